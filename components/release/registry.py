"""The MLflow model registry as vcpilot uses it: the aliases `champion` and `previous`, never stages.

A registered model's versions point at run artifacts (the model directory as files). `champion` is the version
the service should run; `previous` the one it replaced, so that a rollback is one alias move. Each promoted
version carries the tag `vcpilot.replaced` with the version it replaced, which lets successive rollbacks walk
back through the history. The registered model's description says what it is and what last changed its
champion (a workflow, or a rollback); the tag `vcpilot.champion_changed_by` keeps the latter.

Every call that reaches MLflow goes through `mlflow_errors`, so a person sees one sentence, never a traceback:
`RegistryError` when MLflow answered and refused, `RegistryUnavailable` — a RegistryError that is also the
adapter's `TrackingUnavailable` — when it could not be reached or failed. `connect` checks that an HTTP tracking
server answers before anything is attempted.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from components.errors import EXIT_UNAVAILABLE, VcpilotError
from components.tracking.adapter import TrackingUnavailable, check_reachable, client, tracking_errors

__all__ = [
    "CHAMPION",
    "CHANGED_BY_TAG",
    "PREVIOUS",
    "REPLACED_TAG",
    "ROLLED_BACK_TAG",
    "ModelVersion",
    "RegistryError",
    "RegistryUnavailable",
    "RegistryView",
    "Rollback",
    "aliases",
    "connect",
    "describe_model",
    "download",
    "filter_literal",
    "find_alias",
    "find_versions",
    "mlflow_errors",
    "model_description",
    "name_problem",
    "rollback",
    "upsert",
    "view",
]

CHAMPION, PREVIOUS = "champion", "previous"
# MLflow's registry schema keeps names this long: sqlite does not check, PostgreSQL and MySQL fail the request.
NAME_LIMIT = 256
REPLACED_TAG = "vcpilot.replaced"
ROLLED_BACK_TAG = "vcpilot.rolled_back"
CHANGED_BY_TAG = "vcpilot.champion_changed_by"


class RegistryError(VcpilotError):
    """The registry cannot do what was asked; the message says why in one sentence."""


class RegistryUnavailable(RegistryError, TrackingUnavailable):
    """The registry's server could not be reached or failed: the same command may work later."""

    exit_code = EXIT_UNAVAILABLE

    def __init__(self, message: str, *, uri: str = "", reason: str = "") -> None:
        """`message` is the sentence for people; `uri` the tracking target; `reason` the original error, short."""
        TrackingUnavailable.__init__(self, message, uri=uri, reason=reason)


