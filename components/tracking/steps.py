"""A step's own record in MLflow: one child run under the workflow's parent run, logged once the step is done.

A step program inside a workflow gets `MLFLOW_TRACKING_URI`, `MLFLOW_EXPERIMENT_NAME` and `VCPILOT_WORKFLOW` in
its environment (`pipelines.vcjobs.JobContext.env`). With them, `log_step_run` finds the parent run
(`runs.workflow_run`) and logs the step's figures, verdict and report files as a child run (tag
`mlflow.parentRunId`; never `vcpilot.workflow`, which marks the parent). Without them it does nothing.

The report files in the workspace are the source of truth: MLflow down or refusing costs one warning line on
stderr, never the step.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel, ConfigDict, Field

from components.tracking.adapter import (
    DEFAULT_EXPERIMENT,
    PARENT_TAG,
    STEP_TAG,
    TAG_LIMIT,
    WORKFLOW_ENV,
    WORKFLOW_TAG,
    TrackingUnavailable,
    configured_uri,
    experiment_name,
    quiet,
    tracking_errors,
    unreachable,
)
from components.tracking.adapter import client as mlflow_client
from components.tracking.runs import workflow_run

__all__ = [
    "PARENT_TAG",
    "STEP_TAG",
    "StepLog",
    "TrackingTarget",
    "log_step_run",
    "report_metrics",
    "start_child_run",
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


def start_child_run(client: Any, target: TrackingTarget, step: str, tags: Mapping[str, str] | None = None) -> str:
    """Create `step`'s run under the workflow's parent run (created if this is the workflow's first record).

    TrackingUnavailable when MLflow fails.
    """
    parent = workflow_run(target.tracking_uri, target.experiment, target.workflow)
    with tracking_errors(target.tracking_uri, f"start the {step} run"):
        experiment_id = client.get_run(parent).info.experiment_id
        # Not the workflow tag: it marks the parent. Long texts are cut to what every MLflow store accepts.
        own = {key: value[:TAG_LIMIT] for key, value in (tags or {}).items() if key != WORKFLOW_TAG}
        run = client.create_run(experiment_id, run_name=step, tags={**own, PARENT_TAG: parent, STEP_TAG: step})
        return str(run.info.run_id)


def log_step_run(
    log: StepLog, env: Mapping[str, str] | None = None, *, warn: TextIO | None = None, timeout_s: float = 5.0
) -> str | None:
    """Log `log` as a child run of the workflow's parent run; its id, or None when nothing was logged.

    Nothing is logged outside a workflow (no `MLFLOW_TRACKING_URI` or `VCPILOT_WORKFLOW` in `env`, by default
    the process environment). MLflow unreachable or failing (`TrackingUnavailable`) prints one warning line to `warn`
    (stderr) and returns None; a bug in the caller's values still raises.
    """
    target = tracking_target(os.environ if env is None else env)
    if target is None:
        return None
    out = warn or sys.stderr
    if reason := unreachable(target.tracking_uri, timeout_s):
        print(
            f"warning: MLflow at {target.tracking_uri} is unreachable ({reason}); "
            f"the {log.step} step's record is in its report files only",
            file=out,
        )
        return None
    run_id = None
    try:
        quiet()
        mlflow = mlflow_client(target.tracking_uri)
        run_id = start_child_run(mlflow, target, log.step, log.tags)
        with tracking_errors(target.tracking_uri, f"log the {log.step} step"):
            from mlflow.entities import Metric, Param  # imported here: MLflow takes seconds to import

            now = int(time.time() * 1000)
            mlflow.log_batch(
                run_id,
                metrics=[Metric(key, value, now, 0) for key, value in log.metrics.items()],
                params=[Param(key, value[:TAG_LIMIT]) for key, value in log.params.items()],
            )
            for path in log.artifacts:
                if path.is_file():
                    mlflow.log_artifact(run_id, str(path))
            mlflow.set_terminated(run_id, status="FINISHED")
    except TrackingUnavailable as err:  # the step's report files are its record: warn once, carry on
        print(
            f"warning: could not log the {log.step} step to MLflow at {target.tracking_uri} ({err.reason}); "
            "its report files have everything",
            file=out,
        )
        if run_id is not None:
            _give_up(target.tracking_uri, run_id)
        return None
    return run_id


def _give_up(tracking_uri: str, run_id: str) -> None:
    """Mark a half-logged run FAILED, if MLflow still listens (the warning was printed already)."""
    with contextlib.suppress(TrackingUnavailable):
        mlflow = mlflow_client(tracking_uri)
        with tracking_errors(tracking_uri, f"mark run {run_id} FAILED"):
            mlflow.set_terminated(run_id, status="FAILED")
