"""Fixtures for tests that run real processes: LocalCluster pods, a real MLflow tracking server on loopback."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from net_kit import free_port
from vcjob_factory import vcjob, vcjob_task

from components.volcano.cluster_local import LocalCluster
from components.volcano.localconfig import LocalClusterConfig

JobFactory = Callable[..., dict[str, Any]]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """A fresh default LocalCluster (2 nodes x 4 GPUs) with a `capped` queue limited to 2 GPUs."""
    config = LocalClusterConfig.model_validate(
        {"queues": [{"name": "capped", "capability": {"nvidia.com/gpu": 2}}], "priorityClasses": {"high": 1000}}
    )
    c = LocalCluster(tmp_path / "home", config)
    yield c
    for job in c.list_jobs():
        c.delete(job.name, job.namespace, missing_ok=True)
    c.close()


@pytest.fixture
def make_job() -> JobFactory:
    """Build a Volcano Job manifest whose pods run a shell script (the image is ignored locally)."""
    return vcjob


@pytest.fixture
def task() -> Callable[..., dict[str, Any]]:
    """Build one task of a Job manifest."""
    return vcjob_task


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
def closed_url() -> str:
    """The URL of a loopback port nothing listens on: an MLflow that is down."""
    return f"http://127.0.0.1:{free_port()}"
