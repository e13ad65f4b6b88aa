"""Fixtures for tests that run real LocalCluster pods."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

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


def _task(name: str, replicas: int, gpus: int, script: str, **pod: Any) -> dict[str, Any]:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "command": ["sh", "-c", script],
                        "resources": {
                            "requests": {"nvidia.com/gpu": gpus, "cpu": "1"},
                            "limits": {"nvidia.com/gpu": gpus},
                        },
                    }
                ],
                **pod,
            }
        },
    }


@pytest.fixture
def make_job() -> JobFactory:
    """Build a Volcano Job manifest whose pods run a shell script (the image is ignored locally)."""

    def make(
        name: str,
        script: str = "true",
        *,
        pods: int = 1,
        gpus: int = 1,
        queue: str = "default",
        min_available: int | None = None,
        max_retry: int | None = None,
        policies: list[dict[str, Any]] | None = None,
        tasks: list[dict[str, Any]] | None = None,
        **pod: Any,
    ) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "schedulerName": "volcano",
            "queue": queue,
            "minAvailable": pods if min_available is None else min_available,
            "tasks": tasks or [_task("main", pods, gpus, script, **pod)],
        }
        if max_retry is not None:
            spec["maxRetry"] = max_retry
        if policies is not None:
            spec["policies"] = policies
        return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name}, "spec": spec}

    return make


@pytest.fixture
def task() -> Callable[..., dict[str, Any]]:
    """Build one task of a Job manifest."""
    return _task
