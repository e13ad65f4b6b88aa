"""A small fake Kubernetes API server on loopback, for KubeCluster without a cluster (kopf's way: a fake server,
not patched functions). Routes answer scripted JSON; watches stream scripted events; every request is recorded.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

__all__ = ["FakeApiServer"]


class FakeApiServer:
    """Answers the few requests KubeCluster makes, from scripted responses; records what it was asked."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, list[str]]]] = []
        self.routes: dict[tuple[str, str], list[Any]] = {}  # (method, path) -> answers, the last one repeats
        self.watches: list[list[Any]] = []  # one script per watch request
        self.created: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, method: str) -> None:
                url = urlparse(self.path)
                query = parse_qs(url.query)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.requests.append((method, url.path, query))
                if "watch" in query:
                    return self._watch(server.watches.pop(0))
                if method == "POST":
                    server.created.append(json.loads(body))
                answers = server.routes.get((method, url.path)) or [
                    (404, {"kind": "Status", "code": 404, "message": "not found"})
                ]
                status, payload, *headers = answers.pop(0) if len(answers) > 1 else answers[0]
                data = json.dumps(payload).encode()
                self.send_response(status)
                for key, value in (headers[0] if headers else {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _watch(self, script: list[Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for step in script:
                    if step == "drop":  # the connection dies mid-stream
                        self.wfile.flush()
                        self.connection.shutdown(2)
                        return
                    line = json.dumps(step).encode() + b"\n"
                    self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

            def do_DELETE(self) -> None:
                self._answer("DELETE")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def kubeconfig(self, directory: Path) -> Path:
        """A kubeconfig in `directory` that points at this server."""
        path = directory / "kubeconfig"
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                    "users": [{"name": "fake", "user": {"token": "t"}}],
                    "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
                    "current-context": "fake",
                }
            )
        )
        return path