class ModelVersion(BaseModel):
    """One version of a registered model, as people look at it."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: str
    source: str
    run_id: str | None = None
    created_ms: int | None = None
    status: str = "READY"  # PENDING_REGISTRATION and FAILED_REGISTRATION have no files to serve
    aliases: list[str] = []
    description: str = ""  # why it was or was not promoted, with the numbers
    tags: dict[str, str] = {}


class RegistryView(BaseModel):
    """A registered model: what it is, where its aliases point and all its versions, newest first."""

    name: str
    description: str = ""
    aliases: dict[str, str]
    tags: dict[str, str] = {}
    versions: list[ModelVersion]


class Rollback(BaseModel):
    """What a rollback did: the version that is champion again, the one it replaced, and the new `previous`."""

    name: str
    champion: str
    rolled_back: str | None
    previous: str | None


@contextlib.contextmanager
def mlflow_errors(action: str, tracking_uri: str = "") -> Iterator[None]:
    """Turn what MLflow, its store or the network raises while doing `action` into one sentence.

    RegistryError when MLflow answered with a refusal (no such model, a bad value); RegistryUnavailable when it
    could not be reached or failed. Anything else is a bug and is not translated.
    """
    try:
        with tracking_errors(tracking_uri, action):
            yield
    except RegistryError:
        raise
    except TrackingUnavailable as err:
        cause = err.__cause__ if err.__cause__ is not None else err
        raise _translated(action, cause, tracking_uri, err.reason) from None


_REFUSALS = {  # MLflow's answers that say the request itself is wrong: trying again changes nothing
    "BAD_REQUEST",
    "INVALID_PARAMETER_VALUE",
    "INVALID_STATE",
    "PERMISSION_DENIED",
    "RESOURCE_ALREADY_EXISTS",
    "RESOURCE_DOES_NOT_EXIST",
    "UNAUTHENTICATED",
}


def _translated(action: str, err: BaseException, tracking_uri: str, reason: str) -> RegistryError:
    from mlflow.exceptions import MlflowException

    if isinstance(err, TrackingUnavailable):  # raised as such below us (a health check): its sentence stands
        return RegistryUnavailable(str(err), uri=err.uri, reason=err.reason)
    if isinstance(err, MlflowException | OSError):
        message = getattr(err, "message", None) or str(err)
        first = message.strip().splitlines()[0] if message.strip() else type(err).__name__
        sentence = f"{action} failed: {first.rstrip('.')}"
    else:  # requests', urllib3's and sqlalchemy's errors: their type says as much as their text
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        sentence = f"{action} failed: {type(err).__name__} {first}".rstrip()
    if isinstance(err, MlflowException) and err.error_code in _REFUSALS:
        return RegistryError(sentence)
    return RegistryUnavailable(sentence, uri=tracking_uri, reason=reason)


def connect(tracking_uri: str, *, timeout_s: float = 5.0, create: bool = True) -> Any:
    """An MlflowClient for `tracking_uri`, after checking that an HTTP server answers its /health endpoint.

    The check makes an unreachable server one quick error (RegistryUnavailable) instead of minutes of client
    retries. With `create=False` (a command that only reads or moves aliases) a sqlite store that does not exist
    is a RegistryError, not a new empty store (and its directories) made where a typo pointed.
    """
    try:
        check_reachable(tracking_uri, timeout_s)
    except TrackingUnavailable as err:
        raise RegistryUnavailable(str(err), uri=tracking_uri, reason=err.reason) from None
    if _is_file_store(tracking_uri) and os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() not in ("true", "1"):
        raise RegistryError(
            f"MLflow 3 keeps no model registry in a directory ({tracking_uri}); give --tracking-uri (or "
            "MLFLOW_TRACKING_URI) sqlite:///PATH/mlflow.db or http(s)://HOST:PORT, or set MLFLOW_ALLOW_FILE_STORE=true"
        )
    if tracking_uri.startswith("sqlite:///"):
        store = Path(tracking_uri.removeprefix("sqlite:///"))
        if not create and not store.exists():
            raise RegistryError(
                f"there is no MLflow store at {store}, so no registered model; check --tracking-uri "
                "(or MLFLOW_TRACKING_URI), or register one with `vcpilot release register`"
            )
        store.parent.mkdir(parents=True, exist_ok=True)
    with mlflow_errors(f"connecting to MLflow at {tracking_uri}", tracking_uri):
        return client(tracking_uri)


def name_problem(name: str) -> str | None:
    """What is wrong with `name` for a new version (None: nothing we can tell before MLflow answers).

    Only registering checks the length: a longer name a sqlite store took is still shown and rolled back.
    """
    if not name.strip():
        return "is empty; give the registered model's name"
    if len(name) > NAME_LIMIT:
        return f"is {len(name)} characters long; MLflow's registry keeps names of at most {NAME_LIMIT}"
    return None


def _is_file_store(tracking_uri: str) -> bool:
    """A directory (`/path`, `./mlruns`, `file:///path`): MLflow 3's file store, which it refuses in a paragraph."""
    from urllib.parse import urlsplit

    scheme = urlsplit(tracking_uri).scheme.lower()
    return scheme in ("", "file")


def filter_literal(value: str) -> str:
    """`value` quoted for an MLflow search filter, which has no escapes: in the quote it does not contain."""
    for quote in ("'", '"'):
        if quote not in value:
            return f"{quote}{value}{quote}"
    raise RegistryError(f"the name {value!r} has both ' and \"; MLflow cannot search for it, so rename it")


def find_versions(client: Any, name: str, where: str = "") -> list[Any]:
    """Every version of `name` (that matches `where`, an MLflow filter clause), however many pages MLflow gives."""
    query = f"name = {filter_literal(name)}" + (f" and {where}" if where else "")
    found: list[Any] = []
    token = None
    with mlflow_errors(f"listing the versions of {name}", _uri(client)):
        while True:
            page = client.search_model_versions(query, page_token=token)
            found.extend(page)
            token = page.token
            if not token:
                return found


def _uri(client: Any) -> str:
    return str(getattr(client, "tracking_uri", ""))


def _is_missing(err: Exception) -> bool:
    return getattr(err, "error_code", "") == "RESOURCE_DOES_NOT_EXIST"


def aliases(client: Any, name: str) -> dict[str, str] | None:
    """Alias → version of registered model `name`, or None when there is no such model."""
    from mlflow.exceptions import MlflowException

    with mlflow_errors(f"reading registered model {name}", _uri(client)):
        try:
            model = client.get_registered_model(name)
        except MlflowException as err:
            if _is_missing(err):
                return None
            raise
        return {alias: str(version) for alias, version in (model.aliases or {}).items()}


def _version(client: Any, name: str, version: str) -> ModelVersion:
    with mlflow_errors(f"reading version {version} of {name}", _uri(client)):
        mv = client.get_model_version(name, version)
    return _to_view(mv)


def _to_view(mv: Any) -> ModelVersion:
    return ModelVersion(
        name=mv.name,
        version=str(mv.version),
        source=mv.source,
        run_id=mv.run_id or None,
        created_ms=mv.creation_timestamp,
        status=str(mv.status or "READY"),
        aliases=list(mv.aliases or []),
        description=mv.description or "",
        tags=dict(mv.tags or {}),
    )


def find_alias(client: Any, name: str, alias: str) -> ModelVersion | None:
    """The version `alias` points at, or None when the model or the alias does not exist."""
    found = aliases(client, name)
    if not found or alias not in found:
        return None
    return _version(client, name, found[alias])


