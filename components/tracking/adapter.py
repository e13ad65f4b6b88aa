"""The one seam between vcpilot and MLflow: where tracking goes, the names used there, one error for its failures.

Every module that talks to MLflow finds its target here and runs its calls inside `tracking_errors`, which turns
what MLflow, the network or the store raises into one `TrackingUnavailable`. Callers handle it deliberately: a
person's command lets it reach the boundary (`components.errors.explain`), a step's best-effort record catches
exactly it, warns once and carries on — the workspace's report files are the source of truth.

Two ways to find the target, because two kinds of program ask:

- `configured_uri`: an explicit URI, else `MLFLOW_TRACKING_URI`, else "" — tracking is off. Step programs and
  the agent's records use it: outside a workflow they log nothing.
- `resolve_uri`: the same, else the local sqlite store under `VCPILOT_HOME` (`local_store_uri`). The registry
  commands use it: a person's `vcpilot release show` works on a laptop without any setting.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from components.errors import InputError, Unavailable

__all__ = [
    "ARGO_URL_ENV",
    "ARGO_URL_TAG",
    "ATTEMPT_ENV",
    "ATTEMPT_TAG",
    "DEFAULT_EXPERIMENT",
    "EXPERIMENT_ENV",
    "FLUSH_ENV",
    "IMAGE_ENV",
    "IMAGE_TAG",
    "JOB_ENV",
    "JOB_TAG",
    "KEY_TAG",
    "NAMESPACE_ENV",
    "NAMESPACE_TAG",
    "PARENT_TAG",
    "SPOOL_ENV",
    "STATUS_TAG",
    "STEP_ENV",
    "STEP_TAG",
    "TAG_LIMIT",
    "TEMPLATE_VERSION_ENV",
    "TEMPLATE_VERSION_TAG",
    "TRACKING_URI_ENV",
    "TRIGGER_ENV",
    "TRIGGER_TAG",
    "STEP_WAIT_S",
    "WAIT_ENV",
    "WORKFLOW_ENV",
    "WORKFLOW_TAG",
    "WORKFLOW_UID_ENV",
    "WORKFLOW_UID_TAG",
    "WORKSPACE_ENV",
    "TrackingUnavailable",
    "artifact_root",
    "bounded_retries",
    "check_reachable",
    "client",
    "configured_uri",
    "experiment_name",
    "ensure_experiment",
    "first_line",
    "local_store_uri",
    "quiet",
    "resolve_uri",
    "tracking_errors",
    "unreachable",
]

TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"
EXPERIMENT_ENV = "MLFLOW_EXPERIMENT_NAME"
# What a step's pod knows of its workflow run (`pipelines.vcjobs.JobContext.env`), and where it spools.
WORKFLOW_ENV = "VCPILOT_WORKFLOW"
WORKFLOW_UID_ENV = "VCPILOT_WORKFLOW_UID"
NAMESPACE_ENV = "VCPILOT_NAMESPACE"
ARGO_URL_ENV = "VCPILOT_ARGO_URL"
TRIGGER_ENV = "VCPILOT_TRIGGER"
TEMPLATE_VERSION_ENV = "VCPILOT_TEMPLATE_VERSION"
IMAGE_ENV = "VCPILOT_IMAGE"
STEP_ENV = "VCPILOT_STEP"
ATTEMPT_ENV = "VCPILOT_ATTEMPT"
JOB_ENV = "VCPILOT_JOB"
WORKSPACE_ENV = "VCPILOT_WORKSPACE"
SPOOL_ENV = "VCPILOT_TRACKING_SPOOL"  # the directory of the run's spools (components/tracking/spool.py)
FLUSH_ENV = "VCPILOT_TRACKING_FLUSH_S"  # seconds between a spool's background sends (5 unless set)
# How long a step that cannot do without MLflow (the registry: the champion to beat, the version to register)
# waits for an unreachable server before it fails; a person's command waits 0 s unless it is set.
WAIT_ENV = "VCPILOT_MLFLOW_WAIT_S"
STEP_WAIT_S = 300  # what every step's pod gets (pipelines.vcjobs.JobContext.env): a restart or an outage of minutes

DEFAULT_EXPERIMENT = "llm-autopilot"
PARENT_TAG = "mlflow.parentRunId"  # what MLflow's UI nests runs by
# Every run vcpilot makes carries a key that names it for good, so a replay or a retry finds it instead of making
# a second one: `<workflow uid>` for the parent, `<workflow uid>/<step>/<attempt>` for a step's or attempt's run.
KEY_TAG = "vcpilot.key"
# The parent run only: the workflow it records (name, uid, namespace, link), how it started, what ran it.
WORKFLOW_TAG = "vcpilot.workflow"  # the name; older parents are found by it alone
WORKFLOW_UID_TAG = "vcpilot.workflow.uid"
NAMESPACE_TAG = "vcpilot.workflow.namespace"
ARGO_URL_TAG = "vcpilot.workflow.url"  # the workflow in the Argo UI; absent when no UI is configured (locally)
TRIGGER_TAG = "vcpilot.trigger"  # cron, ui, cli, submitted or local
TEMPLATE_VERSION_TAG = "vcpilot.template.version"
IMAGE_TAG = "vcpilot.image"
STATUS_TAG = "vcpilot.status"  # the workflow's outcome, set by the exit handler
# A step's or training attempt's run.
STEP_TAG = "vcpilot.step"
ATTEMPT_TAG = "vcpilot.attempt"
JOB_TAG = "vcpilot.vcjob"
TAG_LIMIT = 5000  # MLflow 3 keeps 8000 characters of a tag; every store keeps this many


class TrackingUnavailable(Unavailable):
    """MLflow could not be reached, or failed or refused what was asked; `reason` is the underlying error's line.

    Best-effort records catch exactly this and carry on; anything else (a bug) is not swallowed with it.
    """

    def __init__(self, message: str, *, uri: str = "", reason: str = "") -> None:
        """`message` is the sentence for people; `uri` the tracking target; `reason` the original error, short."""
        super().__init__(message)
        self.uri = uri
        self.reason = reason or message


# The schemes MLflow keeps runs under (a store's `+driver` aside): anything else it refuses only once a command has
# started, in a paragraph that lists them.
_TRACKING_SCHEMES = ("", "file", "http", "https", "sqlite", "postgresql", "mysql", "mssql", "databricks", "uc")


def check_tracking_uri(uri: str, what: str = "the MLflow tracking URI") -> str:
    """`uri`, or InputError in one sentence when MLflow could not keep runs there (a scheme it lacks, a bad port)."""
    from urllib.parse import urlsplit

    scheme = urlsplit(uri).scheme.lower()
    if scheme.split("+")[0].removesuffix("-uc") not in _TRACKING_SCHEMES:
        raise InputError(
            f"{what} {uri!r} is not one MLflow can keep runs under: give http(s)://host:port of a tracking server, "
            "sqlite:///path/mlflow.db or a local directory"
        )
    if scheme in ("http", "https"):
        from components.ports import check_http_url

        try:
            check_http_url(uri)
        except ValueError as err:
            raise InputError(f"{what} {err}") from None
    if scheme.startswith("sqlite") and uri.partition(":///")[2]:
        _check_sqlite_store(Path(uri.partition(":///")[2].partition("?")[0]), uri, what)
    return uri


_SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file


def _check_sqlite_store(store: Path, uri: str, what: str) -> None:
    """InputError when `store` cannot be an SQLite database: MLflow retries such a store for minutes, in paragraphs.

    A store that does not exist yet is fine (the registry makes it), and so is an empty file.
    """
    fix = "give sqlite:///PATH/mlflow.db, a database file or a path where one can be made"
    try:
        mode = store.stat().st_mode
    except FileNotFoundError:
        return
    except OSError as err:  # a symlink loop, a file where a directory goes
        raise InputError(f"{what} {uri!r} names {store}, which cannot be read ({err.strerror}); {fix}") from None
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise InputError(f"{what} {uri!r} names {store}, which is {kind}; {fix}")
    try:
        with store.open("rb") as file:
            head = file.read(len(_SQLITE_HEADER))
    except OSError:
        return  # MLflow says why it cannot open it
    if head and head != _SQLITE_HEADER:
        raise InputError(f"{what} {uri!r} names {store}, which is not an SQLite database; {fix}")


def configured_uri(explicit: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """`explicit`, else `MLFLOW_TRACKING_URI` from `env` (the process environment); "" means tracking is off.

    InputError for a URI MLflow could not use (`check_tracking_uri`), naming where it came from.
    """
    if explicit:
        return check_tracking_uri(explicit)
    uri = (os.environ if env is None else env).get(TRACKING_URI_ENV, "")
    return check_tracking_uri(uri, f"{TRACKING_URI_ENV}") if uri else ""


def local_store_uri(home: str | Path | None = None) -> str:
    """The local sqlite store: `mlflow.db` under `home`, else `VCPILOT_HOME`, else `./.vcpilot`."""
    root = Path(home or os.environ.get("VCPILOT_HOME") or ".vcpilot").resolve()
    return f"sqlite:///{root / 'mlflow.db'}"


def resolve_uri(explicit: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """`configured_uri`, else the local store under `VCPILOT_HOME`: never empty."""
    source = os.environ if env is None else env
    return configured_uri(explicit, source) or local_store_uri(source.get("VCPILOT_HOME"))


def experiment_name(explicit: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """`explicit`, else `MLFLOW_EXPERIMENT_NAME` from `env` (the process environment), else llm-autopilot."""
    return explicit or (os.environ if env is None else env).get(EXPERIMENT_ENV) or DEFAULT_EXPERIMENT


def artifact_root(tracking_uri: str) -> str | None:
    """Artifacts of a local sqlite store go next to the database, not into the current directory's ./mlruns."""
    if tracking_uri.startswith("sqlite:///"):
        return (Path(tracking_uri.removeprefix("sqlite:///")).parent / "mlartifacts").resolve().as_uri()
    return None


