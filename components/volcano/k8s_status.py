"""API-server objects (as JSON) turned into the Cluster protocol's JobInfo, QueueSnapshot, NodeInfo and Event.

Pure functions over the dicts the API server returns, so KubeCluster's reading of Volcano can be tested with
recorded objects. Two readings are worth knowing:

- Queue demand is counted from PodGroups by `spec.queue` and phase (Volcano >= 1.11 no longer writes the
  counts into `queue.status`); only `status.allocated` is read from the queue.
- A pod that was ended from outside is told by its DisruptionTarget condition (`_DISRUPTIONS`): node eviction
  (Evicted), its node gone (NodeLost) or shutting down (NodeShutdown), or preemption (Preempted; Reclaimed when
  Volcano's evictor says its reclaim action did it). Such a pod reads as Failed, even while being deleted.
- A pod deleted by eviction is gone from the API, but the job's diagnosis needs it: the cluster still records it
  in events (the scheduler's `Scheduled` names the node; the taint-eviction controller's `TaintManagerEviction`,
  Volcano's `Evict` or kube-scheduler's `Preempted` the eviction), so such a pod is reported as Failed with that
  reason on its node until a newer pod of the same name replaces it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from components.volcano.cluster import Event, JobInfo, NodeInfo, PodInfo, QueueSnapshot, lacking_gpus, queue_family
from components.volcano.resources import GPU, parse_quantity, parse_resources

__all__ = [
    "Obj",
    "TASK_INDEX",
    "TASK_SPEC",
    "JOB_NAME",
    "event_from",
    "expected_pod",
    "job_events",
    "job_info",
    "missing_pods",
    "node_info",
    "parse_time",
    "pending_reason",
    "pod_gpus",
    "pod_info",
    "podgroup_name",
    "queue_snapshot",
]

# A JSON object as the API server returns it.
Obj = dict[str, Any]

# Keys Volcano's job controller puts on every pod it creates (volcano.sh/apis batch/v1alpha1 labels.go).
JOB_NAME = "volcano.sh/job-name"
TASK_SPEC = "volcano.sh/task-spec"
TASK_INDEX = "volcano.sh/task-index"

_TERMINAL = frozenset({"Succeeded", "Failed"})
_ASSIGNED = re.compile(r"assigned \S+ to (\S+)$")

# The reason a pod's DisruptionTarget condition gives (k8s.io/api core/v1; set by the taint-eviction and pod GC
# controllers, kube-scheduler, and Volcano's evictor for its preempt and reclaim actions alike), as a pod reason.
_DISRUPTIONS = {
    "DeletionByTaintManager": "Evicted",
    "DeletionByPodGC": "NodeLost",
    "PreemptionByScheduler": "Preempted",
}
# TerminationByKubelet: the kubelet's status reason says why (node pressure, a critical pod, node shutdown).
_BY_KUBELET = {"Evicted": "Evicted", "Preempting": "Preempted", "Terminated": "NodeShutdown"}
_DISRUPTED = frozenset({*_DISRUPTIONS.values(), *_BY_KUBELET.values(), "Reclaimed"})
# Volcano's evictor (pkg/scheduler/cache/cache.go) in its Warning event and the pod's Ready condition.
_VOLCANO_EVICT = re.compile(r"Pod is evicted, because of (\w+)")


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("status") or {}


def parse_time(value: str | None) -> float | None:
    """An RFC 3339 timestamp (`2026-01-02T03:04:05Z`, with or without microseconds) as epoch seconds."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def podgroup_name(job: Mapping[str, Any]) -> str:
    """The PodGroup Volcano (>= 1.5) creates for a job: `<job name>-<job uid>`."""
    return f"{_meta(job).get('name')}-{_meta(job).get('uid')}"


def _container_gpus(container: Mapping[str, Any]) -> float:
    """One container's GPU request; its limit stands in for a missing request, as the API server defaults it."""
    resources = container.get("resources") or {}
    return parse_quantity((resources.get("requests") or {}).get(GPU, (resources.get("limits") or {}).get(GPU, 0)))


