from vcjob_factory import vcjob, vcjob_task

from components.volcano.lifecycle import (
    action_scope,
    count_pods,
    delay_s,
    match_action,
    match_policy,
    max_retry,
    phase_from_pods,
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
