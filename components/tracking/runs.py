"""A workflow's parent MLflow run: named for good by the workflow's uid, found again on retry or resume, closed last.

Every step of one workflow run records under the same parent run, so the record of a run — reports, decisions,
the final status — is reviewable in one place afterwards. The parent's key is the workflow's uid (Argo's
`{{workflow.uid}}`, the local runner's too), which a retried step, a resumed run and a replayed spool all share: it
is created once, by whichever record reaches MLflow first, and found by its `vcpilot.key` tag ever after. A parent
made before keys is found by the workflow's name (`vcpilot.workflow`) and adopted.

MLflow's failures here are `TrackingUnavailable`; the callers decide what a missing record costs.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from components.tracking.adapter import (
    KEY_TAG,
    PARENT_TAG,
    STATUS_TAG,
    WORKFLOW_TAG,
    TrackingUnavailable,
    client,
    ensure_experiment,
    tracking_errors,
)
from components.tracking.recorder import Recorder
from components.tracking.replay import find_run, replay_all
from components.tracking.spool import Spool
from components.tracking.workflow_run import WorkflowRun

__all__ = ["WORKFLOW_TAG", "WorkflowRun", "close_workflow_run", "start_parent", "workflow_run"]


def start_parent(recorder: Recorder, experiment: str, run: WorkflowRun) -> str:
    """Spool the parent run's creation (a no-op once it exists); its key, for the step's own run to nest under."""
    recorder.start_run(run.key, run.name, experiment, run.tags(), workflow=run.name)
    return run.key


def workflow_run(tracking_uri: str, experiment: str, workflow: str, uid: str = "") -> str:
    """The id of the workflow's parent run in `experiment`, sent at once (not spooled), created on first use.

    Found by `uid` (its key) when given, else by the workflow's name. For callers that need the id now: the agent's
    decision records, the registry's lineage.
    """
    mlflow = client(tracking_uri)
    run = WorkflowRun(name=workflow, uid=uid)
    with tracking_errors(tracking_uri, f"find the parent run of {workflow}"):
        experiment_id = ensure_experiment(mlflow, experiment, tracking_uri)
        if uid and (keyed := find_run(mlflow, experiment_id, run.key, workflow)):
            return keyed[0]
        if not uid:
            named = mlflow.search_runs(
                [experiment_id], filter_string=f"tags.`{WORKFLOW_TAG}` = '{workflow}'", max_results=1
            )
            if named:
                return str(named[0].info.run_id)
        tags = {**run.tags(), **({KEY_TAG: uid} if uid else {})}
        return str(mlflow.create_run(experiment_id, run_name=workflow, tags=tags).info.run_id)


def _report(path: Path) -> Any:
    """A report's JSON, or None when it is not JSON (its file is still logged as it is)."""
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def close_workflow_run(
    tracking_uri: str,
    experiment: str,
    workflow: WorkflowRun | str,
    status: str,
    reports: Mapping[str, Path],
    spool_dir: Path | None = None,
    timeout_s: float = 60.0,
    artifacts: Mapping[str, Sequence[Path]] | None = None,
) -> str:
    """Send every spool of the run, then log its reports and numbers on the parent and end it FINISHED or FAILED.

    `spool_dir` is the run's spool directory (the exit handler's, in the workspace); without one the closing
    records are spooled in a temporary directory. TrackingUnavailable, saying how much waits, when MLflow did not
    take it all within `timeout_s`: what it did not take stays in `spool_dir`, for the next replay. `artifacts`
    maps an artifact directory ("" for the run's top) to the files and directories logged there (those that
    exist): the review's summary.md and pictures, the decision records, the rendered manifests.
    """
    run = workflow if isinstance(workflow, WorkflowRun) else WorkflowRun(name=workflow)
    with tempfile.TemporaryDirectory() as tmp:
        directory = spool_dir or Path(tmp) / "spool"
        swept = replay_all(directory, tracking_uri, timeout_s=timeout_s / 2) if spool_dir else None
        recorder = Recorder(Spool(directory / "finalize.jsonl"), tracking_uri, flush_every_s=None)
        key = start_parent(recorder, experiment, run)
        recorder.set_tags(key, {STATUS_TAG: status})
        staged = Path(tmp) / "reports"
        staged.mkdir()
        for name, path in reports.items():
            if path.is_file():
                _record_report(recorder, key, name, path, staged)
        for where, paths in (artifacts or {}).items():
            for path in paths:
                _record_files(recorder, key, path, where)
        recorder.end_run(key, "FINISHED" if status == "Succeeded" else "FAILED")
        closed = recorder.flush(timeout_s=timeout_s / 2, wait_s=5.0)
        waiting = closed.pending + (swept.pending if swept else 0)
        if waiting:
            reason = closed.reason or (swept.reason if swept else "")
            raise TrackingUnavailable(
                f"MLflow at {tracking_uri} could not close the run of {run.name} ({reason}); "
                f"{waiting} records wait in {directory}",
                uri=tracking_uri,
                reason=f"{reason}; {waiting} records wait in {directory}",
            )
        parent = recorder.spool.cursor().runs[key]
        _end_orphans(tracking_uri, parent)
        return parent


def _end_orphans(tracking_uri: str, parent: str) -> None:
    """End KILLED the nested runs still RUNNING once the workflow is over: their pods died before they could say so.

    A training attempt whose node died, a step killed by a stop or a timeout: nothing else will ever end them, and
    MLflow would show them running for ever.
    """
    mlflow = client(tracking_uri)
    with tracking_errors(tracking_uri, "end the runs of steps that died"):
        experiment_id = mlflow.get_run(parent).info.experiment_id
        running = mlflow.search_runs(
            [experiment_id],
            filter_string=f"tags.`{PARENT_TAG}` = '{parent}' and attributes.status = 'RUNNING'",
            max_results=1000,
        )
        for run in running:
            mlflow.set_terminated(run.info.run_id, status="KILLED")


def _record_files(recorder: Recorder, key: str, path: Path, where: str) -> None:
    """A file under `where`, or every file of a directory under `where/<its relative folder>`; nothing if absent."""
    files = [(path, where)] if path.is_file() else []
    for found in sorted(path.rglob("*")) if path.is_dir() else ():
        if found.is_file():
            folder = found.parent.relative_to(path).as_posix()
            files.append((found, "/".join(p for p in (where, folder) if p and p != ".")))
    for file, directory in files:
        recorder.log_artifact(key, file, directory or None)


def _record_report(recorder: Recorder, key: str, name: str, path: Path, staged: Path) -> None:
    """A report as `reports/<name>.json`, and its top-level numbers as metrics `<name>.<field>`.

    Stamped with the report file's time, so closing the run twice logs each number once.
    """
    data = _report(path)
    copy = staged / f"{name}.json"
    if data is None:
        copy.write_bytes(path.read_bytes())
    else:
        copy.write_text(json.dumps(data, indent=2))
    recorder.log_artifact(key, copy, "reports")
    numbers = {
        f"{name}.{field}": float(value)
        for field, value in (data.items() if isinstance(data, dict) else ())
        if isinstance(value, int | float) and not isinstance(value, bool)
    }
    if numbers:
        recorder.log_metrics(key, numbers, timestamp_ms=int(path.stat().st_mtime * 1000))
