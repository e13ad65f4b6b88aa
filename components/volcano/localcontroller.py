"""LocalCluster's controllers: one reconcile pass observes pods, applies job policies, schedules, starts pods.

This is what Volcano's job controller, scheduler and the kubelet do, over LocalCluster's SQLite state. Every
method runs inside the caller's write transaction (`LocalCluster._tx`), so a pass lands whole or not at all.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from components.volcano import localpods
from components.volcano.cluster import FINISHED_PHASES, JobNotFound, NodeNotFound
from components.volcano.lifecycle import (
    RESTART_ACTIONS,
    count_pods,
    crash_loop_wait,
    delay_s,
    match_policy,
    max_retry,
    next_backoff,
    phase_from_pods,
    restarts_in_place,
    task_max_retry,
)
from components.volcano.localdelays import DelayedAction, DelayedActions
from components.volcano.localstate import JobRow, job_tag, pod_requests
from components.volcano.resources import PODS, parse_resources

__all__ = ["CRASH_LOOP", "Controller", "Transition"]

# A pod event the job controller must act on: (namespace, job, task, pod, event, exit code).
Transition = tuple[str, str, str, str, str, int | None]

# The reason a Running pod shows while its container waits to be restarted (the kubelet's, in `kubectl get pods`).
CRASH_LOOP = "CrashLoopBackOff"

# Actions that cancel no waiting action when they run (job_controller_util.go `isInternalAction`).
INTERNAL_ACTIONS = frozenset({"SyncJob", "EnqueueJob", "SyncQueue", "OpenQueue", "CloseQueue"})


class Controller:
    """Reconciles LocalCluster's state; holds no state of its own beyond the connection and settings."""

    def __init__(self, db: sqlite3.Connection, home: Path, clock: Callable[[], float], hook: str | None) -> None:
        self._db = db
        self.home = home
        self._clock = clock
        self._hook = hook
        self._launches: list[Path] = []  # launch records of this transaction's binds (localpods.adopt)
        self.delayed = DelayedActions(db, clock)

    def reconcile(self, transitions: list[Transition] | None = None) -> None:
        """One pass of Volcano's controllers and scheduler; runs inside a write transaction."""
        self.apply_events(list(transitions or []) + self.observe_pods())
        for due in self.delayed.take_due():
            job = self.find(due.namespace, due.job)
            if job is None or job.phase in FINISHED_PHASES:
                continue  # a finished job only has its pods killed, and it has none left (state/finished.go)
            self.apply_action(job, due.action, due.task, due.pod, due.event)
            self.delayed.cancel_like(due.namespace, due.job, due.action, due.task, due.pod)
        self.sync_phases()
        # A session that admits gangs is followed by another, as Volcano's next period: proportion counts a gang's
        # pods in its queue's request only once they exist (the job controller makes them after enqueue).
        while self.schedule():
            pass
        self.sync_phases()
        unknown = self.sync_podgroups()
        if unknown:  # the job controller's answer to a PodGroup turned Unknown, then the scheduler's next session
            self.apply_events(unknown)
            while self.schedule():
                pass
            self.sync_phases()
            self.sync_podgroups()
        self.expire_finished()

    def apply_events(self, events: list[Transition]) -> None:
        """Apply the job policies each event matches (applyPolicies); an event that matches none syncs its job."""
        handled: set[tuple[str, str]] = set()
        for namespace, job_name, task, pod, event, exit_code in events:
            if (namespace, job_name) in handled:
                continue
            job = self.find(namespace, job_name)
            if job is None or job.phase in FINISHED_PHASES:
                continue
            policy = match_policy(job.spec, task, event, exit_code)
            action = policy.action if policy else None
            delay = delay_s(policy) if policy else 0.0
            if policy and action and delay:
                # Volcano's controller waits the policy's timeout first; the job syncs meanwhile.
                self.event(
                    namespace,
                    job_name,
                    f"Job/{job_name}",
                    "ExecuteAction",
                    f"Execute action {action} after {policy.timeout}",
                )
                self.delayed.add(DelayedAction(namespace, job_name, task, pod, event, action), delay)
            elif action:
                if self.apply_action(job, action, task, pod, event):
                    handled.add((namespace, job_name))
                if action not in INTERNAL_ACTIONS:
                    self.delayed.cancel_like(namespace, job_name, action, task, pod)
            elif event == "PodEvicted":
                # Eviction deletes the pod, and Volcano's controller recreates what a live job is missing.
                self.recreate_pod(namespace, pod)

    def observe_pods(self) -> list[Transition]:
        """Pods whose container ended since the last pass, and containers whose CrashLoopBackOff is over."""
        out: list[Transition] = []
        for pod in self._db.execute("SELECT * FROM pods WHERE phase = 'Running'").fetchall():
            if pod["reason"] == CRASH_LOOP:  # no process: it waits for its back-off, from when it ended
                if self._clock() >= pod["finished"] + pod["backoff"]:
                    out += self.restart_container(pod, next_backoff(pod["backoff"]))
                continue
            code = localpods.read_exit_code(pod["exit_file"])
            if code is None and localpods.is_alive(pod["pid"], pod["token"]):
                continue
            code = localpods.read_exit_code(pod["exit_file"]) if code is None else code
            if code == 0:
                out += self.container_ended(pod, 0, "Completed", "exited 0")
            elif code is None:
                out += self.container_ended(pod, None, "Lost", "the pod process vanished without an exit code")
            else:
                out += self.container_ended(pod, code, "Error", f"exited with code {code}")
        return out

    def container_ended(self, pod: sqlite3.Row, code: int | None, reason: str, message: str) -> list[Transition]:
        """A Running pod's container ended (`code` None: it vanished): the events Volcano's job controller gets.

        Under restartPolicy OnFailure (a non-zero exit) or Always (any exit) the kubelet restarts the container in
        the same pod, which stays Running: no PodFailed, no TaskCompleted, only TaskFailed once the task's restarts
        reach its maxRetry. Under Never the pod ends, Succeeded or Failed.
        """
        ns, name = pod["namespace"], pod["job"]
        job = self.find(ns, name)
        task = next((t for t in job.tasks if t.name == pod["task"]), None) if job else None
        if task is not None and restarts_in_place(task.restart_policy, code):
            now = self._clock()
            wait = crash_loop_wait(pod["backoff"], now - (pod["started"] or now))
            if not wait:
                return self.restart_container(pod, next_backoff(None), message)
            self._db.execute(
                "UPDATE pods SET reason = ?, pid = NULL, token = NULL, exit_file = NULL, finished = ? "
                "WHERE namespace = ? AND name = ?",
                (CRASH_LOOP, now, ns, pod["name"]),
            )
            note = f"Back-off {wait:g}s restarting the failed container; its last run: {message}"
            self.event(ns, name, f"Pod/{pod['name']}", "BackOff", note, "Warning")
            return self.task_failed(ns, name, pod["task"], pod["name"])  # a pod update: updatePod looks again
        if code == 0:
            self.finish_pod(pod, "Succeeded", reason, 0, message)
            if job and self.task_done(job, pod["task"]):
                return [(ns, name, pod["task"], pod["name"], "TaskCompleted", None)]
            return []
        self.finish_pod(pod, "Failed", reason, code, message)
        return [(ns, name, pod["task"], pod["name"], "PodFailed", code)]

    def restart_container(self, pod: sqlite3.Row, backoff: float, why: str = "") -> list[Transition]:
        """Start the pod's container again in place, on its node; TaskFailed when the task's restarts reach maxRetry."""
        ns, name = pod["namespace"], pod["job"]
        job = self.job(ns, name)
        restarts = pod["restarts"] + 1
        pid, token, exit_file = self.launch(job, pod["name"], pod["task"], pod["idx"], pod["node"], restarts)
        self._db.execute(
            "UPDATE pods SET reason = NULL, exit_code = NULL, pid = ?, token = ?, exit_file = ?, started = ?, "
            "finished = NULL, restarts = ?, backoff = ? WHERE namespace = ? AND name = ?",
            (pid, token, str(exit_file), self._clock(), restarts, backoff, ns, pod["name"]),
        )
        note = f"container restarted in place (restart {restarts})" + (f"; its last run: {why}" if why else "")
        self.event(ns, name, f"Pod/{pod['name']}", "Started", note)
        return self.task_failed(ns, name, pod["task"], pod["name"])

    def task_failed(self, namespace: str, job_name: str, task: str, pod: str) -> list[Transition]:
        """TaskFailed when the restarts of the task's Running and Pending pods reach its maxRetry (cache.go)."""
        job = self.find(namespace, job_name)
        spec = next((t for t in job.tasks if t.name == task), None) if job else None
        limit = task_max_retry(spec.max_retry) if spec else None
        if limit is None:
            return []
        (restarts,) = self._db.execute(
            "SELECT COALESCE(SUM(restarts), 0) FROM pods WHERE namespace = ? AND job = ? AND task = ? "
            "AND phase IN ('Running', 'Pending')",
            (namespace, job_name, task),
        ).fetchone()
        return [(namespace, job_name, task, pod, "TaskFailed", None)] if restarts >= limit else []

    def task_done(self, job: JobRow, task: str) -> bool:
        """Whether every replica of `task` has succeeded (the TaskCompleted event)."""
        replicas = next((t.replicas for t in job.tasks if t.name == task), 0)
        done = self._db.execute(
            "SELECT COUNT(*) FROM pods WHERE namespace = ? AND job = ? AND task = ? AND phase = 'Succeeded'",
            (job.namespace, job.name, task),
        ).fetchone()[0]
        return bool(replicas) and done >= replicas

    def apply_action(self, job: JobRow, action: str, task: str, pod: str, event: str) -> bool:
        """Carry out a policy action; True when it settled the whole job (later events of this pass are moot)."""
        ns, name = job.namespace, job.name
        if action in RESTART_ACTIONS:
            # Volcano's restarting state: the count goes up first, and a count at maxRetry fails the job.
            retries = job.retry_count + 1
            on = f"pod {pod}" if pod else "the PodGroup"  # a job's own event (Unknown) names no pod
            if retries >= max_retry(job.spec):
                self.kill_pods(ns, name)
                msg = f"{event} on {on}: {action} refused, retried {retries} of {max_retry(job.spec)} times"
                self._db.execute(
                    "UPDATE jobs SET retry_count = ? WHERE namespace = ? AND name = ?", (retries, ns, name)
                )
                self.set_phase(job, "Failed", "MaxRetryReached", msg)
                return True
            msg = f"{event} on {on}: {action} (retry {retries})"
            self.event(ns, name, f"Job/{name}", "Restarting", msg, "Warning")
            if action == "RestartJob":
                self.kill_pods(ns, name)
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
                self.recreate_pod(ns, row["name"])
            self._db.execute(
                "UPDATE jobs SET retry_count = ?, reason = ?, message = ? WHERE namespace = ? AND name = ?",
                (retries, action, msg, ns, name),
            )
            return False
        final = {"AbortJob": "Aborted", "TerminateJob": "Terminated", "CompleteJob": "Completed"}.get(action)
        if final is None:
            return False
        # As Volcano's KillJob: the pods it stops are deleted, whatever the final phase (CompleteJob included).
        self.kill_pods(ns, name)
        self.set_phase(job, final, action, f"{event} on task {task}: {action}")
        return True

    def sync_phases(self) -> None:
        """Volcano's SyncJob: move Pending/Running jobs on by the phases of their pods."""
        for row in self._db.execute("SELECT * FROM jobs WHERE phase IN ('Pending', 'Running')").fetchall():
            job = JobRow.from_row(row)
            pods = self._db.execute(
                "SELECT task, phase FROM pods WHERE namespace = ? AND job = ?", (job.namespace, job.name)
            ).fetchall()
            if job.pg_phase == "Pending" and not pods:
                continue
            phase = phase_from_pods(job, job.phase, count_pods([(p["task"], p["phase"]) for p in pods]))
            if phase != job.phase:
                if phase in FINISHED_PHASES:
                    self.kill_pods(job.namespace, job.name)
                self.set_phase(job, phase, phase, f"pods: {len(pods)} in this run")

    def sync_podgroups(self) -> list[Transition]:
        """The session's PodGroup phase for gangs past admission; the `Unknown` event of each that turned Unknown.

        framework/session.go getPodGroupPhase: a PodGroup with running pods whose gang is not ready (pods running
        or succeeded below minMember, JobInfo.IsReady) is Unknown, and Running again once it is ready; a change to
        Unknown sends the job JobUnknownEvent (job_controller_handler.go updatePodGroup).
        """
        unknown: list[Transition] = []
        for row in self._db.execute(
            "SELECT * FROM jobs WHERE phase IN ('Pending', 'Running') AND pg_phase IN ('Running', 'Unknown')"
        ).fetchall():
            job = JobRow.from_row(row)
            counts = Counter(
                p["phase"]
                for p in self._db.execute(
                    "SELECT phase FROM pods WHERE namespace = ? AND job = ?", (job.namespace, job.name)
                )
            )
            ready = counts["Running"] + counts["Succeeded"] >= job.min_available
            phase = "Unknown" if counts["Running"] and not ready else "Running" if ready else job.pg_phase
            if phase == job.pg_phase:
                continue
            self._db.execute(
                "UPDATE jobs SET pg_phase = ? WHERE namespace = ? AND name = ?", (phase, job.namespace, job.name)
            )
            if phase == "Unknown":
                unknown.append((job.namespace, job.name, "", "", "Unknown", None))
        return unknown

    def schedule(self) -> bool:
        """Run one scheduler session over every waiting gang and start the pods it bound; True when it admitted any."""
        db = self._db
        live = db.execute("SELECT * FROM jobs WHERE phase IN ('Pending', 'Running') ORDER BY seq").fetchall()
        if not live:
            return False
        # Imported once a job is live: a pass over an idle cluster (`vcpilot cluster status`) needs no scheduler.
        from components.volcano import scheduler

        priorities = {r["name"]: r["value"] for r in db.execute("SELECT * FROM priority_classes")}
        gangs, jobs = [], {}
        for row in live:
            job = JobRow.from_row(row)
            pods = db.execute(
                "SELECT name, task, idx, node, phase FROM pods WHERE namespace = ? AND job = ?",
                (job.namespace, job.name),
            ).fetchall()
            if job.pg_phase == "Pending":
                waiting = pod_requests(job, priorities)
            else:
                todo = {f"{job.namespace}/{p['name']}" for p in pods if p["node"] is None}
                waiting = [p for p in pod_requests(job, priorities) if p.name in todo]
                if not waiting:
                    continue
            jobs[job.key] = job
            bound = Counter(p["task"] for p in pods if p["phase"] in ("Running", "Succeeded"))
            gangs.append(
                scheduler.Gang(
                    key=job.key,
                    queue=job.queue,
                    phase=job.pg_phase,
                    min_member=job.min_available,
                    min_resources=job.min_resources(priorities),
                    pods=waiting,
                    bound=bound.total(),
                    priority=priorities.get(job.priority_class_name, 0),
                    order=job.seq,
                    min_task_member=job.min_task_member(),
                    bound_by_task=bound,
                    size=len(pods) if pods else len(waiting),
                )
            )
        if not gangs:
            return False
        usage, running = self.node_usage(), self.node_pods()
        nodes = []
        for r in db.execute("SELECT * FROM nodes ORDER BY name"):
            allocatable = json.loads(r["allocatable"])
            max_pods = int(allocatable.pop(PODS, 0))  # a count of pods, not a resource a pod requests
            nodes.append(
                scheduler.NodeState(
                    name=r["name"],
                    ready=bool(r["ready"]),
                    allocatable=allocatable,
                    used=usage.get(r["name"], {}),
                    labels=json.loads(r["labels"]),
                    taints=tuple(json.loads(r["taints"])),
                    max_pods=max_pods,
                    pods=running.get(r["name"], 0),
                )
            )
        allocated = self.queue_usage()
        elastic = self.queue_elastic(priorities)
        # Volcano's proportion plugin admits a gang only within its queue's realCapability (proportion.go
        # OnSessionOpen): what the Ready nodes hold less every queue's guarantee, plus the queue's own guarantee,
        # capped by its capability; whatever the overcommit factor.
        cluster: dict[str, float] = {}
        for state in nodes:
            if state.ready:
                for name, amount in state.allocatable.items():
                    cluster[name] = cluster.get(name, 0.0) + amount
        specs = {
            r["name"]: (json.loads(r["spec"]), r["state"]) for r in db.execute("SELECT * FROM queues ORDER BY name")
        }
        guarantees = {
            q: parse_resources((spec.get("guarantee") or {}).get("resource")) for q, (spec, _) in specs.items()
        }
        guaranteed: dict[str, float] = {}
        for guarantee in guarantees.values():
            for name, amount in guarantee.items():
                guaranteed[name] = guaranteed.get(name, 0.0) + amount
        queues = []
        for queue, (spec, state) in specs.items():
            own = guarantees[queue]
            real = {
                name: max(amount - guaranteed.get(name, 0.0), 0.0) + own.get(name, 0.0)
                for name, amount in cluster.items()
            }
            capability = {**real, **parse_resources(spec.get("capability"))}
            queues.append(
                scheduler.QueueState(
                    name=queue,
                    weight=int(spec.get("weight") or 1),
                    capability={name: min(amount, real.get(name, amount)) for name, amount in capability.items()},
                    open=state == "Open",
                    allocated=allocated.get(queue, {}),
                    guarantee=own,
                    elastic=elastic.get(queue, {}),
                )
            )
        # As deploy/'s scheduler configuration: proportion's deserved shares in allocate, overcommit as configured.
        (factor,) = db.execute("SELECT value FROM meta WHERE key = 'overcommit'").fetchone()
        session = scheduler.schedule(
            nodes, queues, gangs, overcommit_factor=None if factor is None else float(factor), proportion=True
        )
        for key in session.enqueued:
            self.admit(jobs[key])
        for key, reason in session.reasons.items():
            job = jobs[key]
            if job.pending_reason != reason:
                db.execute(
                    "UPDATE jobs SET pending_reason = ? WHERE namespace = ? AND name = ?",
                    (reason, job.namespace, job.name),
                )
                self.event(job.namespace, job.name, f"PodGroup/{job.name}", "Unschedulable", reason, "Warning")
        for pod_name, node in sorted(session.bindings.items()):
            self.bind(pod_name, node)
        for key, job in jobs.items():
            if key not in session.reasons and job.pending_reason:
                db.execute(
                    "UPDATE jobs SET pending_reason = NULL WHERE namespace = ? AND name = ?", (job.namespace, job.name)
                )
        return bool(session.enqueued)

    def admit(self, job: JobRow) -> None:
        """PodGroup Pending -> Inqueue: the job controller now creates the pods (unbound).

        The manifest is parsed first: one that no longer parses is damaged state (StateDamaged), before a pod is
        made from it.
        """
        job.job  # noqa: B018
        self._db.execute(
            "UPDATE jobs SET pg_phase = 'Inqueue' WHERE namespace = ? AND name = ?", (job.namespace, job.name)
        )
        tasks = {name: (task, index) for name, task, index in job.pod_names()}  # once: a gang may have 100,000 pods
        for pod in pod_requests(job):  # resources and names only: no priorities needed
            pod_name = pod.name.split("/", 1)[1]
            task, index = tasks[pod_name]
            self._db.execute(
                "INSERT INTO pods(namespace, job, name, task, idx, generation, phase, resources) "
                "VALUES (?,?,?,?,?,?, 'Pending', ?)",
                (job.namespace, job.name, pod_name, task, index, job.generation, json.dumps(dict(pod.resources))),
            )

    def bind(self, pod_key: str, node: str) -> None:
        """Start a bound pod (`namespace/name`) as a local process with Volcano's environment."""
        db = self._db
        namespace, pod_name = pod_key.split("/", 1)
        pod = db.execute(
            "SELECT * FROM pods WHERE namespace = ? AND name = ? AND node IS NULL", (namespace, pod_name)
        ).fetchone()
        job = self.job(pod["namespace"], pod["job"])
        pid, token, exit_file = self.launch(job, pod_name, pod["task"], pod["idx"], node)
        db.execute(
            "UPDATE pods SET node = ?, phase = 'Running', pid = ?, token = ?, started = ?, exit_file = ? "
            "WHERE namespace = ? AND name = ?",
            (node, pid, token, self._clock(), str(exit_file), job.namespace, pod_name),
        )
        if job.pg_phase != "Running":
            db.execute(
                "UPDATE jobs SET pg_phase = 'Running' WHERE namespace = ? AND name = ?", (job.namespace, job.name)
            )
        self.event(job.namespace, job.name, f"Pod/{pod_name}", "Scheduled", f"assigned to {node}")
        self.delayed.pod_running(job.namespace, job.name, pod_name)

    def launch(
        self, job: JobRow, pod_name: str, task: str, index: int, node: str, restarts: int = 0
    ) -> tuple[int, str, Path]:
        """Start a container of the pod as a local process; its pid, start token and exit file.

        The pytorch plugin's MASTER_PORT is chosen once per run of the job, by its first pod.
        """
        if job.master_port is None:
            job = job.with_master_port(localpods.free_port())
            self._db.execute(
                "UPDATE jobs SET master_port = ? WHERE namespace = ? AND name = ?",
                (job.master_port, job.namespace, job.name),
            )
        argv, env, workdir = job.pod_process(task, index, node, self.home)
        # A start whose transaction a kill undid left its pod process running: adopt it, never start it twice.
        launch = f"{pod_name}.gen{job.generation}" + (f".restart{restarts}" if restarts else "")
        intent = self.home / "launches" / job.namespace / job.name / launch
        adopted = localpods.adopt(intent)
        if adopted is not None:
            pid, token, exit_file = adopted
        else:
            run = f"{pod_name}.run{job.generation}-{job_tag(job.uid)}{uuid.uuid4().hex[:6]}"
            base = self.home / "logs" / job.namespace / job.name / run
            exit_file = self.home / "exits" / job.namespace / job.name / run
            log = base.parent / f"{run}.log"
            pid, token = localpods.start(argv, env, workdir or job.cwd, log, exit_file, self._hook, intent)
        self._launches.append(intent)
        return pid, token, exit_file

    def committed(self) -> None:
        """The transaction's binds are on record: their launch records are no longer needed."""
        for intent in self._launches:
            localpods.forget(intent)
        self._launches.clear()

    def rolled_back(self) -> None:
        """The transaction's binds are undone; their processes stay adoptable by their launch records."""
        self._launches.clear()

    def expire_finished(self) -> None:
        """Delete finished jobs whose ttlSecondsAfterFinished has passed."""
        now = self._clock()
        for row in self._db.execute("SELECT * FROM jobs WHERE finished_at IS NOT NULL").fetchall():
            ttl = JobRow.from_row(row).ttl_seconds_after_finished
            if ttl is not None and now - row["finished_at"] >= ttl:
                self._db.execute("DELETE FROM pods WHERE namespace = ? AND job = ?", (row["namespace"], row["name"]))
                self._db.execute("DELETE FROM jobs WHERE namespace = ? AND name = ?", (row["namespace"], row["name"]))
                self.delayed.forget_job(row["namespace"], row["name"])

    # -- small helpers --------------------------------------------------------------------------------

    def finish_pod(self, pod: sqlite3.Row, phase: str, reason: str, code: int | None, message: str) -> None:
        """Record a pod's end and its event."""
        self._db.execute(
            "UPDATE pods SET phase = ?, reason = ?, exit_code = ?, finished = ? WHERE namespace = ? AND name = ?",
            (phase, reason, code, self._clock(), pod["namespace"], pod["name"]),
        )
        kind = "Normal" if phase == "Succeeded" else "Warning"
        self.event(pod["namespace"], pod["job"], f"Pod/{pod['name']}", reason, message, kind)

    def recreate_pod(self, namespace: str, pod: str) -> None:
        """A pod of the same name, waiting to be placed again (the old one is gone); it costs no retry."""
        self._db.execute(
            "UPDATE pods SET node = NULL, phase = 'Pending', reason = NULL, exit_code = NULL, pid = NULL, "
            "token = NULL, exit_file = NULL, started = NULL, finished = NULL, restarts = 0, backoff = NULL "
            "WHERE namespace = ? AND name = ?",
            (namespace, pod),
        )

    def kill_pods(self, namespace: str, job: str) -> None:
        """Kill the job's running pods and delete them with its waiting ones; pods that ended by themselves stay.

        As Volcano's KillJob does (PodRetainPhaseSoft): a finished job keeps its Succeeded and Failed pods, and
        the pods its controller had to stop are gone, not left behind as failures of their own.
        """
        for pod in self._db.execute(
            "SELECT * FROM pods WHERE namespace = ? AND job = ? AND phase = 'Running'", (namespace, job)
        ).fetchall():
            localpods.kill(pod["pid"], pod["token"])
            self.event(namespace, job, f"Pod/{pod['name']}", "Killing", "killed: the job is restarting or finishing")
        self._db.execute(
            "DELETE FROM pods WHERE namespace = ? AND job = ? AND phase IN ('Running', 'Pending')", (namespace, job)
        )

    def set_phase(self, job: JobRow, phase: str, reason: str, message: str) -> None:
        """Move a job to `phase`, with its event; a finished job's PodGroup is Completed."""
        finished = self._clock() if phase in FINISHED_PHASES else None
        pg_phase = "Completed" if finished else job.pg_phase
        self._db.execute(
            "UPDATE jobs SET phase = ?, pg_phase = ?, reason = ?, message = ?, finished_at = ? "
            "WHERE namespace = ? AND name = ?",
            (phase, pg_phase, reason, message, finished, job.namespace, job.name),
        )
        self.event(
            job.namespace,
            job.name,
            f"Job/{job.name}",
            phase,
            message,
            "Warning" if phase in ("Failed", "Aborted") else "Normal",
        )

    def event(self, namespace: str, job: str, obj: str, reason: str, message: str, kind: str = "Normal") -> None:
        """Record a Kubernetes-style event about a job or one of its pods."""
        self._db.execute(
            "INSERT INTO events(time, namespace, job, object, type, reason, message) VALUES (?,?,?,?,?,?,?)",
            (self._clock(), namespace, job, obj, kind, reason, message),
        )

    def find(self, namespace: str, name: str) -> JobRow | None:
        """The stored job, or None."""
        row = self._db.execute("SELECT * FROM jobs WHERE namespace = ? AND name = ?", (namespace, name)).fetchone()
        return JobRow.from_row(row) if row else None

    def job(self, namespace: str, name: str) -> JobRow:
        """The stored job; JobNotFound names it."""
        job = self.find(namespace, name)
        if job is None:
            raise JobNotFound(f"job {namespace}/{name} does not exist.")
        return job

    def node(self, name: str) -> sqlite3.Row:
        """A node row; NodeNotFound lists the nodes there are."""
        row = self._db.execute("SELECT * FROM nodes WHERE name = ?", (name,)).fetchone()
        if row is None:
            known = ", ".join(r["name"] for r in self._db.execute("SELECT name FROM nodes ORDER BY name"))
            raise NodeNotFound(f"node {name!r} does not exist (nodes: {known}).")
        return row

    def node_usage(self) -> dict[str, dict[str, float]]:
        """Requests of running pods, summed per node."""
        usage: dict[str, dict[str, float]] = {}
        for pod in self._db.execute("SELECT node, resources FROM pods WHERE phase = 'Running' AND node IS NOT NULL"):
            into = usage.setdefault(pod["node"], {})
            for name, amount in json.loads(pod["resources"]).items():
                into[name] = into.get(name, 0.0) + amount
        return usage

    def node_pods(self) -> dict[str, int]:
        """Running pods, counted per node (what the kubelet's --max-pods bounds)."""
        query = "SELECT node, COUNT(*) FROM pods WHERE phase = 'Running' AND node IS NOT NULL GROUP BY node"
        return {node: count for node, count in self._db.execute(query)}

    def queue_elastic(self, priorities: dict[str, int]) -> dict[str, dict[str, float]]:
        """What each queue's live jobs hold beyond their minResources, per queue (JobInfo GetElasticResources)."""
        held: dict[tuple[str, str], dict[str, float]] = {}
        for pod in self._db.execute("SELECT namespace, job, resources FROM pods WHERE phase = 'Running'"):
            into = held.setdefault((pod["namespace"], pod["job"]), {})
            for name, amount in json.loads(pod["resources"]).items():
                into[name] = into.get(name, 0.0) + amount
        elastic: dict[str, dict[str, float]] = {}
        for (namespace, name), used in held.items():
            job = self.find(namespace, name)
            if job is None:
                continue
            minimum = job.min_resources(priorities)
            into = elastic.setdefault(job.queue, {})
            for resource, amount in used.items():
                into[resource] = into.get(resource, 0.0) + max(amount - minimum.get(resource, 0.0), 0.0)
        return elastic

    def queue_usage(self) -> dict[str, dict[str, float]]:
        """Requests of running pods, summed per queue (the queue's own jobs; a parent's subtree is not added)."""
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
