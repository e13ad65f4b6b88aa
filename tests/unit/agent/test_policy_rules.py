"""The rule policy: plans the size that finishes first, and tells an infrastructure fault from a bug that repeats."""

from __future__ import annotations

from typing import Any

import pytest

from agent.actions import Abort, Downscale, Proceed, RetryFromCheckpoint, Wait
from agent.failures import attempt_record, classify_failure
from agent.observation import AttemptRecord, CheckpointInfo, Observation, PlanRequest, Throughput
from agent.policies import plan_within
from agent.policy import Decision
from agent.policy_rules import LLAMA3_NODE_MTBF_S, RulePolicy, RulesConfig, allowed_sizes, checkpoint_interval_s
from components.volcano.cluster import Event, JobInfo, NodeInfo, PodInfo, QueueSnapshot

GPU = "nvidia.com/gpu"
# One GPU trains 1 sample/s; 90% of per-GPU speed is kept per doubling; running jobs free their GPUs in ~30 min.
CONFIG = RulesConfig(prior_samples_per_gpu_s=1.0, scaling_efficiency=0.9, mean_remaining_s=1800, recheck_s=60)
POLICY = RulePolicy(CONFIG)


def nodes(*allocated: int, gpus: int = 4, down: tuple[str, ...] = ()) -> list[NodeInfo]:
    return [
        NodeInfo(
            name=f"node-{i}",
            ready=f"node-{i}" not in down,
            gpu_capacity=gpus,
            gpu_allocatable=0 if f"node-{i}" in down else gpus,
            gpu_allocated=used,
        )
        for i, used in enumerate(allocated)
    ]


def queue(name: str = "gpu-a", **fields: Any) -> QueueSnapshot:
    return QueueSnapshot(name=name, state="Open", **fields)


def request(**changes: Any) -> PlanRequest:
    values: dict[str, Any] = {"gpus": 8, "global_batch": 32, "micro_batch": 4, "queue": "gpu-a", "max_steps": 200}
    return PlanRequest(**{**values, **changes})


def observation(**fields: Any) -> Observation:
    fields.setdefault("request", request())
    return Observation(time=1000.0, **fields)


# ---- plan ------------------------------------------------------------------------------------------------


def test_an_idle_cluster_trains_at_the_size_asked_for() -> None:
    decision = POLICY.decide(observation(queue=queue(), nodes=nodes(0, 0, 0, 0)), "plan")
    action = decision.action
    assert isinstance(action, Proceed) and decision.policy == "rules"
    assert (action.gpus, action.grad_accum, action.queue, action.global_batch) == (8, 1, "gpu-a", 32)
    assert [c.gpus for c in action.candidates] == [8, 4, 2, 1]
    assert all(c.wait_s == 0 and c.feasible for c in action.candidates)
    assert "8 GPUs now finishes in ~18 min, the fastest" in action.rationale


def test_a_crowded_queue_downscales_to_the_size_that_finishes_first_keeping_the_global_batch() -> None:
    # 8 of the queue's 12 GPUs are in use and a 6-GPU gang waits ahead: 4 GPUs start now, 8 would wait.
    crowded = queue(capability={GPU: 12}, allocated={GPU: 8}, pending=1, pending_gpus=6, running=1, running_gpus=8)
    action = POLICY.plan(observation(queue=crowded, nodes=nodes(4, 4, 0, 0)))
    assert isinstance(action, Downscale)
    assert (action.gpus, action.from_gpus, action.grad_accum, action.global_batch) == (4, 8, 2, 32)
    by_size = {c.gpus: c for c in action.candidates}
    assert by_size[8].wait_s > 0 and by_size[4].wait_s == 0
    assert by_size[4].finish_s == min(c.finish_s for c in action.candidates)
    assert action.rationale == (
        "queue gpu-a has 6 GPUs pending ahead and 8 of its 12 GPUs allocated; 8 GPUs free on healthy nodes; "
        "4 GPUs now finishes in ~33 min vs ~56 min waiting for 8 (grad-accum 2 keeps global batch 32)"
    )


