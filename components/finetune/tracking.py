"""Where rank 0 reports training metrics: one MLflow run per training attempt, through the attempt's spool.

With `MLFLOW_TRACKING_URI` set, each training attempt is one child run of the workflow's parent run, keyed
`<workflow uid>/finetune/<attempt>` and tagged with its step, attempt and VCJob, so the whole story of a pipeline
run — including a retry after a killed pod — reads in one place; without `VCPILOT_WORKFLOW` it is a standalone run.
The train loop never waits for MLflow: every call appends one line to the attempt's spool
(`components.tracking.recorder`), a background flusher sends it while the server answers, and `finish` sends what
is left within a bounded time. An MLflow that is down costs one warning line; what it missed stays in the
workspace for the exit handler to send, and nothing is sent twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Protocol

from components.tracking.adapter import (
    ATTEMPT_ENV,
    FLUSH_ENV,
    JOB_ENV,
    STEP_TAG,
    configured_uri,
    experiment_name,
    quiet,
)
from components.tracking.recorder import FLUSH_EVERY_S, Recorder, environment_spool
from components.tracking.runs import WorkflowRun
from components.tracking.steps import start_step_run

__all__ = ["FINISH_TIMEOUT_S", "MetricsSink", "MlflowSink", "NullSink", "open_sink"]

FINISH_TIMEOUT_S = 30.0  # how long the end of training waits for MLflow to take what the flusher did not send


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
    """One training attempt's MLflow run `key`, written through `recorder`: appending a line is all a call does."""

    def __init__(self, recorder: Recorder, key: str, finish_timeout_s: float = FINISH_TIMEOUT_S) -> None:
        """Record into the run `key`, which `recorder`'s spool has started."""
        self.recorder = recorder
        self.key = key
        self.finish_timeout_s = finish_timeout_s

    def log_params(self, params: Mapping[str, Any]) -> None:
        """Record the run's settings as MLflow params."""
        self.recorder.log_params(self.key, params)

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        """Spool the metrics of `step`; the flusher sends them."""
        self.recorder.log_metrics(self.key, metrics, step)

    def finish(self, succeeded: bool) -> None:
        """End the run FINISHED or FAILED and send what is left, within `finish_timeout_s`."""
        self.recorder.end_run(self.key, "FINISHED" if succeeded else "FAILED")
        self.recorder.close(self.finish_timeout_s, what="the training attempt")


def open_sink(env: Mapping[str, str], is_main: bool) -> MetricsSink:
    """Rank 0's MLflow run when `env` names a tracking URI (`MLFLOW_TRACKING_URI`), else a sink that records nothing.

    The run is spooled first, so it opens whether or not MLflow answers.
    """
    uri = configured_uri(env=env)
    if not is_main or not uri:
        return NullSink()
    quiet()
    attempt = env.get(ATTEMPT_ENV) or "1"
    flush_every_s = float(env.get(FLUSH_ENV) or FLUSH_EVERY_S)
    recorder = Recorder(environment_spool(env, f"finetune-{attempt}"), uri, flush_every_s=flush_every_s)
    experiment = experiment_name(env=env)
    run = WorkflowRun.from_env(env)
    if run is not None:
        key = start_step_run(
            recorder, experiment, run, "finetune", attempt=attempt, job=env.get(JOB_ENV, ""), name=f"finetune-{attempt}"
        )
    else:  # a person's `vcpilot finetune` with a tracking server: a run of its own
        key = f"standalone/{uuid.uuid4()}"
        recorder.start_run(key, "finetune", experiment, {STEP_TAG: "finetune"})
    return MlflowSink(recorder, key)
