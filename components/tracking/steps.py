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
import logging
import math
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel, ConfigDict, Field

from components.tracking.runs import WORKFLOW_TAG, workflow_run

__all__ = [
    "DEFAULT_EXPERIMENT",
    "PARENT_TAG",
    "STEP_TAG",
    "StepLog",
    "first_line",
    "TrackingTarget",
    "log_step_run",
    "report_metrics",
    "start_child_run",
    "tracking_target",
    "unreachable",
]

DEFAULT_EXPERIMENT = "llm-autopilot"
PARENT_TAG = "mlflow.parentRunId"  # what MLflow's UI nests runs by
STEP_TAG = "vcpilot.step"
_TAG_LIMIT = 5000


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
    uri, workflow = env.get("MLFLOW_TRACKING_URI", ""), env.get("VCPILOT_WORKFLOW", "")
    if not uri or not workflow:
        return None
    return TrackingTarget(
        tracking_uri=uri, experiment=env.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT, workflow=workflow
    )


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
    """Create `step`'s run under the workflow's parent run (created if this is the workflow's first record)."""
    parent = workflow_run(target.tracking_uri, target.experiment, target.workflow)
    experiment_id = client.get_run(parent).info.experiment_id
    # Not the workflow tag: it marks the parent. Long texts are cut to what every MLflow store accepts.
    own = {key: value[:_TAG_LIMIT] for key, value in (tags or {}).items() if key != WORKFLOW_TAG}
    run = client.create_run(experiment_id, run_name=step, tags={**own, PARENT_TAG: parent, STEP_TAG: step})
    return str(run.info.run_id)


def unreachable(tracking_uri: str, timeout_s: float) -> str | None:
    """Why an HTTP tracking server does not answer /health (None when it does, or is not HTTP).

    Asked first because MLflow's client retries a dead server for minutes before it gives up.
    """
    if not tracking_uri.startswith(("http://", "https://")):
        return None
    try:
        with urllib.request.urlopen(tracking_uri.rstrip("/") + "/health", timeout=timeout_s) as response:  # noqa: S310
            return None if response.status == 200 else f"/health answered {response.status}"
    except urllib.error.HTTPError as err:
        return f"/health answered {err.code}"
    except (urllib.error.URLError, OSError) as err:
        return str(getattr(err, "reason", err))


def _quiet() -> None:
    """Keep MLflow's "View run at" lines out of a step's stdout (it may be parsed) and its INFO chatter out of logs.

    Settings made in the environment win: `MLFLOW_LOGGING_LEVEL=INFO` brings the chatter back.
    """
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    logging.getLogger("mlflow").setLevel(os.environ["MLFLOW_LOGGING_LEVEL"].upper())  # if imported already


def first_line(err: BaseException) -> str:
    """`Type: first line of the message`, at most 200 characters: an MLflow error fit for a one-line warning."""
    text = (getattr(err, "message", None) or str(err)).strip()
    return f"{type(err).__name__}: {text.splitlines()[0][:200]}" if text else type(err).__name__


def log_step_run(
    log: StepLog, env: Mapping[str, str] | None = None, *, warn: TextIO | None = None, timeout_s: float = 5.0
) -> str | None:
    """Log `log` as a child run of the workflow's parent run; its id, or None when nothing was logged.

    Nothing is logged outside a workflow (no `MLFLOW_TRACKING_URI` or `VCPILOT_WORKFLOW` in `env`, by default
    the process environment). Any MLflow failure prints one warning line to `warn` (stderr) and returns None.
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
        _quiet()
        from mlflow.entities import Metric, Param  # imported here: MLflow takes seconds to import
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=target.tracking_uri)
        run_id = start_child_run(client, target, log.step, log.tags)
        now = int(time.time() * 1000)
        client.log_batch(
            run_id,
            metrics=[Metric(key, value, now, 0) for key, value in log.metrics.items()],
            params=[Param(key, value[:_TAG_LIMIT]) for key, value in log.params.items()],
        )
        for path in log.artifacts:
            if path.is_file():
                client.log_artifact(run_id, str(path))
        client.set_terminated(run_id, status="FINISHED")
    except Exception as err:  # MLflow's, requests' and sqlalchemy's errors share no base we could name
        print(
            f"warning: could not log the {log.step} step to MLflow at {target.tracking_uri} ({first_line(err)}); "
            "its report files have everything",
            file=out,
        )
        if run_id is not None:
            _give_up(target.tracking_uri, run_id)
        return None
    return run_id


def _give_up(tracking_uri: str, run_id: str) -> None:
    """Mark a half-logged run FAILED, if MLflow still listens (the warning was printed already)."""
    with contextlib.suppress(Exception):
        from mlflow.tracking import MlflowClient

        MlflowClient(tracking_uri=tracking_uri).set_terminated(run_id, status="FAILED")
