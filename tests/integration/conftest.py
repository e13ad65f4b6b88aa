"""Fixtures for tests that run real processes: LocalCluster pods, a real MLflow tracking server on loopback."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mlflow_kit import MlflowServer
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
    """A real `mlflow server` (tests/mlflow_kit.py) for the session; yields its URL."""
    server = MlflowServer(tmp_path_factory.mktemp("mlflow-server"))
    try:
        try:
            server.start()
        except RuntimeError as err:
            pytest.fail(str(err))
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def closed_url() -> str:
    """The URL of a loopback port nothing listens on: an MLflow that is down."""
    return f"http://127.0.0.1:{free_port()}"
