"""A workflow's parent MLflow run: found (or created) by the workflow's name, closed by the exit handler.

Every step of one workflow run finds the same parent run from the workflow name it gets as a parameter, so
the record of a run — reports, decisions, the final status — is reviewable in one place afterwards.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["WORKFLOW_TAG", "close_workflow_run", "workflow_run"]

WORKFLOW_TAG = "vcpilot.workflow"


def _client(tracking_uri: str) -> Any:
    from mlflow.tracking import MlflowClient  # imported here: MLflow takes seconds to import

    return MlflowClient(tracking_uri=tracking_uri)


def _artifact_root(tracking_uri: str) -> str | None:
    """Artifacts of a local sqlite store go next to the database, not into the current directory's ./mlruns."""
    if tracking_uri.startswith("sqlite:///"):
        return (Path(tracking_uri.removeprefix("sqlite:///")).parent / "mlartifacts").resolve().as_uri()
    return None


def workflow_run(tracking_uri: str, experiment: str, workflow: str) -> str:
    """The id of the workflow's parent run in `experiment`, created on first use."""
    client = _client(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found else client.create_experiment(experiment, _artifact_root(tracking_uri))
    runs = client.search_runs([experiment_id], filter_string=f"tags.`{WORKFLOW_TAG}` = '{workflow}'", max_results=1)
    if runs:
        return str(runs[0].info.run_id)
    run = client.create_run(experiment_id, run_name=workflow, tags={WORKFLOW_TAG: workflow})
    return str(run.info.run_id)


def close_workflow_run(
    tracking_uri: str, experiment: str, workflow: str, status: str, reports: Mapping[str, Path]
) -> str:
    """Log the run's reports as artifacts and its numbers as metrics, then end it FINISHED or FAILED."""
    client = _client(tracking_uri)
    run_id = workflow_run(tracking_uri, experiment, workflow)
    client.set_tag(run_id, "vcpilot.status", status)
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in reports.items():
            if not path.is_file():
                continue
            data = json.loads(path.read_text())
            (Path(tmp) / f"{name}.json").write_text(json.dumps(data, indent=2))
            for key, value in data.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    client.log_metric(run_id, f"{name}.{key}", float(value))
        client.log_artifacts(run_id, tmp, artifact_path="reports")
    client.set_terminated(run_id, status="FINISHED" if status == "Succeeded" else "FAILED")
    return run_id
