"""A workflow's parent MLflow run: found (or created) by the workflow's name, closed by the exit handler.

Every step of one workflow run finds the same parent run from the workflow name it gets as a parameter, so
the record of a run — reports, decisions, the final status — is reviewable in one place afterwards. MLflow's
failures here are `TrackingUnavailable`; the callers decide what a missing record costs.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from components.tracking.adapter import WORKFLOW_TAG, artifact_root, client, tracking_errors

__all__ = ["WORKFLOW_TAG", "close_workflow_run", "workflow_run"]


def workflow_run(tracking_uri: str, experiment: str, workflow: str) -> str:
    """The id of the workflow's parent run in `experiment`, created on first use."""
    mlflow = client(tracking_uri)
    with tracking_errors(tracking_uri, f"find the parent run of {workflow}"):
        found = mlflow.get_experiment_by_name(experiment)
        experiment_id = (
            found.experiment_id if found else mlflow.create_experiment(experiment, artifact_root(tracking_uri))
        )
        runs = mlflow.search_runs([experiment_id], filter_string=f"tags.`{WORKFLOW_TAG}` = '{workflow}'", max_results=1)
        if runs:
            return str(runs[0].info.run_id)
        run = mlflow.create_run(experiment_id, run_name=workflow, tags={WORKFLOW_TAG: workflow})
        return str(run.info.run_id)


def _report(path: Path) -> Any:
    """A report's JSON, or None when it is not JSON (its file is still logged as it is)."""
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def close_workflow_run(
    tracking_uri: str,
    experiment: str,
    workflow: str,
    status: str,
    reports: Mapping[str, Path],
    artifacts: Mapping[str, Sequence[Path]] | None = None,
) -> str:
    """Log the run's reports as artifacts and its numbers as metrics, then end it FINISHED or FAILED.

    `artifacts` maps an artifact directory ("" for the run's top) to the files and directories logged there
    (those that exist): the review's summary.md and pictures, the decision records, the rendered manifests.
    """
    run_id = workflow_run(tracking_uri, experiment, workflow)
    mlflow = client(tracking_uri)
    with tracking_errors(tracking_uri, f"close the run of {workflow}"), tempfile.TemporaryDirectory() as tmp:
        mlflow.set_tag(run_id, "vcpilot.status", status)
        for name, path in reports.items():
            if not path.is_file():
                continue
            data = _report(path)
            if data is None:
                (Path(tmp) / f"{name}.json").write_bytes(path.read_bytes())
                continue
            (Path(tmp) / f"{name}.json").write_text(json.dumps(data, indent=2))
            for key, value in data.items() if isinstance(data, dict) else ():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    mlflow.log_metric(run_id, f"{name}.{key}", float(value))
        mlflow.log_artifacts(run_id, tmp, artifact_path="reports")
        for where, paths in (artifacts or {}).items():
            for path in paths:
                if path.is_dir():
                    mlflow.log_artifacts(run_id, str(path), artifact_path=where or None)
                elif path.is_file():
                    mlflow.log_artifact(run_id, str(path), artifact_path=where or None)
        mlflow.set_terminated(run_id, status="FINISHED" if status == "Succeeded" else "FAILED")
    return run_id
