"""The doctor's checks of the HTTP servers a deployment talks to: the Argo Server, and MLflow's tracking server.

A tracking URI names what the workflow's pods reach. A Service's cluster DNS name (`http://vcpilot-mlflow:5000`)
does not resolve outside the cluster, so such a server is reached through the API server's service proxy; any
other http(s) URI is fetched directly, from this machine.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, ConfigDict

from components.volcano.cluster import ClusterError
from components.volcano.k8s_api import Api
from pipelines.argo_address import argo_server_url, verify_tls
from pipelines.doctor_report import Check

__all__ = ["TIMEOUT_S", "ServiceRef", "check_argo_server", "check_mlflow", "service_ref"]

TIMEOUT_S = 5.0
_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")  # a Service name (DNS-1035 label)
_NS = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")  # a namespace (DNS-1123 label)
ARGO_SERVER_FIX = (
    "pass --argo-server host:port or set ARGO_SERVER (e.g. localhost:2746 with "
    "`kubectl -n argo port-forward svc/argo-server 2746`)"
)


class ServiceRef(BaseModel):
    """A Service that a URL names by its cluster DNS name; `certain` False for `svc.ns`, which may be a host."""

    model_config = ConfigDict(frozen=True)

    name: str
    namespace: str
    port: int
    scheme: str = "http"
    path: str = ""
    certain: bool = True

    def proxy_path(self, endpoint: str) -> str:
        """The API server's path that proxies GET `<path><endpoint>` to this Service's port."""
        target = f"{'https:' if self.scheme == 'https' else ''}{self.name}:{self.port}"
        return f"/api/v1/namespaces/{self.namespace}/services/{target}/proxy{self.path.rstrip('/')}{endpoint}"


def service_ref(uri: str, namespace: str) -> ServiceRef | None:
    """The Service that http(s) `uri` names as a pod in `namespace` resolves it, or None for any other host.

    `svc` (in `namespace`), `svc.ns`, `svc.ns.svc` and `svc.ns.svc.<cluster domain>` name Services; the port
    defaults to the scheme's.
    """
    parts = urlsplit(uri)
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host:
        return None
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    labels = host.split(".")
    if len(labels) == 1 and _LABEL.match(host) and host != "localhost":
        name, where, certain = host, namespace, True
    elif len(labels) >= 2 and _LABEL.match(labels[0]) and _NS.match(labels[1]) and labels[2:3] in ([], ["svc"]):
        name, where, certain = labels[0], labels[1], len(labels) > 2
    else:
        return None
    return ServiceRef(name=name, namespace=where, port=port, scheme=parts.scheme, path=parts.path, certain=certain)


def check_mlflow(
    api: Api, namespace: str, uri: str, *, transport: httpx.BaseTransport | None = None, timeout_s: float = TIMEOUT_S
) -> Check:
    """Whether the tracking server at the template's `uri` answers MLflow's /health, as seen from the steps' pods.

    A ClusterError from reading the Service it names is the caller's to report.
    """
    where = "the WorkflowTemplate's mlflow-tracking-uri"
    set_it = f"set {where} default to your tracking server, e.g. http://vcpilot-mlflow:5000 (kubectl apply -k deploy/)"
    scheme = urlsplit(uri).scheme
    if not uri.strip():
        return _fail(f"{where} is empty, so every step would write MLflow's local store in its own pod", set_it)
    if scheme not in ("http", "https"):
        return _fail(f"{where} is {uri}: the steps' pods need an http(s) tracking server that they share", set_it)
    host = urlsplit(uri).hostname or ""
    if host == "localhost" or _is_loopback(host):
        return _fail(f"{where} is {uri}, which in a step is the step's own pod", set_it)
    ref = service_ref(uri, namespace)
    if ref is not None:
        service = api.call(
            f"read Service {ref.namespace}/{ref.name}",
            api.core.read_namespaced_service,
            ref.name,
            ref.namespace,
            absent_ok=True,
            _request_timeout=(3.0, timeout_s),
        )
        if service is not None:
            return _through_proxy(api, uri, ref, service, timeout_s)
        if ref.certain:
            return _fail(f"{uri} names Service {ref.namespace}/{ref.name}, which does not exist", set_it)
        return _direct(uri, transport, timeout_s, also=f", nor is there a Service {ref.namespace}/{ref.name}")
    return _direct(uri, transport, timeout_s)


def _through_proxy(api: Api, uri: str, ref: ServiceRef, service: dict[str, Any], timeout_s: float) -> Check:
    label = f"Service {ref.namespace}/{ref.name}"
    ports = [p.get("port") for p in (service.get("spec") or {}).get("ports") or []]
    if ref.port not in ports:
        listed = ", ".join(str(p) for p in ports) or "none"
        fix = f"point the template's mlflow-tracking-uri at one of its ports ({listed})"
        return _fail(f"{uri} names port {ref.port} of {label}, which has ports {listed}", fix)
    fix = (
        f"start the tracking server's pods and wait until they are Ready (`kubectl -n {ref.namespace} get endpoints "
        f"{ref.name}` lists them)"
    )
    try:
        status, said = api.get_path(ref.proxy_path("/health"), timeout=(3.0, timeout_s))
    except ClusterError as err:
        return _fail(f"MLflow at {uri} got no answer through the API server's proxy ({err})", fix)
    if status != 200:
        detail = f"MLflow at {uri} did not answer /health through the API server's proxy to {label} ({said})"
        return _fail(detail, fix)
    return Check(
        check="mlflow", ok=True, detail=f"MLflow at {uri} answers /health (through the API server's proxy to {label})"
    )


def _direct(uri: str, transport: httpx.BaseTransport | None, timeout_s: float, also: str = "") -> Check:
    url = f"{uri.rstrip('/')}/health"
    fix = f"check that the tracking server at {uri} is up and that the cluster's pods can reach it"
    try:
        with httpx.Client(transport=transport, timeout=timeout_s) as http:
            response = http.get(url)
    except httpx.HTTPError as err:
        return _fail(f"cannot reach MLflow at {url} from here ({_reason(err)}){also}", fix)
    if response.status_code != 200:
        return _fail(f"MLflow at {url} answered HTTP {response.status_code}", fix)
    return Check(check="mlflow", ok=True, detail=f"MLflow at {uri} answers /health (fetched from this machine)")


def check_argo_server(
    server: str | None,
    environ: Mapping[str, str],
    *,
    transport: httpx.BaseTransport | None = None,
    timeout_s: float = TIMEOUT_S,
) -> Check:
    """Whether the Argo Server (argument, else ARGO_SERVER) answers GET /api/v1/version, as the argo CLI calls it."""
    server = server or environ.get("ARGO_SERVER")
    if not server:
        return _fail(
            "no Argo Server named, so `vcpilot submit` and the UI were not checked", ARGO_SERVER_FIX, "argo-server"
        )
    try:
        base = argo_server_url(server, environ)
        verify = verify_tls(environ)
    except ValueError as err:
        return _fail(str(err), "set it to true or false", "argo-server")
    token = environ.get("ARGO_TOKEN", "").strip()
    headers = (
        {"Authorization": token if token.startswith(("Bearer ", "Basic ")) else f"Bearer {token}"} if token else {}
    )
    url = f"{base}/api/v1/version"
    try:
        with httpx.Client(transport=transport, timeout=timeout_s, verify=verify) as http:
            response = http.get(url, headers=headers)
    except httpx.HTTPError as err:
        reason = _reason(err)
        if any(word in reason for word in ("SSL", "certificate", "WRONG_VERSION")):
            fix = (
                "set ARGO_INSECURE_SKIP_VERIFY=true for a self-signed certificate, or ARGO_SECURE=false for plain HTTP"
            )
        else:
            fix = f"check that the server runs (kubectl -n argo get deployment argo-server); {ARGO_SERVER_FIX}"
        return _fail(f"cannot reach the Argo Server at {base} ({reason})", fix, "argo-server")
    if response.status_code in (401, 403):
        fix = "set ARGO_TOKEN to a token the server accepts (the output of `argo auth token`)"
        return _fail(f"the Argo Server at {base} refused the request (HTTP {response.status_code})", fix, "argo-server")
    if response.status_code != 200:
        fix = "set ARGO_SECURE=true: the server speaks HTTPS" if "HTTPS" in response.text else ARGO_SERVER_FIX
        return _fail(f"the Argo Server at {base} answered HTTP {response.status_code} to {url}", fix, "argo-server")
    try:
        version = str(response.json().get("version") or "(no version)")
    except (ValueError, AttributeError):
        return _fail(f"{url} did not answer as an Argo Server does (no JSON)", ARGO_SERVER_FIX, "argo-server")
    return Check(check="argo-server", ok=True, detail=f"Argo Workflows {version} at {base}")


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _reason(err: httpx.HTTPError) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text.rstrip(".")


def _fail(detail: str, fix: str, check: str = "mlflow") -> Check:
    return Check(check=check, ok=False, detail=detail, fix=fix)