def ensure_experiment(client: Any, name: str, tracking_uri: str) -> str:
    """The id of experiment `name`, created (artifacts as `artifact_root` says) when there is none.

    Two processes that both find none race to create it: the loser's RESOURCE_ALREADY_EXISTS means it is there now.
    """
    from mlflow.exceptions import MlflowException  # imported here: MLflow takes seconds to import

    found = client.get_experiment_by_name(name)
    if found:
        return str(found.experiment_id)
    try:
        return str(client.create_experiment(name, artifact_root(tracking_uri)))
    except MlflowException as err:
        if err.error_code != "RESOURCE_ALREADY_EXISTS" or not (made := client.get_experiment_by_name(name)):
            raise
        return str(made.experiment_id)


def first_line(err: BaseException) -> str:
    """`Type: first line of the message`, at most 200 characters: an MLflow error fit for a one-line warning."""
    text = (getattr(err, "message", None) or str(err)).strip()
    return f"{type(err).__name__}: {text.splitlines()[0][:200]}" if text else type(err).__name__


def _failures() -> tuple[type[BaseException], ...]:
    """What MLflow, its HTTP client and its stores raise; they share no base but BaseException."""
    from mlflow.exceptions import MlflowException  # imported here: MLflow takes seconds to import
    from requests.exceptions import RequestException
    from urllib3.exceptions import HTTPError

    found: list[type[BaseException]] = [MlflowException, RequestException, HTTPError, OSError]
    with contextlib.suppress(ImportError):  # mlflow-skinny has no sqlalchemy, and no sqlite store
        from sqlalchemy.exc import SQLAlchemyError

        found.append(SQLAlchemyError)
    return tuple(found)


