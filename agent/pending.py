"""Why a Volcano Job is still Pending, in words a person acts on: the gang's GPUs, the queue, the nodes, the line.

`explain` is pure: it reads a job's state and manifest, the nodes, its queue and the jobs ahead of it, and says
what keeps the gang from starting — short by N GPUs on the nodes it may use, the queue at its capability or
closed, nodes excluded (NotReady, cordoned, a taint, the job's own affinity), PodGroups ahead in the queue. The
`explain_pending` tool gathers those inputs from any `Cluster` and calls it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent.capacity import QueueRoom
from agent.guardrails import pod_gpus
from components.untrusted import printable
from components.volcano.cluster import JobInfo, NodeInfo, QueueSnapshot
from components.volcano.models import Job, PodSpec
from components.volcano.placement import BLOCKING_EFFECTS, affinity_allows, tolerates
from components.volcano.resources import GPU

__all__ = ["PendingExplanation", "explain", "node_refusal"]


class PendingExplanation(BaseModel):
    """What keeps a job from starting; `summary` says it in one paragraph, `reasons` one sentence each."""

    model_config = ConfigDict(frozen=True)

    name: str
    namespace: str
    phase: str
    podgroup_phase: str | None = None
    pending: bool
    queue: str
    gpus_needed: int = 0  # GPUs the gang's minAvailable pods ask for together
    gpus_free: int = 0  # free GPUs on the ready nodes the job may use
    short_by: int = 0
    excluded_nodes: dict[str, str] = Field(default_factory=dict)  # node -> why the job may not use it
    ahead: int = 0  # PodGroups waiting in the same queue that were created earlier
    scheduler_message: str = ""
    reasons: list[str] = Field(default_factory=list)
    summary: str


def explain(
    info: JobInfo,
    job: Job | None,
    nodes: Sequence[NodeInfo],
    queue: QueueSnapshot | None,
    ahead: Sequence[JobInfo] = (),
    priority_classes: Collection[str] | None = None,
) -> PendingExplanation:
    """Explain why `info` waits; `job` is its manifest (None when unreadable), `ahead` the jobs queued before it.

    `priority_classes` are the cluster's (None: unread): a class the job names that is not among them gets its pods
    refused by the API server, which no scheduling session mends.
    """
    base: dict[str, Any] = {
        "name": info.name,
        "namespace": info.namespace,
        "phase": info.phase,
        "podgroup_phase": info.podgroup_phase,
        "queue": info.queue,
        "scheduler_message": printable(info.message or ""),  # the cluster's text: quoted, for a terminal or a model
    }
    if info.phase != "Pending":
        state = f"{info.phase} (PodGroup {info.podgroup_phase})" if info.podgroup_phase else info.phase
        summary = f"job {info.namespace}/{info.name} is {state}, not Pending; nothing holds it back."
        return PendingExplanation(**base, pending=False, summary=summary)

    reasons: list[str] = []
    if queue is None:
        reasons.append(f"queue {info.queue!r} does not exist, so the job can never be admitted; resubmit elsewhere")
    elif queue.state != "Open":
        reasons.append(f"queue {info.queue!r} is {queue.state} and admits no new work")

    if job is not None and priority_classes is not None:
        # Volcano's job controller gives a pod the job's class when its template names none.
        named = {t.template.spec.priority_class_name or job.spec.priority_class_name for t in job.spec.tasks}
        for name in sorted(n for n in named if n and n not in priority_classes):
            reasons.append(
                f"priority class {name!r} does not exist on this cluster, so the API server refuses the job's pods; "
                "resubmit naming an existing one or none"
            )

    asks = _pod_asks(job) if job is not None else []
    need_pods = (job.spec.min_available or len(asks)) if job is not None else 0
    need = int(sum(sorted(gpus for gpus, _ in asks)[:need_pods]))
    excluded = _excluded(nodes, [spec for _, spec in asks])
    usable = [n for n in nodes if n.name not in excluded]
    free = sum(max(n.gpu_allocatable - n.gpu_allocated, 0) for n in usable)
    capacity = sum(n.gpu_allocatable for n in usable)
    short = max(need - free, 0)
    gang = sorted(sorted(gpus for gpus, _ in asks)[:need_pods], reverse=True)  # the pods `need` counts
    sizes = ", ".join(sorted({str(g) for g in gang}))
    pods = f"the {need_pods} pods ({sizes} GPUs each)" if need_pods > 1 else f"its pod ({sizes} GPUs)"

    if excluded:
        reasons.append(_excluded_sentence(excluded, len(nodes)))
    if job is not None and need > capacity:
        reasons.append(
            f"the gang is short by {short} GPUs and cannot start as asked: its {need_pods} pods need {need} GPUs at "
            f"once, more than the {capacity} the nodes it may use have in all; ask for fewer GPUs or bring nodes back"
        )
    elif need and not _fits(gang, [n.gpu_allocatable for n in usable]):
        # Enough GPUs in all, but not in whole pods on any node: no job ending frees the room.
        most = max((n.gpu_allocatable for n in usable), default=0)
        reasons.append(
            f"the gang cannot start as asked: even with every GPU free, the nodes it may use (the largest has {most}) "
            f"cannot hold {pods}{' at once' if need_pods > 1 else ''}; ask for fewer GPUs per pod or bring nodes back"
        )
    elif short:
        reasons.append(
            f"the gang is short by {short} GPUs: its {need_pods} pods need {need} GPUs at once and the nodes it may "
            f"use have {free} free"
        )
    elif need and not _fits(gang, [max(n.gpu_allocatable - n.gpu_allocated, 0) for n in usable]):
        fit = "do not all fit at once" if need_pods > 1 else "fits on no node"
        reasons.append(f"{free} GPUs are free but spread over nodes so that {pods} {fit}")

    if queue is not None and need:
        cap = queue.capability.get(GPU)
        held = int(queue.allocated.get(GPU, 0))
        # The limits beyond the queue's own capability (its ancestors', the other queues' guarantees), as the
        # rule policy reads them.
        room = QueueRoom.of(queue.name, queue, nodes)
        if cap is not None and need > cap:
            reasons.append(
                f"queue {queue.name!r} may hold at most {cap:g} GPUs and the gang needs {need}, so it never fits there"
            )
        elif room.limit is not None and need > room.limit:
            reasons.append(f"{room.limit_note}, and the gang needs {need}, so it never fits there")
        elif cap is not None and held + need > cap:
            reasons.append(
                f"queue {queue.name!r} is at its capability: {held} of {cap:g} GPUs are allocated and the gang needs "
                f"{need} more"
            )
        elif need > room.room:
            where = f" ({room.tight})" if room.tight else ""
            free_there = max(room.room, 0)
            reasons.append(
                f"queue {queue.name!r} has room for {free_there:g} more GPUs now{where} and the gang needs {need}"
            )
    if ahead:
        reasons.append(
            f"{len(ahead)} PodGroup{'s are' if len(ahead) > 1 else ' is'} ahead of it in queue {info.queue!r}"
        )

    if reasons:
        summary = f"job {info.namespace}/{info.name} is Pending: " + "; ".join(reasons) + "."
    else:
        summary = (
            f"job {info.namespace}/{info.name} is Pending but nothing blocks it now: it should start at the next "
            "scheduling session."
        )
    if info.message:
        summary += f" The scheduler says: {printable(info.message).rstrip('.')}."
    return PendingExplanation(
        **base,
        pending=True,
        gpus_needed=need,
        gpus_free=free,
        short_by=short,
        excluded_nodes=excluded,
        ahead=len(ahead),
        reasons=reasons,
        summary=summary,
    )


def node_refusal(node: NodeInfo, spec: PodSpec) -> str:
    """Why a pod with `spec` may not run on `node` (resources aside), or "" when it may."""
    if not node.ready:
        return "NotReady"
    if node.unschedulable:
        return "cordoned (unschedulable)"
    tolerations = spec.tolerations or []
    for taint in node.taints:
        if taint.get("effect") in BLOCKING_EFFECTS and not tolerates(tolerations, taint):
            return f"taint {taint.get('key', '')}={taint.get('value', '')}:{taint['effect']} not tolerated"
    for key, value in (spec.node_selector or {}).items():
        if node.labels.get(key) != value:
            return f"node selector {key}={value} does not match"
    if not affinity_allows(spec.affinity, node.name, node.labels):
        return "excluded by the job's node affinity"
    return ""


def _pod_asks(job: Job) -> list[tuple[int, PodSpec]]:
    """(GPUs, pod spec) of every pod of the job, task by task."""
    return [(pod_gpus(t.template.spec), t.template.spec) for t in job.spec.tasks for _ in range(t.replicas)]


def _excluded(nodes: Sequence[NodeInfo], specs: Sequence[PodSpec]) -> dict[str, str]:
    """Nodes that no pod of the job may use, with the first reason found."""
    distinct = list({spec.model_dump_json(): spec for spec in specs}.values())
    out: dict[str, str] = {}
    for node in nodes:
        if not distinct:
            why = node_refusal(node, PodSpec(containers=[]))
        else:
            refusals = [node_refusal(node, spec) for spec in distinct]
            why = refusals[0] if all(refusals) else ""
        if why:
            out[node.name] = why
    return out


def _excluded_sentence(excluded: Mapping[str, str], total: int) -> str:
    parts = [f"{name} ({why})" for name, why in sorted(excluded.items())]
    return f"{len(excluded)} of {total} nodes may not take its pods: " + ", ".join(parts)


def _fits(asks: Sequence[int], rooms: Sequence[int]) -> bool:
    """True when every ask fits in the nodes' `rooms` (GPUs each) at once (first fit, largest ask first)."""
    free = sorted(rooms, reverse=True)
    for ask in asks:
        for i, room in enumerate(free):
            if room >= ask:
                free[i] -= ask
                break
        else:
            return False
    return True
