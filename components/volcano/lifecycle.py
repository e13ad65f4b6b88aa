"""Volcano's job controller rules as pure functions: which policy action an event triggers, and a job's phase.

These follow `pkg/controllers/job` of Volcano v1.15: task policies win over job policies, an exit-code policy
matches `PodFailed` with that code, `RestartJob` increments `retryCount` and the job fails once the count has
reached `maxRetry` (3 when unset), and a job whose pods all finished completes when `minSuccess` (or
`minAvailable`) pods succeeded. Beside them, the kubelet's rules for a pod whose restartPolicy restarts its container
in place (OnFailure, Always) and its CrashLoopBackOff, and the task's maxRetry those restarts spend (TaskFailed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol

from components.durations import parse_go_duration
from components.volcano.resources import EMPTY

if TYPE_CHECKING:
    from components.volcano.models import JobSpec, LifecyclePolicy

__all__ = [
    "CRASH_LOOP_BACKOFF_MAX_S",
    "CRASH_LOOP_BACKOFF_S",
    "DEFAULT_MAX_RETRY",
    "RESTART_ACTIONS",
    "GangShape",
    "PodCounts",
    "TaskShape",
    "action_scope",
    "count_pods",
    "crash_loop_wait",
    "delay_s",
    "match_action",
    "match_policy",
    "max_retry",
    "next_backoff",
    "phase_from_pods",
    "restarts_in_place",
    "task_max_retry",
]

DEFAULT_MAX_RETRY = 3

# The kubelet's back-off before it restarts a crashed container (pkg/kubelet/kubelet.go: flowcontrol.NewBackOff with
# backOffPeriod 10 s and MaxContainerBackOff 300 s).
CRASH_LOOP_BACKOFF_S = 10.0
CRASH_LOOP_BACKOFF_MAX_S = 300.0

# Actions that restart pods; each one spends one unit of the job's retry budget.
RESTART_ACTIONS = frozenset({"RestartJob", "RestartTask", "RestartPod"})


class TaskShape(Protocol):
    """What the phase rules read of a task: a `TaskSpec`, or a stored job's (`localstate.StoredTask`)."""

    @property
    def name(self) -> str: ...  # noqa: D102
    @property
    def replicas(self) -> int: ...  # noqa: D102
    @property
    def min_available(self) -> int | None: ...  # noqa: D102


class GangShape(Protocol):
    """What the phase rules read of a job: a `JobSpec`, or a stored job (`localstate.JobRow`, no model built)."""

    @property
    def min_available(self) -> int | None: ...  # noqa: D102
    @property
    def min_success(self) -> int | None: ...  # noqa: D102
    @property
    def tasks(self) -> Sequence[TaskShape]: ...  # noqa: D102


class PodCounts(NamedTuple):
    """Pods of a job's current run by phase, overall and per task."""

    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    succeeded_by_task: Mapping[str, int] = EMPTY
    failed_by_task: Mapping[str, int] = EMPTY


def count_pods(pods: list[tuple[str, str]]) -> PodCounts:
    """Count `(task, phase)` pairs into PodCounts."""
    by_phase = {"Pending": 0, "Running": 0, "Succeeded": 0, "Failed": 0}
    succeeded: dict[str, int] = {}
    failed: dict[str, int] = {}
    for task, phase in pods:
        by_phase[phase] = by_phase.get(phase, 0) + 1
        if phase == "Succeeded":
            succeeded[task] = succeeded.get(task, 0) + 1
        elif phase == "Failed":
            failed[task] = failed.get(task, 0) + 1
    return PodCounts(
        pending=by_phase["Pending"],
        running=by_phase["Running"],
        succeeded=by_phase["Succeeded"],
        failed=by_phase["Failed"],
        succeeded_by_task=succeeded,
        failed_by_task=failed,
    )


def max_retry(spec: JobSpec) -> int:
    """The job's retry budget, Volcano's default when unset or zero."""
    return spec.max_retry or DEFAULT_MAX_RETRY


def task_max_retry(value: int | None) -> int | None:
    """How many container restarts a task's pods may add up to before TaskFailed; None for no limit.

    cache.go `TaskFailed`: -1 means no limit and 0 (unset) means 3. The CRD's `minimum: 0` refuses -1 at admission,
    so only a job stored some other way could have it.
    """
    if value == -1:
        return None
    return value or DEFAULT_MAX_RETRY


