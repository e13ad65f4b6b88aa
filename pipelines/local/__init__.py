"""The embedded Argo Workflows runner: executes the compiled workflow YAML on a laptop or in CI, like Argo would."""
