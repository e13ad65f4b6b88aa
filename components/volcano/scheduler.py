"""One Volcano scheduler session as a pure function, so LocalCluster admits and places gangs like Volcano."""

from __future__ import annotations

import json
import math
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from components.volcano.gang import GangProgress, task_order
from components.volcano.placement import BLOCKING_EFFECTS, affinity_allows, tolerates
from components.volcano.resources import EMPTY, GPU

__all__ = [
    "Gang",
    "NodeState",
    "PodRequest",
    "QueueState",
    "Session",
    "deserved",
    "schedule",
]

# binpack weights (Volcano's binpack.cpu / binpack.memory / binpack.resources.nvidia.com/gpu); other resources
# are checked for fit but do not steer the choice of node, as upstream skips resources it has no weight for.
_BINPACK_WEIGHTS = {GPU: 10.0, "cpu": 1.0, "memory": 1.0}
_EPS = 1e-9
# Why nodes refuse a pod, said of one node and of many ("is not ready", "are not ready") -> how many nodes.
_Refusals = Counter[tuple[str, str]]


class NodeState(NamedTuple):
    """A node as the scheduler sees it: what it offers and what pods bound to it already request."""

    name: str
    ready: bool
    allocatable: Mapping[str, float]
    used: Mapping[str, float]
    labels: Mapping[str, str] = EMPTY
    taints: tuple[Mapping[str, str], ...] = ()
    unschedulable: bool = False
    # The kubelet's --max-pods (the node's status.allocatable.pods; 0: no limit) and the pods bound to it now:
    # Volcano's predicates plugin keeps a pod off a node that holds that many ("node(s) pod number exceeded").
    max_pods: int = 0
    pods: int = 0


class QueueState(NamedTuple):
    """A Volcano Queue: its weight, its capability (a missing resource is unlimited) and what it holds now.

    `capability` is what the scheduler may give the queue (proportion's realCapability, which the caller works out);
    `guarantee` its spec.guarantee.resource, which it deserves whatever its weight. A queue that is not `open`
    (Closing, Closed) admits no gang and gets no pod placed. `elastic` is what its gangs hold beyond their
    minResources, which enqueue does not count against the capability (proportion's `attr.elastic`).
    """

    name: str
    weight: int = 1
    capability: Mapping[str, float] = EMPTY
    open: bool = True
    allocated: Mapping[str, float] = EMPTY
    guarantee: Mapping[str, float] = EMPTY
    elastic: Mapping[str, float] = EMPTY


@dataclass(frozen=True)
class PodRequest:  # a dataclass, not a NamedTuple: its `index` would hide tuple.index
    """A pod waiting for a node: its requests and the placement constraints of its spec."""

    name: str
    resources: Mapping[str, float]
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: Mapping[str, Any] | None = None
    tolerations: tuple[Mapping[str, Any], ...] = ()
    task: str = ""  # the job's task it belongs to ("" none): its minimum is the gang's `min_task_member`
    index: int = 0  # its index in the task, the <index> of <job>-<task>-<index>
    priority: int = 0  # its PriorityClass value: the template's, else the job's


class Gang(NamedTuple):
    """A PodGroup with the pods of its job still to bind; `bound` pods already count toward `min_member`.

    `min_task_member` is the PodGroup's spec.minTaskMember (each task's minAvailable): the gang binds only when every
    task has that many pods bound or placed too, as long as `min_member` is at least their sum (`gang.GangProgress`).
    """

    key: str
    queue: str
    phase: str
    min_member: int
    min_resources: Mapping[str, float]
    pods: Sequence[PodRequest]  # read only once the gang is admitted: a Pending PodGroup has no pods yet
    bound: int = 0
    priority: int = 0
    order: int = 0
    min_task_member: Mapping[str, int] = EMPTY
    bound_by_task: Mapping[str, int] = EMPTY  # `bound`, by task
    size: int = 0  # every pod of the job, whatever its phase (0: `bound` + the pods to bind)


class Session(NamedTuple):
    """What one session decided: gangs admitted to Inqueue, pods bound to nodes, and why the others wait."""

    enqueued: tuple[str, ...]
    bindings: Mapping[str, str]
    reasons: Mapping[str, str]


