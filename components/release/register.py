"""Registering a model version with its lineage and its verdict, and promoting it to champion.

The model directory is logged as the artifacts of a `release` run — a child of the workflow's parent run when
the release happens inside a workflow — and the version's source is that artifact location, so loading a
version back is downloading its files. No MLflow model flavor is involved: any directory registers.

Lineage tags on the version (and on its run) say where it came from: `vcpilot.workflow`, `vcpilot.parent_run`
and `vcpilot.training_run` (the workflow's MLflow runs), `vcpilot.dataset` and `vcpilot.dataset_digest`
(sha256 of the training set), `vcpilot.base_model`, `vcpilot.checkpoint`. The verdict (verdict.py) adds the
scores, the bars and whether it was promoted, and writes the version's description. A version that is not
promoted is registered all the same, without an alias, so the registry keeps every candidate and its reason.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from components.errors import InputError
from components.release.registry import (
    CHAMPION,
    PREVIOUS,
    REPLACED_TAG,
    RegistryUnavailable,
    aliases,
    connect,
    describe_model,
    find_versions,
    mlflow_errors,
    name_problem,
    upsert,
)
from components.release.verdict import Verdict, describe, verdict_tags
from components.tracking.adapter import (
    DEFAULT_EXPERIMENT,
    PARENT_TAG,
    STEP_TAG,
    WORKFLOW_ENV,
    WORKFLOW_TAG,
    TrackingUnavailable,
    ensure_experiment,
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
    "register",
    "register_model",
    "release_key",
]

RELEASE_TAG = "vcpilot.release"  # a workflow release's key (`release_key`)
TRAINING_STEP = "finetune"  # the step tag of a training attempt's run (components/finetune/tracking.py)


class Lineage(BaseModel):
    """Where a model version came from."""

    model_config = ConfigDict(frozen=True)

    workflow: str = ""
    parent_run: str = ""  # the workflow's MLflow run; filled in when the version is registered
    training_run: str = ""  # the training attempt's run that made the model, when it is known
    dataset: str = ""
    dataset_digest: str = ""
    base_model: str = ""
    checkpoint: str = ""


class Registered(BaseModel):
    """What a registration did: the new version, where its files are, and where the aliases point now."""

    name: str
    version: str
    source: str
    run_id: str
    promoted: bool
    champion: str | None
    previous: str | None
    description: str
    lineage: Lineage
    verdict: Verdict


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


def lineage_tags(lineage: Lineage) -> dict[str, str]:
    """The lineage as registry tags (empty fields are left out)."""
    return {f"vcpilot.{field}": str(value) for field, value in lineage.model_dump().items() if value not in ("", None)}


def _experiment_id(client: Any, tracking_uri: str, experiment: str, workflow: str) -> tuple[str, str | None]:
    """The experiment to log into and the parent run: the workflow's when there is one."""
    if workflow:
        parent = workflow_run(tracking_uri, experiment, workflow)
        return str(client.get_run(parent).info.experiment_id), parent
    return ensure_experiment(client, experiment, tracking_uri), None


