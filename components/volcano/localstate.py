"""LocalCluster's stored rows and what follows from a Job's spec: its pods, their requests and environment."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, overload

from components.volcano.cluster import StateDamaged
from components.volcano.localpods import expand, resolve_command
from components.volcano.resources import Resources, parse_resources

if TYPE_CHECKING:  # parsed where a stored job is read: a pass over an idle cluster imports no pydantic
    from components.volcano.models import Job, JobSpec
    from components.volcano.scheduler import PodRequest

__all__ = ["ADDED_COLUMNS", "SCHEMA", "JobRow", "StoredTask", "job_tag", "pod_requests", "pod_resources", "upgrade"]

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)",
    "CREATE TABLE IF NOT EXISTS nodes (name TEXT PRIMARY KEY, allocatable TEXT, labels TEXT, taints TEXT,"
    " ready INTEGER)",
    "CREATE TABLE IF NOT EXISTS queues (name TEXT PRIMARY KEY, spec TEXT, state TEXT)",
    "CREATE TABLE IF NOT EXISTS priority_classes (name TEXT PRIMARY KEY, value INTEGER)",
    "CREATE TABLE IF NOT EXISTS jobs (namespace TEXT, name TEXT, uid TEXT, seq INTEGER, manifest TEXT, original TEXT,"
    " phase TEXT, pg_phase TEXT, retry_count INTEGER, generation INTEGER, master_port INTEGER, reason TEXT,"
    " message TEXT, pending_reason TEXT, cwd TEXT, created REAL, finished_at REAL,"
    " PRIMARY KEY (namespace, name))",
    "CREATE TABLE IF NOT EXISTS pods (namespace TEXT, job TEXT, name TEXT, task TEXT, idx INTEGER,"
    " generation INTEGER, node TEXT, phase TEXT, reason TEXT, exit_code INTEGER, pid INTEGER, token TEXT,"
    " resources TEXT, started REAL, finished REAL, exit_file TEXT, PRIMARY KEY (namespace, name))",
    "CREATE INDEX IF NOT EXISTS pods_by_job ON pods (namespace, job)",
    "CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL, namespace TEXT,"
    " job TEXT, object TEXT, type TEXT, reason TEXT, message TEXT)",
    "CREATE INDEX IF NOT EXISTS events_by_job ON events (namespace, job)",
    # A policy action waiting for its timeout (localdelays.py).
    "CREATE TABLE IF NOT EXISTS delayed_actions (namespace TEXT, job TEXT, pod TEXT, task TEXT, event TEXT,"
    " action TEXT, due REAL, PRIMARY KEY (namespace, job, pod, action))",
)

# Columns a table got after it was first made: `upgrade` adds each one a cluster.db lacks (SQLite has no
# ADD COLUMN IF NOT EXISTS), to an older database and a new one alike.
ADDED_COLUMNS = (
    # The container's restartCount, and the kubelet's CrashLoopBackOff for it in seconds (NULL until its first
    # restart): restartPolicy OnFailure and Always restart a pod's container in place (localcontroller.py).
    ("pods", "restarts", "INTEGER NOT NULL DEFAULT 0"),
    ("pods", "backoff", "REAL"),
)


def upgrade(db: sqlite3.Connection) -> None:
    """Make the tables of SCHEMA and add the ADDED_COLUMNS a database lacks; runs inside the caller's transaction."""
    for statement in SCHEMA:
        db.execute(statement)
    for table, column, declaration in ADDED_COLUMNS:
        if column not in {row[1] for row in db.execute(f"PRAGMA table_info({table})")}:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")


@lru_cache(maxsize=4096)
def _parse(manifest: str) -> Job:
    """Manifests are stored validated; parsing each once per process keeps reconciles cheap.

    One that no longer parses (stored by a version that checked less) is damaged state, not the caller's input.
    """
    from components.volcano.models import parse_job

    try:
        return parse_job(json.loads(manifest))
    except ValueError as err:
        raise StateDamaged(
            f"a job stored in the LocalCluster's state is no longer valid ({err}); "
            "`vcpilot cluster reset` starts the cluster over"
        ) from None


def pod_resources(containers: Sequence[Mapping[str, Any]]) -> Resources:
    """A pod's requests: the sum over containers, a limit standing in for its missing request (Kubernetes' default).

    `containers` as a stored Job holds them (API field names), which the Job model checked when it was submitted.
    """
    out: Resources = {}
    for container in containers:
        res = container.get("resources") or {}
        for name, amount in parse_resources({**(res.get("limits") or {}), **(res.get("requests") or {})}).items():
            out[name] = out.get(name, 0.0) + amount
    return out


