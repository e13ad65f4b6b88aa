"""http templates sent from this machine as Argo's agent sends them, against a server on loopback."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pipelines.local.runner import run_workflow
from pipelines.local.workflow import WorkflowError

pytestmark = pytest.mark.integration


class Handler(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length).decode()
        if self.path == "/slow":
            time.sleep(3)
        status = {"/missing": 404, "/create": 201}.get(self.path, 200)
        seen = {"method": self.command, "path": self.path, "body": body, "token": self.headers.get("x-token")}
        payload = json.dumps(seen).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def workflow(http: dict[str, Any], then: str | None = None) -> dict[str, Any]:
    templates: list[dict[str, Any]] = [{"name": "call", "http": http}]
    entry = "call"
    if then is not None:
        show = {"name": "show", "inputs": {"parameters": [{"name": "v"}]}}
        show["container"] = {"image": "x", "command": ["echo", "{{inputs.parameters.v}}"]}
        args = {"parameters": [{"name": "v", "value": then}]}
        steps = [[{"name": "call", "template": "call"}], [{"name": "show", "template": "show", "arguments": args}]]
        templates += [{"name": "main", "steps": steps}, show]
        entry = "main"
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"generateName": "http-"},
        "spec": {"entrypoint": entry, "templates": templates},
    }


def root(result: Any) -> dict[str, Any]:
    return next(n for n in result.status["nodes"].values() if n["name"] == result.name)


def test_a_get_succeeds_and_its_body_is_the_result(server: str, tmp_path: Path) -> None:
    result = run_workflow(workflow({"url": f"{server}/hello"}, then="{{steps.call.outputs.result}}"), home=tmp_path)
    assert result.phase == "Succeeded"
    call = next(n for n in result.status["nodes"].values() if n["displayName"] == "call")
    assert call["type"] == "HTTP" and json.loads(call["outputs"]["result"])["method"] == "GET"
    show = next(n for n in result.status["nodes"].values() if n["displayName"] == "show")
    assert json.loads(show["outputs"]["result"])["path"] == "/hello"


def test_a_post_with_headers_body_and_a_success_condition(server: str, tmp_path: Path) -> None:
    http = {
        "url": f"{server}/create",
        "method": "POST",
        "headers": [{"name": "X-Token", "value": "abc"}],
        "body": '{"name": "x"}',
        "successCondition": 'response.statusCode == 201 && request.method == "POST" '
        '&& response.headers["Content-Type"][0] == "application/json"',
    }
    result = run_workflow(workflow(http), home=tmp_path)
    assert result.phase == "Succeeded"
    assert json.loads(root(result)["outputs"]["result"]) == {
        "method": "POST", "path": "/create", "body": '{"name": "x"}', "token": "abc"
    }  # fmt: skip


@pytest.mark.parametrize(
    ("http", "message"),
    [
        ({"url": "{server}/missing"}, "received non-2xx response code: 404"),
        (
            {"url": "{server}/hello", "successCondition": "response.statusCode == 201"},
            "successCondition 'response.statusCode == 201' evaluated false",
        ),
        ({"url": "{server}/slow", "timeoutSeconds": 1}, 'Get "{server}/slow": context deadline exceeded'),
    ],
)
def test_what_fails_the_node_says_why_as_argo_does(
    server: str, tmp_path: Path, http: dict[str, Any], message: str
) -> None:
    http = {k: v.format(server=server) if isinstance(v, str) else v for k, v in http.items()}
    result = run_workflow(workflow(http), home=tmp_path)
    assert result.phase == "Failed" and root(result)["message"] == message.format(server=server)


def test_an_unreachable_server_fails_the_node(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = run_workflow(workflow({"url": f"http://127.0.0.1:{port}/", "method": "POST"}), home=tmp_path)
    assert result.phase == "Failed" and root(result)["message"].startswith(f'Post "http://127.0.0.1:{port}/": ')


@pytest.mark.parametrize(
    ("http", "says"),
    [
        ({"method": "GET"}, "http needs a url"),
        ({"url": "http://127.0.0.1:1/", "timeoutSeconds": "10"}, "timeoutSeconds '10' is not a whole number"),
        (
            {"url": "http://127.0.0.1:1/", "headers": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s"}}}]},
            "header 'A' takes its value from a Secret",
        ),
    ],
)
def test_an_http_template_that_cannot_be_sent_is_refused_before_anything_runs(
    tmp_path: Path, http: dict[str, Any], says: str
) -> None:
    with pytest.raises(WorkflowError, match=says):
        run_workflow(workflow(http), home=tmp_path)
