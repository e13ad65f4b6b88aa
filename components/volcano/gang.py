"""Volcano's gang rules for one placement attempt: which pod goes first, and when enough of a gang is placed.

After Volcano v1.15's scheduler (pkg/scheduler): the job controller fills the PodGroup's `spec.minTaskMember` from
each task's `minAvailable` (job_controller_actions.go `getMinTaskMember`), and the gang plugin holds a job to it
beside `minMember` (plugins/gang/gang.go with api/job_info.go). `GangProgress` follows one job through the allocate
action's loop (actions/allocate/allocate.go `allocateResourcesForTasks`) as its pods are placed or fit nowhere.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

__all__ = ["GangProgress", "task_order"]


class _Ordered(Protocol):
    @property
    def priority(self) -> int: ...

    @property
    def index(self) -> int: ...


_Pod = TypeVar("_Pod", bound=_Ordered)


def task_order(pods: Sequence[_Pod]) -> list[_Pod]:
    """The pods in the order allocate tries them: the session's TaskOrderFn.

    The priority plugin puts the higher pod priority first; then `helpers.CompareTask` goes by the index in the pod's
    name (`<job>-<task>-<index>`), so the tasks of a job take turns: a-0, b-0, a-1, b-1, a-2. Volcano breaks a tie of
    index by creation time and then by the pods' random UIDs; here the order given (the spec's task order) breaks it.
    """
    return sorted(pods, key=lambda pod: (-pod.priority, pod.index))


class GangProgress:
    """One job's pods placed so far in an attempt, held to minMember and to each task's minimum.

    Per-task minima count only while `minMember` is at least their sum: below it, `CheckTaskValid`,
    `CheckTaskReady` and the second case of `NeedContinueAllocating` all pass over them (job_info.go).
    """

    def __init__(
        self,
        min_member: int,
        min_task_member: Mapping[str, int],
        bound: int,
        bound_by_task: Mapping[str, int],
        waiting: Iterable[str],
        size: int,
    ) -> None:
        """`waiting`: the task of each pod still to place; `size`: every pod of the job, whatever its phase."""
        self.min_member = min_member
        self.task_min = {task: count for task, count in min_task_member.items() if count > 0}
        self.per_task = min_member >= sum(min_task_member.values())
        self.ready_num = bound  # ReadyTaskNum: bound, running, succeeded and (here) placed
        self.have: Counter[str] = Counter(bound_by_task)  # getJobAllocatedRoles
        self.pending: Counter[str] = Counter(waiting)
        self.size = size
        self.failed: set[str] = set()  # FitFailedRoles

    def short_task(self) -> str:
        """CheckTaskValid: say which task has fewer pods than its minimum, bound and waiting together ("" none)."""
        if not self.per_task:
            return ""
        for task in sorted(self.task_min):
            count = self.have[task] + self.pending[task]
            if count < self.task_min[task]:
                pods = "pod" if count == 1 else "pods"
                return f"task '{task}' has {count} {pods} but its minAvailable is {self.task_min[task]}"
        return ""

    def skips(self, task: str) -> bool:
        """TaskHasFitErrors: a pod of a task whose pod fit nowhere is not tried again (one without a task is)."""
        return bool(task) and task in self.failed

    def place(self, task: str) -> None:
        """Count a pod of `task` placed."""
        self.ready_num += 1
        self.have[task] += 1
        self.pending[task] -= 1

    def ready(self) -> bool:
        """The gang plugin's JobReady: IsReady (minMember) and CheckTaskReady (every task at its minimum)."""
        return self.ready_num >= self.min_member and not self.lacking()

    def lacking(self) -> str:
        """The first task below its minimum, as a reason's words ("" when none is)."""
        if not self.per_task:
            return ""
        for task in sorted(self.task_min):
            if self.have[task] < self.task_min[task]:
                return f"only {self.have[task]} of task '{task}', whose minAvailable is {self.task_min[task]}"
        return ""

    def fail(self, task: str) -> bool:
        """A pod of `task` fit nowhere: whether allocate goes on with the job's other pods (NeedContinueAllocating).

        A gang that needs every pod stops. Where the per-task minima do not count, it goes on while the pods bound,
        placed and still waiting in tasks that have not failed could reach minMember; where they count, while every
        failed task already has its minimum. A gang that is ready goes on whatever failed.
        """
        self.failed.add(task)
        if self.ready():
            return True
        if self.min_member == self.size:
            return False
        if not self.per_task:
            left = sum(count for t, count in self.pending.items() if t not in self.failed)
            return self.ready_num + left >= self.min_member
        return all(self.have[t] >= self.task_min.get(t, 0) for t in self.failed)
