"""Registering a model version with its lineage, and promoting it to champion.

The model directory is logged as the artifacts of a `release` run — a child of the workflow's parent run when
the release happens inside a workflow — and the version's source is that artifact location, so loading a
version back is downloading its files. No MLflow model flavor is involved: any directory registers.

Lineage tags on the version (and on its run) say where it came from: `vcpilot.workflow`, `vcpilot.dataset`
and `vcpilot.dataset_digest` (sha256 of the training set), `vcpilot.base_model`, `vcpilot.checkpoint`, and
`vcpilot.metric.<name>` for each metric (also logged as run metrics).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from components.errors import InputError
from components.release.registry import (
    CHAMPION,
    PREVIOUS,
    REPLACED_TAG,
    aliases,
    connect,
    mlflow_errors,
)
from components.tracking.adapter import (
    DEFAULT_EXPERIMENT,
    PARENT_TAG,
    STEP_TAG,
    WORKFLOW_ENV,
    WORKFLOW_TAG,
    TrackingUnavailable,
    artifact_root,
    experiment_name,
    quiet,
    resolve_uri,
    tracking_errors,
)
from components.tracking.runs import workflow_run

__all__ = [
    "Lineage",
    "Registered",
    "dataset_digest",
    "lineage_from",
    "lineage_tags",
    "read_metrics",
    "register",
    "register_model",
]


class Lineage(BaseModel):
    """Where a model version came from."""

    model_config = ConfigDict(frozen=True)

    workflow: str = ""
    dataset: str = ""
    dataset_digest: str = ""
    base_model: str = ""
    checkpoint: str = ""
    metrics: dict[str, float] = Field(default_factory=dict)


class Registered(BaseModel):
    """What a registration did: the new version, where its files are, and where the aliases point now."""

    name: str
    version: str
    source: str
    run_id: str
    promoted: bool
    champion: str | None
    previous: str | None
    lineage: Lineage


def _train_file(path: str | Path) -> Path:
    """The training set itself, or `train.jsonl` inside a dataset directory."""
    file = Path(path)
    if file.is_dir():
        file = file / "train.jsonl"
    if not file.is_file():
        raise InputError(f"the training set {file} does not exist; pass --dataset with the file the model trained on")
    return file


def dataset_digest(path: str | Path) -> str:
    """`sha256:<hex>` of the training set: the file itself, or `train.jsonl` inside a dataset directory."""
    file = _train_file(path)
    digest = hashlib.sha256()
    with file.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return f"sha256:{digest.hexdigest()}"


def read_metrics(path: str | Path) -> dict[str, float]:
    """The numeric top-level fields of a JSON report (e.g. the evaluate report) as metrics."""
    file = Path(path)
    if not file.is_file():
        raise InputError(f"the metrics report {file} does not exist")
    try:
        data = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError(f"the metrics report {file} is not JSON") from None
    if not isinstance(data, dict):
        raise InputError(f"the metrics report {file} is not a JSON object")
    return {
        key: float(value)
        for key, value in data.items()
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    }


def lineage_tags(lineage: Lineage) -> dict[str, str]:
    """The lineage as registry tags (empty fields are left out)."""
    tags = {
        f"vcpilot.{field}": str(value)
        for field, value in lineage.model_dump(exclude={"metrics"}).items()
        if value not in ("", None)
    }
    tags.update({f"vcpilot.metric.{name}": f"{value:g}" for name, value in sorted(lineage.metrics.items())})
    return tags


def _experiment_id(client: Any, tracking_uri: str, experiment: str, workflow: str) -> tuple[str, str | None]:
    """The experiment to log into and the parent run: the workflow's when there is one."""
    if workflow:
        parent = workflow_run(tracking_uri, experiment, workflow)
        return str(client.get_run(parent).info.experiment_id), parent
    found = client.get_experiment_by_name(experiment)
    if found:
        return str(found.experiment_id), None
    return str(client.create_experiment(experiment, artifact_root(tracking_uri))), None


