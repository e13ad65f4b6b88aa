"""The embedded Argo Workflows runner: executes the compiled workflow YAML on a laptop or in CI, like Argo would."""

__all__ = ["TRIGGER_LABEL"]

# How a run started, for whoever records it (pipelines/run_identity.py); the local runner says `local`. Kept here,
# not beside the workflow loader, so that `vcpilot plan` reads it without importing the loader and PyYAML.
TRIGGER_LABEL = "vcpilot.io/trigger"
