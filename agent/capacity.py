"""What a training gang can use: the nodes its pods may land on, and the GPUs its queue lets it hold.

The rule policy (`agent.policy_rules`) reads the cluster through these definitions only, each after what
Kubernetes and Volcano v1.15 do (the upstream source is named with each rule): `unusable_reason` and
`usable_nodes` for the nodes, `Pool` for their GPUs, `QueueRoom` for a queue (`queue_rooms` for the run's), and
`missing_priority_class`; `remedy` says what would let a run that fits nowhere train. Pure functions of the
observation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agent.observation import Observation, PlanRequest
from components.volcano.cluster import NodeInfo, QueueSnapshot
from components.volcano.placement import BLOCKING_EFFECTS, tolerates
from components.volcano.resources import GPU

__all__ = [
    "TRAINING_TOLERATIONS",
    "Pool",
    "QueueRoom",
    "left_out",
    "missing_priority_class",
    "queue_rooms",
    "remedy",
    "say_gpus",
    "unusable_reason",
    "usable_nodes",
]

# The tolerations of a training pod: none (components.volcano.builder renders none), so every NoSchedule or
# NoExecute taint keeps it off a node.
TRAINING_TOLERATIONS: tuple[Mapping[str, str], ...] = ()


def unusable_reason(node: NodeInfo, avoid: Sequence[str]) -> str:
    """Why a training pod cannot land on `node` ("" when it can), as kube-scheduler's and Volcano's filters say.

    Volcano's predicates plugin runs Kubernetes' own filter plugins (plugins/predicates/predicates.go):
    - NotReady: the Ready condition is False or Unknown; the node lifecycle controller then taints the node
      node.kubernetes.io/not-ready or /unreachable, NoSchedule, which no training pod tolerates.
    - cordoned: `spec.unschedulable` (kube-scheduler's plugins/nodeunschedulable `Filter`), whatever GPUs it has free.
    - a NoSchedule or NoExecute taint the pod does not tolerate (plugins/tainttoleration `Filter`); a
      PreferNoSchedule taint only steers.
    - avoided: a node an earlier attempt failed on, which the job's node affinity keeps its pods off.
    """
    if not node.ready:
        return "NotReady"
    if node.unschedulable:
        return "cordoned"
    for taint in node.taints:
        if taint.get("effect") in BLOCKING_EFFECTS and not tolerates(TRAINING_TOLERATIONS, taint):
            value = f"={taint['value']}" if taint.get("value") else ""
            return f"taint {taint.get('key', '')}{value}:{taint['effect']}"
    if node.name in avoid:
        return "avoided"
    return ""


def usable_nodes(nodes: Sequence[NodeInfo], avoid: Sequence[str]) -> list[NodeInfo]:
    """Nodes a training pod can land on (`unusable_reason` says why the others are not)."""
    return [node for node in nodes if not unusable_reason(node, avoid)]


def left_out(nodes: Sequence[NodeInfo], avoid: Sequence[str]) -> dict[str, str]:
    """The GPU nodes a training pod cannot land on, with why: what a rationale names beside the free GPUs."""
    reasons = {node.name: unusable_reason(node, avoid) for node in nodes if node.gpu_capacity > 0}
    return {name: why for name, why in reasons.items() if why}


@dataclass(frozen=True)
class Pool:
    """The GPUs of the nodes a training pod may use, in whole pods.

    A node's GPUs are its allocatable ones (status.allocatable: capacity less what the kubelet reserves or the
    device plugin marks unhealthy), less what every pod bound to it requests, whichever scheduler placed it
    (KubeCluster's `k8s_status.node_info`).
    """

    free: int  # unallocated now
    capacity: int  # the most they could ever give one job
    busy: int  # allocated now, to be freed as running jobs end

    @classmethod
    def of(cls, nodes: Sequence[NodeInfo], request: PlanRequest) -> Pool:
        """The pool of `nodes` for the request's pods (whole pods of its GPUs per pod, off its avoided nodes)."""
        usable = usable_nodes(nodes, request.avoid_nodes)
        per_pod = request.gpus_per_pod
        return cls(
            free=sum(whole_pods(n.gpu_allocatable - n.gpu_allocated, per_pod) for n in usable),
            capacity=sum(whole_pods(n.gpu_allocatable, per_pod) for n in usable),
            busy=sum(n.gpu_allocated for n in usable),
        )

    def never(self, gpus: int) -> str:
        """Why `gpus` GPUs can never be placed here ("" when they can)."""
        if gpus > self.capacity:
            return f"the healthy nodes offer at most {say_gpus(self.capacity)} in whole pods"
        return ""


@dataclass(frozen=True)
class QueueRoom:
    """A queue's room for a new gang and the demand queued ahead in it; an unobserved queue is open and unlimited.

    What Volcano v1.15 holds a new job to, from the queue's snapshot (`QueueSnapshot`, `queue_family`):
    - `refusal`: the job admission webhook takes jobs only into an Open queue that is not root and has no child
      queues (webhooks/admission/jobs/validate/admit_job.go `validateJobCreate`).
    - `limit`, `room`: the enqueue action admits a gang only while allocated + inqueue + the gang's minResources
      stays within the queue's realCapability (proportion.go and capacity.go `jobEnqueueable`), and the capacity
      plugin checks every ancestor the same way (`checkJobEnqueueableHierarchically`). realCapability is the
      capability (a missing GPU entry: unlimited; 0: none), capped by the cluster's allocatable less the other
      queues' guarantees. `deserved` caps nothing: above it a queue's pods may be reclaimed, not refused.
    """

    name: str
    refusal: str = ""
    capability: float | None = None  # the queue's own spec.capability, in GPUs
    allocated: float = 0.0  # the queue's own status.allocated, in GPUs
    limit: float | None = None  # the most it could ever hold (None: no queue limit, the nodes decide)
    limit_note: str = ""  # what sets `limit`
    limit_fix: str = ""  # what would raise it
    room: float = math.inf  # GPUs it may take now
    held: float = 0.0  # GPUs allocated where `room` is tightest: they free up as those jobs end
    tight: str = ""  # the rationale's words for that level when it is not the queue's own capability
    ahead: int = 0  # GPUs of PodGroups pending, inqueue, or Unknown and short of pods
    ahead_groups: int = 0

    @classmethod
    def of(cls, name: str, snapshot: QueueSnapshot | None, nodes: Sequence[NodeInfo] = ()) -> QueueRoom:
        """Read `snapshot`; `nodes` (all of them) give the cluster total that the guarantees are taken from."""
        if snapshot is None:
            return cls(name=name)
        capability = snapshot.capability.get(GPU)
        allocated = snapshot.allocated.get(GPU, 0.0)
        # (limit, room, held, why the limit, the rationale's words, what would raise it) for each level that caps
        # this queue: its own capability, every ancestor's (a child without a GPU capability inherits its parent's),
        # the guarantees of the other queues. The lowest limit is the queue's; the least room is where it waits.
        levels: list[tuple[float, float, float, str, str, str]] = []
        if capability is not None:
            note = f"queue {name}'s capability is {capability:g} GPUs"
            levels.append((capability, capability - allocated, allocated, note, "", f"raise queue {name}'s capability"))
        for ancestor in snapshot.ancestors:
            cap = ancestor.capability.get(GPU)
            if cap is not None:
                held = ancestor.allocated.get(GPU, 0.0)
                note = f"queue {name} is under {ancestor.name}, whose capability is {cap:g} GPUs"
                tight = f"{held:g} of {ancestor.name}'s {cap:g} GPUs allocated"
                levels.append((cap, cap - held, held, note, tight, f"raise queue {ancestor.name}'s capability"))
        elsewhere = snapshot.guaranteed_elsewhere.get(GPU, 0.0)
        if elsewhere > 0 and nodes:
            # Every node counts, as Volcano's session total does; a NotReady node's allocatable is read as 0, so its
            # capacity stands in (an upper bound: the limit errs towards possible).
            total = sum(n.gpu_allocatable if n.ready else n.gpu_capacity for n in nodes)
            own = snapshot.guarantee.get(GPU, 0.0)
            real = max(0.0, total - elsewhere - own) + own
            note = f"queue {name} can hold at most {real:g} GPUs: "
            note += f"other queues are guaranteed {elsewhere:g} of the cluster's {total:g}"
            tight = f"at most {real:g} GPUs beside other queues' guarantees"
            levels.append((real, real - allocated, allocated, note, tight, "lower the other queues' guarantees"))
        limit, limit_note, limit_fix = None, "", ""
        if levels:
            limit, _, _, limit_note, _, limit_fix = min(levels, key=lambda level: level[0])
        room, held, tight = math.inf, allocated, ""
        if levels:
            _, room, held, _, tight, _ = min(levels, key=lambda level: level[1])
        lacking = snapshot.unknown_gpus
        return cls(
            name=name,
            refusal=_refusal(snapshot),
            capability=capability,
            allocated=allocated,
            limit=limit,
            limit_note=limit_note,
            limit_fix=limit_fix,
            room=room,
            held=held,
            tight=tight,
            ahead=snapshot.pending_gpus + snapshot.inqueue_gpus + lacking,
            ahead_groups=snapshot.pending + snapshot.inqueue + (snapshot.unknown if lacking else 0),
        )

    def never(self, gpus: int) -> str:
        """Why `gpus` GPUs can never run in this queue ("" when they can)."""
        if self.refusal:
            return self.refusal
        if self.limit is not None and gpus > self.limit:
            return self.limit_note
        return ""

    def wait_s(self, gpus: int, pool: Pool, mean_remaining_s: float) -> float:
        """Expected seconds until a gang of `gpus` is admitted and placed (see docs/agent.md).

        Now, when it fits in what is free (within the queue's room) after the gangs ahead that fit there; else
        the GPUs it lacks, the gangs ahead included, free up at `busy / mean_remaining_s` per second.
        """
        available = min(pool.free, self.room)
        taken = 0.0
        if self.ahead_groups:
            # Only totals are known: gangs of the average size ahead take the free GPUs first, as many as fit;
            # one that does not fit does not block the smaller ones behind it (Volcano does not hold a place).
            size = self.ahead / self.ahead_groups
            taken = size * min(self.ahead_groups, math.floor(available / size)) if size else 0.0
        if gpus <= available - taken:
            return 0.0
        lack_nodes = gpus + self.ahead - pool.free
        lack_queue = gpus + self.ahead - self.room
        return mean_remaining_s * max(
            lack_nodes / max(pool.busy, 1) if lack_nodes > 0 else 0.0,
            lack_queue / max(self.held, 1.0) if lack_queue > 0 else 0.0,
        )


def queue_rooms(observation: Observation) -> list[QueueRoom]:
    """The run's queue, then its fallback queue when set and different; one the cluster lacks takes no job.

    Volcano's job admission refuses a job into a queue that does not exist (admit_job.go `validateJobCreate`).
    """
    request = observation.request
    queues = [(request.queue, observation.queue)]
    if request.fallback_queue and request.fallback_queue != request.queue:
        queues.append((request.fallback_queue, observation.fallback_queue))
    return [
        QueueRoom(name=name, refusal=f"queue {name} does not exist on this cluster")
        if name in observation.missing_queues
        else QueueRoom.of(name, snapshot, observation.nodes)
        for name, snapshot in queues
    ]


def remedy(observation: Observation, sizes: Sequence[int]) -> str:
    """What would let the run train when no size it allows can: each change named, by what stops its smallest size.

    `sizes` are the sizes in whole pods that split the global batch, gpus-min aside, largest first. The smallest the
    run allows is the easiest for every limit (a queue's and the nodes' refuse only sizes above them), so what stops
    it is what must change; a lower gpus-min is named only when a size below it would run.
    """
    request = observation.request
    rooms, pool = queue_rooms(observation), Pool.of(observation.nodes, request)

    def runs(n: int) -> bool:
        return not pool.never(n) and any(not room.never(n) for room in rooms)

    lower = next((f"lower gpus-min to {n}" for n in sizes if n < request.gpus_min and runs(n)), "")
    smallest, needs = min(n for n in sizes if n >= request.gpus_min), []
    if pool.never(smallest):
        most = max((node.gpu_allocatable for node in usable_nodes(observation.nodes, request.avoid_nodes)), default=0)
        if 0 < most < request.gpus_per_pod:
            needs.append(f"lower gpus-per-pod (no healthy node has {request.gpus_per_pod} GPUs; the most is {most})")
        elif left_out(observation.nodes, request.avoid_nodes):
            needs.append("bring back the nodes left out or add GPU nodes")
        else:
            needs.append("add GPU nodes")
    if all(room.never(smallest) for room in rooms):
        fixes = ["name a queue that takes jobs" if room.refusal else room.limit_fix for room in rooms]
        needs.append(" or ".join(dict.fromkeys(fixes)))
    return ", or ".join(filter(None, [lower, " and ".join(needs)]))


def missing_priority_class(observation: Observation) -> str:
    """Why no job of the run can start when its PriorityClass is not on the cluster ("" when it is, or unread)."""
    name, known = observation.request.priority_class, observation.priority_classes
    if not name or known is None or name in known:
        return ""
    return (
        f"priority class {name!r} does not exist on this cluster (its priority classes: {', '.join(known) or 'none'}): "
        "the API server refuses every pod that names it"
    )


def _refusal(snapshot: QueueSnapshot) -> str:
    """Why Volcano's job admission refuses any new job into this queue ("" when it takes them)."""
    name = snapshot.name
    if snapshot.state != "Open":
        return f"queue {name} is {snapshot.state}: Volcano admits no new job into a queue that is not Open"
    if name == "root":
        return "queue root is the top of Volcano's queue tree and takes no jobs"
    if snapshot.children:
        return f"queue {name} has child queues ({', '.join(snapshot.children)}): Volcano admits jobs only into a leaf"
    return ""


def whole_pods(gpus: int, per_pod: int) -> int:
    """The GPUs of `gpus` that whole pods of `per_pod` GPUs can use."""
    return max(0, gpus) // per_pod * per_pod


def say_gpus(count: float) -> str:
    """`1 GPU`, `8 GPUs`."""
    return f"{count:g} GPU" if count == 1 else f"{count:g} GPUs"