def schedule(
    nodes: Sequence[NodeState],
    queues: Sequence[QueueState],
    gangs: Sequence[Gang],
    *,
    overcommit_factor: float | None = 1.2,
    proportion: bool = False,
) -> Session:
    """Run the actions enqueue then allocate once over the whole state, as one Volcano session does.

    Gangs are all-or-nothing: a gang's pods are bound only when `bound` plus the pods placed reach
    `min_member` and every task its `min_task_member`. A gang's pods are tried in Volcano's task order (priority,
    then index; `gang.task_order`); once one fits nowhere the others of its task are not tried, and the gang goes
    on with its other tasks only where Volcano's allocate would (`gang.GangProgress.fail`). `reasons` is keyed by
    gang key. The result depends on the input alone; ties go by name.

    `overcommit_factor` None is a scheduler without the overcommit plugin: enqueue checks the queue's capability
    only, not the idle cluster. `proportion` adds what Volcano's proportion plugin does in allocate: each queue
    gets a deserved share (`deserved`), a queue at it is skipped, a pod that would take its queue past it is not
    placed, and queues are served by allocated ÷ deserved instead of allocated ÷ weight.
    """
    queue_by_name = {q.name: q for q in queues}
    ordered = sorted(gangs, key=lambda g: (-g.priority, g.order, g.key))
    reasons: dict[str, str] = {}
    shares = deserved(nodes, queues, gangs) if proportion else None  # as the session opens, before enqueue
    enqueued = _enqueue(nodes, queue_by_name, ordered, overcommit_factor, reasons)
    admitted = set(enqueued)
    runnable = [g for g in ordered if g.pods and (g.phase in ("Inqueue", "Running", "Unknown") or g.key in admitted)]
    bindings = _Allocator(nodes, queue_by_name, reasons, shares).run(runnable)
    return Session(enqueued=tuple(enqueued), bindings=bindings, reasons=reasons)


def deserved(
    nodes: Sequence[NodeState], queues: Sequence[QueueState], gangs: Sequence[Gang]
) -> dict[str, dict[str, float]]:
    """Each queue's deserved resources, as Volcano's proportion plugin computes them when a session opens.

    Only queues with a job take part. The ready nodes' allocatable is dealt out by weight in rounds; a queue's
    share is capped by its capability and by its request (what it holds plus the pods of its admitted gangs
    still to bind: a Pending PodGroup has no pods yet), and what a capped queue leaves is dealt out again. A queue
    deserves at least its guarantee (`helpers.Max(attr.deserved, attr.guarantee)` in proportion.go).
    """
    total: dict[str, float] = {}
    for node in nodes:
        if node.ready and not node.unschedulable:
            _add_into(total, node.allocatable)
    by_name = {q.name: q for q in queues}
    request = {q: dict(by_name[q].allocated) for q in dict.fromkeys(g.queue for g in gangs) if q in by_name}
    for gang in gangs:
        if gang.queue in request and gang.phase in ("Inqueue", "Running", "Unknown"):
            for pod in gang.pods:
                _add_into(request[gang.queue], pod.resources)
    share = {q: dict.fromkeys(total, 0.0) for q in request}
    remaining, met = dict(total), set()
    while True:
        weight = sum(max(by_name[q].weight, 1) for q in request if q not in met)
        if not weight:
            break
        before, grown, shrunk = dict(remaining), dict.fromkeys(total, 0.0), dict.fromkeys(total, 0.0)
        for q in request:
            if q in met:
                continue
            old, cap = share[q], by_name[q].capability
            new = {}
            for r in total:
                amount = old[r] + remaining[r] * max(by_name[q].weight, 1) / weight
                new[r] = min(amount, cap.get(r, total[r]), total[r], request[q].get(r, 0.0))
                new[r] = max(new[r], by_name[q].guarantee.get(r, 0.0))
                grown[r] += max(new[r] - old[r], 0.0)
                shrunk[r] += max(old[r] - new[r], 0.0)
            share[q] = new
            if all(request[q].get(r, 0.0) <= new[r] + _EPS for r in total) or new == old:
                met.add(q)
        remaining = {r: max(remaining[r] + shrunk[r] - grown[r], 0.0) for r in total}
        if all(v <= _EPS for v in remaining.values()) or remaining == before:
            break
    return share


