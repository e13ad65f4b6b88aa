"""A Volcano cluster on a virtual clock: LocalCluster's pure scheduling core without processes or SQLite.

Gangs wait Pending, are admitted Inqueue and bound all at once by `components.volcano.scheduler.schedule` — the
same function LocalCluster's controller calls — run as deploy/volcano/scheduler/volcano-scheduler.conf configures
Volcano: no overcommit plugin (a gang is admitted when its queue's capability has room, however busy the
cluster), and the proportion plugin (a queue places pods only up to its deserved share, so a large gang in a
queue whose share is small waits while smaller jobs of other queues take the GPUs as they free). Nodes fail and
recover on the trace's schedule; pods on a failed node die.

Evictions for a gang that waits Inqueue, as Volcano's `preempt` and `reclaim` actions choose them, pod by pod on
one node at a time, and only when every pod the gang needs then fits (Volcano commits no eviction that leaves
the gang short): `preempt` takes pods of lower-priority jobs of the gang's own queue (our borrowers in the
fallback queue, `SimJob.reclaimable`, for its owner); `reclaim` takes pods of other queues named reclaimable
whose queue holds more than its deserved share, for a gang whose queue is below its own. A job that loses a pod
is ended whole: its job policy restarts it.

`Timing` says how late Volcano acts. The default, zero, runs sessions at the instant something changes, one after
another until one changes nothing: a gang is admitted by one session and bound by the next (proportion deals its
shares as a session opens, when the gang it admits asked for nothing yet), with no time between. A non-zero
timing opens a session only every `period_s` and gives the job controller a lag: a VCJob's PodGroup exists
`controller_s` after the submit, and its pods `controller_s` after the PodGroup went Inqueue — as on a real
cluster, where time compressed 720-fold turns these fractions of a second into simulated minutes.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

from components.volcano.cluster import NodeInfo, QueueSnapshot
from components.volcano.placement import affinity_allows
from components.volcano.resources import GPU
from components.volcano.scheduler import Gang, NodeState, PodRequest, QueueState, deserved, schedule

__all__ = ["AT_ONCE", "SimJob", "Simulation", "Timing"]

HOSTNAME = "kubernetes.io/hostname"


@dataclass(frozen=True)
class Timing:
    """How late Volcano acts, in seconds of the simulated clock; zero is at once (see the module's docstring)."""

    period_s: float = 0.0  # a scheduler session every period (Volcano's --schedule-period); 0: at every change
    controller_s: float = 0.0  # the job controller's lag: the PodGroup after the submit, the pods after Inqueue
    phase_s: float = 0.0  # where the ticks fall: at phase_s + k × period_s (a real scheduler's are anywhere)

    def __post_init__(self) -> None:
        if min(self.period_s, self.controller_s, self.phase_s) < 0:
            raise ValueError(f"a timing is never negative: {self}")

    def scaled(self, compression: float) -> Timing:
        """This timing, given in a cluster's real seconds, on the clock of a replay compressed `compression`-fold."""
        if compression <= 0:
            raise ValueError(f"the compression must be positive, not {compression}")
        return Timing(self.period_s * compression, self.controller_s * compression, self.phase_s * compression)


AT_ONCE = Timing()  # the benchmark's: seconds of Volcano's are nothing against jobs of hours


@dataclass(eq=False)
class SimJob:
    """A VCJob of `pods` pods × `gpus_per_pod` GPUs (minAvailable = pods: all start together or none)."""

    key: str
    queue: str
    pods: int
    gpus_per_pod: int
    priority: int = 0
    avoid_nodes: tuple[str, ...] = ()
    on_start: Callable[[SimJob], None] = lambda job: None
    on_lost: Callable[[SimJob, str], None] = lambda job, node: None  # the job's pods died with this node
    reclaimable: bool = False  # a borrower of its queue, of a lower priority: the queue's owner may evict it
    preempts: bool = True  # False: its PriorityClass says `preemptionPolicy: Never`, so it evicts no one
    on_reclaimed: Callable[[SimJob], None] = lambda job: None  # evicted for the owner (SIGTERM, then killed)
    phase: str = "Pending"  # the PodGroup's: Pending, Inqueue, Running
    order: int = 0  # creation order; a Volcano RestartJob keeps it
    nodes: tuple[str, ...] = ()  # where each pod runs, once Running
    started_s: float = 0.0
    run: int = 0  # bumped at every start, so a stale completion event can tell it is stale
    lag_until_s: float = -math.inf  # Pending: its PodGroup exists from then on; Inqueue: its pods do (`Timing`)

    @property
    def gpus(self) -> int:
        """GPUs the whole gang holds once running."""
        return self.pods * self.gpus_per_pod


class Simulation:
    """The event loop and the cluster state; strategies and tenants drive it through callbacks."""

    def __init__(
        self,
        nodes: tuple[str, ...],
        gpus_per_node: int,
        queues: tuple[QueueState, ...],
        start_s: float,
        reclaimable: tuple[str, ...] = (),
        timing: Timing = AT_ONCE,
    ):
        self.now = start_s
        self.timing = timing
        self.reclaimable = frozenset(reclaimable)  # queues with `reclaimable: true`: others' reclaim may take theirs
        self.gpus_per_node = gpus_per_node
        self.ready = dict.fromkeys(nodes, True)
        self.queues = {q.name: q for q in queues}
        self.jobs: dict[str, SimJob] = {}
        self._events: list[tuple[float, int, Callable[[], None]]] = []
        self._tick = itertools.count()
        self._order = itertools.count()
        self.sessions = 0
        self._dirty = False  # whether jobs or nodes changed since the last scheduling
        self._gangs: dict[str, tuple[tuple[str, int, tuple[str, ...], bool], Gang]] = {}
        self._last_tick = -math.inf  # the index of the last session's tick, with a period
        self._session_due = False  # whether a session is already set for a coming tick
        self.partial_gangs = 0  # gangs started with fewer pods than minAvailable: must stay 0
        self.reclaims = 0

    # -- the clock --------------------------------------------------------------------------------------

    def at(self, time_s: float, action: Callable[[], None]) -> None:
        """Run `action` at `time_s` (never in the past)."""
        heapq.heappush(self._events, (max(time_s, self.now), next(self._tick), action))

    def run(self, done: Callable[[], bool], horizon_s: float) -> None:
        """Process events in time order, scheduling after each instant, until `done()` or the horizon."""
        while self._events and not done():
            time_s = self._events[0][0]
            if time_s > horizon_s:
                break
            self.now = time_s
            while self._events and self._events[0][0] == time_s:
                heapq.heappop(self._events)[2]()
            if self._dirty:  # a session over an unchanged cluster decides nothing new (a policy's Wait, say)
                self._dirty = False
                if self.timing.period_s:
                    self._next_session()
                else:
                    self._schedule()

    def _next_session(self) -> None:
        """Set one session for the next tick of the period (not one that had its session already)."""
        if self._session_due:
            return
        period, phase = self.timing.period_s, self.timing.phase_s
        tick = max(math.ceil((self.now - phase) / period - 1e-9), self._last_tick + 1)
        self._session_due = True
        self.at(phase + tick * period, lambda: self._tick_session(tick))

    def _tick_session(self, tick: float) -> None:
        """One session at a tick; when it changed something, another at the next tick."""
        self._session_due, self._last_tick = False, tick
        if self._session() or self._reclaim():
            self._dirty = True

    def _lag(self, job: SimJob) -> None:
        """Start the job controller's next step for `job` (`Timing.controller_s`); the cluster changes when done."""
        if self.timing.controller_s:
            job.lag_until_s = self.now + self.timing.controller_s
            self.at(job.lag_until_s, self._touch)

    def _touch(self) -> None:
        self._dirty = True

    def _has_podgroup(self, job: SimJob) -> bool:
        return job.phase != "Pending" or job.lag_until_s <= self.now

    def _has_pods(self, job: SimJob) -> bool:
        """Whether the job's pods exist: from the submit without a controller lag (as LocalCluster has them),
        else once the lag after Inqueue is over."""
        return not self.timing.controller_s or (job.phase != "Pending" and job.lag_until_s <= self.now)

    # -- what Volcano does ------------------------------------------------------------------------------

    def submit(self, job: SimJob, *, keep_order: bool = False) -> None:
        """Create the job's PodGroup (Pending); a RestartJob keeps the job's place with `keep_order`."""
        self._dirty = True
        if not keep_order:
            job.order = next(self._order)
        job.phase, job.nodes = "Pending", ()
        self.jobs[job.key] = job
        self._lag(job)

    def finish(self, job: SimJob) -> None:
        """The job completed: its pods end and free their GPUs."""
        self._dirty = True
        self.jobs.pop(job.key, None)
        self._gangs.pop(job.key, None)
        job.phase, job.nodes = "Completed", ()

    def delete(self, job: SimJob) -> None:
        """The job is deleted before it started (a start deadline): its PodGroup goes, nothing ran."""
        self._dirty = True
        self.jobs.pop(job.key, None)
        self._gangs.pop(job.key, None)
        job.phase = "Deleted"

    def fail_node(self, node: str) -> None:
        """The node goes NotReady: every job with a pod there loses it and is told so."""
        self.ready[node], self._dirty = False, True
        for job in [j for j in self.jobs.values() if j.phase == "Running" and node in j.nodes]:
            self.jobs.pop(job.key)
            job.phase = "Failed"
            job.on_lost(job, node)

    def recover_node(self, node: str) -> None:
        """The node is Ready again."""
        self.ready[node], self._dirty = True, True

    def _schedule(self) -> None:
        """Scheduler sessions until one changes nothing (without a `Timing` period no time passes between them)."""
        while self._session() or self._reclaim():
            pass

    def _session(self) -> bool:
        """One session, enqueue and allocate, over the jobs whose PodGroups exist; whether it changed anything."""
        waiting = [j for j in self.jobs.values() if j.phase != "Running" and self._has_podgroup(j)]
        if not waiting:
            return False
        self.sessions += 1
        gangs = [self._gang(j) for j in waiting]
        session = schedule(self._node_states(), self._queue_states(), gangs, overcommit_factor=None, proportion=True)
        changed = False
        for key in session.enqueued:
            self.jobs[key].phase, changed = "Inqueue", True
            self._lag(self.jobs[key])
        placed: dict[str, list[tuple[int, str]]] = {}
        for pod, node in session.bindings.items():
            key, index = pod.rsplit("#", 1)
            placed.setdefault(key, []).append((int(index), node))
        for key, pods in sorted(placed.items(), key=lambda item: self.jobs[item[0]].order):
            job = self.jobs[key]
            self.partial_gangs += len(pods) < job.pods
            job.phase, job.nodes, job.started_s = "Running", tuple(n for _, n in sorted(pods)), self.now
            job.run += 1
            job.on_start(job)
            changed = True
        return changed

    def _reclaim(self) -> bool:
        """Evict for the first gang waiting Inqueue that evictions let in (preempt, then reclaim); whether any was."""
        running = [j for j in self.jobs.values() if j.phase == "Running"]
        starving = [j for j in self.jobs.values() if j.phase == "Inqueue" and self._has_pods(j)]
        if not running or not starving:
            return False
        nodes, queues = self._node_states(), self._queue_states()
        shares = deserved(nodes, queues, [self._gang(j) for j in self.jobs.values() if self._has_podgroup(j)])
        allocated = {q.name: q.allocated.get(GPU, 0.0) for q in queues}
        for job in sorted(starving, key=lambda j: (-j.priority, j.order)):
            victims = self._victims(job, running, shares, allocated)
            if victims:
                for victim in sorted(victims, key=lambda v: v.order):
                    self.jobs.pop(victim.key)
                    victim.phase = "Failed"  # its pods keep their nodes until the job is resubmitted
                    self.reclaims += 1
                    victim.on_reclaimed(victim)
                return True
        return False

    def _victims(
        self, job: SimJob, running: list[SimJob], shares: dict[str, dict[str, float]], allocated: dict[str, float]
    ) -> list[SimJob]:
        """The jobs whose pods Volcano would evict so that every pod of `job` fits, or [] when none would do."""
        if not job.preempts:  # Volcano's preempt and reclaim both skip a task whose policy is Never
            return []
        queue_share = shares.get(job.queue, {}).get(GPU, 0.0)
        cross = allocated[job.queue] < queue_share - 1e-9  # reclaim only for a queue below its deserved share
        alloc = dict(allocated)
        free = {n: self.gpus_per_node - u if self.ready[n] else 0.0 for n, u in self._used().items()}
        pods_on: dict[str, list[SimJob]] = {}  # node -> a pod of that job, once per pod, the youngest job first
        for other in sorted(running, key=lambda j: -j.order):
            for node in other.nodes:
                pods_on.setdefault(node, []).append(other)
        chosen: dict[str, SimJob] = {}
        gang = _gang(job)
        for _ in range(job.pods):
            need = float(job.gpus_per_pod)
            if cross and alloc[job.queue] + need > queue_share + 1e-9:
                return []  # proportion's Preemptive: the pod would take its queue past its share
            for node in sorted(free):
                if not self.ready[node] or not affinity_allows(gang.pods[0].affinity, node, {HOSTNAME: node}):
                    continue
                taken: list[SimJob] = []
                room = free[node]
                for other in pods_on.get(node, []):
                    if room >= need:
                        break
                    same = other.queue == job.queue and other.reclaimable and other.priority < job.priority
                    reclaim = (
                        cross
                        and other.queue != job.queue
                        and other.queue in self.reclaimable
                        and alloc[other.queue] > shares.get(other.queue, {}).get(GPU, 0.0) + 1e-9
                    )
                    if same or reclaim:
                        taken.append(other)
                        room += other.gpus_per_pod
                        alloc[other.queue] -= other.gpus_per_pod
                if room < need:
                    for other in taken:
                        alloc[other.queue] += other.gpus_per_pod
                    continue
                for other in taken:
                    pods_on[node].remove(other)
                    chosen[other.key] = other
                free[node], alloc[job.queue] = room - need, alloc[job.queue] + need
                break
            else:
                return []  # a pod fits on no node even with evictions: Volcano evicts no one for it
        return [j for j in chosen.values() if j.key != job.key]

    def _gang(self, job: SimJob) -> Gang:
        """The job's gang as the scheduler sees it, built once per phase and place in line; a gang whose pods
        do not exist yet can be admitted, not bound, and asks nothing of proportion's shares."""
        pods = self._has_pods(job)
        key = (job.phase, job.order, job.avoid_nodes, pods)
        cached = self._gangs.get(job.key)
        if cached is None or cached[0] != key:
            cached = self._gangs[job.key] = (key, _gang(job, pods=pods))
        return cached[1]

    def _used(self) -> dict[str, float]:
        used = dict.fromkeys(self.ready, 0.0)
        for job in self.jobs.values():
            if job.phase == "Running":
                for node in job.nodes:
                    used[node] += job.gpus_per_pod
        return used

    def _node_states(self) -> list[NodeState]:
        used = self._used()
        return [
            NodeState(
                name=name,
                ready=ready,
                allocatable={GPU: float(self.gpus_per_node)},
                used={GPU: used[name]},
                labels={HOSTNAME: name},
            )
            for name, ready in self.ready.items()
        ]

    def _allocated(self, queue: str) -> float:
        return float(sum(j.gpus for j in self.jobs.values() if j.queue == queue and j.phase == "Running"))

    def _queue_states(self) -> list[QueueState]:
        return [
            QueueState(q.name, weight=q.weight, capability=q.capability, allocated={GPU: self._allocated(q.name)})
            for q in self.queues.values()
        ]

    # -- what `agent.observe` would read ----------------------------------------------------------------

    def queue_snapshot(self, name: str) -> QueueSnapshot:
        """The queue as `Cluster.queue` reports it: PodGroups counted by phase, with the GPUs they ask for."""
        queue = self.queues[name]
        return QueueSnapshot.counted(
            ((job.phase, job.gpus) for job in self.jobs.values() if job.queue == name and self._has_podgroup(job)),
            name=name,
            state="Open",
            weight=queue.weight,
            capability=dict(queue.capability),
            allocated={GPU: self._allocated(name)},
        )

    def node_infos(self) -> list[NodeInfo]:
        """Every node as `Cluster.nodes` reports it (a NotReady node has nothing allocatable)."""
        used = self._used()
        return [
            NodeInfo(
                name=name,
                ready=ready,
                gpu_capacity=self.gpus_per_node,
                gpu_allocatable=self.gpus_per_node if ready else 0,
                gpu_allocated=int(used[name]),
                labels={HOSTNAME: name},
            )
            for name, ready in self.ready.items()
        ]


def _gang(job: SimJob, *, pods: bool = True) -> Gang:
    affinity = None
    if job.avoid_nodes:
        expression = {"key": HOSTNAME, "operator": "NotIn", "values": list(job.avoid_nodes)}
        affinity = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [expression]}]
                }
            }
        }
    resources = {GPU: float(job.gpus_per_pod)}
    return Gang(
        key=job.key,
        queue=job.queue,
        phase=job.phase,
        min_member=job.pods,
        min_resources={GPU: float(job.gpus)},
        pods=tuple(PodRequest(f"{job.key}#{i}", resources, affinity=affinity) for i in range(job.pods)) if pods else (),
        priority=job.priority,
        order=job.order,
    )
