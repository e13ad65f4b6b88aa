"""A real OpenAI-compatible chat endpoint on loopback that answers from a script: the LLM the agent's tests talk to."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer of the fake server."""

    body: Any
    status: int = 200
    delay_s: float = 0.0
    drip_s: float = 0.0  # send the body a byte at a time, this long apart (each read is quick, the whole is not)


@dataclass
class FakeLLM:
    """What the fake server answers (in order) and what it was asked."""

    url: str = ""
    replies: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def script(self, *replies: Reply | dict) -> None:
        self.replies.extend(r if isinstance(r, Reply) else Reply(r) for r in replies)


@contextlib.contextmanager
def serve() -> Iterator[FakeLLM]:
    """An OpenAI-compatible /v1/chat/completions on a free loopback port, answering from a script."""
    fake = FakeLLM()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            length = int(self.headers.get("Content-Length", 0))
            fake.requests.append(json.loads(self.rfile.read(length)))
            fake.headers.append(dict(self.headers))
            if self.path != "/v1/chat/completions" or not fake.replies:
                reply = Reply({"error": {"message": f"nothing scripted for {self.path}"}}, status=404)
            else:
                reply = fake.replies.pop(0)
            time.sleep(reply.delay_s)
            data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if reply.drip_s:
                    for byte in data:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(reply.drip_s)
                else:
                    self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (the timeout test)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


def completion(*calls: tuple[str, Any]) -> dict:
    """A chat completion whose message calls `calls` (name, arguments: a dict, or raw text)."""
    tool_calls = [
        {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
        }
        for i, (name, args) in enumerate(calls)
    ]
    message = {"role": "assistant", "content": None, "tool_calls": tool_calls}
    return {"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, "message": message}]}
