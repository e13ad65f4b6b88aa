"""Fixtures for the tests that run against the e2e control plane (deploy/e2e/up.sh): skipped without one."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

E2E_KUBECONFIG = "VCPILOT_E2E_KUBECONFIG"


@pytest.fixture(scope="session")
def kubeconfig() -> Path:
    """The admin kubeconfig of the running e2e cluster; the test skips when VCPILOT_E2E_KUBECONFIG is unset."""
    path = os.environ.get(E2E_KUBECONFIG)
    if not path or not Path(path).is_file():
        pytest.skip(f"set {E2E_KUBECONFIG} to the kubeconfig of a running e2e cluster (deploy/e2e/up.sh)")
    return Path(path)


@pytest.fixture(scope="session")
def admin(kubeconfig: Path) -> Iterator[Any]:
    """An ApiClient with the cluster admin's credentials (to set up and inspect, never as the thing tested)."""
    from kubernetes import config

    api = config.new_client_from_config(str(kubeconfig))
    yield api
    api.close()


@pytest.fixture
def namespace(admin: Any) -> Iterator[str]:
    """A namespace of this test's own, deleted (with whatever is left in it) afterwards."""
    from kubernetes import client

    core = client.CoreV1Api(admin)
    name = f"e2e-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


@pytest.fixture
def eventually() -> Callable[..., Any]:
    """`eventually(what, check, timeout)`: poll `check` until truthy; fail naming `what` after `timeout` s."""

    def poll(what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() >= deadline:
                pytest.fail(f"timed out waiting until {what}")
            time.sleep(0.3)

    return poll


@pytest.fixture
def cluster(kubeconfig: Path) -> Iterator[Any]:
    """A KubeCluster with the admin's kubeconfig; nodes it failed are made Ready again afterwards."""
    from components.volcano.cluster_k8s import KubeCluster

    kube = KubeCluster(kubeconfig)
    failed: list[str] = []
    fail_node = kube.fail_node

    def tracked(node: str) -> list[str]:
        failed.append(node)
        return fail_node(node)

    kube.fail_node = tracked  # type: ignore[method-assign]
    yield kube
    for node in failed:
        kube.recover_node(node)
    deadline = time.monotonic() + 60
    while failed and time.monotonic() < deadline and not all(n.ready for n in kube.nodes() if n.name in failed):
        time.sleep(0.5)
    kube.close()