def job_tag(uid: str) -> str:
    """The part of a pod run's log file name that says which job wrote it: 8 hex digits of the job's uid."""
    return uid.replace("-", "")[:8]


class StoredTask(NamedTuple):
    """A task of a stored Job as every reconcile reads it: its size, and its pods' requests and placement."""

    name: str
    replicas: int
    min_available: int | None
    resources: Resources
    node_selector: dict[str, str]
    affinity: dict[str, Any] | None
    tolerations: tuple[dict[str, Any], ...]
    priority_class_name: str = ""  # the pod template's own
    restart_policy: str = ""  # the pod template's; "" is unset, which the API server defaults to Always
    max_retry: int | None = None  # the task's `maxRetry` (Volcano's webhook sets 3 where it is 0 or unset)

    @classmethod
    def from_stored(cls, task: Mapping[str, Any]) -> StoredTask:
        """Read from a task of the stored JSON (`spec.tasks[i]`, API field names)."""
        pod = (task.get("template") or {}).get("spec") or {}
        return cls(
            name=task["name"],
            replicas=int(task.get("replicas") or 0),
            min_available=task.get("minAvailable"),
            resources=pod_resources(pod.get("containers") or []),
            node_selector=dict(pod.get("nodeSelector") or {}),
            affinity=pod.get("affinity"),
            tolerations=tuple(pod.get("tolerations") or ()),
            priority_class_name=str(pod.get("priorityClassName") or ""),
            restart_policy=str(pod.get("restartPolicy") or ""),
            max_retry=None if task.get("maxRetry") is None else int(task["maxRetry"]),
        )

    @property
    def min_member(self) -> int:
        """The task's minimum in the PodGroup's spec.minTaskMember: its minAvailable, else its replicas."""
        return self.replicas if self.min_available is None else self.min_available


