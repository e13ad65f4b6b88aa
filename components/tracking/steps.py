"""A step's own record in MLflow: one child run under the workflow's parent run, logged once the step is done.

A step program inside a workflow gets `MLFLOW_TRACKING_URI`, `MLFLOW_EXPERIMENT_NAME`, the workflow run
(`VCPILOT_WORKFLOW`, `VCPILOT_WORKFLOW_UID`, …: `runs.WorkflowRun`), its step, attempt and VCJob, and its spool
directory in its environment (`pipelines.vcjobs.JobContext.env`). With them, `log_step_run` spools the parent run
(`runs.start_parent`) and the step's figures, verdict and report files as a child run keyed
`<uid>/<step>/<attempt>` (tag `mlflow.parentRunId`; never `vcpilot.workflow`, which marks the parent), then sends
the spool. Without them it does nothing.

The report files in the workspace are the source of truth: MLflow down or refusing costs one warning line on
stderr, never the step, and the spool keeps every record until the exit handler sends it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel, ConfigDict, Field

from components.tracking.adapter import (
    ATTEMPT_ENV,
    ATTEMPT_TAG,
    DEFAULT_EXPERIMENT,
    JOB_ENV,
    JOB_TAG,
    PARENT_TAG,
    STEP_TAG,
    TAG_LIMIT,
    WORKFLOW_ENV,
    WORKFLOW_TAG,
    configured_uri,
    experiment_name,
    quiet,
)
from components.tracking.recorder import Recorder, environment_spool
from components.tracking.runs import WorkflowRun, start_parent

__all__ = [
    "PARENT_TAG",
    "STEP_TAG",
    "StepLog",
    "TrackingTarget",
    "log_step_run",
    "report_metrics",
    "start_step_run",
    "tracking_target",
]


class TrackingTarget(BaseModel):
    """Where a step's child run goes: the tracking server, the experiment and the workflow (its parent run)."""

    model_config = ConfigDict(frozen=True)

    tracking_uri: str
    experiment: str = DEFAULT_EXPERIMENT
    workflow: str


class StepLog(BaseModel):
    """What one step records: figures as metrics, settings as params, verdicts and reasons as tags, files."""

    model_config = ConfigDict(frozen=True)

    step: str
    metrics: dict[str, float] = Field(default_factory=dict)
    params: dict[str, str] = Field(default_factory=dict)
    tags: dict[str, str] = Field(default_factory=dict)
    artifacts: tuple[Path, ...] = ()


def tracking_target(env: Mapping[str, str]) -> TrackingTarget | None:
    """The child run's destination from a step's environment, or None when the step runs outside a workflow."""
    uri, workflow = configured_uri(env=env), env.get(WORKFLOW_ENV, "")
    if not uri or not workflow:
        return None
    return TrackingTarget(tracking_uri=uri, experiment=experiment_name(env=env), workflow=workflow)


def report_metrics(report: Mapping[str, Any], keys: Iterable[str] | None = None) -> dict[str, float]:
    """The numbers of a flat report as metrics: ints, floats and booleans (1/0); None, text and nested skipped.

    `keys` limits them to those named. Infinite or NaN figures are left out: MLflow's stores do not all keep them.
    """
    chosen = report if keys is None else {key: report[key] for key in keys if key in report}
    metrics = {}
    for key, value in chosen.items():
        if isinstance(value, bool):
            metrics[key] = 1.0 if value else 0.0
        elif isinstance(value, int | float) and math.isfinite(value):
            metrics[key] = float(value)
    return metrics


def start_step_run(
    recorder: Recorder,
    experiment: str,
    run: WorkflowRun,
    step: str,
    *,
    attempt: int | str = 1,
    job: str = "",
    name: str | None = None,
    tags: Mapping[str, str] | None = None,
) -> str:
    """Spool the parent run and `step`'s run under it (each made once, whatever the replays); the step run's key."""
    parent = start_parent(recorder, experiment, run)
    # Not the workflow tag: it marks the parent. Long texts are cut to what every MLflow store accepts.
    own = {key: value[:TAG_LIMIT] for key, value in (tags or {}).items() if key != WORKFLOW_TAG}
    own.update({STEP_TAG: step, ATTEMPT_TAG: str(attempt), **({JOB_TAG: job} if job else {})})
    key = run.step_key(step, attempt)
    recorder.start_run(key, name or step, experiment, own, parent=parent)
    return key


def log_step_run(
    log: StepLog, env: Mapping[str, str] | None = None, *, warn: TextIO | None = None, timeout_s: float = 30.0
) -> str | None:
    """Log `log` as a child run of the workflow's parent run, through the step's spool; the run's id once sent.

    Nothing is logged outside a workflow (no `MLFLOW_TRACKING_URI` or `VCPILOT_WORKFLOW` in `env`, by default
    the process environment). Everything is spooled first (`components.tracking.recorder`), then sent within
    `timeout_s`; MLflow unreachable or failing prints one warning line to `warn` (stderr) and returns None — the
    spool keeps the record for the exit handler's replay. A bug in the caller's values still raises.
    """
    source = os.environ if env is None else env
    target = tracking_target(source)
    run = WorkflowRun.from_env(source)
    if target is None or run is None:
        return None
    quiet()
    attempt = source.get(ATTEMPT_ENV) or "1"
    recorder = Recorder(
        environment_spool(source, f"{log.step}-{attempt}"), target.tracking_uri, flush_every_s=None, warn=warn
    )
    key = start_step_run(
        recorder, target.experiment, run, log.step, attempt=attempt, job=source.get(JOB_ENV, ""), tags=log.tags
    )
    recorder.log_params(key, {name: value[:TAG_LIMIT] for name, value in log.params.items()})
    recorder.log_metrics(key, log.metrics)
    for path in log.artifacts:
        if path.is_file():
            recorder.log_artifact(key, path)
    recorder.end_run(key, "FINISHED")
    result = recorder.close(timeout_s, what=f"the {log.step} step")
    return None if result.pending else recorder.spool.cursor().runs.get(key)