def pod_gpus(pod_spec: Mapping[str, Any]) -> int:
    """GPUs a pod holds on its node for its whole life, as the schedulers count them.

    Kubernetes' `PodRequests` (k8s.io/component-helpers resource/helpers.go, which kube-scheduler's fit filter
    and Volcano's `GetPodResourceRequest` use): the containers' sum, sidecars (init containers with restartPolicy
    Always) added; at least what any init container asks together with the sidecars started before it; plus the
    pod's `overhead`. A pod of a default-scheduler Deployment counts the same as one of ours.
    """
    total = sum(_container_gpus(c) for c in pod_spec.get("containers") or [])
    sidecars = init_peak = 0.0
    for container in pod_spec.get("initContainers") or []:
        if container.get("restartPolicy") == "Always":
            total += _container_gpus(container)
            sidecars += _container_gpus(container)
            init_peak = max(init_peak, sidecars)
        else:
            init_peak = max(init_peak, sidecars + _container_gpus(container))
    overhead = parse_quantity((pod_spec.get("overhead") or {}).get(GPU, 0))
    return int(max(total, init_peak) + overhead)


def _replicas(job: Mapping[str, Any]) -> dict[str, tuple[int, Mapping[str, Any]]]:
    """Each task of the job by name: its replicas and pod spec."""
    tasks = (job.get("spec") or {}).get("tasks") or []
    return {
        str(t.get("name")): (int(t.get("replicas") or 0), (t.get("template") or {}).get("spec") or {}) for t in tasks
    }


def expected_pod(job: Mapping[str, Any], pod: str) -> tuple[str, int, int] | None:
    """The task, index and GPUs of `pod` when it is a name the job's tasks give (`<job>-<task>-<index>`), else None.

    Read from the name, not by listing every name the tasks give: a task may have 2^31-1 replicas.
    """
    prefix = f"{_meta(job).get('name')}-"
    task, _, index = pod.removeprefix(prefix).rpartition("-")
    if not pod.startswith(prefix) or not re.fullmatch(r"0|[1-9][0-9]{0,9}", index):
        return None
    replicas, spec = _replicas(job).get(task, (0, {}))
    return (task, int(index), pod_gpus(spec)) if int(index) < replicas else None