def view(client: Any, name: str) -> RegistryView:
    """The registered model's aliases and versions; RegistryError when there is no such model."""
    found = aliases(client, name)
    if found is None:
        raise RegistryError(f"there is no registered model {name}; register one with `vcpilot release register`")
    with mlflow_errors(f"reading registered model {name}", _uri(client)):
        model = client.get_registered_model(name)
    found_versions = find_versions(client, name)
    # Searches do not fill in a version's aliases on every store; the registered model's map is authoritative.
    by_version: dict[str, list[str]] = {}
    for alias, version in sorted(found.items()):
        by_version.setdefault(version, []).append(alias)
    versions = [
        _to_view(mv).model_copy(update={"aliases": by_version.get(str(mv.version), [])}) for mv in found_versions
    ]
    versions.sort(key=lambda v: int(v.version) if v.version.isdigit() else 0, reverse=True)
    return RegistryView(
        name=name,
        description=model.description or "",
        aliases=found,
        tags=dict(model.tags or {}),
        versions=versions,
    )


def model_description(name: str, champion: str | None, changed_by: str) -> str:
    """What the registered model is, and what made its current champion one."""
    what = (
        f"{name}: the language model that vcpilot's autopilot fine-tunes and serves. Every candidate is a version, "
        "tagged with its runs, dataset digest and scores; `champion` is the version to serve, `previous` the one "
        "it replaced."
    )
    if champion is None:
        return f"{what} There is no champion yet."
    return f"{what} Version {champion} is champion, made so by {changed_by or 'an earlier release'}."


def upsert(setter: Any, *args: str) -> None:
    """Call an MLflow setter of a tag or an alias, again if a concurrent writer made the row first.

    MLflow's SQL store sets one by reading and then inserting: two releases at once, and the second insert fails a
    unique constraint (BAD_REQUEST). The row is there then, and a second call updates it.
    """
    from mlflow.exceptions import MlflowException

    try:
        setter(*args)
    except MlflowException as err:
        if err.error_code != "BAD_REQUEST":
            raise
        setter(*args)


def describe_model(client: Any, name: str, *, by: str = "") -> str:
    """Write the registered model's description; `by` is what just changed its champion ("": nothing did)."""
    found = aliases(client, name) or {}
    with mlflow_errors(f"describing registered model {name}", _uri(client)):
        if by:
            upsert(client.set_registered_model_tag, name, CHANGED_BY_TAG, by)
        else:
            by = client.get_registered_model(name).tags.get(CHANGED_BY_TAG, "")
        description = model_description(name, found.get(CHAMPION), by)
        client.update_registered_model(name, description=description)
    return description


def download(client: Any, version: ModelVersion, destination: str | Path) -> Path:
    """Download a version's files (its run artifacts) into `destination`; returns the model directory."""
    from mlflow.artifacts import download_artifacts

    Path(destination).mkdir(parents=True, exist_ok=True)
    with mlflow_errors(f"downloading version {version.version} of {version.name}", _uri(client)):
        path = download_artifacts(
            artifact_uri=version.source, dst_path=str(destination), tracking_uri=client.tracking_uri
        )
    return Path(path)


def rollback(client: Any, name: str) -> Rollback:
    """Make `previous` the champion again.

    `previous` then points at the version the restored champion had itself replaced when it was promoted (its
    `vcpilot.replaced` tag), so rolling back again goes one step further back; it is removed when there is
    none. The version rolled back from is tagged `vcpilot.rolled_back`.
    """
    found = aliases(client, name)
    if found is None:
        raise RegistryError(f"there is no registered model {name} to roll back")
    if PREVIOUS not in found:
        raise RegistryError(f"{name} has no previous version to roll back to (its champion is {found.get(CHAMPION)})")
    restored = _version(client, name, found[PREVIOUS])
    if restored.status != "READY":
        raise RegistryError(
            f"{name}'s previous version {restored.version} is {restored.status}, not READY, so it has no files to "
            "serve; nothing was changed"
        )
    rolled_back = found.get(CHAMPION)
    older = restored.tags.get(REPLACED_TAG)
    with mlflow_errors(f"rolling back {name}", _uri(client)):
        client.set_registered_model_alias(name, CHAMPION, restored.version)
        if older and older not in (restored.version, rolled_back) and _exists(client, name, older):
            client.set_registered_model_alias(name, PREVIOUS, older)
        else:
            older = None
            client.delete_registered_model_alias(name, PREVIOUS)
        if rolled_back:
            client.set_model_version_tag(name, rolled_back, ROLLED_BACK_TAG, "true")
    describe_model(client, name, by=f"a rollback from version {rolled_back}" if rolled_back else "a rollback")
    return Rollback(name=name, champion=restored.version, rolled_back=rolled_back, previous=older)


def _exists(client: Any, name: str, version: str) -> bool:
    from mlflow.exceptions import MlflowException

    try:
        client.get_model_version(name, version)
    except MlflowException as err:
        if _is_missing(err):
            return False
        raise
    return True
