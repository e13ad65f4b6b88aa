"""What the agent looks at before it decides: the cluster, the failed job, the checkpoints, the measured speed.

`observe` is the only place the policies' input is gathered, and it never fails: an unreachable cluster, a job
that is gone or a missing checkpoint directory becomes a note in the observation, which the policies repeat
in their rationale. `measured_throughput` reads what `components.finetune` logged to MLflow for this workflow.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from agent.observation import AttemptRecord, CheckpointInfo, Observation, PlanRequest, Throughput
from agent.run_bands import run_bands
from components.finetune.checkpoint_layout import latest, recorded_step
from components.tracking.adapter import (
    PARENT_TAG,
    STEP_TAG,
    WORKFLOW_TAG,
    TrackingUnavailable,
    bounded_retries,
    client,
    tracking_errors,
)
from components.volcano.cluster import Cluster, ClusterError, Event, JobInfo, NodeInfo, QueueNotFound, QueueSnapshot

__all__ = ["find_checkpoint", "measured_throughput", "observe"]

_T = TypeVar("_T")


def observe(
    cluster: Cluster | None,
    request: PlanRequest,
    *,
    job_name: str | None = None,
    checkpoints: str | None = None,
    history: Iterable[AttemptRecord] = (),
    throughput: Throughput | None = None,
    now: float | None = None,
    settle_s: float = 0.0,
) -> Observation:
    """Snapshot the queues, nodes, the failed job (with its events) and the latest complete checkpoint.

    With `settle_s`, a failed job whose pods have not all ended is first given that long to show why (see
    `settle`). Whatever cannot be read is left out with a note saying why; nothing here raises for the cluster's
    sake.
    """
    notes: list[str] = []
    if cluster is not None and job_name and settle_s > 0:
        with contextlib.suppress(ClusterError):
            if not settle(cluster, job_name, request.namespace, settle_s):
                notes.append(f"job {job_name} still had pods running on Ready nodes after {settle_s:g} s")

    def look(what: str, read: Callable[[], _T]) -> _T | None:
        try:
            return read()
        except ClusterError as err:
            notes.append(f"could not read {what}: {err}")
            return None

    queue: QueueSnapshot | None = None
    fallback: QueueSnapshot | None = None
    job: JobInfo | None = None
    nodes: list[NodeInfo] = []
    events: list[Event] = []
    bands: list[str] = []
    missing: list[str] = []
    classes: dict[str, int] | None = None

    def read_queue(cluster: Cluster, name: str) -> QueueSnapshot | None:
        try:
            return cluster.queue(name)
        except QueueNotFound:  # not a read that failed: a fact the policies act on
            missing.append(name)
        except ClusterError as err:
            notes.append(f"could not read queue {name}: {err}")
        return None

    if cluster is None:
        notes.append("no cluster to observe from this step")
    else:
        queue = read_queue(cluster, request.queue)
        if request.fallback_queue and request.fallback_queue != request.queue:
            fallback = read_queue(cluster, request.fallback_queue)
        nodes = look("the nodes", cluster.nodes) or []
        classes = look("the priority classes", cluster.priority_classes)
        bands = run_bands(classes or {})
        if job_name:
            job = look(f"job {job_name}", lambda: cluster.get(job_name, request.namespace))
            if job is not None:
                events = look(f"events of job {job_name}", lambda: cluster.events(job_name, request.namespace)) or []
    checkpoint = None
    if checkpoints is not None:
        checkpoint = find_checkpoint(checkpoints)
        if checkpoint is None:
            notes.append(f"no complete checkpoint under {checkpoints}")
    return Observation(
        time=time.time() if now is None else now,
        request=request,
        queue=queue,
        fallback_queue=fallback,
        nodes=nodes,
        job=job,
        events=events,
        history=list(history),
        checkpoint=checkpoint,
        throughput=throughput,
        run_bands=bands,
        missing_queues=missing,
        priority_classes=None if classes is None else sorted(classes),
        notes=notes,
    )


def unsettled(job: JobInfo, nodes: Iterable[NodeInfo]) -> list[str]:
    """Pods of an ended job that have not ended themselves and sit on a Ready node: their story is not told yet.

    When a node dies mid-training, the ranks on the healthy nodes fail first (their collective loses a peer, exit
    1 within seconds), while the API server still calls the dead node Ready until its heartbeats are overdue
    (node-monitor-grace-period, 40-50 s): read at that moment, the job looks like one rank's bug. Once every pod
    has ended, or its node is NotReady, the failure can be told for what it is.

    A Failed job with no pod left to read is unsettled too (named by the job): eviction deleted its pods, and the
    events that tell of it are written asynchronously, a moment after the job is seen Failed.
    """
    if job.phase not in {"Failed", "Aborted", "Terminated"}:
        return []
    if job.phase == "Failed" and job.min_available > 0 and not job.pods and not job.ending:
        return [job.name]
    ready = {n.name for n in nodes if n.ready}
    return [p.name for p in (*job.pods, *job.ending) if p.phase in {"Pending", "Running"} and p.node in ready]


def settle(cluster: Cluster, job_name: str, namespace: str, timeout_s: float, poll_s: float = 2.0) -> bool:
    """Wait up to `timeout_s` until the failed job has no `unsettled` pod; True when it has none."""
    deadline = time.monotonic() + timeout_s
    while unsettled(cluster.get(job_name, namespace), cluster.nodes()):
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True


def find_checkpoint(directory: str) -> CheckpointInfo | None:
    """The newest complete `step-N/` under `directory` and the step its metadata names; None when there is none."""
    try:
        path = latest(Path(directory))
        return CheckpointInfo(path=str(path), step=recorded_step(path)) if path else None
    except OSError:  # an unreadable directory is one without checkpoints, for the observation's sake
        return None


def measured_throughput(tracking_uri: str, experiment: str, workflow: str) -> Throughput | None:
    """Samples per second of this workflow's latest training attempt, from MLflow; None when unknown or unreachable.

    `components.finetune` logs each optimizer step's `step_time_s` and the params `global_batch` and
    `world_size` (GPUs) to a child run of the workflow's parent run: samples/s = global batch ÷ median step time,
    the first step (warm-up) left out; and the medians of each checkpoint's `checkpoint_save_s` (how long it stopped
    training) and `checkpoint_write_s` (how long its write went on beside training; 0 when none was logged).
    """
    if not tracking_uri or not workflow:
        return None
    try:
        with bounded_retries(), tracking_errors(tracking_uri, "read the measured speed"):
            return _read_throughput(tracking_uri, experiment, workflow)
    except TrackingUnavailable:  # MLflow down: the prior stands in, nothing fails
        return None


def _median(mlflow: Any, run_id: str, metric: str) -> float:
    values = [m.value for m in mlflow.get_metric_history(run_id, metric)]
    return statistics.median(values) if values else 0.0


def _read_throughput(tracking_uri: str, experiment: str, workflow: str) -> Throughput | None:
    mlflow: Any = client(tracking_uri)
    found = mlflow.get_experiment_by_name(experiment)
    if found is None:
        return None
    ids = [found.experiment_id]
    parents = mlflow.search_runs(ids, filter_string=f"tags.`{WORKFLOW_TAG}` = '{workflow}'", max_results=1)
    if not parents:
        return None
    children = mlflow.search_runs(
        ids,
        filter_string=f"tags.`{PARENT_TAG}` = '{parents[0].info.run_id}' and tags.`{STEP_TAG}` = 'finetune'",
        order_by=["attribute.start_time DESC"],
        max_results=5,
    )
    for run in children:
        params = run.data.params
        history = sorted(mlflow.get_metric_history(run.info.run_id, "step_time_s"), key=lambda m: m.step)
        steady = [m.value for m in history[1:] or history]
        if not steady or "global_batch" not in params or "world_size" not in params:
            continue
        median = statistics.median(steady)
        if median > 0:
            samples = int(params["global_batch"]) / median
            save_s, write_s = (
                _median(mlflow, run.info.run_id, name) for name in ("checkpoint_save_s", "checkpoint_write_s")
            )
            return Throughput(
                samples_per_s=samples,
                gpus=int(params["world_size"]),
                source="mlflow",
                checkpoint_save_s=save_s,
                checkpoint_write_s=write_s,
            )
    return None