def missing_pods(job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> bool:
    """Whether some pod the job's tasks give is not among `pods`."""
    present = {str(_meta(p).get("name")) for p in pods}
    found = sum(1 for name in present if expected_pod(job, name) is not None)
    return found < sum(replicas for replicas, _ in _replicas(job).values())


def _terminated(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    """The first container's terminated state (Volcano reads the exit code of the first container too)."""
    for status in _status(pod).get("containerStatuses") or []:
        state = (status.get("state") or {}).get("terminated")
        if state:
            return state
    return {}


def _volcano_eviction(message: str) -> str | None:
    """Reclaimed or Preempted, from Volcano's "Pod is evicted, because of reclaim" (preempt, shuffle: Preempted)."""
    match = _VOLCANO_EVICT.search(message)
    if match is None:
        return None
    return "Reclaimed" if match.group(1) == "reclaim" else "Preempted"


def _disruption(status: Mapping[str, Any]) -> str | None:
    """The pod reason its DisruptionTarget condition gives, or None."""
    conditions = status.get("conditions") or []
    for condition in conditions:
        if condition.get("type") != "DisruptionTarget" or condition.get("status") != "True":
            continue
        if condition.get("reason") == "TerminationByKubelet":
            return _BY_KUBELET.get(status.get("reason") or "")
        reason = _DISRUPTIONS.get(condition.get("reason") or "")
        if reason == "Preempted":  # or reclaimed: Volcano's evictor says which in the Ready condition it sets
            for ready in conditions:
                if ready.get("reason") == "Evict":
                    reason = _volcano_eviction(str(ready.get("message") or "")) or reason
        return reason
    return None


def _pod_reason(pod: Mapping[str, Any]) -> str | None:
    status = _status(pod)
    disrupted = _disruption(status)
    if disrupted:
        return disrupted
    if status.get("reason"):
        return str(status["reason"])
    if status.get("phase") in _TERMINAL:
        return _terminated(pod).get("reason")
    # restartPolicy OnFailure/Always: a Running pod whose container waits to be restarted, as kubectl shows it
    for container in status.get("containerStatuses") or []:
        if ((container.get("state") or {}).get("waiting") or {}).get("reason") == "CrashLoopBackOff":
            return "CrashLoopBackOff"
    return None


def pod_info(pod: Mapping[str, Any]) -> PodInfo:
    """A pod as PodInfo: task and index from Volcano's labels, reason and exit code from its status."""
    meta, spec, status = _meta(pod), pod.get("spec") or {}, _status(pod)
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    name = str(meta.get("name"))
    task = annotations.get(TASK_SPEC) or labels.get(TASK_SPEC) or ""
    index = str(labels.get(TASK_INDEX) or annotations.get(TASK_INDEX) or name.rsplit("-", 1)[-1])
    code = _terminated(pod).get("exitCode") if status.get("phase") in _TERMINAL else None
    reason = _pod_reason(pod)
    # A pod that eviction or preemption is deleting has failed, whatever its last reported phase.
    phase = "Failed" if reason in _DISRUPTED else status.get("phase") or "Pending"
    return PodInfo(
        name=name,
        task=task,
        index=int(index) if re.fullmatch(r"[0-9]{1,10}", index) else 0,
        node=spec.get("nodeName") or None,
        phase=phase,
        reason=reason,
        exit_code=int(code) if code is not None else None,
        gpus=pod_gpus(spec),
        restarts=sum(int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or []),
    )


def _eviction(event: Mapping[str, Any]) -> str | None:
    """The reason for the pod an event says is being evicted, or None."""
    reason, message = event.get("reason"), str(event.get("message") or "")
    if reason == "TaintManagerEviction" and message.startswith("Marking"):
        return "Evicted"
    if reason == "Evict":  # Volcano's evictor: "Pod is evicted, because of preempt"
        return _volcano_eviction(message)
    if reason == "Preempted":  # kube-scheduler: "Preempted by pod <uid> on node <node>"
        return "Preempted"
    return None


def _ran_since(job: Mapping[str, Any]) -> float:
    """When the job last entered Running (Volcano's status.conditions, whole seconds); -inf when it never did."""
    conditions = _status(job).get("conditions") or []
    ran = (parse_time(c.get("lastTransitionTime")) for c in conditions if c.get("status") == "Running")
    return max((t for t in ran if t is not None), default=float("-inf"))


def _evicted(job: Mapping[str, Any], present: set[str], events: Sequence[Obj]) -> list[PodInfo]:
    """Pods of the job that eviction or preemption deleted, rebuilt from events, unless a newer pod took the name.

    Each eviction is told with the placement before it. A pod placed again after its eviction has taken the name
    only if the job ran again after the eviction: Volcano's controller recreates an evicted pod at once, and the
    RestartJob that follows deletes the newcomer before it runs, leaving the eviction the job's whole story.
    """
    placed: dict[str, list[tuple[float, str]]] = {}
    evicted: dict[str, tuple[float, str]] = {}
    for event in events:
        kind, name = _target(event)
        if kind != "Pod" or name in present or expected_pod(job, name) is None:
            continue
        when = _event_time(event)
        if event.get("reason") == "Scheduled":
            match = _ASSIGNED.search(event.get("message") or "")
            if match:
                placed.setdefault(name, []).append((when, match.group(1)))
        elif (reason := _eviction(event)) and when >= evicted.get(name, (float("-inf"), ""))[0]:
            evicted[name] = (when, reason)
    ran = _ran_since(job)
    out = []
    for name, (when, reason) in evicted.items():
        before = [p for p in placed.get(name, []) if p[0] <= when]
        replaced = any(p[0] > when for p in placed.get(name, [])) and ran >= int(when) + 1
        expected = expected_pod(job, name)
        if before and not replaced and expected is not None:
            task, index, gpus = expected
            node = max(before)[1]
            out.append(PodInfo(name=name, task=task, index=index, node=node, phase="Failed", reason=reason, gpus=gpus))
    return out


def pending_reason(podgroup: Mapping[str, Any] | None, events: Sequence[Obj] = ()) -> str | None:
    """Why the scheduler leaves a gang waiting: the PodGroup's Unschedulable condition, else its latest events.

    A gang the enqueue action refuses (queue quota, cluster idle resources) gets no condition, only
    `Unschedulable` events on the PodGroup; those of the latest second are joined into one sentence.
    """
    if podgroup is None:
        return None
    for condition in reversed(_status(podgroup).get("conditions") or []):
        if condition.get("type") == "Unschedulable" and condition.get("status") == "True":
            return condition.get("message") or condition.get("reason")
    name = _meta(podgroup).get("name")
    mine = [e for e in events if _target(e) == ("PodGroup", name) and e.get("reason") == "Unschedulable"]
    if not mine:
        return None
    latest = max(int(_event_time(e)) for e in mine)
    messages = [" ".join(str(e.get("message") or "").split()) for e in mine if int(_event_time(e)) == latest]
    return "; ".join(sorted(dict.fromkeys(m for m in messages if m), key=lambda m: "gang" in m)) or None


def _owned_by(obj: Mapping[str, Any], uid: str | None) -> bool:
    return any(ref.get("uid") == uid for ref in _meta(obj).get("ownerReferences") or [])


def job_info(
    job: Mapping[str, Any],
    pods: Iterable[Mapping[str, Any]],
    podgroup: Mapping[str, Any] | None = None,
    events: Sequence[Obj] = (),
) -> JobInfo:
    """A Volcano Job and what belongs to it as JobInfo; pods of another job of the same name are ignored.

    `events` are the namespace's events, as far as read: Pod events to rebuild evicted pods of a finished
    job, PodGroup events to say why a pending job waits.
    """
    meta, spec, status = _meta(job), job.get("spec") or {}, _status(job)
    state = status.get("state") or {}
    uid = meta.get("uid")
    mine = [p for p in pods if _owned_by(p, uid) and (_meta(p).get("labels") or {}).get(JOB_NAME) == meta.get("name")]
    # A pod being deleted is gone as far as the job is concerned, unless eviction or preemption deletes it.
    infos = [pod_info(p) for p in mine if not _meta(p).get("deletionTimestamp") or _pod_reason(p) in _DISRUPTED]
    shown = {i.name for i in infos}
    ending = [i for i in map(pod_info, mine) if i.name not in shown and i.phase in {"Pending", "Running"}]
    if podgroup is not None and not _owned_by(podgroup, uid):
        podgroup = None
    infos += _evicted(job, {i.name for i in infos}, events)
    phase = state.get("phase") or "Pending"
    waiting = pending_reason(podgroup, events) if phase == "Pending" else None
    return JobInfo(
        name=str(meta.get("name")),
        namespace=str(meta.get("namespace") or "default"),
        uid=str(uid or ""),
        queue=spec.get("queue") or "default",
        phase=phase,
        ending=ending,
        retry_count=int(status.get("retryCount") or 0),
        min_available=int(spec.get("minAvailable") or 0),
        labels=dict(meta.get("labels") or {}),
        pods=sorted(infos, key=lambda p: (p.task, p.index)),
        podgroup_phase=_status(podgroup).get("phase") if podgroup else None,
        reason=state.get("reason") or None,
        message=waiting or state.get("message") or None,
    )


def queue_snapshot(
    queue: Mapping[str, Any], podgroups: Iterable[Mapping[str, Any]], queues: Iterable[Mapping[str, Any]] = ()
) -> QueueSnapshot:
    """A queue with its demand counted from the PodGroups that name it, by phase (GPUs from `minResources`).

    `queues` are every queue (this one among them or not), for its place in the queue tree (`queue_family`).
    A PodGroup without a phase is Pending, as Volcano's `JobInfo.IsPending` reads it.
    """
    meta, spec, status = _meta(queue), queue.get("spec") or {}, _status(queue)
    name = str(meta.get("name"))
    demand = []
    for pg in podgroups:
        pg_spec = pg.get("spec") or {}
        if (pg_spec.get("queue") or "default") != name or _meta(pg).get("deletionTimestamp"):
            continue
        gpus = int(parse_quantity((pg_spec.get("minResources") or {}).get(GPU, 0)))
        phase = _status(pg).get("phase") or "Pending"
        demand.append((phase, _lacking(pg, gpus) if phase == "Unknown" else gpus))
    specs = {str(_meta(q).get("name")): q.get("spec") or {} for q in queues}
    specs[name] = spec
    allocated = {str(_meta(q).get("name")): parse_resources(_status(q).get("allocated")) for q in queues}
    return QueueSnapshot.counted(
        demand,
        name=name,
        state=status.get("state") or "Open",
        weight=int(spec.get("weight") or 1),
        capability=parse_resources(spec.get("capability")),
        allocated=parse_resources(status.get("allocated")),
        **queue_family(name, specs, allocated),
    )


def _lacking(podgroup: Mapping[str, Any], gpus: int) -> int:
    """GPUs an Unknown gang's waiting pods lack (`lacking_gpus`), from its minMember and running and succeeded pods."""
    members = int((podgroup.get("spec") or {}).get("minMember") or 0)
    status = _status(podgroup)
    placed = int(status.get("running") or 0) + int(status.get("succeeded") or 0)
    return lacking_gpus(gpus, members, placed)


def _ready(node: Mapping[str, Any]) -> bool:
    for condition in _status(node).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def node_info(node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> NodeInfo:
    """A node with readiness from its Ready condition and GPUs allocated to the non-terminal pods bound to it.

    A NotReady node can take nothing, so its allocatable GPUs count as 0 (as on LocalCluster).
    """
    meta, spec, status = _meta(node), node.get("spec") or {}, _status(node)
    name = meta.get("name")
    ready = _ready(node)
    used = sum(
        pod_gpus(p.get("spec") or {})
        for p in pods
        if (p.get("spec") or {}).get("nodeName") == name and _status(p).get("phase") not in _TERMINAL
    )
    return NodeInfo(
        name=str(name),
        ready=ready,
        gpu_capacity=int(parse_quantity((status.get("capacity") or {}).get(GPU, 0))),
        gpu_allocatable=int(parse_quantity((status.get("allocatable") or {}).get(GPU, 0))) if ready else 0,
        gpu_allocated=used,
        labels=dict(meta.get("labels") or {}),
        taints=[{k: str(v) for k, v in taint.items()} for taint in spec.get("taints") or []],
        unschedulable=bool(spec.get("unschedulable")),
    )


def _event_time(event: Mapping[str, Any]) -> float:
    """When the event last happened, to the nanosecond where the API allows.

    Timestamps have whole seconds, which cannot order a pod's placement and its eviction in the same second;
    but client-go names an event `<object>.<hex UnixNano of its first occurrence>`, exact for an event seen
    once.
    """
    when = 0.0
    for value in (
        event.get("lastTimestamp"),
        event.get("eventTime"),
        (event.get("series") or {}).get("lastObservedTime"),
        event.get("firstTimestamp"),
        _meta(event).get("creationTimestamp"),
    ):
        parsed = parse_time(value)
        if parsed is not None:
            when = parsed
            break
    if (event.get("count") or 1) == 1:
        try:
            exact = int(str(_meta(event).get("name", "")).rsplit(".", 1)[-1], 16) / 1e9
        except ValueError:
            return when
        if abs(exact - when) < 2.0 or not when:
            return exact
    return when


def _target(event: Mapping[str, Any]) -> tuple[str, str]:
    target = event.get("involvedObject") or {}
    return str(target.get("kind")), str(target.get("name"))


def event_from(event: Mapping[str, Any]) -> Event:
    """A core/v1 Event as the protocol's Event (`object` is `Kind/name`)."""
    target = event.get("involvedObject") or {}
    return Event(
        time=_event_time(event),
        object=f"{target.get('kind')}/{target.get('name')}",
        type=event.get("type") or "Normal",
        reason=event.get("reason") or "",
        message=" ".join(str(event.get("message") or "").split()),
    )


def job_events(job: Mapping[str, Any], events: Iterable[Mapping[str, Any]], limit: int = 50) -> list[Event]:
    """The most recent events of the job, its PodGroup and its pods (by the names its tasks give), oldest first."""
    wanted = {("Job", str(_meta(job).get("name"))), ("PodGroup", podgroup_name(job))}
    mine = [e for e in events if _target(e) in wanted or (_target(e)[0] == "Pod" and expected_pod(job, _target(e)[1]))]
    ordered = sorted((event_from(e) for e in mine), key=lambda e: e.time)
    return ordered[-limit:] if limit > 0 else []
