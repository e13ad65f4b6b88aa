"""A real MLflow tracking server on loopback for the release tests, started once and killed at the end."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory) -> Iterator[str]:
    """`mlflow server` with a sqlite backend and proxied artifacts, in its own process group; yields its URL."""
    root = tmp_path_factory.mktemp("mlflow-server")
    port = free_port()
    log = (root / "server.log").open("w")
    command = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        *("--host", "127.0.0.1", "--port", str(port), "--workers", "1"),
        *("--backend-store-uri", f"sqlite:///{root / 'db'}", "--artifacts-destination", str(root / "artifacts")),
    ]
    # Its own session: the server forks uvicorn workers, and the whole group must go when the tests end.
    server = subprocess.Popen(command, cwd=root, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                pytest.fail(
                    f"mlflow server exited with {server.returncode}: {(root / 'server.log').read_text()[-2000:]}"
                )
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"mlflow server did not answer /health within 120 s: {(root / 'server.log').read_text()[-2000:]}"
                )
            time.sleep(0.25)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=5)  # uvicorn waits for idle keep-alive connections; no need to
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    """A directory with a few files: the registry does not care what model it is."""
    path = tmp_path / "model"
    path.mkdir()
    (path / "config.json").write_text("{}")
    (path / "weights.bin").write_bytes(bytes(range(256)))
    return path


@pytest.fixture
def closed_url() -> str:
    """The URL of a loopback port nothing listens on: an MLflow that is down."""
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Two test workers on two cores: torch threads beyond one per worker only fight each other."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