def register(
    client: Any,
    name: str,
    model_dir: str | Path,
    lineage: Lineage,
    *,
    experiment: str = DEFAULT_EXPERIMENT,
    promote: bool = True,
) -> Registered:
    """Log `model_dir` as a run's artifacts, register it as a new version of `name`, and (by default) promote it.

    Promoting moves `champion` to the new version and `previous` to the version that was champion. The model
    directory is checked before MLflow is touched; RegistryError or ValueError say what went wrong.
    """
    directory = Path(model_dir)
    if not directory.is_dir():
        raise InputError(f"the model directory {directory} does not exist")
    if not any(directory.iterdir()):
        raise InputError(f"the model directory {directory} is empty; nothing to register")
    tags = lineage_tags(lineage)
    uri = str(client.tracking_uri)
    with mlflow_errors(f"registering {directory} as {name}", uri):
        experiment_id, parent = _experiment_id(client, uri, experiment, lineage.workflow)
        # Not the workflow tag on the run: `workflow_run` finds the parent run by it. The parent link says it.
        run_tags = {STEP_TAG: "release"} | {k: v for k, v in tags.items() if k != WORKFLOW_TAG}
        run_tags |= {PARENT_TAG: parent} if parent else {}
        run = client.create_run(experiment_id, run_name=f"release-{name}", tags=run_tags)
        run_id = run.info.run_id
        try:
            for metric, value in lineage.metrics.items():
                client.log_metric(run_id, metric, value)
            client.log_artifacts(run_id, str(directory), artifact_path="model")
        except BaseException:
            # The first error is the one to report; marking the run FAILED is only worth a try.
            with contextlib.suppress(TrackingUnavailable), tracking_errors(uri, f"mark run {run_id} FAILED"):
                client.set_terminated(run_id, status="FAILED")
            raise
        client.set_terminated(run_id, status="FINISHED")
        current = aliases(client, name)
        if current is None:
            client.create_registered_model(name, description="Registered by vcpilot release; see its aliases.")
        old = (current or {}).get(CHAMPION)
        version_tags = tags | ({REPLACED_TAG: old} if promote and old else {})
        mv = client.create_model_version(
            name, source=f"{run.info.artifact_uri}/model", run_id=run_id, tags=version_tags
        )
        version = str(mv.version)
        if promote:
            client.set_registered_model_alias(name, CHAMPION, version)
            if old and old != version:
                client.set_registered_model_alias(name, PREVIOUS, old)
        now = aliases(client, name) or {}
    return Registered(
        name=name,
        version=version,
        source=str(mv.source),
        run_id=run_id,
        promoted=promote,
        champion=now.get(CHAMPION),
        previous=now.get(PREVIOUS),
        lineage=lineage,
    )


def lineage_from(
    *,
    workflow: str = "",
    dataset: str | Path | None = None,
    base_model: str = "",
    checkpoint: str = "",
    metrics: Mapping[str, float] | None = None,
) -> Lineage:
    """A Lineage from what a command line gives: the dataset's digest is computed here."""
    return Lineage(
        workflow=workflow,
        dataset=str(_train_file(dataset)) if dataset else "",
        dataset_digest=dataset_digest(dataset) if dataset else "",
        base_model=base_model,
        checkpoint=checkpoint,
        metrics=dict(metrics or {}),
    )


def register_model(
    model: Path,
    name: str,
    *,
    dataset: Path | None = None,
    base_model: str = "",
    checkpoint: str = "",
    metrics: Path | None = None,
    workflow: str = "",
    experiment: str = "",
    promote: bool = True,
    tracking_uri: str = "",
) -> Registered:
    """Check the inputs, then register `model` as a new version of `name` (and promote it unless told not to).

    Everything local is checked before MLflow is contacted, so a bad input or an unreachable server changes
    nothing. Raises InputError or RegistryError with one sentence.
    """
    quiet()
    if not name:
        raise InputError("--registered-model is empty; name the registered model to add a version to")
    if not model.is_dir():
        raise InputError(f"the model directory {model} does not exist")
    lineage = lineage_from(
        workflow=workflow or os.environ.get(WORKFLOW_ENV, ""),
        dataset=dataset,
        base_model=base_model,
        checkpoint=checkpoint,
        metrics=read_metrics(metrics) if metrics else None,
    )
    client = connect(resolve_uri(tracking_uri))
    experiment = experiment_name(experiment)
    return register(client, name, model, lineage, experiment=experiment, promote=promote)
