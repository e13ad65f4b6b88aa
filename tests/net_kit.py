"""A loopback port nothing listens on yet, for the servers tests start (MLflow, MCP over HTTP, the review UI)."""

from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
