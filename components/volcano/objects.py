"""Kubernetes-shaped objects for LocalCluster jobs: status blocks as the API server shows them, and batch/v1 Jobs.

Argo's resource templates read objects (`successCondition: status.state.phase == Completed`,
`jsonPath: '{.metadata.name}'`), so LocalCluster hands out the manifest with the status Volcano (or the
Kubernetes Job controller) would write. A `batch/v1` Job is run as a Volcano Job without gang (minAvailable 1)
whose failed pods are recreated up to `backoffLimit` times (restartPolicy Never), or whose containers are restarted in
place up to `backoffLimit` times (OnFailure), once its fields pass the API server's Job rules.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any

from components.volcano.cluster import JobInfo

__all__ = ["BATCH_JOB", "batch_job_status", "batch_to_volcano", "generate_name", "volcano_job_status"]

BATCH_JOB = ("batch/v1", "Job")


def generate_name(prefix: str) -> str:
    """What the API server does with `metadata.generateName`: the prefix and five random characters."""
    import secrets  # here, not at the top: they cost a reading command (`vcpilot cluster status`) a few ms
    import string

    return prefix + "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(5))


def batch_to_volcano(manifest: dict[str, Any]) -> dict[str, Any]:
    """The Volcano Job that runs a batch/v1 Job's pods: `completions` replicas, no gang, pod restarts."""
    spec = manifest.get("spec") or {}
    if not isinstance(spec, dict) or not isinstance(spec.get("template"), dict):
        raise ValueError("batch/v1 Job needs spec.template (a pod template).")
    completions = _count(spec, "completions") or 1
    backoff = _count(spec, "backoffLimit")
    backoff = 6 if backoff is None else backoff
    _count(spec, "parallelism")
    template = copy.deepcopy(spec["template"])
    pod = template.setdefault("spec", {})
    if not isinstance(pod, dict):
        raise ValueError("batch/v1 Job's spec.template.spec must be a pod spec (a mapping of fields).")
    # ValidateJobSpec: a Job's pods end, so restartPolicy Always is refused, and so is none (a pod's default is Always)
    if pod.get("restartPolicy") not in ("OnFailure", "Never"):
        found = f"is {pod['restartPolicy']!r}" if pod.get("restartPolicy") else "is not set"
        raise ValueError(
            f"batch/v1 Job's spec.template.spec.restartPolicy {found}; a Job's pods need OnFailure or Never."
        )
    task: dict[str, Any] = {"name": "job", "replicas": completions, "minAvailable": 1, "template": template}
    if pod["restartPolicy"] == "OnFailure":
        # The kubelet restarts a failed container in place, and the Job controller fails the Job once its pods'
        # restarts reach backoffLimit, 0 meaning the first (pastBackoffLimitOnFailure): Volcano's TaskFailed sum.
        task.update(maxRetry=max(backoff, 1), policies=[{"event": "TaskFailed", "action": "AbortJob"}])
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": copy.deepcopy(manifest.get("metadata") or {}),
        "spec": {
            "schedulerName": "volcano",
            "queue": "default",
            "minAvailable": 1,
            # A k8s Job fails once more than backoffLimit pods failed; each RestartPod spends one retry.
            "maxRetry": backoff + 1,
            "policies": [{"event": "PodFailed", "action": "RestartPod"}],
            "tasks": [task],
        },
    }


def _count(spec: dict[str, Any], field: str) -> int | None:
    """A batch/v1 Job's count (completions, parallelism, backoffLimit): unset, or a whole int32 of at least 0."""
    from pydantic import Field, TypeAdapter, ValidationError

    from components.volcano.models import Int32
    from components.volcano.validation import describe_validation_error

    value = spec.get(field)
    if value is None:
        return None
    try:
        return TypeAdapter(Annotated[Int32, Field(ge=0)]).validate_python(value)
    except ValidationError as err:
        raise ValueError(f"batch/v1 Job's spec.{field}: {describe_validation_error(err)}.") from None


def _counts(info: JobInfo) -> dict[str, int]:
    phases = [p.phase for p in info.pods]
    return {
        "pending": phases.count("Pending"),
        "running": phases.count("Running"),
        "succeeded": phases.count("Succeeded"),
        "failed": phases.count("Failed"),
    }


def volcano_job_status(info: JobInfo) -> dict[str, Any]:
    """A `batch.volcano.sh/v1alpha1` Job status block."""
    by_task: dict[str, dict[str, int]] = {}
    for pod in info.pods:
        phase = by_task.setdefault(pod.task, {})
        phase[pod.phase] = phase.get(pod.phase, 0) + 1
    status: dict[str, Any] = {
        "state": {"phase": info.phase, **({"reason": info.reason} if info.reason else {})},
        "minAvailable": info.min_available,
        "retryCount": info.retry_count,
        "taskStatusCount": {task: {"phase": counts} for task, counts in by_task.items()},
        **_counts(info),
    }
    if info.message:
        status["state"]["message"] = info.message
    return status


def batch_job_status(info: JobInfo) -> dict[str, Any]:
    """A `batch/v1` Job status block (active / succeeded / failed and the Complete or Failed condition)."""
    counts = _counts(info)
    status: dict[str, Any] = {
        "active": counts["running"],
        "succeeded": counts["succeeded"],
        "failed": counts["failed"] + info.retry_count,
    }
    if info.phase == "Completed":
        status["conditions"] = [{"type": "Complete", "status": "True"}]
    elif info.finished:
        status["conditions"] = [{"type": "Failed", "status": "True", "reason": info.reason or "BackoffLimitExceeded"}]
    return status
