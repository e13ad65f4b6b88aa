"""The one interface vcpilot uses to talk to Volcano, whether real (KubeCluster) or embedded (LocalCluster)."""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from components.errors import EXIT_FAILED, Unavailable, VcpilotError
from components.volcano.resources import parse_resources

if TYPE_CHECKING:  # what `submit` and `apply_queue` take; reading the cluster needs no pydantic
    from components.volcano.models import Job
    from components.volcano.scheduling_models import Queue

__all__ = [
    "Cluster",
    "ClusterError",
    "ClusterUnavailable",
    "Conflict",
    "Event",
    "Invalid",
    "JobInfo",
    "JobNotFound",
    "NodeInfo",
    "NodeNotFound",
    "PodInfo",
    "QueueLimit",
    "lacking_gpus",
    "QueueNotFound",
    "QueueSnapshot",
    "StateDamaged",
    "Timeout",
    "Unschedulable",
    "FINISHED_PHASES",
    "queue_family",
]

# Job phases after which Volcano does nothing more with a job.
FINISHED_PHASES = frozenset({"Completed", "Failed", "Aborted", "Terminated"})


class ClusterError(VcpilotError):
    """Base of every error a Cluster raises; the message is one sentence meant for a person."""


class ClusterUnavailable(ClusterError, Unavailable):
    """The cluster's API server could not be reached, or kept failing, after the retries."""


class JobNotFound(ClusterError):
    """The named Job does not exist."""


class QueueNotFound(ClusterError):
    """The named Queue does not exist."""


class NodeNotFound(ClusterError):
    """The named node does not exist."""


class Conflict(ClusterError):
    """An object with that name exists with a different spec."""


class Invalid(ClusterError):
    """The manifest breaks a rule the API server or Volcano's admission would enforce."""


class StateDamaged(ClusterError):
    """The cluster's own stored state cannot be read (LocalCluster's database); the message says how to start over."""


class Unschedulable(ClusterError):
    """The request can never be placed on this cluster (asks more than any node or queue can give)."""


class Timeout(ClusterError):
    """A wait ran out before the job reached one of the wanted phases."""

    exit_code = EXIT_FAILED


# The answers are frozen dataclasses, not pydantic models: a cluster builds them from state it has checked (its
# own rows, the API server's objects), and `vcpilot cluster status` then imports no pydantic (benchmarks/cli.py).
# Where one is part of a pydantic model (the agent's observation) pydantic validates and dumps it as a dataclass;
# `dataclasses.asdict` gives its JSON form.


@dataclass(frozen=True, kw_only=True)
class PodInfo:
    """One pod of a job, as `kubectl get pod` would show it."""

    name: str
    task: str
    index: int
    node: str | None = None
    phase: str  # Pending, Running, Succeeded, Failed
    reason: str | None = None  # e.g. Evicted, NodeLost, Error, Killed; CrashLoopBackOff while a restart waits
    exit_code: int | None = None
    gpus: int = 0
    restarts: int = 0  # its containers' restartCount: restartPolicy OnFailure or Always restarts them in place


@dataclass(frozen=True, kw_only=True)
class JobInfo:
    """A Volcano Job's state: phase, retries and its current pods."""

    name: str
    namespace: str = "default"
    uid: str
    queue: str
    phase: str
    retry_count: int = 0
    min_available: int
    labels: dict[str, str] = field(default_factory=dict)
    pods: list[PodInfo] = field(default_factory=list)
    # Pods being deleted that have not ended: on Kubernetes a pod stays until its kubelet confirms it stopped, so
    # one on a node that died stays "Terminating" for good. Not among `pods` (they are gone for the job).
    ending: list[PodInfo] = field(default_factory=list)
    podgroup_phase: str | None = None
    reason: str | None = None
    message: str | None = None

    @property
    def finished(self) -> bool:
        """True once Volcano will do nothing more with this job."""
        return self.phase in FINISHED_PHASES


@dataclass(frozen=True, kw_only=True)
class QueueLimit:
    """An ancestor of a queue in Volcano's queue tree, with what it caps and holds for its whole subtree."""

    name: str
    capability: dict[str, float] = field(default_factory=dict)
    allocated: dict[str, float] = field(default_factory=dict)  # its descendants' together, as Volcano writes it