def _training_run(client: Any, experiment_id: str, parent: str) -> str:
    """The workflow's last finished training attempt (the one whose model is released), or "" when none is."""
    runs = client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{PARENT_TAG}` = '{parent}' and tags.`{STEP_TAG}` = '{TRAINING_STEP}'",
        order_by=["attributes.start_time DESC"],
        max_results=20,
    )
    finished = [run for run in runs if run.info.status == "FINISHED"]
    return str(finished[0].info.run_id) if finished else ""


def register(
    client: Any,
    name: str,
    model_dir: str | Path,
    lineage: Lineage,
    verdict: Verdict | None = None,
    *,
    experiment: str = DEFAULT_EXPERIMENT,
) -> Registered:
    """Log `model_dir` as a run's artifacts, register it as a new version of `name`, promote it if `verdict` says.

    Promoting moves `champion` to the new version and `previous` to the version that was champion; a version
    that is not promoted gets no alias. Either way the version carries the lineage and the verdict as tags and
    the verdict's sentence as its description. Without a verdict the version is promoted (a first champion).
    The model directory is checked before MLflow is touched; RegistryError or InputError say what went wrong.
    """
    verdict = verdict or Verdict()
    directory = Path(model_dir)
    if not directory.is_dir():
        raise InputError(f"the model directory {directory} does not exist")
    if not any(directory.iterdir()):
        raise InputError(f"the model directory {directory} is empty; nothing to register")
    uri = str(client.tracking_uri)
    # Read first: a name MLflow refuses (a '/'), or a server that refuses, then changes nothing.
    exists = aliases(client, name) is not None
    with mlflow_errors(f"registering {directory} as {name}", uri):
        experiment_id, parent = _experiment_id(client, uri, experiment, lineage.workflow)
        if parent:
            found = lineage.training_run or _training_run(client, experiment_id, parent)
            lineage = lineage.model_copy(update={"parent_run": parent, "training_run": found})
        tags = lineage_tags(lineage) | verdict_tags(verdict)
        key = release_key(directory, tags) if lineage.workflow else ""
        tags |= {RELEASE_TAG: key} if key else {}
        description = describe(verdict)
        resumed = find_versions(client, name, f"tags.`{RELEASE_TAG}` = '{key}'") if key and exists else []
        mv = (
            resumed[0]
            if resumed
            else _new_version(client, name, directory, experiment_id, parent, tags, description, verdict, exists)
        )
    version, run_id, promote = str(mv.version), str(mv.run_id), verdict.promoted
    if promote:
        try:
            _promote(client, name, version)
        except TrackingUnavailable as err:
            again = "run the same step again to finish" if lineage.workflow else f"point {CHAMPION} at it in MLflow"
            raise RegistryUnavailable(
                f"version {version} of {name} is registered but {CHAMPION} was not moved to it ({err.reason}); {again}",
                uri=uri,
                reason=err.reason,
            ) from None
    by = f"workflow {lineage.workflow}" if lineage.workflow else "`vcpilot release register`"
    describe_model(client, name, by=by if promote else "")
    now = aliases(client, name) or {}
    return Registered(
        name=name,
        version=version,
        source=str(mv.source),
        run_id=run_id,
        promoted=promote,
        champion=now.get(CHAMPION),
        previous=now.get(PREVIOUS),
        description=description,
        lineage=lineage,
        verdict=verdict,
    )


def release_key(directory: Path, tags: dict[str, str]) -> str:
    """What names one workflow's release for good: its model directory and every lineage and verdict tag.

    A step run again after MLflow cut it off has the same key, and finishes that version instead of registering
    the model twice; a second release in the same workflow (other scores, another checkpoint) has another.
    """
    text = "\n".join([str(directory.resolve()), *(f"{k}={v}" for k, v in sorted(tags.items()))])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _new_version(
    client: Any,
    name: str,
    directory: Path,
    experiment_id: str,
    parent: str | None,
    tags: dict[str, str],
    description: str,
    verdict: Verdict,
    exists: bool,
) -> Any:
    """Log `directory` as a release run's artifacts and register them as a new version of `name` (no alias yet).

    The registered model is made only once the files are logged, so a failed upload leaves no empty model behind.
    """
    from mlflow.exceptions import MlflowException

    uri = str(client.tracking_uri)
    # Not the workflow tag on the run: `workflow_run` finds the parent run by it. The parent link says it.
    run_tags = {STEP_TAG: "release"} | {k: v for k, v in tags.items() if k != WORKFLOW_TAG}
    run_tags |= {PARENT_TAG: parent} if parent else {}
    run = client.create_run(experiment_id, run_name=f"release-{name}", tags=run_tags)
    run_id = run.info.run_id
    try:
        for metric, value in verdict.scores.numbers().items():
            client.log_metric(run_id, metric, value)
        client.log_artifacts(run_id, str(directory), artifact_path="model")
    except BaseException:
        # The first error is the one to report; marking the run FAILED is only worth a try.
        with contextlib.suppress(TrackingUnavailable), tracking_errors(uri, f"mark run {run_id} FAILED"):
            client.set_terminated(run_id, status="FAILED")
        raise
    client.set_terminated(run_id, status="FINISHED")
    try:
        if not exists:
            client.create_registered_model(name)
    except MlflowException as err:  # another release made it a moment ago
        if err.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
    return client.create_model_version(
        name, source=f"{run.info.artifact_uri}/model", run_id=run_id, tags=tags, description=description
    )


def _promote(client: Any, name: str, version: str) -> None:
    """Move `champion` to `version` and `previous` to the champion it replaces; done again, it changes nothing.

    The champion is read once the new version exists, just before the move: a release that finished while this one
    uploaded becomes `previous` (MLflow has no compare-and-set: two moves in the same instant may still skip one).
    A version that is champion already (a release cut off before it moved `previous`) takes the champion it
    replaced from its `vcpilot.replaced` tag.
    """
    old = (aliases(client, name) or {}).get(CHAMPION)
    with mlflow_errors(f"promoting version {version} of {name}", str(client.tracking_uri)):
        if old == version:
            old = client.get_model_version(name, version).tags.get(REPLACED_TAG)
        elif old:
            upsert(client.set_model_version_tag, name, version, REPLACED_TAG, old)
        upsert(client.set_registered_model_alias, name, CHAMPION, version)
        if old and old != version:
            upsert(client.set_registered_model_alias, name, PREVIOUS, old)


def lineage_from(
    *,
    workflow: str = "",
    dataset: str | Path | None = None,
    base_model: str = "",
    checkpoint: str = "",
    training_run: str = "",
) -> Lineage:
    """A Lineage from what a command line gives: the dataset's digest is computed here."""
    return Lineage(
        workflow=workflow,
        training_run=training_run,
        dataset=str(_train_file(dataset)) if dataset else "",
        dataset_digest=dataset_digest(dataset) if dataset else "",
        base_model=base_model,
        checkpoint=checkpoint,
    )


def register_model(
    model: Path,
    name: str,
    *,
    dataset: Path | None = None,
    base_model: str = "",
    checkpoint: str = "",
    training_run: str = "",
    verdict: Verdict | None = None,
    workflow: str = "",
    experiment: str = "",
    tracking_uri: str = "",
) -> Registered:
    """Check the inputs, then register `model` as a new version of `name`, promoted if the verdict says so.

    Everything local is checked before MLflow is contacted, so a bad input or an unreachable server changes
    nothing. The verdict (verdict.py `read_scores` reads it from the reports) defaults to promoting. Raises
    InputError or RegistryError with one sentence.
    """
    quiet()
    if problem := name_problem(name):
        raise InputError(f"--registered-model {problem}")
    if not model.is_dir():
        raise InputError(f"the model directory {model} does not exist")
    lineage = lineage_from(
        workflow=workflow or os.environ.get(WORKFLOW_ENV, ""),
        dataset=dataset,
        base_model=base_model,
        checkpoint=checkpoint,
        training_run=training_run,
    )
    client = connect(resolve_uri(tracking_uri))
    experiment = experiment_name(experiment)
    return register(client, name, model, lineage, verdict, experiment=experiment)