def test_a_short_wait_for_the_full_size_beats_training_smaller_now() -> None:
    # One GPU is busy for ~30 min on a cluster whose 8 GPUs the job wants; a long training is worth the wait.
    long_run = observation(request=request(max_steps=5000), queue=queue(), nodes=nodes(1, 0))
    action = POLICY.plan(long_run)
    assert isinstance(action, Proceed) and action.gpus == 8
    assert "after ~30 min waiting" in action.rationale


def test_a_full_queue_moves_to_the_fallback_queue_at_full_size() -> None:
    full = queue(capability={GPU: 8}, allocated={GPU: 8}, running=1, running_gpus=8)
    spare = queue("spare")
    obs = observation(
        request=request(fallback_queue="spare"), queue=full, fallback_queue=spare, nodes=nodes(8, 0, 0, gpus=8)
    )
    action = POLICY.plan(obs)
    assert isinstance(action, Proceed) and (action.gpus, action.queue) == (8, "spare")
    assert "8 GPUs in queue spare now" in action.rationale
    assert {c.queue for c in action.candidates} == {"gpu-a", "spare"}


def test_after_a_replan_a_borrowed_queue_is_taken_only_where_the_gang_starts_there_now() -> None:
    # gpu-a is full with 8 GPUs pending ahead (~60 min); spare has 2 free GPUs and frees 8 in ~13 min.
    full = queue(capability={GPU: 8}, allocated={GPU: 8}, running=1, running_gpus=8, pending=1, pending_gpus=8)

    def plan(replans: int, *allocated: int, own: QueueSnapshot = full) -> Proceed | Downscale:
        wanted = request(fallback_queue="spare", gpus_min=8, replans=replans)
        obs = observation(request=wanted, queue=own, fallback_queue=queue("spare"), nodes=nodes(*allocated, gpus=8))
        action = POLICY.plan(obs, may_wait=False)
        assert isinstance(action, Proceed | Downscale)
        return action

    first = plan(0, 8, 6)
    assert first.queue == "spare" and "in queue spare after ~13 min waiting" in first.rationale
    # The gang sent there missed its start deadline: the re-plan keeps the run in its own queue, where it waits.
    again = plan(1, 8, 6)
    assert again.queue == "gpu-a" and "after ~60 min waiting" in again.rationale
    ruled_out = next(c for c in again.candidates if c.queue == "spare")
    assert not ruled_out.feasible and ruled_out.wait_s > 0
    assert ruled_out.note.endswith("missed its start deadline: borrowing only where it starts now")
    # Where the gang starts in spare now, the re-plan borrows; where the own queue can never hold it, it waits there.
    assert plan(1, 8, 0).queue == "spare"
    assert plan(1, 8, 6, own=queue(capability={GPU: 4})).queue == "spare"


def test_nothing_free_now_is_a_wait_with_a_reason_and_a_recheck_then_the_best_when_waiting_is_over() -> None:
    busy = observation(queue=queue(), nodes=nodes(4, 4))
    action = POLICY.plan(busy)
    assert isinstance(action, Wait) and action.recheck_s == 60
    assert action.reason.startswith("nothing can start now (queue gpu-a has nothing pending ahead; 0 GPUs free")
    assert all(c.feasible and c.wait_s > 0 for c in action.candidates)
    settled = POLICY.plan(busy, may_wait=False)
    assert isinstance(settled, Proceed | Downscale) and settled.global_batch == 32


def test_a_size_nothing_can_ever_hold_is_an_abort_that_names_the_limit() -> None:
    tiny = queue(capability={GPU: 2})
    action = POLICY.plan(observation(request=request(gpus_min=4), queue=tiny, nodes=nodes(0, 0)))
    assert isinstance(action, Abort)
    assert "queue gpu-a's capability is 2 GPUs" in action.reason and "4–8 GPUs" in action.reason
    assert not any(c.feasible for c in action.candidates)


