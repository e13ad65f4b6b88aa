"""An embedded Volcano: gang scheduling, queues and restart policies for local processes on virtual GPU nodes.

State lives in SQLite under `VCPILOT_HOME` so that several processes (the workflow runner, an agent step,
the CLI, an MCP server) see one cluster and a crash loses nothing. There is no daemon: every call, and
every pod that ends, runs one reconcile under the database's write lock — observe pods, apply the job
controller's policies, run one scheduler session, start what was bound.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
import shlex
import sqlite3
import sys
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from components.errors import InputError, VcpilotError
from components.volcano import localpods
from components.volcano.cluster import (
    FINISHED_PHASES,
    ClusterUnavailable,
    Conflict,
    Event,
    Invalid,
    JobInfo,
    JobNotFound,
    NodeInfo,
    PodInfo,
    QueueNotFound,
    QueueSnapshot,
    StateDamaged,
    Timeout,
    lacking_gpus,
    queue_family,
)
from components.volcano.localcontroller import CRASH_LOOP, Controller, Transition
from components.volcano.localstate import JobRow, upgrade
from components.volcano.objects import BATCH_JOB, batch_job_status, batch_to_volcano, generate_name, volcano_job_status
from components.volcano.resources import GPU, parse_resources

# Kubernetes' scalability thresholds: at most 150,000 pods in a cluster (kubernetes.io, "Considerations for large
# clusters"). LocalCluster creates an admitted gang's pods at once, a row each: 10^9 replicas would never return.
MAX_JOB_PODS = 150_000

if TYPE_CHECKING:  # imported where they are used: reading an idle cluster (`vcpilot cluster status`) needs no pydantic
    from components.volcano.localconfig import LocalClusterConfig
    from components.volcano.locallogs import PodLog
    from components.volcano.models import Job
    from components.volcano.scheduling_models import Queue

__all__ = ["JobEvent", "LocalCluster", "default_home"]


@dataclass(frozen=True, kw_only=True)
class JobEvent(Event):
    """An event with the job it is filed under: what `vcpilot cluster events` lists across jobs."""

    namespace: str
    job: str


def default_home() -> Path:
    """`VCPILOT_HOME`, or `./.vcpilot` (components.files.state_home: refused when it is a file)."""
    from components.files import state_home

    return state_home()


def _chosen_config(home: Path, config: LocalClusterConfig | str | Path | None) -> LocalClusterConfig:
    """The config given, else the home's `cluster.yaml`, else the default; a bad one is an InputError."""
    from components.volcano.localconfig import LocalClusterConfig, load_config

    if isinstance(config, LocalClusterConfig):
        return config
    if config is None and (home / "cluster.yaml").exists():
        config = home / "cluster.yaml"
    return load_config(config)


