"""Where rank 0 reports training metrics: an MLflow child run under the workflow's parent run, or nowhere.

With `MLFLOW_TRACKING_URI` set, each training attempt is one child run of the workflow's parent run
(`components.tracking.runs.workflow_run`), so the whole story of a pipeline run — including a retry after a
killed pod — reads in one place; without `VCPILOT_WORKFLOW` it is a standalone run. Metrics are logged
asynchronously, so a slow tracking store does not slow the train loop; `finish` waits for them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["MetricsSink", "MlflowSink", "NullSink", "open_sink"]

DEFAULT_EXPERIMENT = "llm-autopilot"


class MetricsSink(Protocol):
    """Something that records a run's parameters, per-step metrics and outcome."""

    def log_params(self, params: Mapping[str, Any]) -> None:
        """Record the run's settings once."""

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        """Record metrics of optimizer step `step`."""

    def finish(self, succeeded: bool) -> None:
        """Flush what is pending and close the run."""


class NullSink:
    """Records nothing: for ranks other than 0 and for runs without a tracking server."""

    def log_params(self, params: Mapping[str, Any]) -> None:
        """Ignore the settings."""

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        """Ignore the metrics."""

    def finish(self, succeeded: bool) -> None:
        """Nothing to close."""


class MlflowSink:
    """One MLflow run, child of the workflow's parent run when there is a workflow."""

    def __init__(self, tracking_uri: str, experiment: str, workflow: str | None, run_name: str = "finetune") -> None:
        from mlflow.tracking import MlflowClient  # imported here: MLflow takes seconds to import

        from components.tracking.runs import workflow_run

        self.client = MlflowClient(tracking_uri=tracking_uri)
        tags = {"vcpilot.step": "finetune"}
        if workflow:
            parent = workflow_run(tracking_uri, experiment, workflow)
            experiment_id = self.client.get_run(parent).info.experiment_id
            tags["mlflow.parentRunId"] = parent
        else:
            found = self.client.get_experiment_by_name(experiment)
            experiment_id = found.experiment_id if found else self.client.create_experiment(experiment)
        self.run_id: str = self.client.create_run(experiment_id, run_name=run_name, tags=tags).info.run_id

    def log_params(self, params: Mapping[str, Any]) -> None:
        """Record the run's settings as MLflow params."""
        from mlflow.entities import Param

        self.client.log_batch(self.run_id, params=[Param(key, str(value)) for key, value in params.items()])

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        """Queue the metrics of `step`; they are written in the background."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch = [Metric(key, float(value), now, step) for key, value in metrics.items()]
        self.client.log_batch(self.run_id, metrics=batch, synchronous=False)

    def finish(self, succeeded: bool) -> None:
        """Wait for queued metrics, then end the run FINISHED or FAILED."""
        import mlflow

        mlflow.flush_async_logging()
        self.client.set_terminated(self.run_id, status="FINISHED" if succeeded else "FAILED")


def open_sink(env: Mapping[str, str], is_main: bool) -> MetricsSink:
    """Rank 0's MLflow run when `MLFLOW_TRACKING_URI` is set, else a sink that records nothing."""
    uri = env.get("MLFLOW_TRACKING_URI", "")
    if not is_main or not uri:
        return NullSink()
    experiment = env.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT
    return MlflowSink(uri, experiment, env.get("VCPILOT_WORKFLOW") or None)
