"""An embedded Volcano: gang scheduling, queues and restart policies for local processes on virtual GPU nodes.

State lives in SQLite under `VCPILOT_HOME` so that several processes (the workflow runner, an agent step,
the CLI, an MCP server) see one cluster and a crash loses nothing. There is no daemon: every call, and
every pod that ends, runs one reconcile under the database's write lock — observe pods, apply the job
controller's policies, run one scheduler session, start what was bound.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shlex
import sqlite3
import sys
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

from components.volcano import localpods, scheduler
from components.volcano.cluster import (
    FINISHED_PHASES,
    Conflict,
    Event,
    Invalid,
    JobInfo,
    JobNotFound,
    NodeInfo,
    NodeNotFound,
    PodInfo,
    QueueNotFound,
    QueueSnapshot,
    Timeout,
)
from components.volcano.lifecycle import RESTART_ACTIONS, count_pods, match_action, max_retry, phase_from_pods
from components.volcano.localconfig import LocalClusterConfig, load_config
from components.volcano.localstate import SCHEMA, JobRow, pod_requests
from components.volcano.models import Job, Queue, apply_volcano_defaults, parse_job, validate_job
from components.volcano.objects import BATCH_JOB, batch_job_status, batch_to_volcano, generate_name, volcano_job_status
from components.volcano.resources import GPU, parse_resources

__all__ = ["LocalCluster", "default_home"]

# A pod event the job controller must act on: (namespace, job, task, pod, event, exit code).
Transition = tuple[str, str, str, str, str, int | None]


def default_home() -> Path:
    """`VCPILOT_HOME`, or `./.vcpilot`."""
    return Path(os.environ.get("VCPILOT_HOME") or ".vcpilot").resolve()


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
        self.home.mkdir(parents=True, exist_ok=True)
        self._clock = clock
        self._hook = (
            f"{shlex.quote(sys.executable)} -m components.volcano.cluster_local reconcile "
            f"--home {shlex.quote(str(self.home))}"
            if hook
            else None
        )
        self._db = sqlite3.connect(self.home / "cluster.db", timeout=60, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        with self._tx():
            for statement in SCHEMA:
                self._db.execute(statement)
            if self._db.execute("SELECT COUNT(*) FROM nodes").fetchone()[0] == 0:
                self._install(self._config(config))

    # -- transactions and setup -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: every change a call makes lands together or not at all."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _config(self, config: LocalClusterConfig | str | Path | None) -> LocalClusterConfig:
        if isinstance(config, LocalClusterConfig):
            return config
        if config is None and (self.home / "cluster.yaml").exists():
            config = self.home / "cluster.yaml"
        return load_config(config)

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
        """Kill every pod and start over with an empty cluster built from `config`."""
        with self._tx() as db:
            for pod in db.execute("SELECT pid, token FROM pods WHERE phase = 'Running'").fetchall():
                localpods.kill(pod["pid"], pod["token"])
            for table in ("pods", "jobs", "events", "nodes", "queues", "priority_classes", "meta"):
                db.execute(f"DELETE FROM {table}")
            self._install(self._config(config))

    def close(self) -> None:
        """Close the database connection (pods keep running)."""
        self._db.close()

    # -- the Cluster protocol -------------------------------------------------------------------------

    def submit(self, job: Job | Mapping[str, Any]) -> JobInfo:
        """Create a Volcano Job (or a batch/v1 Job); identical resubmission returns it, a different spec Conflicts.

        `metadata.generateName` gets a generated name, as the API server does.
        """
        original: dict[str, Any] | None = None
        try:
            raw = job.to_dict() if isinstance(job, Job) else copy.deepcopy(dict(job))
            meta_raw = raw.setdefault("metadata", {}) or {}
            if not meta_raw.get("name") and meta_raw.get("generateName"):
                meta_raw["name"] = generate_name(meta_raw.pop("generateName"))
            if (raw.get("apiVersion"), raw.get("kind")) == BATCH_JOB:
                original, raw = raw, batch_to_volcano(raw)
            # LocalCluster behaves as Volcano with its admission webhooks: defaults filled in, then validated.
            parsed = apply_volcano_defaults(parse_job(raw))
            validate_job(parsed)
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
            if row is None:
                raise Invalid(f"job {meta.name}: queue {queue!r} does not exist.")
            if row["state"] != "Open":
                raise Invalid(f"job {meta.name}: queue {queue!r} is {row['state']}, it accepts no new jobs.")
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
                self._event(namespace, meta.name, f"Job/{meta.name}", "Created", "job submitted")
            self._reconcile()
            return self._info(self._job(namespace, meta.name))

    def get(self, name: str, namespace: str = "default") -> JobInfo:
        """A job's phase, retry count and current pods."""
        with self._tx():
            self._reconcile()
            return self._info(self._job(namespace, name))

    def get_object(self, name: str, namespace: str = "default") -> dict[str, Any]:
        """The job as the API server would return it: the submitted manifest, metadata and a live status."""
        with self._tx() as db:
            self._reconcile()
            info = self._info(self._job(namespace, name))
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

    def delete(self, name: str, namespace: str = "default", *, missing_ok: bool = False) -> None:
        """Delete a job and kill its pods."""
        with self._tx() as db:
            row = db.execute("SELECT 1 FROM jobs WHERE namespace = ? AND name = ?", (namespace, name)).fetchone()
            if row is None:
                if missing_ok:
                    return
                raise JobNotFound(f"job {namespace}/{name} does not exist.")
            self._kill_pods(namespace, name)
            db.execute("DELETE FROM pods WHERE namespace = ? AND job = ?", (namespace, name))
            db.execute("DELETE FROM jobs WHERE namespace = ? AND name = ?", (namespace, name))
            self._event(namespace, name, f"Job/{name}", "Deleted", "job deleted")
            self._reconcile()

    def list_jobs(self, labels: Mapping[str, str] | None = None, namespace: str | None = None) -> list[JobInfo]:
        """Jobs carrying every given label, oldest first."""
        with self._tx() as db:
            self._reconcile()
            rows = db.execute("SELECT * FROM jobs ORDER BY seq").fetchall()
            infos = [self._info(JobRow.from_row(r)) for r in rows]
        wanted = dict(labels or {})
        return [
            i for i in infos if (namespace is None or i.namespace == namespace) and wanted.items() <= i.labels.items()
        ]

    def apply_queue(self, queue: Queue | Mapping[str, Any]) -> QueueSnapshot:
        """Create or update a queue (weight, capability, reclaimable, state)."""
        try:
            parsed = queue if isinstance(queue, Queue) else Queue.model_validate(dict(queue))
            name = parsed.metadata.name
            spec = parsed.spec.model_dump(by_alias=True, exclude_none=True, mode="json") if parsed.spec else {}
            parse_resources(spec.get("capability"))
        except ValueError as err:
            raise Invalid(f"queue: {str(err).splitlines()[0]}") from None
        if not name:
            raise Invalid("queue metadata.name is required.")
        state = (parsed.status.state if parsed.status and parsed.status.state else None) or "Open"
        with self._tx() as db:
            db.execute(
                "INSERT INTO queues(name, spec, state) VALUES (?,?,?) "
                "ON CONFLICT(name) DO UPDATE SET spec = excluded.spec, state = excluded.state",
                (name, json.dumps(spec), state),
            )
            self._reconcile()
            return self._queue_snapshot(name)

    def queue(self, name: str) -> QueueSnapshot:
        """One queue with its PodGroup counts."""
        with self._tx():
            self._reconcile()
            return self._queue_snapshot(name)

    def queues(self) -> list[QueueSnapshot]:
        """Every queue, by name."""
        with self._tx() as db:
            self._reconcile()
            names = [r["name"] for r in db.execute("SELECT name FROM queues ORDER BY name")]
            return [self._queue_snapshot(n) for n in names]

    def nodes(self) -> list[NodeInfo]:
        """Every node with readiness and GPU accounting from its running pods."""
        with self._tx() as db:
            self._reconcile()
            used = self._node_usage()
            out = []
            for row in db.execute("SELECT * FROM nodes ORDER BY name"):
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

    def events(self, name: str, namespace: str = "default", limit: int = 50) -> list[Event]:
        """The job's most recent events, oldest first."""
        with self._tx() as db:
            self._reconcile()
            self._job(namespace, name)
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
        """(log file name, text) of every run of every pod of the job, oldest run first."""
        with self._tx():
            self._job(namespace, name)
        directory = self.home / "logs" / namespace / name
        files = sorted(directory.glob("*.log"), key=lambda p: p.stat().st_mtime) if directory.exists() else []
        return [(p.name, p.read_text(errors="replace")) for p in files]

    def fail_node(self, node: str) -> list[str]:
        """Turn a node NotReady; its pods are killed and evicted. Returns the evicted pods."""
        with self._tx() as db:
            self._node(node)
            db.execute("UPDATE nodes SET ready = 0 WHERE name = ?", (node,))
            pods = db.execute("SELECT * FROM pods WHERE node = ? AND phase = 'Running'", (node,)).fetchall()
            transitions: list[Transition] = []
            for pod in pods:
                localpods.kill(pod["pid"], pod["token"])
                self._finish_pod(pod, "Failed", "Evicted", None, f"node {node} is NotReady")
                transitions.append((pod["namespace"], pod["job"], pod["task"], pod["name"], "PodEvicted", None))
            self._reconcile(transitions)
            return [p["name"] for p in pods]

    def recover_node(self, node: str) -> None:
        """Make a failed node Ready again."""
        with self._tx() as db:
            self._node(node)
            db.execute("UPDATE nodes SET ready = 1 WHERE name = ?", (node,))
            self._reconcile()

    def kill_pod(self, pod: str, namespace: str = "default") -> None:
        """SIGKILL one running pod, as an OOM kill or a crashed rank would."""
        with self._tx() as db:
            row = db.execute("SELECT * FROM pods WHERE namespace = ? AND name = ?", (namespace, pod)).fetchone()
            if row is None or row["phase"] != "Running":
                raise JobNotFound(f"pod {namespace}/{pod} is not running.")
            localpods.kill(row["pid"], row["token"])
            self._finish_pod(row, "Failed", "Killed", 137, "killed by fault injection (SIGKILL)")
            self._reconcile([(namespace, row["job"], row["task"], pod, "PodFailed", 137)])

    def reconcile(self) -> None:
        """Bring the cluster up to date now (pods that ended, restarts, scheduling)."""
        with self._tx():
            self._reconcile()

    # -- reconcile ------------------------------------------------------------------------------------

    def _reconcile(self, transitions: list[Transition] | None = None) -> None:
        """One pass of Volcano's controllers and scheduler; runs inside a write transaction."""
        events = list(transitions or []) + self._observe_pods()
        handled: set[tuple[str, str]] = set()
        for namespace, job_name, task, pod, event, exit_code in events:
            if (namespace, job_name) in handled:
                continue
            job = self._find(namespace, job_name)
            if job is None or job.phase in FINISHED_PHASES:
                continue
            action = match_action(job.spec, task, event, exit_code)
            if action and self._apply_action(job, action, task, pod, event):
                handled.add((namespace, job_name))
        self._sync_phases()
        self._schedule()
        self._sync_phases()
        self._expire_finished()

    def _observe_pods(self) -> list[Transition]:
        """Pods whose process ended since the last pass."""
        out: list[Transition] = []
        for pod in self._db.execute("SELECT * FROM pods WHERE phase = 'Running'").fetchall():
            code = localpods.read_exit_code(pod["exit_file"])
            if code is None and localpods.is_alive(pod["pid"], pod["token"]):
                continue
            code = localpods.read_exit_code(pod["exit_file"]) if code is None else code
            if code == 0:
                self._finish_pod(pod, "Succeeded", "Completed", 0, "exited 0")
                job = self._find(pod["namespace"], pod["job"])
                if job and self._task_done(job, pod["task"]):
                    out.append((pod["namespace"], pod["job"], pod["task"], pod["name"], "TaskCompleted", None))
            elif code is None:
                self._finish_pod(pod, "Failed", "Lost", None, "the pod process vanished without an exit code")
                out.append((pod["namespace"], pod["job"], pod["task"], pod["name"], "PodFailed", None))
            else:
                self._finish_pod(pod, "Failed", "Error", code, f"exited with code {code}")
                out.append((pod["namespace"], pod["job"], pod["task"], pod["name"], "PodFailed", code))
        return out

    def _task_done(self, job: JobRow, task: str) -> bool:
        replicas = next((t.replicas for t in job.spec.tasks if t.name == task), 0)
        done = self._db.execute(
            "SELECT COUNT(*) FROM pods WHERE namespace = ? AND job = ? AND task = ? AND phase = 'Succeeded'",
            (job.namespace, job.name, task),
        ).fetchone()[0]
        return bool(replicas) and done >= replicas

    def _apply_action(self, job: JobRow, action: str, task: str, pod: str, event: str) -> bool:
        """Carry out a policy action; True when it settled the whole job (later events of this pass are moot)."""
        ns, name = job.namespace, job.name
        if action in RESTART_ACTIONS:
            # Volcano's restarting state: the count goes up first, and a count at maxRetry fails the job.
            retries = job.retry_count + 1
            if retries >= max_retry(job.spec):
                self._kill_pods(ns, name)
                msg = f"{event} on pod {pod}: {action} refused, retried {retries} of {max_retry(job.spec)} times"
                self._db.execute(
                    "UPDATE jobs SET retry_count = ? WHERE namespace = ? AND name = ?", (retries, ns, name)
                )
                self._set_phase(job, "Failed", "MaxRetryReached", msg)
                return True
            msg = f"{event} on pod {pod}: {action} (retry {retries})"
            self._event(ns, name, f"Job/{name}", "Restarting", msg, "Warning")
            if action == "RestartJob":
                self._kill_pods(ns, name)
                self._db.execute("DELETE FROM pods WHERE namespace = ? AND job = ?", (ns, name))
                self._db.execute(
                    "UPDATE jobs SET phase = 'Pending', pg_phase = 'Pending', retry_count = ?, "
                    "generation = generation + 1, master_port = NULL, reason = ?, message = ? "
                    "WHERE namespace = ? AND name = ?",
                    (retries, action, msg, ns, name),
                )
                return True
            # RestartTask / RestartPod: only those pods are killed and recreated; the gang keeps its place.
            where = "task = ?" if action == "RestartTask" else "name = ?"
            target = task if action == "RestartTask" else pod
            for row in self._db.execute(
                f"SELECT * FROM pods WHERE namespace = ? AND job = ? AND {where}", (ns, name, target)
            ).fetchall():
                if row["phase"] == "Running":
                    localpods.kill(row["pid"], row["token"])
                self._db.execute(
                    "UPDATE pods SET node = NULL, phase = 'Pending', reason = NULL, exit_code = NULL, pid = NULL, "
                    "token = NULL, exit_file = NULL WHERE namespace = ? AND name = ?",
                    (ns, row["name"]),
                )
            self._db.execute(
                "UPDATE jobs SET retry_count = ?, reason = ?, message = ? WHERE namespace = ? AND name = ?",
                (retries, action, msg, ns, name),
            )
            return False
        final = {"AbortJob": "Aborted", "TerminateJob": "Terminated", "CompleteJob": "Completed"}.get(action)
        if final is None:
            return False
        self._kill_pods(ns, name)
        self._set_phase(job, final, action, f"{event} on task {task}: {action}")
        return True

    def _sync_phases(self) -> None:
        """Volcano's SyncJob: move Pending/Running jobs on by the phases of their pods."""
        for row in self._db.execute("SELECT * FROM jobs WHERE phase IN ('Pending', 'Running')").fetchall():
            job = JobRow.from_row(row)
            pods = self._db.execute(
                "SELECT task, phase FROM pods WHERE namespace = ? AND job = ?", (job.namespace, job.name)
            ).fetchall()
            if job.pg_phase == "Pending" and not pods:
                continue
            phase = phase_from_pods(job.spec, job.phase, count_pods([(p["task"], p["phase"]) for p in pods]))
            if phase != job.phase:
                if phase in FINISHED_PHASES:
                    self._kill_pods(job.namespace, job.name)
                self._set_phase(job, phase, phase, f"pods: {len(pods)} in this run")

    def _schedule(self) -> None:
        """Run one scheduler session over every waiting gang and start the pods it bound."""
        db = self._db
        usage = self._node_usage()
        nodes = [
            scheduler.NodeState(
                name=r["name"],
                ready=bool(r["ready"]),
                allocatable=json.loads(r["allocatable"]),
                used=usage.get(r["name"], {}),
                labels=json.loads(r["labels"]),
                taints=tuple(json.loads(r["taints"])),
            )
            for r in db.execute("SELECT * FROM nodes ORDER BY name")
        ]
        allocated = self._queue_usage()
        queues = []
        for r in db.execute("SELECT * FROM queues ORDER BY name"):
            spec = json.loads(r["spec"])
            queues.append(
                scheduler.QueueState(
                    name=r["name"],
                    weight=int(spec.get("weight") or 1),
                    capability=parse_resources(spec.get("capability")),
                    open=r["state"] == "Open",
                    allocated=allocated.get(r["name"], {}),
                )
            )
        priorities = {r["name"]: r["value"] for r in db.execute("SELECT * FROM priority_classes")}
        gangs, jobs = [], {}
        for row in db.execute("SELECT * FROM jobs WHERE phase IN ('Pending', 'Running') ORDER BY seq"):
            job = JobRow.from_row(row)
            pods = db.execute(
                "SELECT name, task, idx, node, phase FROM pods WHERE namespace = ? AND job = ?",
                (job.namespace, job.name),
            ).fetchall()
            if job.pg_phase == "Pending":
                waiting = pod_requests(job)
            else:
                todo = {f"{job.namespace}/{p['name']}" for p in pods if p["node"] is None}
                waiting = [p for p in pod_requests(job) if p.name in todo]
                if not waiting:
                    continue
            jobs[job.key] = job
            gangs.append(
                scheduler.Gang(
                    key=job.key,
                    queue=job.spec.queue or "default",
                    phase=job.pg_phase,
                    min_member=job.spec.min_available or 0,
                    min_resources=job.min_resources(),
                    pods=tuple(waiting),
                    bound=sum(1 for p in pods if p["phase"] in ("Running", "Succeeded")),
                    priority=priorities.get(job.spec.priority_class_name or "", 0),
                    order=job.seq,
                )
            )
        if not gangs:
            return
        factor = float(db.execute("SELECT value FROM meta WHERE key = 'overcommit'").fetchone()[0])
        session = scheduler.schedule(nodes, queues, gangs, overcommit_factor=factor)
        for key in session.enqueued:
            self._admit(jobs[key])
        for key, reason in session.reasons.items():
            job = jobs[key]
            if job.pending_reason != reason:
                db.execute(
                    "UPDATE jobs SET pending_reason = ? WHERE namespace = ? AND name = ?",
                    (reason, job.namespace, job.name),
                )
                self._event(job.namespace, job.name, f"PodGroup/{job.name}", "Unschedulable", reason, "Warning")
        for pod_name, node in sorted(session.bindings.items()):
            self._bind(pod_name, node)
        for key, job in jobs.items():
            if key not in session.reasons and job.pending_reason:
                db.execute(
                    "UPDATE jobs SET pending_reason = NULL WHERE namespace = ? AND name = ?", (job.namespace, job.name)
                )

    def _admit(self, job: JobRow) -> None:
        """PodGroup Pending -> Inqueue: the job controller now creates the pods (unbound)."""
        self._db.execute(
            "UPDATE jobs SET pg_phase = 'Inqueue' WHERE namespace = ? AND name = ?", (job.namespace, job.name)
        )
        for pod in pod_requests(job):
            pod_name = pod.name.split("/", 1)[1]
            task, index = job.pod_task(pod_name)
            self._db.execute(
                "INSERT INTO pods(namespace, job, name, task, idx, generation, phase, resources) "
                "VALUES (?,?,?,?,?,?, 'Pending', ?)",
                (job.namespace, job.name, pod_name, task, index, job.generation, json.dumps(dict(pod.resources))),
            )

    def _bind(self, pod_key: str, node: str) -> None:
        """Start a bound pod (`namespace/name`) as a local process with Volcano's environment."""
        db = self._db
        namespace, pod_name = pod_key.split("/", 1)
        pod = db.execute(
            "SELECT * FROM pods WHERE namespace = ? AND name = ? AND node IS NULL", (namespace, pod_name)
        ).fetchone()
        job = self._job(pod["namespace"], pod["job"])
        if job.master_port is None:
            job = job.with_master_port(localpods.free_port())
            db.execute(
                "UPDATE jobs SET master_port = ? WHERE namespace = ? AND name = ?",
                (job.master_port, job.namespace, job.name),
            )
        argv, env, workdir = job.pod_process(pod["task"], pod["idx"], node, self.home)
        run = f"{pod_name}.run{job.generation}-{uuid.uuid4().hex[:6]}"
        base = self.home / "logs" / job.namespace / job.name / run
        exit_file = self.home / "exits" / job.namespace / job.name / run
        pid, token = localpods.start(argv, env, workdir or job.cwd, base.parent / f"{run}.log", exit_file, self._hook)
        db.execute(
            "UPDATE pods SET node = ?, phase = 'Running', pid = ?, token = ?, started = ?, exit_file = ? "
            "WHERE namespace = ? AND name = ?",
            (node, pid, token, self._clock(), str(exit_file), job.namespace, pod_name),
        )
        if job.pg_phase != "Running":
            db.execute(
                "UPDATE jobs SET pg_phase = 'Running' WHERE namespace = ? AND name = ?", (job.namespace, job.name)
            )
        self._event(job.namespace, job.name, f"Pod/{pod_name}", "Scheduled", f"assigned to {node}")

    def _expire_finished(self) -> None:
        """Delete finished jobs whose ttlSecondsAfterFinished has passed."""
        now = self._clock()
        for row in self._db.execute("SELECT * FROM jobs WHERE finished_at IS NOT NULL").fetchall():
            ttl = JobRow.from_row(row).spec.ttl_seconds_after_finished
            if ttl is not None and now - row["finished_at"] >= ttl:
                self._db.execute("DELETE FROM pods WHERE namespace = ? AND job = ?", (row["namespace"], row["name"]))
                self._db.execute("DELETE FROM jobs WHERE namespace = ? AND name = ?", (row["namespace"], row["name"]))

    # -- small helpers --------------------------------------------------------------------------------

    def _finish_pod(self, pod: sqlite3.Row, phase: str, reason: str, code: int | None, message: str) -> None:
        self._db.execute(
            "UPDATE pods SET phase = ?, reason = ?, exit_code = ?, finished = ? WHERE namespace = ? AND name = ?",
            (phase, reason, code, self._clock(), pod["namespace"], pod["name"]),
        )
        kind = "Normal" if phase == "Succeeded" else "Warning"
        self._event(pod["namespace"], pod["job"], f"Pod/{pod['name']}", reason, message, kind)

    def _kill_pods(self, namespace: str, job: str) -> None:
        for pod in self._db.execute(
            "SELECT * FROM pods WHERE namespace = ? AND job = ? AND phase = 'Running'", (namespace, job)
        ).fetchall():
            localpods.kill(pod["pid"], pod["token"])
            self._finish_pod(pod, "Failed", "Terminated", 137, "killed: the job is restarting or finishing")

    def _set_phase(self, job: JobRow, phase: str, reason: str, message: str) -> None:
        finished = self._clock() if phase in FINISHED_PHASES else None
        pg_phase = "Completed" if finished else job.pg_phase
        self._db.execute(
            "UPDATE jobs SET phase = ?, pg_phase = ?, reason = ?, message = ?, finished_at = ? "
            "WHERE namespace = ? AND name = ?",
            (phase, pg_phase, reason, message, finished, job.namespace, job.name),
        )
        self._event(
            job.namespace,
            job.name,
            f"Job/{job.name}",
            phase,
            message,
            "Warning" if phase in ("Failed", "Aborted") else "Normal",
        )

    def _event(self, namespace: str, job: str, obj: str, reason: str, message: str, kind: str = "Normal") -> None:
        self._db.execute(
            "INSERT INTO events(time, namespace, job, object, type, reason, message) VALUES (?,?,?,?,?,?,?)",
            (self._clock(), namespace, job, obj, kind, reason, message),
        )

    def _find(self, namespace: str, name: str) -> JobRow | None:
        row = self._db.execute("SELECT * FROM jobs WHERE namespace = ? AND name = ?", (namespace, name)).fetchone()
        return JobRow.from_row(row) if row else None

    def _job(self, namespace: str, name: str) -> JobRow:
        job = self._find(namespace, name)
        if job is None:
            raise JobNotFound(f"job {namespace}/{name} does not exist.")
        return job

    def _node(self, name: str) -> sqlite3.Row:
        row = self._db.execute("SELECT * FROM nodes WHERE name = ?", (name,)).fetchone()
        if row is None:
            known = ", ".join(r["name"] for r in self._db.execute("SELECT name FROM nodes ORDER BY name"))
            raise NodeNotFound(f"node {name!r} does not exist (nodes: {known}).")
        return row

    def _node_usage(self) -> dict[str, dict[str, float]]:
        usage: dict[str, dict[str, float]] = {}
        for pod in self._db.execute("SELECT node, resources FROM pods WHERE phase = 'Running' AND node IS NOT NULL"):
            into = usage.setdefault(pod["node"], {})
            for name, amount in json.loads(pod["resources"]).items():
                into[name] = into.get(name, 0.0) + amount
        return usage

    def _queue_usage(self) -> dict[str, dict[str, float]]:
        usage: dict[str, dict[str, float]] = {}
        for pod in self._db.execute(
            "SELECT j.manifest AS manifest, p.resources AS resources FROM pods p JOIN jobs j "
            "ON p.namespace = j.namespace AND p.job = j.name WHERE p.phase = 'Running'"
        ):
            queue = json.loads(pod["manifest"])["spec"].get("queue") or "default"
            into = usage.setdefault(queue, {})
            for name, amount in json.loads(pod["resources"]).items():
                into[name] = into.get(name, 0.0) + amount
        return usage

    def _queue_snapshot(self, name: str) -> QueueSnapshot:
        row = self._db.execute("SELECT * FROM queues WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise QueueNotFound(f"queue {name!r} does not exist.")
        spec = json.loads(row["spec"])
        counts = {"Pending": [0, 0], "Inqueue": [0, 0], "Running": [0, 0]}
        for job_row in self._db.execute(
            "SELECT * FROM jobs WHERE phase NOT IN ('Completed','Failed','Aborted','Terminated')"
        ):
            job = JobRow.from_row(job_row)
            if (job.spec.queue or "default") == name and job.pg_phase in counts:
                counts[job.pg_phase][0] += 1
                counts[job.pg_phase][1] += int(job.min_resources().get(GPU, 0))
        return QueueSnapshot(
            name=name,
            state=row["state"],
            weight=int(spec.get("weight") or 1),
            capability=parse_resources(spec.get("capability")),
            allocated=self._queue_usage().get(name, {}),
            pending=counts["Pending"][0],
            inqueue=counts["Inqueue"][0],
            running=counts["Running"][0],
            pending_gpus=counts["Pending"][1],
            inqueue_gpus=counts["Inqueue"][1],
            running_gpus=counts["Running"][1],
        )

    def _info(self, job: JobRow) -> JobInfo:
        pods = self._db.execute(
            "SELECT * FROM pods WHERE namespace = ? AND job = ? ORDER BY task, idx", (job.namespace, job.name)
        ).fetchall()
        return JobInfo(
            name=job.name,
            namespace=job.namespace,
            uid=job.uid,
            queue=job.spec.queue or "default",
            phase=job.phase,
            retry_count=job.retry_count,
            min_available=job.spec.min_available or 0,
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
                )
                for p in pods
            ],
        )


def _main(argv: list[str]) -> int:
    """`python -m components.volcano.cluster_local reconcile --home DIR`: the hook a pod runs when it ends."""
    if len(argv) >= 1 and argv[0] == "reconcile":
        home = argv[argv.index("--home") + 1] if "--home" in argv else None
        LocalCluster(home).reconcile()
        return 0
    print("usage: python -m components.volcano.cluster_local reconcile [--home DIR]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