@dataclass(frozen=True, kw_only=True)
class QueueSnapshot:
    """A queue and the demand on it, counted from PodGroups (Volcano >= 1.11 no longer writes status counts).

    `parent`, `children`, `ancestors` and `guaranteed_elsewhere` come from the other queues (`queue_family`).
    """

    name: str
    state: str
    weight: int = 1
    capability: dict[str, float] = field(default_factory=dict)
    allocated: dict[str, float] = field(default_factory=dict)
    pending: int = 0
    inqueue: int = 0
    running: int = 0
    pending_gpus: int = 0
    inqueue_gpus: int = 0
    running_gpus: int = 0
    # PodGroups some of whose pods run while the rest wait for room (Volcano's phase Unknown), and the GPUs those
    # waiting pods still lack: the running ones are in `allocated`.
    unknown: int = 0
    unknown_gpus: int = 0
    guarantee: dict[str, float] = field(default_factory=dict)  # spec.guarantee.resource
    deserved: dict[str, float] = field(default_factory=dict)  # spec.deserved
    parent: str = ""  # spec.parent; "" is under root
    children: list[str] = field(default_factory=list)  # queues whose parent this is
    ancestors: list[QueueLimit] = field(default_factory=list)  # parent first, up to root
    # What the other queues' guarantees hold back from this one, where that applies (see `queue_family`).
    guaranteed_elsewhere: dict[str, float] = field(default_factory=dict)

    @classmethod
    def counted(cls, podgroups: Iterable[tuple[str, int]], **queue: Any) -> QueueSnapshot:
        """The queue (`name`, `state`, …) with its PodGroups, given as (phase, GPUs), counted by phase.

        Pending, Inqueue, Running and Unknown PodGroups are demand (for Unknown, GPUs are what its waiting pods
        lack); the others (Completed) are left out.
        """
        counts = {phase: [0, 0] for phase in ("Pending", "Inqueue", "Running", "Unknown")}
        for phase, gpus in podgroups:
            if phase in counts:
                counts[phase][0] += 1
                counts[phase][1] += gpus
        (pending, pending_gpus), (inqueue, inqueue_gpus), (running, running_gpus), (unknown, unknown_gpus) = (
            counts.values()
        )
        return cls(
            **queue,
            pending=pending,
            inqueue=inqueue,
            running=running,
            pending_gpus=pending_gpus,
            inqueue_gpus=inqueue_gpus,
            running_gpus=running_gpus,
            unknown=unknown,
            unknown_gpus=unknown_gpus,
        )


def lacking_gpus(gpus: int, min_member: int, placed: int) -> int:
    """GPUs an Unknown gang's waiting pods lack, at its `gpus` (minResources) ÷ `min_member` a pod.

    Volcano's session marks a PodGroup Unknown when some of its pods run and the gang is short of minMember
    (framework/session.go `getPodGroupPhase`); the `placed` ones (running or succeeded) hold their GPUs already. The
    members short of minMember wait, and at least one pod does: with minMember met, a task below its minTaskMember
    (or a pod beyond minMember) is what keeps it Unknown.
    """
    if min_member <= 0:
        return 0
    return min(gpus, math.ceil(gpus * max(min_member - placed, 1) / min_member))


def _parent_of(name: str, spec: Mapping[str, Any]) -> str:
    """A queue's parent as Volcano's queue controller sets it (updateQueueParent): `root` when none is named."""
    return str(spec.get("parent") or ("" if name == "root" else "root"))


def queue_family(
    name: str, specs: Mapping[str, Mapping[str, Any]], allocated: Mapping[str, Mapping[str, float]]
) -> dict[str, Any]:
    """The fields of `name`'s QueueSnapshot that its own spec and the queue tree give, as QueueSnapshot keywords.

    `specs` holds every queue's spec as the API server returns it (camelCase), `allocated` what each queue holds
    (an ancestor: its whole subtree, as Volcano's session writes a parent's `status.allocated`).

    - `ancestors`: Volcano's capacity plugin checks a gang against the queue and every ancestor
      (capacity.go `checkJobEnqueueableHierarchically`, `checkQueueAllocatableHierarchically`); a child without a
      capability for a resource inherits its parent's (`checkHierarchicalQueue`).
    - `guaranteed_elsewhere`: in a flat tree (every queue under root), the proportion and capacity plugins give a
      queue `realCapability` = min(capability, total allocatable − every queue's guarantee + its own)
      (proportion.go `OnSessionOpen`, capacity.go `buildQueueAttrs`): the other queues' guarantees are held back.
      In a deeper tree the capacity plugin reserves guarantees among siblings under their parent instead, with
      root unbounded; that is not modelled (empty), the ancestors' capabilities are.
    """
    spec = specs.get(name) or {}
    ancestors: list[QueueLimit] = []
    parent, seen = _parent_of(name, spec), {name}
    while parent and parent in specs and parent not in seen:
        seen.add(parent)
        up = specs[parent]
        capability = parse_resources(up.get("capability"))
        ancestors.append(QueueLimit(name=parent, capability=capability, allocated=dict(allocated.get(parent, {}))))
        parent = _parent_of(parent, up)
    children = sorted(q for q, s in specs.items() if q != name and _parent_of(q, s) == name)
    elsewhere: dict[str, float] = {}
    if all(_parent_of(q, s) in ("", "root") for q, s in specs.items()):
        for other, other_spec in specs.items():
            if other != name:
                for resource, amount in _guarantee(other_spec).items():
                    elsewhere[resource] = elsewhere.get(resource, 0.0) + amount
    return {
        "guarantee": _guarantee(spec),
        "deserved": parse_resources(spec.get("deserved")),
        "parent": str(spec.get("parent") or ""),
        "children": children,
        "ancestors": ancestors,
        "guaranteed_elsewhere": {r: amount for r, amount in elsewhere.items() if amount > 0},
    }