def test_unhealthy_tainted_cordoned_and_avoided_nodes_give_no_gpus() -> None:
    cluster = [
        *nodes(0, gpus=8, down=("node-0",)),
        NodeInfo(
            name="t", ready=True, gpu_capacity=8, gpu_allocatable=8, gpu_allocated=0, taints=[{"effect": "NoSchedule"}]
        ),
        NodeInfo(name="c", ready=True, gpu_capacity=8, gpu_allocatable=8, gpu_allocated=0, unschedulable=True),
        NodeInfo(name="bad", ready=True, gpu_capacity=8, gpu_allocatable=8, gpu_allocated=0),
        NodeInfo(name="ok", ready=True, gpu_capacity=4, gpu_allocatable=4, gpu_allocated=0),
    ]
    action = POLICY.plan(observation(request=request(avoid_nodes=["bad"]), queue=queue(), nodes=cluster))
    assert isinstance(action, Downscale) and action.gpus == 4
    assert "the healthy nodes offer at most 4 GPUs" in {c.gpus: c for c in action.candidates}[8].note


def test_an_unobserved_cluster_trains_at_the_size_asked_for_and_says_why() -> None:
    action = POLICY.plan(observation(notes=["no cluster to observe from this step"]))
    assert isinstance(action, Proceed) and action.gpus == 8
    assert "could not be observed (no cluster to observe from this step)" in action.rationale


def test_measured_throughput_and_the_checkpoint_set_the_time_to_finish() -> None:
    measured = Throughput(samples_per_s=16.0, gpus=4, source="mlflow")  # 4 samples/s per GPU at 4 GPUs
    halfway = CheckpointInfo(path="/c/step-100", step=100)
    obs = observation(queue=queue(), nodes=nodes(0, 0), throughput=measured, checkpoint=halfway)
    assert POLICY.run_s(obs, 4) == pytest.approx(100 * 32 / 16.0)
    assert POLICY.run_s(obs, 8) == pytest.approx(100 * 32 / (16.0 * 2 * 0.9))


def test_the_checkpoint_interval_is_youngs_for_the_gangs_nodes_and_the_measured_save() -> None:
    # A node fails every hour; the gang of 8 one-GPU pods spans at most the 2 nodes: a fault every 30 min. A save
    # takes 2 s: sqrt(2 × 2 × 1800) = 84.9 s, at 8 GPUs' 1.11 s a step (28.8 samples/s, batch 32) 77 steps.
    measured = Throughput(samples_per_s=16.0, gpus=4, source="mlflow", checkpoint_save_s=2.0)
    young = CONFIG.model_copy(update={"checkpoint_stall_share": 0.0})  # Young's alone
    policy = RulePolicy(young.model_copy(update={"node_mtbf_s": 3600.0}))
    action = policy.plan(observation(queue=queue(), nodes=nodes(0, 0), throughput=measured))
    assert isinstance(action, Proceed) and action.gpus == 8
    assert checkpoint_interval_s(2.0, 1800.0) == pytest.approx(84.85, abs=0.01)
    assert action.checkpoint_every == 77
    # At Llama 3's rate Young's interval (1.9 h for this gang) is longer than the whole run (222 s): the final save.
    assert checkpoint_interval_s(2.0, LLAMA3_NODE_MTBF_S / 2) == pytest.approx(1.88 * 3600, rel=0.01)
    alone = RulePolicy(young).plan(observation(queue=queue(), nodes=nodes(0, 0), throughput=measured))
    assert isinstance(alone, Proceed) and alone.checkpoint_every == 200
    # By default a 2 s stall may come every 100 s, the 2% the stalls may take (`checkpoint_stall_share`): 90 steps.
    default = POLICY.plan(observation(queue=queue(), nodes=nodes(0, 0), throughput=measured))
    assert isinstance(default, Proceed) and default.checkpoint_every == 90


