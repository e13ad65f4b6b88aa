"""The one way tests write a Volcano Job manifest by hand: pods that run a shell script (LocalCluster ignores images).

A change to the manifests tests submit is one edit here. Jobs the pipeline renders come from its builders
(`pipelines.vcjobs`, `components.volcano.builder`), and objects recorded as an API server returned them stay
literal where the test reads them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["API_VERSION", "GPU", "vcjob", "vcjob_task"]

API_VERSION = "batch.volcano.sh/v1alpha1"
GPU = "nvidia.com/gpu"


def vcjob_task(
    name: str = "main",
    replicas: int = 1,
    gpus: int = 1,
    script: str = "true",
    *,
    policies: list[dict[str, Any]] | None = None,
    **pod: Any,
) -> dict[str, Any]:
    """One task whose `replicas` pods each ask `gpus` GPUs and run `script`; `pod` adds pod spec fields."""
    task: dict[str, Any] = {
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
                        "resources": {"requests": {GPU: gpus, "cpu": "1"}, "limits": {GPU: gpus}},
                    }
                ],
                **pod,
            }
        },
    }
    if policies is not None:
        task["policies"] = policies
    return task


def vcjob(
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
    generate_name: bool = False,
    **pod: Any,
) -> dict[str, Any]:
    """A Job of one task `main` (or `tasks`) gang-scheduled by Volcano; `generate_name` makes `name` a prefix."""
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "queue": queue,
        "minAvailable": pods if min_available is None else min_available,
        "tasks": tasks or [vcjob_task("main", pods, gpus, script, **pod)],
    }
    if max_retry is not None:
        spec["maxRetry"] = max_retry
    if policies is not None:
        spec["policies"] = policies
    metadata = {"generateName": name} if generate_name else {"name": name}
    return {"apiVersion": API_VERSION, "kind": "Job", "metadata": metadata, "spec": spec}
