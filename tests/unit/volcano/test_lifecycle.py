from vcjob_factory import vcjob, vcjob_task

from components.volcano.lifecycle import (
    action_scope,
    count_pods,
    crash_loop_wait,
    delay_s,
    match_action,
    match_policy,
    max_retry,
    next_backoff,
    phase_from_pods,
    restarts_in_place,
    task_max_retry,
)
from components.volcano.models import parse_job


def spec(**overrides):
    base = vcjob(
        "j",
        min_available=3,
        policies=[{"event": "PodEvicted", "action": "RestartJob"}, {"exitCode": 42, "action": "AbortJob"}],
        tasks=[
            vcjob_task("master", 1, policies=[{"event": "TaskCompleted", "action": "CompleteJob"}]),
            vcjob_task("worker", 2),
        ],
    )
    base["spec"].update(overrides)
    return parse_job(base).spec


def test_task_policy_wins_and_job_policy_applies_to_every_task():
    s = spec()
    assert match_action(s, "master", "TaskCompleted") == "CompleteJob"
    assert match_action(s, "worker", "TaskCompleted") is None
    assert match_action(s, "worker", "PodEvicted") == "RestartJob"


def test_exit_code_policy_matches_only_pod_failed_with_that_code():
    s = spec()
    assert match_action(s, "worker", "PodFailed", 42) == "AbortJob"
    assert match_action(s, "worker", "PodFailed", 1) is None


def test_any_event_wildcard():
    s = spec(policies=[{"event": "*", "action": "RestartJob"}])
    assert match_action(s, "worker", "PodFailed", 1) == "RestartJob"


def test_max_retry_defaults_to_three_like_volcano():
    assert max_retry(spec()) == 3
    assert max_retry(spec(maxRetry=5)) == 5


def test_phase_follows_pods():
    s = spec()
    pending = count_pods([("master", "Running"), ("worker", "Running")])
    assert phase_from_pods(s, "Pending", pending) == "Pending"
    running = count_pods([("master", "Running"), ("worker", "Running"), ("worker", "Running")])
    assert phase_from_pods(s, "Pending", running) == "Running"
    done = count_pods([("master", "Succeeded"), ("worker", "Succeeded"), ("worker", "Succeeded")])
    assert phase_from_pods(s, "Running", done) == "Completed"
    one_failed = count_pods([("master", "Succeeded"), ("worker", "Succeeded"), ("worker", "Failed")])
    assert phase_from_pods(s, "Running", one_failed) == "Failed"


def test_min_success_completes_early():
    s = spec(minSuccess=1)
    assert phase_from_pods(s, "Running", count_pods([("master", "Succeeded"), ("worker", "Running")])) == "Completed"


def test_a_policys_timeout_is_how_long_the_controller_waits_and_zero_or_less_is_no_wait():
    # applyPolicies hands the timeout to the action; processNextReq acts at once only on 0, and the timer of a
    # negative one fires at once.
    policies = [{"event": "PodFailed", "action": "AbortJob", "timeout": t} for t in ("1h30m", "0", "-1s")]
    s = spec(policies=[*policies, {"event": "PodEvicted", "action": "RestartJob"}])
    assert [delay_s(p) for p in s.policies or []] == [5400.0, 0.0, -1.0, 0.0]
    assert match_policy(s, "worker", "PodFailed", 1) is (s.policies or [])[0]
    assert [action_scope(a) for a in ("AbortJob", "RestartJob", "RestartTask", "RestartPod")] == [
        "job",
        "job",
        "task",
        "pod",
    ]


def test_the_kubelet_restarts_in_place_under_on_failure_and_always_only():
    # kubelet ShouldContainerBeRestarted: Never never; OnFailure on a non-zero exit (a vanished container, None,
    # included); Always, a pod's default when unset, on any exit.
    assert [restarts_in_place("Never", code) for code in (0, 1, None)] == [False, False, False]
    assert [restarts_in_place("OnFailure", code) for code in (0, 1, 137, None)] == [False, True, True, True]
    assert [restarts_in_place(policy, 0) for policy in ("Always", None, "")] == [True, True, True]


def test_crash_loop_back_off_starts_at_once_then_10s_doubling_to_5_minutes():
    # kuberuntime_manager.go doBackOff with flowcontrol.Backoff(10s, 300s): no entry yet, restart at once and Next
    # sets 10 s; every restart after waiting doubles it, up to 300 s.
    backoff, waits = None, []
    for _ in range(9):
        wait = crash_loop_wait(backoff, ran_s=1)
        waits.append(wait)
        backoff = next_backoff(backoff if wait else None)
    assert waits == [0, 10, 20, 40, 80, 160, 300, 300, 300]


def test_a_container_that_ran_over_ten_minutes_restarts_at_once_and_its_back_off_starts_over():
    # flowcontrol hasExpired: an entry untouched for twice the maximum (600 s) is dropped.
    assert crash_loop_wait(300, ran_s=600) == 300
    assert crash_loop_wait(300, ran_s=601) == 0
    assert next_backoff(None) == 10


def test_a_tasks_max_retry_of_0_is_3_and_of_minus_1_is_no_limit():
    # cache.go TaskFailed: "maxRetry == -1 means no limit", "Compatible with existing job: maxRetry == 0 -> 3".
    assert [task_max_retry(value) for value in (None, 0, 1, 5, -1)] == [3, 3, 1, 5, None]