def _enqueue(
    nodes: Sequence[NodeState],
    queues: Mapping[str, QueueState],
    ordered: Sequence[Gang],
    factor: float | None,
    reasons: dict[str, str],
) -> list[str]:
    """Admit Pending gangs while their queue's capability and the overcommitted idle cluster have room.

    With `factor` None the idle cluster is not checked (Volcano without the overcommit plugin).
    """
    total: dict[str, float] = {}
    for node in nodes:
        if node.ready and not node.unschedulable:
            _add_into(total, node.allocatable)
    idle = {r: amount * factor for r, amount in total.items()} if factor is not None else {}
    for node in nodes:
        _add_into(idle, node.used, -1.0)
    reserved: dict[str, float] = {}  # min_resources of Inqueue gangs that hold no pods yet
    queue_reserved: dict[str, dict[str, float]] = {}
    for gang in ordered:
        if gang.phase == "Inqueue" and gang.bound == 0:
            _add_into(reserved, gang.min_resources)
            _add_into(queue_reserved.setdefault(gang.queue, {}), gang.min_resources)
    enqueued: list[str] = []
    for gang in ordered:
        if gang.phase != "Pending":
            continue
        queue = queues.get(gang.queue)
        if queue is None:
            reasons[gang.key] = f"queue '{gang.queue}' does not exist; create it or submit to another queue"
            continue
        if not queue.open:
            reasons[gang.key] = f"queue '{gang.queue}' is closed and admits no new jobs"
            continue
        asked = {r: q for r, q in gang.min_resources.items() if q > 0}
        if asked:
            short = (
                ""
                if factor is None
                else next((r for r in sorted(asked) if reserved.get(r, 0.0) + asked[r] > idle.get(r, 0.0) + _EPS), "")
            )
            if short:
                left = max(idle.get(short, 0.0) - reserved.get(short, 0.0), 0.0)
                reasons[gang.key] = (
                    f"not enough idle resources in the cluster to admit the gang "
                    f"({short}: asks {_fmt(short, asked[short])}, {_fmt(short, left)} idle)"
                )
                continue
            held = dict(queue.allocated)  # proportion: allocated + inqueue - elastic
            _add_into(held, queue_reserved.get(queue.name, {}))
            _add_into(held, queue.elastic, -1.0)
            over = _capability_excess(queue, held, asked)
            if over:
                reasons[gang.key] = over
                continue
        _add_into(reserved, asked)
        _add_into(queue_reserved.setdefault(queue.name, {}), asked)
        enqueued.append(gang.key)
    return enqueued


