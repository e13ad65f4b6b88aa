"""KubeCluster's line to the API server: configuration, bounded retries with backoff, errors as one sentence.

A busy or restarting API server answers 429 or 5xx, or drops the connection; those calls are tried again with
doubling delays (or the server's Retry-After), a bounded number of times. Every other failure becomes a
`ClusterError` subclass whose message says what was being done and what the server said, never a traceback.
Answers are the API server's JSON as dicts, read raw (`_preload_content=False`), so nothing is lost to the
client's models.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from components.files import load_document
from components.volcano.cluster import ClusterError, ClusterUnavailable, Conflict, Invalid

__all__ = [
    "BATCH",
    "MERGE_PATCH",
    "REQUEST_TIMEOUT",
    "SCHEDULING",
    "Api",
    "api_message",
    "backoff_delay",
    "is_retryable",
]

BATCH = ("batch.volcano.sh", "v1alpha1")
SCHEDULING = ("scheduling.volcano.sh", "v1beta1")
MERGE_PATCH = "application/merge-patch+json"  # a null value removes a key
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
REQUEST_TIMEOUT = (5.0, 30.0)  # connect, read (seconds) for every call but watches


def is_retryable(err: BaseException) -> bool:
    """Whether trying again may succeed: throttling, a server error, or a connection that failed or dropped."""
    if isinstance(err, ApiException):
        return err.status in _RETRY_STATUS or not err.status
    return isinstance(err, urllib3.exceptions.HTTPError | ConnectionError | TimeoutError)


def backoff_delay(attempt: int, retry_after: str | None = None, *, base: float = 0.25, cap: float = 8.0) -> float:
    """Seconds to wait before retry `attempt` (1, 2, ...): the server's Retry-After when given, else doubling."""
    if retry_after:
        try:
            return min(max(float(retry_after), 0.0), cap)
        except ValueError:
            pass
    return min(base * 2 ** (attempt - 1), cap)


def api_message(err: BaseException) -> str:
    """What the API server said, as one sentence without a trailing period (the Status body's message)."""
    if isinstance(err, ApiException):
        text = ""
        try:
            text = str(json.loads(err.body or "{}").get("message") or "")
        except (ValueError, AttributeError):
            text = str(err.body or "")
        text = text or f"HTTP {err.status} {err.reason or ''}".strip()
    else:
        text = str(getattr(err, "reason", None) or err) or type(err).__name__
    return " ".join(text.split()).rstrip(".")


def check_kubeconfig(path: str, context: str | None) -> None:
    """Refuse, in one sentence, a kubeconfig file the client could not use, before it says so its own way.

    The client answers some shapes with several sentences, and others with a Python TypeError ('str' object does
    not support item assignment); this reads the file as every file we take (InputError: missing, a directory,
    not YAML, too big) and checks the entries a context needs.
    """
    document = load_document(path, "")  # its InputError is worded "cannot load kubeconfig PATH: …" below
    names: dict[str, list[str]] = {}
    for key in ("clusters", "contexts", "users"):
        entries = document.get(key) or []
        if not isinstance(entries, list) or not all(
            isinstance(e, dict) and isinstance(e.get("name"), str) for e in entries
        ):
            raise ClusterError(f"kubeconfig {path}: {key} must be a list of entries, each with a name")
        names[key] = [e["name"] for e in entries]
    known = ", ".join(names["contexts"]) or "none"
    chosen = context or document.get("current-context")
    if not chosen:
        raise ClusterError(f"kubeconfig {path} sets no current-context; pass --context (its contexts: {known})")
    if chosen not in names["contexts"]:
        raise ClusterError(f"kubeconfig {path} has no context {chosen!r}; its contexts: {known}")


def load_config(kubeconfig: str | Path | None, context: str | None, in_cluster: bool | None) -> client.Configuration:
    """The client configuration from a kubeconfig, or the pod's service account when `in_cluster`."""
    cfg = client.Configuration()
    if in_cluster is None:
        in_cluster = (
            kubeconfig is None
            and context is None
            and not os.environ.get("KUBECONFIG")
            and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
        )
    try:
        if in_cluster:
            config.load_incluster_config(client_configuration=cfg)
        else:
            path = str(kubeconfig) if kubeconfig else None
            if path:
                check_kubeconfig(path, context)
            config.load_kube_config(config_file=path, context=context, client_configuration=cfg)
    except (ConfigException, OSError, TypeError, ValueError) as err:
        where = "the in-cluster service account" if in_cluster else f"kubeconfig {kubeconfig or '(default)'}"
        # the client's messages run to several sentences ("Invalid kube-config file. Expected …"): one, joined
        said = "; ".join(part for part in " ".join(str(err).split()).rstrip(".").split(". ") if part)
        raise ClusterError(f"cannot load {where}: {said}.") from None
    # Retries are ours (`Api.call`): urllib3 would otherwise sleep out a Retry-After by itself, unbounded.
    cfg.retries = urllib3.Retry(total=0, respect_retry_after_header=False)
    return cfg


