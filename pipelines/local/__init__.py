"""The embedded Argo Workflows runner: executes the compiled workflow YAML on a laptop or in CI, like Argo would."""

__all__ = ["CRON_LABEL", "TRIGGER_LABEL"]

# How a run started, for whoever records it (pipelines/run_identity.py); the local runner says `local`. Kept here,
# not beside the workflow loader, so that `vcpilot plan` reads it without importing the loader and PyYAML.
TRIGGER_LABEL = "vcpilot.io/trigger"
# The label Argo's cron controller puts on every workflow it starts (a CronWorkflow's runs carry it here too).
CRON_LABEL = "workflows.argoproj.io/cron-workflow"