@dataclass(frozen=True)
class JobRow:
    """One stored job: its validated manifest and the controller's bookkeeping.

    `job` parses the manifest (once per process), for what starts a pod or answers a pod's event (its command
    and environment, the lifecycle policies). What every read of the cluster reconciles and shows (queue,
    minAvailable, minSuccess, priorityClassName, labels, ttlSecondsAfterFinished, the tasks' sizes and their pods'
    requests and placement) is read from the stored JSON itself, which was validated and defaulted when the job
    was submitted: listing, syncing and scheduling live jobs builds no Job model (`vcpilot cluster status`).
    """

    namespace: str
    name: str
    uid: str
    seq: int
    manifest: str  # the Job as stored: JSON, by its API field names
    phase: str
    pg_phase: str
    retry_count: int
    generation: int
    master_port: int | None
    reason: str | None
    message: str | None
    pending_reason: str | None
    cwd: str

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> JobRow:
        """Build from a `jobs` table row."""
        return cls(
            namespace=row["namespace"],
            name=row["name"],
            uid=row["uid"],
            seq=row["seq"],
            manifest=row["manifest"],
            phase=row["phase"],
            pg_phase=row["pg_phase"],
            retry_count=row["retry_count"],
            generation=row["generation"],
            master_port=row["master_port"],
            reason=row["reason"],
            message=row["message"],
            pending_reason=row["pending_reason"],
            cwd=row["cwd"],
        )

    @functools.cached_property
    def job(self) -> Job:
        """The stored Job, parsed."""
        return _parse(self.manifest)

    @property
    def spec(self) -> JobSpec:
        """The Job's spec."""
        return self.job.spec

    @functools.cached_property
    def _stored(self) -> dict[str, Any]:
        stored: dict[str, Any] = json.loads(self.manifest)
        return stored

    @property
    def queue(self) -> str:
        """The Job's queue (`spec.queue`; Volcano's default filled in at submission)."""
        return str(self._stored["spec"].get("queue") or "default")

    @property
    def min_available(self) -> int:
        """`spec.minAvailable`, 0 when unset."""
        return int(self._stored["spec"].get("minAvailable") or 0)

    @property
    def min_success(self) -> int | None:
        """`spec.minSuccess`, None when unset."""
        value = self._stored["spec"].get("minSuccess")
        return None if value is None else int(value)

    @property
    def priority_class_name(self) -> str:
        """`spec.priorityClassName`, "" when unset."""
        return str(self._stored["spec"].get("priorityClassName") or "")

    @functools.cached_property
    def tasks(self) -> tuple[StoredTask, ...]:
        """`spec.tasks`, as the reconcile reads them."""
        return tuple(StoredTask.from_stored(task) for task in self._stored["spec"].get("tasks") or [])

    @property
    def ttl_seconds_after_finished(self) -> int | None:
        """`spec.ttlSecondsAfterFinished`: how long the finished job is kept; None for ever."""
        ttl = self._stored["spec"].get("ttlSecondsAfterFinished")
        return None if ttl is None else int(ttl)

    @property
    def key(self) -> str:
        """`namespace/name`, the PodGroup's key in a scheduler session."""
        return f"{self.namespace}/{self.name}"

    @property
    def labels(self) -> dict[str, str]:
        """The Job's labels."""
        return dict((self._stored.get("metadata") or {}).get("labels") or {})

    def with_master_port(self, port: int) -> JobRow:
        """A copy with the port the pytorch plugin hands every pod of this run."""
        return dataclasses.replace(self, master_port=port)

    def pod_names(self) -> list[tuple[str, str, int]]:
        """(pod name, task, index) for every replica, Volcano-style `<job>-<task>-<index>`."""
        return [(f"{self.name}-{task.name}-{i}", task.name, i) for task in self.tasks for i in range(task.replicas)]

    def min_task_member(self) -> dict[str, int]:
        """The PodGroup's spec.minTaskMember: each task's minimum (job_controller_actions.go `getMinTaskMember`)."""
        return {task.name: task.min_member for task in self.tasks}

    def min_resources(self, priorities: Mapping[str, int] | None = None) -> Resources:
        """The PodGroup's minResources, as Volcano's job controller sums them (calcPGMinResources).

        Tasks go by their template's PriorityClass value, highest first (`priorities` by name; an unknown class
        counts 0), the spec's order among equals. Where `minAvailable` is below the sum of the tasks' minima, it is
        the requests of the first `minAvailable` pods of those tasks, replicas by replicas
        (`CalcFirstCountResources`); otherwise each task's minimum, then the tasks' other replicas up to
        `minAvailable` (`CalcPGMinResources`).
        """
        values = priorities or {}
        tasks = sorted(self.tasks, key=lambda task: -values.get(task.priority_class_name, 0))
        counts: list[int] = []
        remaining = self.min_available
        if self.min_available < sum(task.min_member for task in tasks):
            for task in tasks:
                counts.append(min(task.replicas, max(remaining, 0)))
                remaining -= counts[-1]
        else:
            for task in tasks:
                counts.append(min(task.min_member, max(remaining, 0)))
                remaining -= counts[-1]
            for i, task in enumerate(tasks):
                extra = min(task.replicas - task.min_member, max(remaining, 0))
                counts[i] += max(extra, 0)
                remaining -= max(extra, 0)
        out: Resources = {}
        for task, count in zip(tasks, counts, strict=True):
            for name, amount in task.resources.items():
                out[name] = out.get(name, 0.0) + amount * count
        return out

    def pod_ip(self, pod_name: str) -> str:
        """The pod's own address: one of 127.0.0.0/8 outside 127.0.0.x, drawn from its job's uid and its name.

        Every address of 127.0.0.0/8 is the loopback interface's, so a pod that binds its address (the load-test
        server binds `status.podIP`) does not collide with another job's pod on the same port, as on a cluster
        where each pod has a network namespace of its own.
        """
        import hashlib  # here, not at the top: OpenSSL's start-up is 11 M instructions a reading command never needs

        digest = hashlib.sha256(f"{self.uid}/{pod_name}".encode()).digest()
        return f"127.{1 + digest[0] % 255}.{digest[1]}.{1 + digest[2] % 254}"

    def pod_process(
        self, task_name: str, index: int, node: str, home: Path
    ) -> tuple[list[str], dict[str, str], str | None]:
        """The argv, environment and working directory of one pod, with the env/svc/pytorch plugins' variables."""
        task = next(t for t in self.spec.tasks if t.name == task_name)
        container = task.template.spec.containers[0]
        pod_name = f"{self.name}-{task_name}-{index}"
        known = {
            "metadata.name": pod_name,
            "metadata.namespace": self.namespace,
            "spec.nodeName": node,
            "status.podIP": self.pod_ip(pod_name),
        }
        # The container's own variables, as the kubelet sets them: each value may refer to those before it as
        # $(NAME), and the command and args to all of them (the plugins' included), never to the node's.
        own: dict[str, str] = {}
        for var in container.env or []:
            if var.value is not None:
                own[var.name] = expand(var.value, own)
            elif var.value_from and "fieldRef" in var.value_from:
                field = var.value_from["fieldRef"].get("fieldPath")
                if field in known:
                    own[var.name] = known[field]
        plugins = self.spec.plugins or {}
        own.update({"VC_TASK_INDEX": str(index), "VK_TASK_INDEX": str(index)})
        if "svc" in plugins or "env" in plugins:
            for t in self.spec.tasks:
                hosts = [self.pod_ip(f"{self.name}-{t.name}-{i}") for i in range(t.replicas)]
                own[f"VC_{t.name.upper().replace('-', '_')}_NUM"] = str(t.replicas)
                own[f"VC_{t.name.upper().replace('-', '_')}_HOSTS"] = ",".join(hosts)
        if "pytorch" in plugins:
            args = dict(a.lstrip("-").split("=", 1) for a in plugins["pytorch"] if "=" in a)
            master, worker = args.get("master", "master"), args.get("worker", "worker")
            masters = sum(t.replicas for t in self.spec.tasks if t.name == master)
            world = sum(t.replicas for t in self.spec.tasks if t.name in (master, worker))
            # Volcano's plugin sets nothing in a job without the master task (OnPodCreate returns at once).
            if masters and task_name in (master, worker):
                own.update(
                    {
                        "MASTER_ADDR": "127.0.0.1",
                        "MASTER_PORT": str(self.master_port),
                        "WORLD_SIZE": str(world),
                        "RANK": str(index if task_name == master else masters + index),
                    }
                )
        env = dict(os.environ)
        # Local pods share a few cores: one math thread each unless told otherwise (torch would take them all).
        env.setdefault("OMP_NUM_THREADS", "1")
        env.update(own)
        env.update(
            {
                "VCPILOT_HOME": str(home),
                "VCPILOT_POD_NAME": pod_name,
                "VCPILOT_NODE_NAME": node,
                "VCPILOT_JOB_NAME": self.name,
                "VCPILOT_RETRY_COUNT": str(self.retry_count),
            }
        )
        argv = [expand(arg, own) for arg in resolve_command(container.command or [], container.args or [])]
        workdir = container.working_dir if container.working_dir and Path(container.working_dir).is_dir() else None
        return argv, env, workdir