class Api:
    """The core and custom-objects APIs of one cluster, called with retries (see the module docstring)."""

    def __init__(
        self,
        kubeconfig: str | Path | None = None,
        context: str | None = None,
        *,
        in_cluster: bool | None = None,
        attempts: int = 6,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = load_config(kubeconfig, context, in_cluster)
        self.client = client.ApiClient(self.config)
        self.core = client.CoreV1Api(self.client)
        self.custom = client.CustomObjectsApi(self.client)
        # The groups `vcpilot doctor` reads besides those, so that no module above this one imports the client.
        self.version = client.VersionApi(self.client)
        self.authentication = client.AuthenticationV1Api(self.client)
        self.authorization = client.AuthorizationV1Api(self.client)
        self.scheduling = client.SchedulingV1Api(self.client)  # priority classes
        self.extensions = client.ApiextensionsV1Api(self.client)  # custom resource definitions
        self.attempts = max(1, attempts)
        self.sleep = sleep

    @property
    def host(self) -> str:
        """The API server's URL."""
        return str(self.config.host)

    def close(self) -> None:
        """Close the connection pool."""
        self.client.close()

    def get_path(self, path: str, *, timeout: tuple[float, float]) -> tuple[int, str]:
        """GET a path of the API server once, without retries: the HTTP status and, unless 200, what was said.

        Raises a ClusterError whose message is what went wrong (`api_message`) when no answer came.
        """
        request = self.client.param_serialize("GET", path, auth_settings=["BearerToken"])
        try:
            response = self.client.call_api(*request, _request_timeout=timeout)
            body = response.read() or b""
        except (ApiException, urllib3.exceptions.HTTPError, ConnectionError, TimeoutError) as err:
            raise ClusterError(api_message(err)) from None
        if response.status == 200:
            return 200, ""
        answer = ApiException(status=response.status, reason=response.reason, body=body.decode(errors="replace"))
        return response.status, api_message(answer)

    def call(
        self,
        what: str,
        fn: Callable[..., Any],
        *args: Any,
        missing: ClusterError | None = None,
        absent_ok: bool = False,
        **kw: Any,
    ) -> Any:
        """Call the API with retries: the answer's JSON (None for a 404 when `absent_ok`), or a ClusterError."""
        kw.setdefault("_request_timeout", REQUEST_TIMEOUT)
        for attempt in range(1, self.attempts + 1):
            try:
                response = fn(*args, _preload_content=False, **kw)
                return json.loads(response.data or b"{}")
            except (ApiException, urllib3.exceptions.HTTPError, ConnectionError, TimeoutError) as err:
                if absent_ok and isinstance(err, ApiException) and err.status == 404:
                    return None
                if is_retryable(err) and attempt < self.attempts:
                    headers = getattr(err, "headers", None) or {}
                    self.sleep(backoff_delay(attempt, headers.get("Retry-After")))
                    continue
                raise self.error(what, err, missing, attempt) from None
        raise AssertionError("unreachable")

    def error(self, what: str, err: BaseException, missing: ClusterError | None, attempts: int) -> ClusterError:
        """The ClusterError for a failed call: `missing` for a 404, else by status, naming what was being done."""
        status = err.status if isinstance(err, ApiException) else None
        message = api_message(err)
        if status == 404 and missing is not None:
            return missing
        if status == 409:
            return Conflict(f"cannot {what}: {message}.")
        if status in (400, 422):
            return Invalid(f"the API server refused to {what}: {message}.")
        if status in (401, 403):
            return ClusterError(f"not allowed to {what} ({message}); check the kubeconfig's user or the RBAC.")
        if is_retryable(err):
            return ClusterUnavailable(
                f"could not {what}: the API server at {self.host} failed {attempts} times ({message})."
            )
        return ClusterError(f"could not {what}: {message}.")

    def items(self, what: str, fn: Callable[..., Any], *args: Any, **kw: Any) -> list[dict[str, Any]]:
        """The `items` of a list call."""
        return list(self.call(what, fn, *args, **kw).get("items") or [])