def restarts_in_place(restart_policy: str | None, exit_code: int | None) -> bool:
    """Whether the kubelet restarts a container that ended with `exit_code` (None: it vanished) in its pod.

    kubelet ShouldContainerBeRestarted: never under Never, on a non-zero exit under OnFailure, on any exit under
    Always, which is what an unset policy is (the API server's SetDefaults_PodSpec).
    """
    policy = restart_policy or "Always"
    if policy == "Never":
        return False
    return policy == "Always" or exit_code != 0


def crash_loop_wait(backoff: float | None, ran_s: float) -> float:
    """Seconds the kubelet waits before restarting a container that ran `ran_s` and ended; 0 restarts it at once.

    kuberuntime_manager.go `doBackOff`: a container with no back-off yet (`backoff` None, its first crash) restarts
    at once; so does one whose back-off expired, untouched for twice the maximum (flowcontrol `hasExpired`: the
    container ran over 600 s). Otherwise it waits its back-off, CrashLoopBackOff meanwhile.
    """
    if backoff is None or ran_s > 2 * CRASH_LOOP_BACKOFF_MAX_S:
        return 0.0
    return backoff


def next_backoff(backoff: float | None) -> float:
    """The container's back-off once it restarts (flowcontrol `Next`): 10 s, or `backoff` doubled up to 300 s.

    `backoff` is None for a restart at once (a first crash, or an expired back-off): the back-off starts over.
    """
    if backoff is None:
        return CRASH_LOOP_BACKOFF_S
    return min(backoff * 2, CRASH_LOOP_BACKOFF_MAX_S)


def _matches(policy: LifecyclePolicy, event: str, exit_code: int | None) -> bool:
    if policy.exit_code is not None:
        return event == "PodFailed" and exit_code == policy.exit_code
    events = set(policy.events or [])
    if policy.event:
        events.add(policy.event)
    return event in events or "*" in events


def match_policy(spec: JobSpec, task: str | None, event: str, exit_code: int | None = None) -> LifecyclePolicy | None:
    """The policy Volcano's controller applies to `event` on a pod of `task`, or None to just sync the job."""
    for t in spec.tasks:
        if t.name == task:
            for policy in t.policies or []:
                if _matches(policy, event, exit_code):
                    return policy
    for policy in spec.policies or []:
        if _matches(policy, event, exit_code):
            return policy
    return None


def match_action(spec: JobSpec, task: str | None, event: str, exit_code: int | None = None) -> str | None:
    """The action Volcano takes for `event` on a pod of `task`, or None to just sync the job."""
    policy = match_policy(spec, task, event, exit_code)
    return policy.action if policy else None


def delay_s(policy: LifecyclePolicy) -> float:
    """How long the controller waits before it takes the policy's action: its `timeout`, in seconds.

    Volcano's applyPolicies hands the policy's timeout to the action (`delayAct.delay`), and processNextReq takes it
    at once only when that is 0; any other one, a negative one included, goes through AddDelayActionForJob, whose
    timer fires at once for a negative one (pkg/controllers/job/job_controller.go).
    """
    return parse_go_duration(policy.timeout) if policy.timeout else 0.0


def action_scope(action: str) -> str:
    """What an action acts on, for cancelling delayed ones (job_controller_util.go `GetActionType`)."""
    return {"RestartTask": "task", "RestartPod": "pod", "RestartPartition": "partition"}.get(action, "job")


def phase_from_pods(spec: GangShape, current: str, counts: PodCounts) -> str:
    """The phase a syncing Pending/Running job moves to given its pods (the controller's SyncJob)."""
    total = sum(t.replicas or 0 for t in spec.tasks)
    min_available = spec.min_available or 0
    if total == 0:
        return current
    if spec.min_success is not None and counts.succeeded >= spec.min_success:
        return "Completed"
    if counts.succeeded + counts.failed == total:
        task_min = sum(t.replicas if t.min_available is None else t.min_available for t in spec.tasks)
        if min_available >= task_min:
            for t in spec.tasks:
                if t.min_available is not None and counts.succeeded_by_task.get(t.name, 0) < t.min_available:
                    return "Failed"
        if spec.min_success is not None:
            return "Completed" if counts.succeeded >= spec.min_success else "Failed"
        return "Completed" if counts.succeeded >= min_available else "Failed"
    if current == "Pending" and counts.running + counts.succeeded + counts.failed >= max(min_available, 1):
        return "Running"
    if current == "Running" and counts.pending > total - min_available:
        return "Pending"  # state/running.go: more pods wait than the gang can spare (an evicted one found no node)
    return current