def test_an_asynchronous_checkpoint_is_taken_as_often_as_its_stall_allows_one_write_at_a_time() -> None:
    # The trainer stops 2 s to copy the state and writes it beside training for 30 s: a checkpoint every 100 s
    # (2% of the time stalled) at 1.11 s a step, 90 steps; a write of 125 s makes it one every 125 s (113 steps).
    policy = RulePolicy(CONFIG)
    for write_s, steps in ((30.0, 90), (125.0, 113)):
        measured = Throughput(
            samples_per_s=16.0, gpus=4, source="mlflow", checkpoint_save_s=2.0, checkpoint_write_s=write_s
        )
        action = policy.plan(observation(queue=queue(), nodes=nodes(0, 0), throughput=measured))
        assert isinstance(action, Proceed) and action.checkpoint_every == steps
    # A checkpoint on SIGTERM waits for the write in flight, then copies and writes: over the grace period
    # (2 + 2 × 150 > 300 s) the run's own interval stands, as for a slow synchronous save.
    slow = Throughput(samples_per_s=16.0, gpus=4, source="mlflow", checkpoint_save_s=2.0, checkpoint_write_s=150.0)
    action = RulePolicy(CONFIG.model_copy(update={"sigterm_grace_s": 300.0})).plan(
        observation(queue=queue(), nodes=nodes(0, 0), throughput=slow)
    )
    assert isinstance(action, Proceed) and action.checkpoint_every == 0


@pytest.mark.parametrize("save_s", [0.0, 301.0])
def test_without_a_measured_save_or_one_longer_than_the_grace_period_the_runs_own_interval_stands(
    save_s: float,
) -> None:
    # 0: nothing measured; over the 300 s grace period a reclaimed run could not checkpoint on SIGTERM.
    measured = Throughput(samples_per_s=16.0, gpus=4, source="mlflow", checkpoint_save_s=save_s)
    action = POLICY.plan(observation(queue=queue(), nodes=nodes(0, 0), throughput=measured))
    assert isinstance(action, Proceed) and action.checkpoint_every == 0


def test_done_work_ties_every_size_and_the_tie_goes_to_more_gpus_in_the_target_queue() -> None:
    done = CheckpointInfo(path="/c/step-200", step=200)
    obs = observation(
        request=request(fallback_queue="spare"),
        queue=queue(),
        fallback_queue=queue("spare"),
        nodes=nodes(0, 0),
        checkpoint=done,
    )
    action = POLICY.plan(obs)
    assert isinstance(action, Proceed) and (action.gpus, action.queue) == (8, "gpu-a")


def test_allowed_sizes_are_whole_pods_that_split_the_global_batch() -> None:
    assert allowed_sizes(request(gpus=8, gpus_min=2, gpus_per_pod=2, global_batch=48, micro_batch=2)) == [8, 6, 4, 2]
    assert allowed_sizes(request(gpus=8, global_batch=32, micro_batch=4)) == [8, 4, 2, 1]


# ---- diagnose --------------------------------------------------------------------------------------------

JOB = "wf-train-1"


def pod(name: str, node: str | None, reason: str | None = None, code: int | None = None, phase: str = "Failed"):
    return PodInfo(name=name, task="master", index=0, node=node, phase=phase, reason=reason, exit_code=code, gpus=2)


def failed(*pods: PodInfo, message: str | None = None) -> JobInfo:
    return JobInfo(
        name=JOB, uid="u", queue="gpu-a", phase="Failed", min_available=len(pods), pods=list(pods), message=message
    )


def diagnosis(job: JobInfo | None, cluster: list[NodeInfo], **fields: Any) -> Observation:
    changes = fields.pop("request", {})
    base = {"gpus": 4, "gpus_per_pod": 2, "global_batch": 32, "micro_batch": 4, "queue": "gpu-a", "attempt": 1}
    return Observation(time=1000.0, request=PlanRequest(**{**base, **changes}), job=job, nodes=cluster, **fields)


CKPT = CheckpointInfo(path="/ws/runs/wf/checkpoints/step-40", step=40)
HEALTHY = nodes(0, 0, 0)


