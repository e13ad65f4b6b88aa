"""The one way tests and benchmarks write a Volcano Job manifest by hand: pods that run a shell script.

A change to the manifests they submit is one edit here. LocalCluster ignores images and runs the command; kwok's
fake kubelet (the contract suite on the e2e cluster) reads the pod template's `metadata` instead. Jobs the pipeline
renders come from its builders (`pipelines.vcjobs`, `components.volcano.builder`), and objects recorded as an API
server returned them stay literal where the test reads them.
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
    command: list[str] | None = None,
    metadata: dict[str, Any] | None = None,
    policies: list[dict[str, Any]] | None = None,
    **pod: Any,
) -> dict[str, Any]:
    """One task whose `replicas` pods each ask `gpus` GPUs and run `script` (or `command` without a shell).

    `metadata` is the pod template's (kwok's stage annotations); `pod` adds pod spec fields or replaces the
    defaults, `containers` included.
    """
    container = {
        "name": "main",
        "image": "busybox",
        "command": command or ["sh", "-c", script],
        "resources": {"requests": {GPU: gpus, "cpu": "1", "memory": "1Gi"}, "limits": {GPU: gpus}},
    }
    template: dict[str, Any] = {"spec": {"restartPolicy": "Never", "containers": [container], **pod}}
    if metadata is not None:
        template["metadata"] = metadata
    task: dict[str, Any] = {"name": name, "replicas": replicas, "template": template}
    if policies is not None:
        task["policies"] = policies
    return task


def vcjob(
    name: str,
    script: str = "true",
    *,
    pods: int = 1,
    gpus: int = 1,
    namespace: str | None = None,
    labels: dict[str, str] | None = None,
    queue: str = "default",
    priority_class: str | None = None,
    min_available: int | None = None,
    max_retry: int | None = None,
    policies: list[dict[str, Any]] | None = None,
    tasks: list[dict[str, Any]] | None = None,
    generate_name: bool = False,
    **pod: Any,
) -> dict[str, Any]:
    """A Job of one task `main` (or `tasks`) gang-scheduled by Volcano; `generate_name` makes `name` a prefix.

    `min_available` defaults to every pod of every task: all start together or none does.
    """
    tasks = tasks or [vcjob_task("main", pods, gpus, script, **pod)]
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "queue": queue,
        "minAvailable": sum(t["replicas"] for t in tasks) if min_available is None else min_available,
        "tasks": tasks,
    }
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    if max_retry is not None:
        spec["maxRetry"] = max_retry
    if policies is not None:
        spec["policies"] = policies
    metadata: dict[str, Any] = {"generateName": name} if generate_name else {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels is not None:
        metadata["labels"] = labels
    return {"apiVersion": API_VERSION, "kind": "Job", "metadata": metadata, "spec": spec}