class LocalCluster:
    """The `Cluster` protocol over virtual nodes whose pods are local processes (see the module docstring)."""

    def __init__(
        self,
        home: str | Path | None = None,
        config: LocalClusterConfig | str | Path | None = None,
        *,
        clock: Callable[[], float] = time.time,
        hook: bool = True,
    ) -> None:
        self.home = Path(home).resolve() if home else default_home()
        self._clock = clock
        self._hook = hook
        # A config given, or the one a new home is built from, is checked before anything is written: a refused
        # one leaves the home as it was. An existing cluster keeps what it has.
        fresh = not (self.home / "cluster.db").exists()
        chosen = self._config(config) if config is not None or fresh else None
        self._open()
        with self._tx() as db:
            nodes = db.execute("SELECT COUNT(*) FROM nodes").fetchone()[0]
            queues = db.execute("SELECT COUNT(*) FROM queues").fetchone()[0]
        if nodes == 0 and queues == 0:
            chosen = chosen or self._config(config)
            with self._tx():
                self._install(chosen)
        elif nodes == 0:
            self._db.close()
            raise StateDamaged(f"{self._damaged()}: it has no nodes")

    def _open(self) -> None:
        """Connect to `cluster.db` and make its tables; StateDamaged when the file is not a database of ours."""
        try:
            self.home.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise InputError(
                f"cannot use {self.home} as the LocalCluster's home: {err.strerror or err}; "
                "set VCPILOT_HOME to a directory you can write"
            ) from None
        try:
            self._db = sqlite3.connect(self.home / "cluster.db", timeout=60, isolation_level=None)
        except sqlite3.Error as err:
            raise self._unusable(err) from None
        self._db.row_factory = sqlite3.Row
        # Every pod runs this when it ends, so the cluster moves on even when no process is watching.
        reconcile_hook = (
            f"{shlex.quote(sys.executable)} -m components.volcano.cluster_local reconcile "
            f"--home {shlex.quote(str(self.home))}"
        )
        self._ctl = Controller(self._db, self.home, self._clock, reconcile_hook if self._hook else None)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            with self._tx():
                upgrade(self._db)
        except StateDamaged:
            self._db.close()
            raise
        except sqlite3.DatabaseError as err:
            self._db.close()
            raise self._unusable(err) from None

    def _unusable(self, err: sqlite3.Error) -> VcpilotError:
        """Why `cluster.db` cannot be opened: a home we may not write (InputError), else damaged state.

        A read-only or foreign home is not damage: `cluster reset`, which StateDamaged advises, would not help,
        and on a home that comes back writable it would delete every job.
        """
        state = self.home / "cluster.db"
        if state.exists() and not state.is_file():  # a directory (or a pipe) where the database goes: damage
            return StateDamaged(f"{self._damaged()}: it is not a file")
        if isinstance(err, sqlite3.OperationalError) and any(s in str(err) for s in ("unable to open", "readonly")):
            return InputError(
                f"cannot open the LocalCluster's state {self.home / 'cluster.db'} ({err}); check that {self.home} "
                "is a writable directory on a local disk, or point VCPILOT_HOME elsewhere"
            )
        return StateDamaged(f"{self._damaged()}: {err}")

    def _damaged(self) -> str:
        return (
            f"the LocalCluster's state {self.home / 'cluster.db'} is damaged and cannot be used; "
            "`vcpilot cluster reset` starts the cluster over"
        )

    # -- transactions and setup -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: every change a call makes lands together or not at all.

        A database error is the state's fault, not the caller's: StateDamaged says how to start over, and a
        lock held past the connection's timeout is ClusterUnavailable.
        """
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as err:
            if "locked" in str(err) or "busy" in str(err):
                raise ClusterUnavailable(f"the LocalCluster's state in {self.home} stays locked: {err}") from None
            raise StateDamaged(f"{self._damaged()}: {err}") from None
        except sqlite3.DatabaseError as err:
            raise StateDamaged(f"{self._damaged()}: {err}") from None
        try:
            yield self._db
        except sqlite3.DatabaseError as err:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
            raise StateDamaged(f"{self._damaged()}: {err}") from None
        except BaseException:
            self._db.execute("ROLLBACK")
            self._ctl.rolled_back()
            raise
        self._db.execute("COMMIT")
        self._ctl.committed()

    def _config(self, config: LocalClusterConfig | str | Path | None) -> LocalClusterConfig:
        return _chosen_config(self.home, config)

    def _install(self, config: LocalClusterConfig) -> None:
        db = self._db
        for entry in config.nodes:
            for node in entry.expand():
                db.execute(
                    "INSERT INTO nodes(name, allocatable, labels, taints, ready) VALUES (?,?,?,?,1)",
                    (
                        node["name"],
                        json.dumps(node["allocatable"]),
                        json.dumps(node["labels"]),
                        json.dumps(node["taints"]),
                    ),
                )
        queues: dict[str, dict[str, Any]] = {"default": {"weight": 1, "reclaimable": True}}
        for q in config.queues:
            queues[q.name] = {"weight": q.weight, "capability": q.capability, "reclaimable": q.reclaimable}
        for name, spec in queues.items():
            db.execute("INSERT INTO queues(name, spec, state) VALUES (?,?, 'Open')", (name, json.dumps(spec)))
        for name, value in config.priority_classes.items():
            db.execute("INSERT INTO priority_classes(name, value) VALUES (?,?)", (name, value))
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('overcommit', ?)", (config.overcommit_factor,))

    def reset(self, config: LocalClusterConfig | str | Path | None = None) -> None:
        """Kill every pod and start over with an empty cluster built from `config` (checked before anything goes)."""
        chosen = self._config(config)
        with self._tx() as db:
            for pod in db.execute("SELECT pid, token FROM pods WHERE phase = 'Running'").fetchall():
                localpods.kill(pod["pid"], pod["token"])
            for table in ("pods", "jobs", "events", "nodes", "queues", "priority_classes", "meta", "delayed_actions"):
                db.execute(f"DELETE FROM {table}")
            self._install(chosen)

    @classmethod
    def start_over(cls, home: str | Path | None = None, config: LocalClusterConfig | str | Path | None = None) -> Path:
        """`reset` that also works when the state is damaged: a database past reading is moved aside, not lost.

        Returns where the damaged database went, or the home's `cluster.db` when it could be reset in place.
        """
        base = Path(home).resolve() if home else default_home()
        chosen = _chosen_config(base, config)
        cluster = cls.__new__(cls)
        cluster.home, cluster._clock, cluster._hook = base, time.time, True
        try:
            cluster._open()
            try:
                cluster.reset(chosen)
                return base / "cluster.db"
            finally:
                cluster.close()
        except StateDamaged:
            pass
        aside = base / f"cluster.db.damaged-{time.strftime('%Y%m%d-%H%M%S')}"
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.replace(base / f"cluster.db{suffix}", aside.with_name(aside.name + suffix))
        cls(base, chosen).close()
        return aside

    def close(self) -> None:
        """Close the database connection (pods keep running)."""
        self._db.close()

    # -- the Cluster protocol -------------------------------------------------------------------------

    def submit(self, job: Job | Mapping[str, Any]) -> JobInfo:
        """Create a Volcano Job (or a batch/v1 Job); identical resubmission returns it, a different spec Conflicts.

        `metadata.generateName` gets a generated name, as the API server does.
        """
        from components.volcano.models import Job, apply_volcano_defaults, parse_job, validate_job

        original: dict[str, Any] | None = None
        try:
            raw = job.to_dict() if isinstance(job, Job) else copy.deepcopy(dict(job))
            meta_raw = raw["metadata"] = raw.get("metadata") or {}
            if not isinstance(meta_raw, dict):
                raise ValueError(f"metadata must be a mapping (name, namespace, labels), not {type(meta_raw).__name__}")
            if not meta_raw.get("name") and meta_raw.get("generateName"):
                meta_raw["name"] = generate_name(meta_raw.pop("generateName"))
            if (raw.get("apiVersion"), raw.get("kind")) == BATCH_JOB:
                original, raw = raw, batch_to_volcano(raw)
            # LocalCluster behaves as Volcano with its admission webhooks: defaults filled in, then validated.
            parsed = apply_volcano_defaults(parse_job(raw))
            validate_job(parsed, batch=original is not None)
        except ValueError as err:
            raise Invalid(str(err)) from None
        manifest = parsed.to_dict()
        manifest.pop("status", None)
        meta, spec = parsed.metadata, parsed.spec
        namespace = meta.namespace or "default"
        if not meta.name:
            raise Invalid("metadata.name (or metadata.generateName) is required.")
        if spec.scheduler_name != "volcano":
            raise Invalid(f"job {meta.name}: spec.schedulerName must be 'volcano', not {spec.scheduler_name!r}.")
        pods = sum(task.replicas for task in spec.tasks)
        if pods > MAX_JOB_PODS:
            raise Invalid(
                f"job {meta.name}: its tasks ask for {pods:,} pods; LocalCluster holds at most {MAX_JOB_PODS:,} "
                "for one job (Kubernetes' tested limit for a whole cluster), and would create each of them."
            )
        for task in spec.tasks:
            for container in task.template.spec.containers if task.template and task.template.spec else []:
                if not container.command:
                    raise Invalid(
                        f"job {meta.name}: container {container.name!r} of task {task.name!r} has no command; "
                        "LocalCluster runs the container's command, it cannot read an image's entrypoint."
                    )
        with self._tx() as db:
            queue = spec.queue or "default"
            row = db.execute("SELECT state FROM queues WHERE name = ?", (queue,)).fetchone()
            if queue == "root":
                raise Invalid(f"job {meta.name}: queue 'root' is the top of Volcano's queue tree and takes no jobs.")
            if row is None:
                raise Invalid(f"job {meta.name}: queue {queue!r} does not exist.")
            if row["state"] != "Open":
                raise Invalid(f"job {meta.name}: queue {queue!r} is {row['state']}, it accepts no new jobs.")
            rows = db.execute("SELECT name, spec FROM queues").fetchall()
            children = [r["name"] for r in rows if json.loads(r["spec"] or "{}").get("parent") == queue]
            if children:
                raise Invalid(
                    f"job {meta.name}: queue {queue!r} is the parent of {', '.join(sorted(children))}; "
                    "submit to a queue without child queues (a leaf)."
                )
            if (
                spec.priority_class_name
                and not db.execute(
                    "SELECT 1 FROM priority_classes WHERE name = ?", (spec.priority_class_name,)
                ).fetchone()
            ):
                raise Invalid(f"job {meta.name}: priority class {spec.priority_class_name!r} does not exist.")
            existing = db.execute(
                "SELECT manifest FROM jobs WHERE namespace = ? AND name = ?", (namespace, meta.name)
            ).fetchone()
            if existing is not None:
                if json.loads(existing["manifest"]).get("spec") != manifest.get("spec"):
                    raise Conflict(f"job {namespace}/{meta.name} already exists with a different spec.")
            else:
                seq = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM jobs").fetchone()[0]
                db.execute(
                    "INSERT INTO jobs(namespace, name, uid, seq, manifest, original, phase, pg_phase, retry_count, "
                    "generation, cwd, created) VALUES (?,?,?,?,?,?, 'Pending', 'Pending', 0, 0, ?, ?)",
                    (
                        namespace,
                        meta.name,
                        str(uuid.uuid4()),
                        seq,
                        json.dumps(manifest),
                        json.dumps(original) if original else None,
                        os.getcwd(),
                        self._clock(),
                    ),
                )
                self._ctl.event(namespace, meta.name, f"Job/{meta.name}", "Created", "job submitted")
            self._ctl.reconcile()
            return self._info(self._ctl.job(namespace, meta.name))

    def get(self, name: str, namespace: str = "default") -> JobInfo:
        """A job's phase, retry count and current pods."""
        with self._tx():
            self._ctl.reconcile()
            return self._info(self._ctl.job(namespace, name))

    def get_object(self, name: str, namespace: str = "default") -> dict[str, Any]:
        """The job as the API server would return it: the submitted manifest, metadata and a live status."""
        with self._tx() as db:
            self._ctl.reconcile()
            info = self._info(self._ctl.job(namespace, name))
            row = db.execute("SELECT * FROM jobs WHERE namespace = ? AND name = ?", (namespace, name)).fetchone()
        obj = json.loads(row["original"] or row["manifest"])
        obj["metadata"] = {
            **(obj.get("metadata") or {}),
            "name": name,
            "namespace": namespace,
            "uid": info.uid,
            "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(row["created"])),
        }
        obj["status"] = batch_job_status(info) if row["original"] else volcano_job_status(info)
        return obj

    def wait(
        self,
        name: str,
        phases: Collection[str] = FINISHED_PHASES,
        timeout: float = 600.0,
        namespace: str = "default",
    ) -> JobInfo:
        """Reconcile until the job reaches one of `phases`; Timeout after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        delay = 0.02
        while True:
            info = self.get(name, namespace)
            if info.phase in phases:
                return info
            if time.monotonic() >= deadline:
                raise Timeout(
                    f"job {namespace}/{name} is still {info.phase} after {timeout:g}s "
                    f"(waited for {', '.join(sorted(phases))})."
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 0.25)

    def delete(self, name: str, namespace: str = "default", *, missing_ok: bool = False, wait: bool = True) -> None:
        """Delete a job and kill its pods (at once: `wait` changes nothing here)."""
        with self._tx() as db:
            row = db.execute("SELECT 1 FROM jobs WHERE namespace = ? AND name = ?", (namespace, name)).fetchone()
            if row is None:
                if missing_ok:
                    return
                raise JobNotFound(f"job {namespace}/{name} does not exist.")
            self._ctl.kill_pods(namespace, name)
            db.execute("DELETE FROM pods WHERE namespace = ? AND job = ?", (namespace, name))
            db.execute("DELETE FROM jobs WHERE namespace = ? AND name = ?", (namespace, name))
            self._ctl.delayed.forget_job(namespace, name)
            self._ctl.event(namespace, name, f"Job/{name}", "Deleted", "job deleted")
            self._ctl.reconcile()

    def list_jobs(self, labels: Mapping[str, str] | None = None, namespace: str | None = None) -> list[JobInfo]:
        """Jobs carrying every given label, oldest first."""
        with self._tx():
            self._ctl.reconcile()
            infos = self._jobs()
        wanted = dict(labels or {})
        return [
            i for i in infos if (namespace is None or i.namespace == namespace) and wanted.items() <= i.labels.items()
        ]

    def apply_queue(self, queue: Queue | Mapping[str, Any]) -> QueueSnapshot:
        """Create or update a queue (weight, capability, reclaimable, state)."""
        from components.volcano.queue_admission import validate_queue, validate_queue_tree
        from components.volcano.scheduling_models import Queue, parse_queue

        try:
            parsed = queue if isinstance(queue, Queue) else parse_queue(dict(queue))
            validate_queue(parsed)
        except ValueError as err:
            raise Invalid(f"queue: {err}.") from None
        name = str(parsed.metadata.name)
        spec = parsed.spec.model_dump(by_alias=True, exclude_none=True, mode="json")
        state = (parsed.status.state if parsed.status and parsed.status.state else None) or "Open"
        with self._tx() as db:
            others = {
                row["name"]: parse_queue({"metadata": {"name": row["name"]}, "spec": json.loads(row["spec"] or "{}")})
                for row in db.execute("SELECT name, spec FROM queues WHERE name != ?", (name,))
            }
            try:
                validate_queue_tree(parsed, others)
            except ValueError as err:
                raise Invalid(f"queue {name}: {err}.") from None
            db.execute(
                "INSERT INTO queues(name, spec, state) VALUES (?,?,?) "
                "ON CONFLICT(name) DO UPDATE SET spec = excluded.spec, state = excluded.state",
                (name, json.dumps(spec), state),
            )
            self._ctl.reconcile()
            return self._queue_snapshot(name)

    def queue(self, name: str) -> QueueSnapshot:
        """One queue with its PodGroup counts."""
        with self._tx():
            self._ctl.reconcile()
            return self._queue_snapshot(name)

    def queues(self) -> list[QueueSnapshot]:
        """Every queue, by name."""
        with self._tx():
            self._ctl.reconcile()
            return self._queues()

    def priority_classes(self) -> dict[str, int]:
        """Every PriorityClass by name, with its value."""
        with self._tx() as db:
            return {r["name"]: r["value"] for r in db.execute("SELECT name, value FROM priority_classes ORDER BY name")}

    def nodes(self) -> list[NodeInfo]:
        """Every node with readiness and GPU accounting from its running pods."""
        with self._tx():
            self._ctl.reconcile()
            return self._nodes()

    def status(self) -> tuple[list[NodeInfo], list[QueueSnapshot], list[JobInfo]]:
        """`nodes()`, `queues()` and `list_jobs()` as of one reconcile and one transaction (`cluster status`)."""
        with self._tx():
            self._ctl.reconcile()
            return self._nodes(), self._queues(), self._jobs()

    def events(self, name: str, namespace: str = "default", limit: int = 50) -> list[Event]:
        """The job's most recent events, oldest first."""
        with self._tx() as db:
            self._ctl.reconcile()
            self._ctl.job(namespace, name)
            rows = db.execute(
                "SELECT * FROM events WHERE namespace = ? AND job = ? ORDER BY id DESC LIMIT ?",
                (namespace, name, limit),
            ).fetchall()
        return [
            Event(time=r["time"], object=r["object"], type=r["type"], reason=r["reason"], message=r["message"])
            for r in reversed(rows)
        ]

    # -- beyond the protocol: logs and fault injection --------------------------------------------------

    def logs(self, name: str, namespace: str = "default") -> list[tuple[str, str]]:
        """(log file name, text) of every run of every pod of the job, in the order they ran."""
        return [(r.path.name, r.read().decode(errors="replace")) for r in self.pod_logs(name, namespace)]

    def pod_logs(self, name: str, namespace: str = "default", pod: str | None = None) -> list[PodLog]:
        """The job's pod runs (`pod`'s alone when given) in the order they ran (components.volcano.locallogs)."""
        with self._tx():
            job = self._ctl.job(namespace, name)
            pods = [p.name for p in self._info(job).pods]
        if pod is not None and pod not in pods:
            raise JobNotFound(f"job {namespace}/{name} has no pod {pod!r} (pods: {', '.join(pods) or 'none'}).")
        from components.volcano.locallogs import pod_logs

        return pod_logs(self.home / "logs" / namespace / name, pod, job.uid)

    def all_events(
        self, namespace: str | None = None, job: str | None = None, obj: str | None = None, limit: int = -1
    ) -> list[JobEvent]:
        """The last `limit` events (all: -1) of `namespace`, `job`, `obj` ("Pod/x") when given, oldest first.

        Unlike `events`, a job that was deleted still has its events here, until the next reset.
        """
        wanted = {"namespace": namespace, "job": job, "object": obj}
        where = " AND ".join([f"{column} = ?" for column, v in wanted.items() if v is not None] or ["1"])
        with self._tx() as db:
            self._ctl.reconcile()
            rows = db.execute(
                f"SELECT * FROM events WHERE {where} ORDER BY id DESC LIMIT ?",
                [*(v for v in wanted.values() if v is not None), limit],
            ).fetchall()
        fields = ("namespace", "job", "time", "object", "type", "reason", "message")
        return [JobEvent(**{f: r[f] for f in fields}) for r in reversed(rows)]

    def find_pod(self, pod: str, namespace: str = "default") -> tuple[str, PodInfo]:
        """The job a pod belongs to, and the pod; JobNotFound when no job has it."""
        with self._tx() as db:
            self._ctl.reconcile()
            row = db.execute("SELECT job FROM pods WHERE namespace = ? AND name = ?", (namespace, pod)).fetchone()
            if row is None:
                raise JobNotFound(f"pod {namespace}/{pod} does not exist.")
            info = self._info(self._ctl.job(namespace, row["job"]))
        return info.name, next(p for p in info.pods if p.name == pod)

    def fail_node(self, node: str) -> list[str]:
        """Turn a node NotReady; its pods are killed and evicted. Returns the evicted pods."""
        with self._tx() as db:
            self._ctl.node(node)
            db.execute("UPDATE nodes SET ready = 0 WHERE name = ?", (node,))
            pods = db.execute("SELECT * FROM pods WHERE node = ? AND phase = 'Running'", (node,)).fetchall()
            transitions: list[Transition] = []
            for pod in pods:
                localpods.kill(pod["pid"], pod["token"])
                self._ctl.finish_pod(pod, "Failed", "Evicted", None, f"node {node} is NotReady")
                transitions.append((pod["namespace"], pod["job"], pod["task"], pod["name"], "PodEvicted", None))
            self._ctl.reconcile(transitions)
            return [p["name"] for p in pods]

    def recover_node(self, node: str) -> None:
        """Make a failed node Ready again."""
        with self._tx() as db:
            self._ctl.node(node)
            db.execute("UPDATE nodes SET ready = 1 WHERE name = ?", (node,))
            self._ctl.reconcile()

    def kill_pod(self, pod: str, namespace: str = "default") -> None:
        """SIGKILL one running pod, as an OOM kill or a crashed rank would (exit code 137).

        The pod fails (PodFailed), or under restartPolicy OnFailure or Always its container is restarted in place.
        """
        with self._tx() as db:
            row = db.execute("SELECT * FROM pods WHERE namespace = ? AND name = ?", (namespace, pod)).fetchone()
            if row is None or row["phase"] != "Running":
                raise JobNotFound(f"pod {namespace}/{pod} is not running.")
            if row["reason"] == CRASH_LOOP:
                raise JobNotFound(f"pod {namespace}/{pod} has no process to kill: it waits to restart ({CRASH_LOOP}).")
            localpods.kill(row["pid"], row["token"])
            self._ctl.reconcile(self._ctl.container_ended(row, 137, "Killed", "killed by fault injection (SIGKILL)"))

    def reconcile(self) -> None:
        """Bring the cluster up to date now (pods that ended, restarts, scheduling)."""
        with self._tx():
            self._ctl.reconcile()

    def _nodes(self) -> list[NodeInfo]:
        used = self._ctl.node_usage()
        out = []
        for row in self._db.execute("SELECT * FROM nodes ORDER BY name"):
            allocatable = json.loads(row["allocatable"])
            gpus = int(allocatable.get(GPU, 0))
            out.append(
                NodeInfo(
                    name=row["name"],
                    ready=bool(row["ready"]),
                    gpu_capacity=gpus,
                    gpu_allocatable=gpus if row["ready"] else 0,
                    gpu_allocated=int(used.get(row["name"], {}).get(GPU, 0)),
                    labels=json.loads(row["labels"]),
                    taints=json.loads(row["taints"]),
                )
            )
        return out

    def _queues(self) -> list[QueueSnapshot]:
        names = [r["name"] for r in self._db.execute("SELECT name FROM queues ORDER BY name")]
        return [self._queue_snapshot(n) for n in names]

    def _jobs(self) -> list[JobInfo]:
        rows = self._db.execute("SELECT * FROM jobs ORDER BY seq").fetchall()
        return [self._info(JobRow.from_row(r)) for r in rows]

    def _queue_snapshot(self, name: str) -> QueueSnapshot:
        row = self._db.execute("SELECT * FROM queues WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise QueueNotFound(f"queue {name!r} does not exist.")
        spec = json.loads(row["spec"])
        specs = {r["name"]: json.loads(r["spec"] or "{}") for r in self._db.execute("SELECT name, spec FROM queues")}
        usage = self._ctl.queue_usage()
        # A parent holds what its subtree holds, as Volcano's session writes a parent queue's status.allocated.
        held: dict[str, dict[str, float]] = {}
        for queue, used in usage.items():
            seen: set[str] = set()
            while queue and queue not in seen:
                seen.add(queue)
                into = held.setdefault(queue, {})
                for resource, amount in used.items():
                    into[resource] = into.get(resource, 0.0) + amount
                queue = (specs.get(queue) or {}).get("parent") or ("root" if queue != "root" else "")
        demand = []
        priorities = {r["name"]: r["value"] for r in self._db.execute("SELECT name, value FROM priority_classes")}
        for job_row in self._db.execute(
            "SELECT * FROM jobs WHERE phase NOT IN ('Completed','Failed','Aborted','Terminated')"
        ):
            job = JobRow.from_row(job_row)
            if job.queue == name:
                gpus = int(job.min_resources(priorities).get(GPU, 0))
                if job.pg_phase == "Unknown":
                    (placed,) = self._db.execute(
                        "SELECT COUNT(*) FROM pods WHERE namespace = ? AND job = ? "
                        "AND phase IN ('Running', 'Succeeded')",
                        (job.namespace, job.name),
                    ).fetchone()
                    gpus = lacking_gpus(gpus, job.min_available, placed)
                demand.append((job.pg_phase, gpus))
        return QueueSnapshot.counted(
            demand,
            name=name,
            state=row["state"],
            weight=int(spec.get("weight") or 1),
            capability=parse_resources(spec.get("capability")),
            allocated=held.get(name, {}),
            **queue_family(name, specs, held),
        )

    def _info(self, job: JobRow) -> JobInfo:
        pods = self._db.execute(
            "SELECT * FROM pods WHERE namespace = ? AND job = ? ORDER BY task, idx", (job.namespace, job.name)
        ).fetchall()
        return JobInfo(
            name=job.name,
            namespace=job.namespace,
            uid=job.uid,
            queue=job.queue,
            phase=job.phase,
            retry_count=job.retry_count,
            min_available=job.min_available,
            labels=job.labels,
            podgroup_phase=job.pg_phase,
            reason=job.reason,
            message=job.pending_reason if job.phase == "Pending" and job.pending_reason else job.message,
            pods=[
                PodInfo(
                    name=p["name"],
                    task=p["task"],
                    index=p["idx"],
                    node=p["node"],
                    phase=p["phase"],
                    reason=p["reason"],
                    exit_code=p["exit_code"],
                    gpus=int(json.loads(p["resources"]).get(GPU, 0)),
                    restarts=p["restarts"],
                )
                for p in pods
            ],
        )


def reconcile_after_pod_end(home: Path) -> None:
    """The hook a pod runs when it ends: reconcile once for any number of pods that end together.

    Each hook leaves a mark (`reconcile.pending`); only the one holding `reconcile.lock` reconciles, again while
    marks come. One that finds the lock held leaves its mark to the holder, which looks for marks again after it
    lets go, so no end is missed. A gang of many short pods thus keeps one process writing the state, not one per
    pod, and a command the user types waits behind that one alone.
    """
    mark = home / "reconcile.pending"
    mark.touch()
    with open(home / "reconcile.lock", "a") as lock:
        while mark.exists():
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # the holder sees the mark
            try:
                cluster = LocalCluster(home)
                while mark.exists():
                    mark.unlink(missing_ok=True)
                    try:
                        cluster.reconcile()
                    except BaseException:
                        mark.touch()  # for the next hook or command: this end is not seen to yet
                        raise
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def _main(argv: list[str]) -> int:
    """`python -m components.volcano.cluster_local reconcile --home DIR`: the hook a pod runs when it ends."""
    if len(argv) >= 1 and argv[0] == "reconcile":
        home = argv[argv.index("--home") + 1] if "--home" in argv else None
        reconcile_after_pod_end(Path(home).resolve() if home else default_home())
        return 0
    print("usage: python -m components.volcano.cluster_local reconcile [--home DIR]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