def test_pods_evicted_from_a_node_are_retried_from_the_latest_checkpoint_off_that_node() -> None:
    job = failed(pod("m-0", "node-1", "Evicted"), pod("w-0", "node-0", "Terminated", 137))
    obs = diagnosis(job, nodes(0, 0, 0, down=("node-1",)), checkpoint=CKPT, request={"avoid_nodes": ["node-5"]})
    action = POLICY.diagnose(obs)
    assert isinstance(action, RetryFromCheckpoint)
    assert action.avoid_nodes == ["node-5", "node-1"] and action.gpus == 4
    assert (action.checkpoint, action.checkpoint_step) == ("/ws/runs/wf/checkpoints/step-40", 40)
    assert action.rationale.startswith("pod m-0 Evicted on node-1 (node-1 NotReady): an infrastructure fault; ")
    assert "retrying from step 40 (/ws/runs/wf/checkpoints/step-40) off node-5, node-1" in action.rationale


def test_a_pod_on_a_not_ready_node_blames_the_node() -> None:
    action = POLICY.diagnose(diagnosis(failed(pod("m-0", "node-2", "Error", 1)), nodes(0, 0, 0, down=("node-2",))))
    assert isinstance(action, RetryFromCheckpoint) and action.avoid_nodes == ["node-2"]


def test_when_the_healthy_gpus_no_longer_suffice_the_retry_is_smaller_with_the_same_global_batch() -> None:
    job = failed(pod("m-0", "node-0", "Evicted"), pod("w-0", "node-1", "Terminated", 137))
    action = POLICY.diagnose(diagnosis(job, nodes(0, 0, gpus=2, down=("node-0",)), checkpoint=CKPT))
    assert isinstance(action, RetryFromCheckpoint)
    assert (action.gpus, action.grad_accum, action.global_batch) == (2, 4, 32)
    assert "at 2 GPUs (the healthy nodes offer only 2" in action.rationale
    below_min = diagnosis(job, nodes(0, 0, gpus=2, down=("node-0",)), request={"gpus_min": 4})
    abort = POLICY.diagnose(below_min)
    assert isinstance(abort, Abort) and "fewer than gpus-min 4" in abort.reason


def test_a_killed_pod_is_retried_anywhere_and_an_unseen_job_is_retried_blind() -> None:
    killed = POLICY.diagnose(diagnosis(failed(pod("m-0", "node-0", "Killed", 137)), HEALTHY, checkpoint=CKPT))
    assert isinstance(killed, RetryFromCheckpoint) and killed.avoid_nodes == []
    assert "ended from outside the job" in killed.rationale
    blind = POLICY.diagnose(diagnosis(None, HEALTHY))
    assert isinstance(blind, RetryFromCheckpoint) and blind.checkpoint == ""
    assert blind.rationale.startswith(
        "the failed job could not be inspected: the cause is unknown; retrying from scratch"
    )


def test_one_rank_out_of_memory_is_retried_and_one_rank_with_a_gpu_error_keeps_off_its_node() -> None:
    oom = failed(pod("m-0", "node-0", "OOMKilled", 137), pod("w-0", "node-1", "Terminated", 137))
    action = POLICY.diagnose(diagnosis(oom, HEALTHY))
    assert isinstance(action, RetryFromCheckpoint) and action.avoid_nodes == []
    assert "only rank m-0 ran out of memory" in action.rationale
    xid = failed(pod("m-0", "node-0", "Error", 1), pod("w-0", "node-1", "Terminated", 137))
    event = Event(time=1.0, object="Pod/m-0", type="Warning", reason="GPUError", message="Xid 79: GPU has fallen off")
    action = POLICY.diagnose(diagnosis(xid, HEALTHY, events=[event]))
    assert isinstance(action, RetryFromCheckpoint) and action.avoid_nodes == ["node-0"]
    assert "only rank m-0 hit a GPU error (on node-0)" in action.rationale


def test_the_same_exit_code_on_every_rank_is_retried_once_then_aborted() -> None:
    crash = failed(pod("m-0", "node-0", "Error", 3), pod("w-0", "node-1", "Error", 3))
    first = diagnosis(crash, HEALTHY, checkpoint=CKPT)
    retry = POLICY.diagnose(first)
    assert isinstance(retry, RetryFromCheckpoint) and "a first failure is retried once" in retry.rationale
    record = attempt_record(first)
    assert record == AttemptRecord(
        attempt=1, job=JOB, gpus=4, outcome="Failed", exit_codes=[3], failed_ranks=2, ranks=2, checkpoint_step=40
    )
    again = diagnosis(crash, HEALTHY, checkpoint=CKPT, history=[record], request={"attempt": 2})
    abort = POLICY.diagnose(again)
    assert isinstance(abort, Abort)
    assert abort.reason == (
        "training fails deterministically: all 2 ranks that failed by themselves exited with code 3, exactly as "
        "attempt 1 did from the same checkpoint (step 40); a retry would repeat it, so fix the code or data and "
        "run again"
    )


