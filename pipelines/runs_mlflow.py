"""The MLflow side of `vcpilot runs`: each run's parent MLflow run and its link, looked up without ever failing.

The workspace and the runner's directory are the record of a run (`pipelines/runs.py`); MLflow adds a link to
the parent run (tagged `vcpilot.workflow`) when it answers. A local sqlite store that does not exist yet is
not opened — MLflow would create it — and an HTTP server is asked for `/health` first, so a dead one costs
seconds, not MLflow's minutes of retries.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.tracking.adapter import (
    PARENT_TAG,
    WORKFLOW_TAG,
    TrackingUnavailable,
    bounded_retries,
    check_reachable,
    client,
    experiment_name,
    quiet,
    resolve_uri,
    tracking_errors,
)

__all__ = ["UI_HOST", "UI_PORT", "ParentRun", "Target", "find_parent_runs", "mark_deleted", "target", "ui_url"]

UI_HOST = "127.0.0.1"  # where `vcpilot ui` serves the local store unless told otherwise
UI_PORT = 5000


@dataclass(frozen=True)
class Target:
    """Where a run's MLflow records are: the tracking URI and the experiment."""

    uri: str
    experiment: str


@dataclass(frozen=True)
class ParentRun:
    """A workflow's parent run in MLflow, and the page that shows it (None when no UI address is known)."""

    run_id: str
    experiment_id: str
    status: str
    url: str | None


def target(home: Path, tracking_uri: str = "", experiment: str = "") -> Target:
    """The run's own `mlflow-tracking-uri`/`mlflow-experiment` parameters, else this machine's (the local store)."""
    env = {**os.environ, "VCPILOT_HOME": str(home)}
    return Target(resolve_uri(tracking_uri or None, env), experiment_name(experiment or None, env))


def ui_url(tracking_uri: str, experiment_id: str, run_id: str | None = None) -> str | None:
    """The MLflow UI's page of an experiment (or run): on the server itself, or where `vcpilot ui` serves a store."""
    if tracking_uri.startswith(("http://", "https://")):
        base = tracking_uri.rstrip("/")
    elif tracking_uri.startswith("sqlite:///"):
        base = f"http://{UI_HOST}:{UI_PORT}"
    else:
        return None
    page = f"{base}/#/experiments/{experiment_id}"
    return f"{page}/runs/{run_id}" if run_id else page


def find_parent_runs(where: Target, names: Iterable[str] | None = None) -> dict[str, ParentRun]:
    """The parent runs of the workflows `names` (all of them when None), by workflow name.

    Empty when the store does not exist or the experiment does not; TrackingUnavailable when MLflow fails.
    """
    mlflow = _open(where.uri)
    if mlflow is None:
        return {}
    wanted = None if names is None else set(names)
    with bounded_retries(), tracking_errors(where.uri, "look up the workflow runs"):
        experiment = mlflow.get_experiment_by_name(where.experiment)
        if experiment is None:
            return {}
        if wanted is not None and len(wanted) == 1:
            only = next(iter(wanted))
            query = f"tags.`{WORKFLOW_TAG}` = '{only}'"
        else:
            query = f"tags.`{WORKFLOW_TAG}` LIKE '%'"  # MLflow's search has no IN for tags
        runs = mlflow.search_runs([experiment.experiment_id], filter_string=query, max_results=1000)
    found: dict[str, ParentRun] = {}
    for run in reversed(runs):  # newest first from MLflow: the oldest parent of a name wins, as workflow_run finds it
        name = run.data.tags.get(WORKFLOW_TAG, "")
        if wanted is None or name in wanted:
            run_id, experiment_id = run.info.run_id, run.info.experiment_id
            found[name] = ParentRun(run_id, experiment_id, run.info.status, ui_url(where.uri, experiment_id, run_id))
    return found


def mark_deleted(where: Target, name: str) -> str:
    """Mark the workflow's parent run and its nested runs deleted; one line that says what was done or left."""
    try:
        parent = find_parent_runs(where, [name]).get(name)
        if parent is None:
            return f"no MLflow run of {name} in {where.uri} (experiment {where.experiment})"
        mlflow = client(where.uri)
        with bounded_retries(), tracking_errors(where.uri, f"delete the run of {name}"):
            children = mlflow.search_runs(
                [parent.experiment_id], filter_string=f"tags.`{PARENT_TAG}` = '{parent.run_id}'", max_results=1000
            )
            for child in children:
                mlflow.delete_run(child.info.run_id)
            mlflow.delete_run(parent.run_id)
    except TrackingUnavailable as err:
        return f"the MLflow run of {name} was left: {err.reason}"
    return f"MLflow run {parent.run_id} and its {len(children)} nested runs, marked deleted in {where.uri}"


def _open(uri: str) -> Any:
    """An MLflow client for `uri`, or None when it is a local store that does not exist (opening would create it)."""
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).is_file():
        return None
    if uri.startswith("file:") or "://" not in uri:
        path = Path(uri.removeprefix("file://").removeprefix("file:"))
        if not path.is_dir():
            return None
    check_reachable(uri, timeout_s=2.0)
    quiet()
    return client(uri)