@contextlib.contextmanager
def tracking_errors(tracking_uri: str, action: str) -> Iterator[None]:
    """Within this block, MLflow's failures while doing `action` (a verb: "log the step") are TrackingUnavailable."""
    try:
        yield
    except TrackingUnavailable:
        raise
    except _failures() as err:
        reason = first_line(err)
        message = f"MLflow at {tracking_uri} could not {action} ({reason})"
        raise TrackingUnavailable(message, uri=tracking_uri, reason=reason) from err


def unreachable(tracking_uri: str, timeout_s: float) -> str | None:
    """Why an HTTP tracking server does not answer /health (None when it does, or is not HTTP).

    Asked first because MLflow's client retries a dead server for minutes before it gives up.
    """
    if not tracking_uri.startswith(("http://", "https://")):
        return None
    import urllib.error  # imported here: urllib.request and http.client cost every `vcpilot` command otherwise
    import urllib.request

    try:
        with urllib.request.urlopen(tracking_uri.rstrip("/") + "/health", timeout=timeout_s) as response:  # noqa: S310
            return None if response.status == 200 else f"/health answered {response.status}"
    except urllib.error.HTTPError as err:
        return f"/health answered {err.code}"
    except (urllib.error.URLError, OSError) as err:
        return str(getattr(err, "reason", err))