class _Allocator:
    """The allocate action over scratch copies of node usage and queue allocation."""

    def __init__(
        self,
        nodes: Sequence[NodeState],
        queues: Mapping[str, QueueState],
        reasons: dict[str, str],
        shares: Mapping[str, Mapping[str, float]] | None = None,
    ):
        self.shares = shares  # the proportion plugin's deserved, by queue; None without it
        self.nodes = sorted(nodes, key=lambda n: n.name)
        self.alloc = [dict(n.allocatable) for n in self.nodes]
        self.used = [dict(n.used) for n in self.nodes]
        self.pod_room = [n.max_pods - n.pods if n.max_pods else math.inf for n in self.nodes]
        self.queues = queues
        self.queue_alloc = {name: dict(q.allocated) for name, q in queues.items()}
        self.reasons = reasons
        # Free capacity over nodes that take pods at all: a cheap upper bound for any gang.
        self.free_total: dict[str, float] = {}
        for node, alloc, used in zip(self.nodes, self.alloc, self.used, strict=True):
            if node.ready and not node.unschedulable:
                for r, amount in alloc.items():
                    self.free_total[r] = self.free_total.get(r, 0.0) + max(amount - used.get(r, 0.0), 0.0)
        # constraint key -> nodes that pass every predicate but resources, refusals counted by kind
        self.static: dict[str, tuple[list[int], _Refusals]] = {}
        # Capacity only shrinks within a session, so a request that found no node against committed usage
        # fails again for any request at least as large with the same constraints.
        self.failed: dict[str, list[tuple[dict[str, float], str]]] = {}

    def run(self, gangs: Sequence[Gang]) -> dict[str, str]:
        """Try gangs queue by queue, always serving the queue with the lowest weighted share next."""
        bindings: dict[str, str] = {}
        by_queue: dict[str, deque[Gang]] = {}
        for gang in gangs:  # already in priority, creation order
            if gang.queue not in self.queues:
                self.reasons[gang.key] = f"queue '{gang.queue}' does not exist; create it to let the gang run"
                continue
            by_queue.setdefault(gang.queue, deque()).append(gang)
        while by_queue:
            name = min(by_queue, key=lambda q: (*self._share(q), q))
            gang = by_queue[name].popleft()
            if not by_queue[name]:
                del by_queue[name]
            # Pods that request nothing are backfill's, which asks proportion nothing.
            if self._overused(name) and any(v > _EPS for pod in gang.pods for v in pod.resources.values()):
                self.reasons[gang.key] = f"queue '{name}' holds its deserved share of the cluster"
                continue
            for pod, index in self._place_gang(gang):
                bindings[pod] = self.nodes[index].name
        return bindings

    def _share(self, queue: str) -> tuple[float, float]:
        if self.shares is not None:  # proportion: the largest of allocated ÷ deserved over the resources
            alloc, deserve = self.queue_alloc[queue], self.shares.get(queue, {})
            ratios = [
                alloc.get(r, 0.0) / d if d > _EPS else float(alloc.get(r, 0.0) > _EPS) for r, d in deserve.items()
            ]
            return max(ratios, default=0.0), 0.0
        weight = max(self.queues[queue].weight, 1)
        alloc = self.queue_alloc[queue]
        return alloc.get(GPU, 0.0) / weight, alloc.get("cpu", 0.0) / weight

    def _overused(self, queue: str) -> bool:
        """Proportion's Overused: the queue holds at least its deserved share of every resource."""
        if self.shares is None:
            return False
        alloc = self.queue_alloc[queue]
        return all(d <= alloc.get(r, 0.0) + _EPS for r, d in self.shares.get(queue, {}).items())

    def _closed(self, queue: str, request: Mapping[str, float]) -> str:
        """Proportion's Allocatable: a queue that is not Open gets no pod placed (best-effort pods are backfill's)."""
        if self.queues[queue].open or not request:
            return ""
        return f"queue '{queue}' is not open: it places no pods until it is opened again"

    def _past_deserved(self, queue: str, request: Mapping[str, float]) -> str:
        """Proportion's Allocatable: say how the pod would take its queue past its deserved share, or ""."""
        if self.shares is None:
            return ""
        alloc, deserve = self.queue_alloc[queue], self.shares.get(queue, {})
        for r in sorted(request):
            if alloc.get(r, 0.0) + request[r] > deserve.get(r, 0.0) + _EPS:
                return (
                    f"queue '{queue}' would pass its deserved share ({r}: {_fmt(r, alloc.get(r, 0.0))} allocated "
                    f"+ {_fmt(r, request[r])} asked > {_fmt(r, deserve.get(r, 0.0))} deserved)"
                )
        return ""

    def _place_gang(self, gang: Gang) -> list[tuple[str, int]]:
        """Place the gang's pods one by one; keep them only if the gang is ready (minMember and task minima)."""
        need = gang.min_member - gang.bound
        total_pods = gang.bound + len(gang.pods)
        prefix = f"{{}}/{total_pods} pods of the gang could be placed, minMember is {gang.min_member}: "
        pods = task_order(gang.pods)
        progress = GangProgress(
            gang.min_member,
            gang.min_task_member,
            gang.bound,
            gang.bound_by_task,
            (pod.task for pod in pods),
            gang.size or total_pods,
        )
        short_task = progress.short_task()  # the gang plugin's JobValid: CheckTaskValid, then ValidTaskNum
        if short_task:
            self.reasons[gang.key] = f"{short_task}; the gang waits for more pods"
            return []
        if need > len(gang.pods):
            self.reasons[gang.key] = (
                f"the gang has {total_pods} pods but minMember is {gang.min_member}; it waits for more pods"
            )
            return []
        short = self._short_of_free(gang, need)
        if short:
            self.reasons[gang.key] = prefix.format(gang.bound) + short
            return []
        queue_alloc = self.queue_alloc[gang.queue]
        saved_queue = dict(queue_alloc)
        saved_nodes: dict[int, tuple[dict[str, float], float]] = {}
        placed: list[tuple[str, int, dict[str, float]]] = []
        reason = ""
        for pod in pods:
            if progress.skips(pod.task):
                continue
            request = {r: q for r, q in pod.resources.items() if q > 0}
            over = _capability_excess(self.queues[gang.queue], queue_alloc, request)
            over = over or self._closed(gang.queue, request) or self._past_deserved(gang.queue, request)
            if over:  # proportion's Allocatable refuses this pod; allocate goes on with the next
                reason = over
                continue
            index, why = self._best_node(pod, request, fresh=not placed)
            if index < 0:
                lacking = progress.lacking() if gang.bound + len(placed) >= gang.min_member else ""
                reason = (
                    f"{gang.bound + len(placed)}/{total_pods} pods of the gang could be placed, but {lacking}: {why}"
                    if lacking
                    else prefix.format(gang.bound + len(placed)) + why
                )
                if progress.fail(pod.task):
                    continue
                break
            saved_nodes.setdefault(index, (dict(self.used[index]), self.pod_room[index]))
            _add_into(self.used[index], request)
            self.pod_room[index] -= 1
            _add_into(queue_alloc, request)
            placed.append((pod.name, index, request))
            progress.place(pod.task)
        if reason:
            self.reasons[gang.key] = reason
        if not placed or not progress.ready():
            for index, (used, room) in saved_nodes.items():  # gang: no partial placement ever survives
                self.used[index], self.pod_room[index] = used, room
            self.queue_alloc[gang.queue] = saved_queue
            return []
        for _, index, request in placed:
            if self.nodes[index].ready and not self.nodes[index].unschedulable:
                _add_into(self.free_total, request, -1.0)
        return [(name, index) for name, index, _ in placed]

    def _short_of_free(self, gang: Gang, need: int) -> str:
        """Say why the gang cannot fit when even its `need` smallest pods ask more than all free capacity."""
        if need <= 0:
            return ""
        for r in sorted({r for pod in gang.pods for r in pod.resources}):
            asked = sum(sorted(max(p.resources.get(r, 0.0), 0.0) for p in gang.pods)[:need])
            free = self.free_total.get(r, 0.0)
            if asked > free + _EPS:
                return (
                    f"the cluster has {_fmt(r, free)} {r} free on schedulable nodes "
                    f"and the gang needs at least {_fmt(r, asked)}"
                )
        return ""

    def _best_node(self, pod: PodRequest, request: dict[str, float], *, fresh: bool) -> tuple[int, str]:
        """Return the fitting node with the highest binpack score, or -1 and a fit-error summary."""
        key = _constraint_key(pod)
        for smaller, why in self.failed.get(key, ()):
            if all(request.get(r, 0.0) + _EPS >= q for r, q in smaller.items()):
                return -1, why
        allowed, _ = self._allowed(key, pod)
        # Scarce, heavily weighted resources first: most nodes that do not fit fail on the first test.
        items = sorted(request.items(), key=lambda item: (-_BINPACK_WEIGHTS.get(item[0], 0.0), item[0]))
        scored = [(r, q, _BINPACK_WEIGHTS[r]) for r, q in items if r in _BINPACK_WEIGHTS]
        best, best_score = -1, -1.0
        for i in allowed:  # the hot loop of a session: plain loops, no generators
            if self.pod_room[i] < 1:
                continue
            used, alloc = self.used[i], self.alloc[i]
            for r, q in items:
                if used.get(r, 0.0) + q > alloc.get(r, 0.0) + _EPS:
                    break
            else:
                score = 0.0
                for r, q, w in scored:
                    score += w * (used.get(r, 0.0) + q) / alloc[r]
                if score > best_score:  # nodes are in name order, so ties go to the first name
                    best, best_score = i, score
        if best >= 0:
            return best, ""
        why = self._fit_errors(key, pod, items)
        if fresh:  # judged against committed usage only, so it stays true for the session
            self.failed.setdefault(key, []).append((request, why))
        return -1, why

    def _allowed(self, key: str, pod: PodRequest) -> tuple[list[int], _Refusals]:
        """Nodes that pass every predicate but resources, and the count of refusals by kind."""
        if key not in self.static:
            allowed: list[int] = []
            refused: _Refusals = Counter()
            for i, node in enumerate(self.nodes):
                why = _static_refusal(node, pod)
                if why:
                    refused[why] += 1
                else:
                    allowed.append(i)
            self.static[key] = (allowed, refused)
        return self.static[key]

    def _fit_errors(self, key: str, pod: PodRequest, items: list[tuple[str, float]]) -> str:
        """Summarise why no node fits, like the scheduler's "0/N nodes are available" message."""
        allowed, refused = self._allowed(key, pod)
        counts = Counter(refused)
        for i in allowed:
            if self.pod_room[i] < 1:
                counts[("has its pod number exceeded", "have their pod number exceeded")] += 1
                continue
            used, alloc = self.used[i], self.alloc[i]
            for r, q in items:
                if used.get(r, 0.0) + q > alloc.get(r, 0.0) + _EPS:
                    counts[(f"has insufficient {r}", f"have insufficient {r}")] += 1
                    break
        parts = [f"{n} node {one}" if n == 1 else f"{n} nodes {many}" for (one, many), n in sorted(counts.items())]
        return f"0/{len(self.nodes)} nodes are available: " + ", ".join(parts)