def _guarantee(spec: Mapping[str, Any]) -> dict[str, float]:
    return parse_resources((spec.get("guarantee") or {}).get("resource"))


@dataclass(frozen=True, kw_only=True)
class NodeInfo:
    """A node and its GPU accounting."""

    name: str
    ready: bool
    gpu_capacity: int
    gpu_allocatable: int
    gpu_allocated: int
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    unschedulable: bool = False


@dataclass(frozen=True, kw_only=True)
class Event:
    """A Kubernetes-style event about a job or one of its pods."""

    time: float
    object: str  # e.g. "Job/train-1", "Pod/train-1-master-0"
    type: str = "Normal"  # Normal or Warning
    reason: str
    message: str


@runtime_checkable
class Cluster(Protocol):
    """What vcpilot needs from Volcano. Both implementations honour these semantics.

    - `submit` is idempotent: submitting a Job whose spec equals the stored one returns it; a different
      spec under the same name raises `Conflict`. A manifest Volcano would reject raises `Invalid`.
    - Phases are Volcano's (`Pending`, `Running`, `Restarting`, `Completing`, `Completed`, `Failed`,
      `Aborting`, `Aborted`, `Terminating`, `Terminated`); pods are created only once the Job's PodGroup is
      admitted (Inqueue), and a gang starts all `minAvailable` pods at once or none.
    - `retry_count` counts RestartJob actions; a job whose retry count reaches `maxRetry` (3 when unset)
      fails on its next restart, as Volcano's restarting state does.
    - Queue counts come from PodGroups by `spec.queue` and phase, never from `queue.status`.
    - Unknown names raise `JobNotFound` / `QueueNotFound` / `NodeNotFound`.
    """

    def submit(self, job: Job | Mapping[str, Any]) -> JobInfo:
        """Create a Volcano Job (idempotent for an identical spec)."""
        ...

    def get(self, name: str, namespace: str = "default") -> JobInfo:
        """Return a job's phase, retry count and pods."""
        ...

    def get_object(self, name: str, namespace: str = "default") -> dict[str, Any]:
        """The job object as the API server returns it (manifest, metadata, status) for conditions and jsonPath."""
        ...

    def wait(
        self,
        name: str,
        phases: Collection[str] = FINISHED_PHASES,
        timeout: float = 600.0,
        namespace: str = "default",
    ) -> JobInfo:
        """Block until the job is in one of `phases`; raise `Timeout` after `timeout` seconds."""
        ...

    def delete(self, name: str, namespace: str = "default", *, missing_ok: bool = False, wait: bool = True) -> None:
        """Delete a job and kill its pods; with `wait` False, return once the deletion is accepted.

        Waiting, it returns once the job and its pods are gone, which takes their grace period (a training pod
        may take minutes to write its checkpoint on SIGTERM); without, they stop after (`kubectl delete --wait=false`).
        """
        ...

    def list_jobs(self, labels: Mapping[str, str] | None = None, namespace: str | None = None) -> list[JobInfo]:
        """Jobs whose labels include every given label (all namespaces when namespace is None)."""
        ...

    def apply_queue(self, queue: Queue | Mapping[str, Any]) -> QueueSnapshot:
        """Create or update a Queue."""
        ...

    def queue(self, name: str) -> QueueSnapshot:
        """One queue's state, capability, allocation and PodGroup demand."""
        ...

    def queues(self) -> list[QueueSnapshot]:
        """Every queue."""
        ...

    def nodes(self) -> list[NodeInfo]:
        """Every node with its readiness and GPU accounting."""
        ...

    def priority_classes(self) -> dict[str, int]:
        """Every PriorityClass by name, with its value."""
        ...

    def events(self, name: str, namespace: str = "default", limit: int = 50) -> list[Event]:
        """The most recent events of a job and its pods, oldest first."""
        ...