def test_a_crash_after_progress_is_not_a_repeat() -> None:
    crash = failed(pod("m-0", "node-0", "Error", 3))
    earlier = AttemptRecord(attempt=1, job=JOB, gpus=4, outcome="Failed", exit_codes=[3], checkpoint_step=20)
    action = POLICY.diagnose(diagnosis(crash, HEALTHY, checkpoint=CKPT, history=[earlier], request={"attempt": 2}))
    assert isinstance(action, RetryFromCheckpoint)


def test_pods_the_controller_killed_do_not_hide_a_bug() -> None:
    """Rank 0 crashes with code 3; the controller then kills rank 1 (Terminated): a bug, not a fault."""
    job = failed(pod("m-0", "node-0", "Error", 3), pod("w-0", "node-0", "Terminated", 137))
    failure = classify_failure(job, diagnosis(job, HEALTHY))
    assert failure.kind == "bug" and failure.codes == (3,) and failure.failed_ranks == 1


def test_mixed_exit_codes_are_unclear_and_retried() -> None:
    job = failed(pod("m-0", "node-0", "Error", 3), pod("w-0", "node-1", "Error", 1), message="PodFailed")
    action = POLICY.diagnose(diagnosis(job, HEALTHY))
    assert isinstance(action, RetryFromCheckpoint)
    assert action.rationale.startswith(f"job {JOB} ended Failed (PodFailed): the cause is unclear")


def test_no_retry_once_the_attempts_are_spent() -> None:
    job = failed(pod("m-0", "node-1", "Evicted"))
    action = POLICY.diagnose(diagnosis(job, HEALTHY, request={"attempt": 3, "max_attempts": 3}))
    assert isinstance(action, Abort)
    assert action.reason.endswith("and attempt 3 of 3 was the last (max-recovery-attempts)")


def test_deciding_is_pure_the_same_observation_gives_the_same_decision() -> None:
    obs = observation(queue=queue(pending=1, pending_gpus=6), nodes=nodes(4, 0, 0))
    assert POLICY.decide(obs, "plan") == POLICY.decide(obs, "plan")
    assert POLICY.decide(obs, "plan").observation is obs


def test_ranks_their_watchdog_ended_are_a_hang_retried_as_a_fault_attempt_after_attempt() -> None:
    hung = failed(pod("m-0", "node-0", "Error", 124), pod("w-0", "node-1", "Terminated", 137))
    first = diagnosis(hung, HEALTHY, checkpoint=CKPT)
    action = POLICY.diagnose(first)
    assert isinstance(action, RetryFromCheckpoint) and action.checkpoint_step == 40
    assert action.rationale.startswith(
        "pod m-0 made no progress until the watchdog ended them (hung, exit code 124): an infrastructure fault"
    )
    again = diagnosis(hung, HEALTHY, checkpoint=CKPT, history=[attempt_record(first)], request={"attempt": 2})
    assert isinstance(POLICY.diagnose(again), RetryFromCheckpoint), "a hang twice is no bug"