def _capability_excess(queue: QueueState, held: Mapping[str, float], asked: Mapping[str, float]) -> str:
    """Say how `asked` would push the queue past its capability, or return "" when it fits."""
    for r in sorted(asked):
        if r in queue.capability and held.get(r, 0.0) + asked[r] > queue.capability[r] + _EPS:
            return (
                f"queue '{queue.name}' is at its capability ({r}: {_fmt(r, held.get(r, 0.0))} allocated "
                f"+ {_fmt(r, asked[r])} asked > {_fmt(r, queue.capability[r])})"
            )
    return ""


def _constraint_key(pod: PodRequest) -> str:
    return json.dumps([pod.node_selector, pod.affinity, pod.tolerations], sort_keys=True, default=str)


def _static_refusal(node: NodeState, pod: PodRequest) -> tuple[str, str] | None:
    """Name the first predicate but resources that keeps the pod off the node, or None when all pass."""
    if not node.ready:
        return "is not ready", "are not ready"
    if node.unschedulable:
        return "is unschedulable", "are unschedulable"
    for taint in node.taints:
        if taint.get("effect") in BLOCKING_EFFECTS and not tolerates(pod.tolerations, taint):
            return "has a taint the pod does not tolerate", "have a taint the pod does not tolerate"
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return "does not match the pod's node selector", "do not match the pod's node selector"
    if not affinity_allows(pod.affinity, node.name, node.labels):
        return "does not match the pod's node affinity", "do not match the pod's node affinity"
    return None


def _add_into(target: dict[str, float], vector: Mapping[str, float], sign: float = 1.0) -> None:
    for r, amount in vector.items():
        target[r] = target.get(r, 0.0) + sign * amount


def _fmt(resource: str, amount: float) -> str:
    """Write an amount as people read it: whole counts, cores, GiB for memory."""
    if resource in ("memory", "ephemeral-storage") and abs(amount) >= 2**30:
        return f"{amount / 2**30:.4g}Gi"
    if abs(amount - round(amount)) < 1e-6:
        return str(int(round(amount)))
    return f"{amount:.4g}"
