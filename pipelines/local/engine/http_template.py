"""An `http` template, sent from this machine as Argo's agent sends it (workflow/executor/agent.go, v4.1.2).

The request: `method` (GET when empty), `url`, `headers` (a `Host` header sets the host), `body` or
`bodyFrom.bytes`, within `timeoutSeconds`; TLS checked unless `insecureSkipVerify`. The node (type HTTP) gets the
response body as `outputs.result` and Succeeds on a 2xx status, or when `successCondition` — an expr over
`request.{method,url,body,bodyBytes,headers}` and `response.{statusCode,body,headers}` — is true; otherwise it
Fails with Argo's message ("received non-2xx response code: 404", "successCondition '…' evaluated false"). A
request that cannot be made fails the node with the reason, worded as Go's net/http does (`Get "URL": …`).
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Mapping
from typing import Any

import httpx

from pipelines.local.engine.executors import DEADLINE_MESSAGE, LeafResult
from pipelines.local.engine.status import Outputs
from pipelines.local.expressions import ExpressionError, evaluate_expr

__all__ = ["run_http"]


def _body(spec: Mapping[str, Any]) -> bytes:
    source = spec.get("bodyFrom")
    if isinstance(source, Mapping) and source.get("bytes") is not None:
        return base64.b64decode(str(source["bytes"]))  # a []byte field: base64 in JSON and YAML
    return str(spec.get("body") or "").encode()


def _send(spec: Mapping[str, Any], out: dict[str, Any]) -> None:
    method = str(spec.get("method") or "GET")
    url = str(spec["url"])
    headers: list[tuple[str, str]] = [(str(h["name"]), str(h.get("value") or "")) for h in spec.get("headers") or []]
    timeout = spec.get("timeoutSeconds")
    try:
        with httpx.Client(verify=not spec.get("insecureSkipVerify"), timeout=None, follow_redirects=True) as client:
            request = client.build_request(method, url, content=_body(spec), headers=headers)
            out["response"] = client.send(request) if timeout is None else _within(client, request, float(timeout))
            out["response"].read()
    except httpx.TimeoutException:
        out["error"] = f'{method.title()} "{url}": context deadline exceeded'
    except (httpx.HTTPError, ValueError, OSError) as err:
        out["error"] = f'{method.title()} "{url}": {err or type(err).__name__}'


def _within(client: httpx.Client, request: httpx.Request, seconds: float) -> httpx.Response:
    request.extensions["timeout"] = httpx.Timeout(seconds).as_dict()
    return client.send(request)


def run_http(template: Mapping[str, Any], cancel: threading.Event) -> LeafResult:
    """Send the template's request and judge the response; a stop or workflow deadline (`cancel`) fails it."""
    spec = template["http"]
    out: dict[str, Any] = {}
    sender = threading.Thread(target=_send, args=(spec, out), daemon=True)
    sender.start()
    while sender.is_alive():
        if cancel.wait(0.1):
            return LeafResult("Failed", DEADLINE_MESSAGE)
    if "error" in out:
        return LeafResult("Failed", out["error"])
    response: httpx.Response = out["response"]
    text = response.content.decode("utf-8", "replace")
    outputs = Outputs(result=text)
    condition = spec.get("successCondition")
    if not condition:
        if 200 <= response.status_code < 300:
            return LeafResult("Succeeded", None, outputs)
        return LeafResult("Failed", f"received non-2xx response code: {response.status_code}", outputs)
    scope = {
        "request": {
            "method": str(spec.get("method") or ""),
            "url": str(spec["url"]),
            "body": str(spec.get("body") or ""),
            "bodyBytes": list(_body(spec)) if spec.get("bodyFrom") else [],
            "headers": _multi((str(h["name"]), str(h.get("value") or "")) for h in spec.get("headers") or []),
        },
        "response": {
            "statusCode": response.status_code,
            "body": text,
            "headers": _multi(response.headers.multi_items()),
        },
    }
    try:
        passed = evaluate_expr(str(condition), scope)
    except ExpressionError as err:
        return LeafResult("Failed", str(err), outputs)
    if passed is not True:
        return LeafResult("Failed", f"successCondition '{condition}' evaluated false", outputs)
    return LeafResult("Succeeded", None, outputs)


def _multi(pairs: Any) -> dict[str, list[str]]:
    """Go's http.Header: canonical names (`Content-Type`), each with its list of values."""
    headers: dict[str, list[str]] = {}
    for name, value in pairs:
        headers.setdefault("-".join(part.capitalize() for part in name.split("-")), []).append(value)
    return headers