def check_reachable(tracking_uri: str, timeout_s: float = 5.0, env: Mapping[str, str] = os.environ) -> None:
    """TrackingUnavailable in one sentence when an HTTP tracking server does not answer /health.

    With `VCPILOT_MLFLOW_WAIT_S` (WAIT_ENV) set, a server that does not answer is asked again, every few seconds,
    until it does or that many seconds have passed; one line on stderr says it is waiting.
    """
    import sys
    import time

    text = env.get(WAIT_ENV, "").strip() or "0"
    try:
        wait_s = float(text)
    except ValueError:
        wait_s = -1.0
    if not 0 <= wait_s < float("inf"):
        raise InputError(f"{WAIT_ENV}={text!r} is not a number of seconds; set it to 0 or more, or unset it")
    deadline = time.monotonic() + wait_s
    reason = unreachable(tracking_uri, timeout_s)
    if reason and wait_s > 0:
        print(
            f"warning: MLflow at {tracking_uri} is unreachable ({reason}); waiting up to {wait_s:g} s", file=sys.stderr
        )
    while reason and time.monotonic() < deadline:
        time.sleep(min(2.0, max(0.0, deadline - time.monotonic())))
        reason = unreachable(tracking_uri, timeout_s)
    if reason:
        waited = f", still after {wait_s:g} s" if wait_s > 0 else ""
        raise TrackingUnavailable(
            f"MLflow at {tracking_uri} is unreachable ({reason}{waited}); start the server or set {TRACKING_URI_ENV}",
            uri=tracking_uri,
            reason=reason,
        )


def quiet() -> None:
    """Keep MLflow's progress bars, "View run at" lines and INFO chatter out of our output (stdout may be parsed).

    Settings made in the environment win: `MLFLOW_LOGGING_LEVEL=INFO` brings the chatter back.
    """
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    # MLflow reads the level when it is first imported; a process that imported it already needs telling.
    import logging  # imported here: `vcpilot plan` reads this module's names and logs nothing

    logging.getLogger("mlflow").setLevel(os.environ["MLFLOW_LOGGING_LEVEL"].upper())


@contextlib.contextmanager
def bounded_retries() -> Iterator[None]:
    """Within this block an unreachable tracking server fails in seconds, not after MLflow's minutes of retries.

    A value the user set in the environment wins.
    """
    wanted = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"}
    added = [key for key in wanted if key not in os.environ]
    os.environ.update({key: wanted[key] for key in added})
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


def client(tracking_uri: str) -> Any:
    """An MlflowClient whose tracking and registry are both `tracking_uri` (MLflow is imported only now)."""
    with tracking_errors(tracking_uri, "open a client"):
        from mlflow.tracking import MlflowClient  # imported here: MLflow takes seconds to import

        return MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
