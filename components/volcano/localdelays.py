"""The policy actions LocalCluster's job controller holds back until their `timeout` has passed.

Volcano's job controller takes a policy's action at once only when its timeout is 0 (processNextReq); otherwise it
records `Execute action <action> after <timeout>` and starts a timer (AddDelayActionForJob), and the timer takes
the action on the job as it then is (pkg/controllers/job/job_controller.go). LocalCluster has no daemon and so no
timer: each waiting action is a row with the time it is due, and every reconcile takes those whose time has come,
by the cluster's clock. A timer is cancelled, as there, when an action of the same scope runs (cleanupDelayActions)
or when the pod whose failure or eviction set it runs again (CleanPodDelayActionsIfNeed).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from typing import NamedTuple

from components.volcano.lifecycle import action_scope

__all__ = ["DelayedAction", "DelayedActions"]


class DelayedAction(NamedTuple):
    """An action waiting for its time: what a pod's event on a job set off."""

    namespace: str
    job: str
    task: str
    pod: str
    event: str
    action: str


class DelayedActions:
    """The waiting actions in LocalCluster's state (table `delayed_actions`); runs inside the caller's transaction."""

    def __init__(self, db: sqlite3.Connection, clock: Callable[[], float]) -> None:
        self._db = db
        self._clock = clock

    def add(self, delayed: DelayedAction, delay_s: float) -> None:
        """Start the timer; one already running for the same pod and action keeps its time (AddDelayActionForJob)."""
        d = delayed
        self._db.execute(
            "INSERT OR IGNORE INTO delayed_actions(namespace, job, pod, task, event, action, due) "
            "VALUES (?,?,?,?,?,?,?)",
            (d.namespace, d.job, d.pod, d.task, d.event, d.action, self._clock() + delay_s),
        )

    def take_due(self) -> Iterator[DelayedAction]:
        """Yield, soonest first, each action whose time has come, removing it; one cancelled meanwhile is skipped."""
        now = self._clock()
        rows = self._db.execute(
            "SELECT rowid AS id, * FROM delayed_actions WHERE due <= ? ORDER BY due, rowid", (now,)
        ).fetchall()
        for row in rows:
            if self._db.execute("DELETE FROM delayed_actions WHERE rowid = ?", (row["id"],)).rowcount:
                yield DelayedAction(row["namespace"], row["job"], row["task"], row["pod"], row["event"], row["action"])

    def cancel_like(self, namespace: str, job: str, action: str, task: str, pod: str) -> None:
        """`action` ran on the job: cancel its waiting actions of the same scope (the same task's, the same pod's)."""
        scope = action_scope(action)
        for row in self._db.execute(
            "SELECT rowid AS id, action, task, pod FROM delayed_actions WHERE namespace = ? AND job = ?",
            (namespace, job),
        ).fetchall():
            if action_scope(row["action"]) != scope:
                continue
            if (scope == "task" and row["task"] != task) or (scope in ("pod", "partition") and row["pod"] != pod):
                continue
            self._db.execute("DELETE FROM delayed_actions WHERE rowid = ?", (row["id"],))

    def pod_running(self, namespace: str, job: str, pod: str) -> None:
        """The pod runs again: the actions its failure or eviction set off are cancelled."""
        self._db.execute(
            "DELETE FROM delayed_actions WHERE namespace = ? AND job = ? AND pod = ? "
            "AND event IN ('PodFailed', 'PodEvicted')",
            (namespace, job, pod),
        )

    def forget_job(self, namespace: str, job: str) -> None:
        """The job is gone: its timers with it (Volcano's find no job when they fire)."""
        self._db.execute("DELETE FROM delayed_actions WHERE namespace = ? AND job = ?", (namespace, job))