class _PodRequests(Sequence["PodRequest"]):
    """Every pod of a job's run, each built when the scheduler reaches it.

    A gang waiting for admission has no pods in Volcano yet (the controller creates them once its PodGroup is
    Inqueue) and enqueue reads only its minResources: so a Pending gang of a million replicas that its queue
    cannot admit costs nothing here either, where a list of them took seconds and gigabytes every reconcile.
    """

    def __init__(self, job: JobRow, priorities: Mapping[str, int]) -> None:
        self._job = job
        self._tasks = [(task, task.replicas) for task in job.tasks]
        # A pod's priority: its template's PriorityClass, else the job's (createJobPod), by value; unknown is 0.
        job_class = job.priority_class_name
        self._priority = {task.name: priorities.get(task.priority_class_name or job_class, 0) for task in job.tasks}

    def __len__(self) -> int:
        return sum(replicas for _, replicas in self._tasks)

    @overload
    def __getitem__(self, index: int) -> PodRequest: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[PodRequest]: ...
    def __getitem__(self, index: int | slice) -> PodRequest | Sequence[PodRequest]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        for task, replicas in self._tasks:
            if 0 <= index < replicas:
                return self._request(task, index)
            index -= replicas
        raise IndexError(index)

    def __iter__(self) -> Iterator[PodRequest]:
        for task, replicas in self._tasks:
            for index in range(replicas):
                yield self._request(task, index)

    def _request(self, task: StoredTask, index: int) -> PodRequest:
        from components.volcano.scheduler import PodRequest

        return PodRequest(
            name=f"{self._job.namespace}/{self._job.name}-{task.name}-{index}",
            resources=task.resources,
            node_selector=task.node_selector,
            affinity=task.affinity,
            tolerations=task.tolerations,
            task=task.name,
            index=index,
            priority=self._priority[task.name],
        )


def pod_requests(job: JobRow, priorities: Mapping[str, int] | None = None) -> Sequence[PodRequest]:
    """Every pod the job's run will have, as the scheduler sees it (named `namespace/pod`), built as it is read.

    `priorities`: PriorityClass values by name, for the pods' priority.
    """
    return _PodRequests(job, priorities or {})