def test_by_default_busy_gpus_free_in_two_hours_so_a_long_wait_for_the_full_size_loses_to_starting_smaller() -> None:
    # 12 of the queue's 16 GPUs held, 4 free: 4 GPUs start now; 8 wait for 4 more, a third of what is held.
    full = observation(
        request=request(max_steps=300),
        queue=queue(capability={GPU: 16}, allocated={GPU: 12}, running=2, running_gpus=12),
        nodes=nodes(8, 4, gpus=8),
    )
    thirty_minutes = RulePolicy(RulesConfig(mean_remaining_s=1800)).plan(full)
    assert isinstance(thirty_minutes, Proceed) and thirty_minutes.gpus == 8  # waits ~10 min, trains ~27 min
    action = RulePolicy().plan(full)  # the default: ~40 min of waiting is worth more than the slower run
    assert RulesConfig().mean_remaining_s == 7200
    assert isinstance(action, Downscale) and (action.gpus, action.grad_accum, action.global_batch) == (4, 2, 32)
    by_size = {c.gpus: c for c in action.candidates if c.queue == "gpu-a"}
    assert by_size[8].wait_s == pytest.approx(2400) and by_size[4].wait_s == 0


# ---- plan_within: the plan step's wait ------------------------------------------------------------------------


class FakeTime:
    """A clock that moves only when the plan step sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_a_wait_looks_again_and_takes_what_starts_once_the_cluster_frees_up():
    busy, idle = observation(queue=queue(), nodes=nodes(4, 4)), observation(queue=queue(), nodes=nodes(0, 0))
    looks = iter([busy, busy, idle])
    time, said = FakeTime(), []
    decision = plan_within(lambda: next(looks), POLICY, 3600, sleep=time.sleep, clock=lambda: time.now, say=said.append)
    assert isinstance(decision.action, Proceed) and decision.action.gpus == 8
    assert time.sleeps == [60, 60] and len(said) == 2
    assert said[0].startswith("waiting: nothing can start now (queue gpu-a has nothing pending ahead")
    assert said[0].endswith("; looking again in 60 s (3600 s of max-plan-wait-s left)")


def test_a_wait_that_outlasts_max_plan_wait_s_takes_the_best_candidate_and_says_so():
    busy = observation(queue=queue(), nodes=nodes(4, 4))
    time = FakeTime()
    decision = plan_within(lambda: busy, POLICY, 150, sleep=time.sleep, clock=lambda: time.now)
    assert time.sleeps == [60, 60, 30]  # never past the bound
    assert isinstance(decision.action, Proceed | Downscale) and decision.action.global_batch == 32
    waited = "waited 150 s, as long as max-plan-wait-s 150 allows, then took the best"
    assert decision.action.rationale.startswith(waited)
    time = FakeTime()
    at_once = plan_within(lambda: busy, POLICY, 0, sleep=time.sleep, clock=lambda: time.now)
    assert time.sleeps == [] and isinstance(at_once.action, Proceed | Downscale)


def test_the_default_bound_is_the_pipelines_parameter():
    from agent.policy_rules import RulesConfig
    from pipelines.parameters import DEFAULTS

    assert float(DEFAULTS["max-plan-wait-s"]) == RulesConfig().max_plan_wait_s == 86400


def test_a_look_that_finds_the_cluster_unchanged_keeps_the_answer_without_asking_again():
    class Counting:
        name = "counting"

        def __init__(self) -> None:
            self.asked = 0

        def decide(self, observation: Observation, stage: str) -> Decision:
            self.asked += 1
            return POLICY.decide(observation, stage)  # type: ignore[arg-type]

    busy = observation(queue=queue(), nodes=nodes(4, 4))
    later = busy.model_copy(update={"time": busy.time + 60})  # the same cluster, a minute on
    freer = observation(queue=queue(), nodes=nodes(4, 2)).model_copy(update={"time": busy.time + 120})  # 2 GPUs free
    looks = iter([busy, later, later, freer])
    policy, time = Counting(), FakeTime()
    decision = plan_within(lambda: next(looks), policy, 600, sleep=time.sleep, clock=lambda: time.now)
    assert policy.asked == 2 and time.sleeps == [60, 60, 60]
    assert isinstance(decision.action, Downscale) and decision.observation == freer
    # waiting out the bound on an unchanged cluster takes the best from the latest look
    looks = iter([busy, later, later])
    policy, time = Counting(), FakeTime()
    decision = plan_within(lambda: next(looks), policy, 120, sleep=time.sleep, clock=lambda: time.now)
    assert policy.asked == 1 and decision.observation == later and isinstance(decision.action, Proceed | Downscale)
