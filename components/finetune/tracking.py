"""Where rank 0 reports training metrics: an MLflow child run under the workflow's parent run, or nowhere.

With `MLFLOW_TRACKING_URI` set, each training attempt is one child run of the workflow's parent run
(`components.tracking.runs.workflow_run`), so the whole story of a pipeline run — including a retry after a
killed pod — reads in one place; without `VCPILOT_WORKFLOW` it is a standalone run. Metrics are logged
asynchronously, so a slow tracking store does not slow the train loop; `finish` waits for them.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from components.tracking.adapter import (
    STEP_TAG,
    WORKFLOW_ENV,
    TrackingUnavailable,
    check_reachable,
    client,
    configured_uri,
    experiment_name,
    tracking_errors,
)
from components.tracking.steps import TrackingTarget, start_child_run

__all__ = ["MetricsSink", "MlflowSink", "NullSink", "open_sink"]


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
    """One MLflow run, child of the workflow's parent run when there is a workflow.

    Opening it raises TrackingUnavailable. A tracking server that fails mid-training costs one warning line,
    never the training: from then on the metrics go nowhere, and the checkpoints and the final model are written
    as always.
    """

    def __init__(self, tracking_uri: str, experiment: str, workflow: str | None, run_name: str = "finetune") -> None:
        """Start the run: a child of `workflow`'s parent run, else a standalone run in `experiment`."""
        self.client = client(tracking_uri)
        self.tracking_uri = tracking_uri
        self.broken = False
        if workflow:
            target = TrackingTarget(tracking_uri=tracking_uri, experiment=experiment, workflow=workflow)
            self.run_id = start_child_run(self.client, target, run_name)
            return
        with tracking_errors(tracking_uri, f"start the {run_name} run"):
            found = self.client.get_experiment_by_name(experiment)
            experiment_id = found.experiment_id if found else self.client.create_experiment(experiment)
            tags = {STEP_TAG: "finetune"}
            self.run_id = str(self.client.create_run(experiment_id, run_name=run_name, tags=tags).info.run_id)

    def _safely(self, what: str, call: Callable[[], Any]) -> None:
        if self.broken:
            return
        try:
            with tracking_errors(self.tracking_uri, what):
                call()
        except TrackingUnavailable as err:  # training matters more than its metrics: warn once, go on untracked
            self.broken = True
            print(
                f"warning: MLflow at {self.tracking_uri} failed to {what} ({err.reason}); "
                "training goes on without tracking",
                file=sys.stderr,
            )

    def log_params(self, params: Mapping[str, Any]) -> None:
        """Record the run's settings as MLflow params."""
        from mlflow.entities import Param

        batch = [Param(key, str(value)) for key, value in params.items()]
        self._safely("record the parameters", lambda: self.client.log_batch(self.run_id, params=batch))

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        """Queue the metrics of `step`; they are written in the background."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch = [Metric(key, float(value), now, step) for key, value in metrics.items()]
        self._safely("record metrics", lambda: self.client.log_batch(self.run_id, metrics=batch, synchronous=False))

    def finish(self, succeeded: bool) -> None:
        """Wait for queued metrics, then end the run FINISHED or FAILED."""
        import mlflow

        self._safely("write the queued metrics", mlflow.flush_async_logging)
        status = "FINISHED" if succeeded else "FAILED"
        self._safely("close the run", lambda: self.client.set_terminated(self.run_id, status=status))


def open_sink(env: Mapping[str, str], is_main: bool) -> MetricsSink:
    """Rank 0's MLflow run when `env` names a tracking URI (`MLFLOW_TRACKING_URI`), else a sink that records nothing.

    A tracking server that does not answer costs one warning line on stderr, and the training runs untracked.
    """
    uri = configured_uri(env=env)
    if not is_main or not uri:
        return NullSink()
    try:
        check_reachable(uri, timeout_s=5.0)
        return MlflowSink(uri, experiment_name(env=env), env.get(WORKFLOW_ENV) or None)
    except TrackingUnavailable as err:  # as in MlflowSink._safely: the training runs untracked
        print(
            f"warning: MLflow at {uri} is unreachable ({err.reason}); training goes on without tracking",
            file=sys.stderr,
        )
    return NullSink()
