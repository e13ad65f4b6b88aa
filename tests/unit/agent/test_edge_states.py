"""Cluster states no test cluster shows: the rule policy still decides, within the request, as the LLM check allows.

Hand-made edge cases (no nodes, queues closed or capped since the plan, a checkpoint past the run's end, a failed
job in a stray queue) and observations drawn broadly by hypothesis: zero or huge GPU counts, nodes NotReady,
cordoned, tainted or over-allocated, queues Closed, capped by a parent or missing, a PriorityClass missing,
failures of every kind over many attempts. Whatever the state, a decision keeps the request's invariants — never
raises, the global batch kept, a size within [gpus_min, gpus] in whole pods, the avoided and blamed nodes kept
off, no retry past the budget, a bounded wait, one readable sentence — and an action the rules take is one
`check_answer` would accept from the LLM (an abort at plan aside: the LLM may only wait there, and the wait bound
hands the decision back to the rules).
"""

from __future__ import annotations

import math
import re
from typing import Any

from hypothesis import assume, example, given
from hypothesis import strategies as st
from pydantic import ValidationError

from agent.actions import Abort, Downscale, Proceed, RetryFromCheckpoint, Wait
from agent.failures import classify_failure
from agent.observation import AttemptRecord, CheckpointInfo, Observation, PlanRequest, Throughput
from agent.policy import Stage
from agent.policy_llm import check_answer
from agent.policy_rules import RulePolicy
from components.volcano.cluster import JobInfo, NodeInfo, PodInfo, QueueLimit, QueueSnapshot

GPU = "nvidia.com/gpu"
POLICY = RulePolicy()
NODES = [f"node-{i}" for i in range(4)]
NOT_OPEN = "Volcano admits no new job into a queue that is not Open"
UNREADABLE = re.compile(r"\b(inf|nan|None)\b|\n")


def node(name: str = "node-0", gpus: int = 8, allocated: int = 0, **fields: Any) -> NodeInfo:
    return NodeInfo(name=name, ready=True, gpu_capacity=gpus, gpu_allocatable=gpus, gpu_allocated=allocated, **fields)


def request(**changes: Any) -> PlanRequest:
    values: dict[str, Any] = {"gpus": 8, "global_batch": 32, "micro_batch": 4, "queue": "gpu-a", "max_steps": 200}
    return PlanRequest(**{**values, **changes})


def assert_sound(observation: Observation, stage: Stage) -> None:
    """The invariants every decision keeps, whatever the cluster looks like."""
    wanted = observation.request
    action = POLICY.decide(observation, stage).action
    words = action.rationale + getattr(action, "reason", "")
    assert not UNREADABLE.search(words), words
    assert all(math.isfinite(c.wait_s) and math.isfinite(c.run_s) for c in action.candidates)
    if isinstance(action, Wait):
        assert stage == "plan" and 0 < action.recheck_s <= POLICY.config.recheck_s
    if isinstance(action, Proceed | Downscale | RetryFromCheckpoint):
        assert wanted.gpus_min <= action.gpus <= wanted.gpus and action.gpus % wanted.gpus_per_pod == 0
        assert action.global_batch == wanted.global_batch
    if isinstance(action, RetryFromCheckpoint):
        assert wanted.attempt < wanted.max_attempts
        blamed = classify_failure(observation.job, observation).bad_nodes
        assert {*wanted.avoid_nodes, *blamed} <= set(action.avoid_nodes)
    if not (stage == "plan" and isinstance(action, Abort)):
        check_answer(action, observation, stage)
    elif lower := re.search(r"lower gpus-min to (\d+)", action.rationale):  # advice that works
        smaller = wanted.model_copy(update={"gpus_min": int(lower[1])})
        assert not isinstance(POLICY.plan(observation.model_copy(update={"request": smaller})), Abort)


# ---- hand-made ----------------------------------------------------------------------------------------------


def test_a_failure_after_the_last_step_checkpointed_is_diagnosed() -> None:
    # The run wrote its final checkpoint (step 200 of 200), then failed, with a save time measured: nothing is
    # left to train, so the interval is the whole run, not a division by the zero seconds left.
    measured = Throughput(samples_per_s=16.0, gpus=4, source="mlflow", checkpoint_save_s=10.0)
    done = CheckpointInfo(path="/ws/ckpt/step-200", step=200)
    for step in (200, 250):  # at the end, and "from the future" (a longer run's checkpoint)
        obs = Observation(
            time=1000.0,
            request=request(),
            nodes=[node()],
            checkpoint=done.model_copy(update={"step": step}),
            throughput=measured,
        )
        retry = POLICY.decide(obs, "diagnose").action
        assert isinstance(retry, RetryFromCheckpoint) and retry.checkpoint_every == 200
        plan = POLICY.decide(obs, "plan").action
        assert isinstance(plan, Proceed) and plan.checkpoint_every == 200
        assert_sound(obs, "diagnose")


def test_a_step_too_fast_to_time_checkpoints_at_the_end() -> None:
    measured = Throughput(samples_per_s=1e308, gpus=1, source="mlflow", checkpoint_save_s=2.0)
    action = POLICY.plan(Observation(time=1000.0, request=request(), nodes=[node()], throughput=measured))
    assert isinstance(action, Proceed) and action.checkpoint_every == 200


def test_without_nodes_a_closed_queue_is_not_trained_in() -> None:
    # The queues were read but no node was (none has joined yet): Volcano's admission would refuse a job into
    # the closed queue at once, so the plan goes to the open fallback, or stops saying why.
    closed = QueueSnapshot(name="gpu-a", state="Closed")
    spare = QueueSnapshot(name="spare", state="Open")
    obs = Observation(time=1000.0, request=request(fallback_queue="spare"), queue=closed, fallback_queue=spare)
    action = POLICY.plan(obs)
    assert isinstance(action, Proceed) and (action.queue, action.gpus) == ("spare", 8)
    assert "queue gpu-a is Closed" in action.rationale
    assert_sound(obs, "plan")
    alone = Observation(time=1000.0, request=request(), queue=closed)
    abort = POLICY.plan(alone)
    assert isinstance(abort, Abort)
    assert abort.reason.startswith("no queue of the run takes jobs: queue gpu-a is Closed")
    unseen = POLICY.plan(Observation(time=1000.0, request=request()))
    assert isinstance(unseen, Proceed) and unseen.queue == "gpu-a"


def test_a_failed_job_in_a_queue_the_run_does_not_name_is_retried_in_the_runs_queue() -> None:
    stray = JobInfo(
        name="wf-train-1",
        uid="u",
        queue="someone-elses",
        phase="Failed",
        min_available=1,
        pods=[PodInfo(name="m-0", task="master", index=0, node="node-0", phase="Failed", reason="Killed")],
    )
    obs = Observation(time=1000.0, request=request(fallback_queue="spare"), nodes=[node()], job=stray)
    action = POLICY.diagnose(obs)
    assert isinstance(action, RetryFromCheckpoint) and action.queue == "gpu-a"
    assert_sound(obs, "diagnose")


def test_a_retry_leaves_a_queue_closed_since_the_attempt_started() -> None:
    # The attempt ran in gpu-a, which an administrator has closed since: Volcano would refuse the retry's job.
    job = JobInfo(
        name="wf-train-1",
        uid="u",
        queue="gpu-a",
        phase="Failed",
        min_available=1,
        pods=[PodInfo(name="m-0", task="master", index=0, node="node-0", phase="Failed", reason="Killed")],
    )
    closed = QueueSnapshot(name="gpu-a", state="Closed")
    obs = Observation(
        time=1000.0,
        request=request(fallback_queue="spare"),
        queue=closed,
        fallback_queue=QueueSnapshot(name="spare", state="Open"),
        nodes=[node()],
        job=job,
    )
    action = POLICY.diagnose(obs)
    assert isinstance(action, RetryFromCheckpoint) and action.queue == "spare"
    assert action.rationale.endswith(f"in queue spare (queue gpu-a is Closed: {NOT_OPEN})")
    assert_sound(obs, "diagnose")
    alone = POLICY.diagnose(Observation(time=1000.0, request=request(), queue=closed, nodes=[node()], job=job))
    assert isinstance(alone, Abort)
    assert alone.reason.endswith(", and no queue of the run takes jobs: queue gpu-a is Closed: " + NOT_OPEN)


def test_a_retry_fits_the_queues_capability_as_the_plan_does() -> None:
    # The nodes hold 16 GPUs, but the queue's capability (lowered since the plan) admits no gang above 4: a retry
    # at 8 would stay Pending for good, so it shrinks, or stops when even gpus-min is above the capability.
    capped = QueueSnapshot(name="gpu-a", state="Open", capability={GPU: 4})
    killed = PodInfo(name="m-0", task="master", index=0, node="node-0", phase="Failed", reason="Killed")
    job = JobInfo(name="wf-train-1", uid="u", queue="gpu-a", phase="Failed", min_available=1, pods=[killed])
    obs = Observation(time=1000.0, request=request(), queue=capped, nodes=[node(gpus=16)], job=job)
    action = POLICY.diagnose(obs)
    assert isinstance(action, RetryFromCheckpoint) and (action.gpus, action.grad_accum) == (4, 2)
    assert "at 4 GPUs (queue gpu-a's capability is 4 GPUs; grad-accum raised to keep global batch 32)" in (
        action.rationale
    )
    assert_sound(obs, "diagnose")
    abort = POLICY.diagnose(obs.model_copy(update={"request": request(gpus_min=8)}))
    assert isinstance(abort, Abort)
    assert abort.reason.endswith(", and queue gpu-a's capability is 4 GPUs, fewer than gpus-min 8")


# ---- drawn -------------------------------------------------------------------------------------------------

COUNTS = st.one_of(st.integers(-2, 16), st.sampled_from([0, 2**31, 10**6]))
AMOUNTS: st.SearchStrategy[dict[str, float]] = st.one_of(
    st.just({}), st.fixed_dictionaries({GPU: st.one_of(st.floats(-2, 32), st.just(1e9))})
)
NODE = st.builds(
    NodeInfo,
    name=st.sampled_from(NODES),
    ready=st.booleans(),
    gpu_capacity=COUNTS,
    gpu_allocatable=COUNTS,
    gpu_allocated=COUNTS,
    taints=st.lists(st.fixed_dictionaries({"key": st.just("k"), "effect": st.sampled_from(["NoSchedule", ""])})),
    unschedulable=st.booleans(),
)


def queues(name: str) -> st.SearchStrategy[QueueSnapshot]:
    return st.builds(
        QueueSnapshot,
        name=st.just(name),
        state=st.sampled_from(["Open", "Open", "Closed", "Closing", "Unknown"]),
        capability=AMOUNTS,
        allocated=AMOUNTS,
        pending=st.integers(0, 3),
        inqueue=st.integers(0, 3),
        pending_gpus=COUNTS,
        inqueue_gpus=COUNTS,
        unknown=st.integers(0, 2),
        unknown_gpus=st.integers(0, 8),
        guarantee=AMOUNTS,
        children=st.lists(st.just("child"), max_size=1),
        ancestors=st.lists(st.builds(QueueLimit, name=st.just("org"), capability=AMOUNTS, allocated=AMOUNTS)),
        guaranteed_elsewhere=AMOUNTS,
    )


POD = st.builds(
    PodInfo,
    name=st.sampled_from(["m-0", "w-0", "w-1"]),
    task=st.just("worker"),
    index=st.integers(0, 2),
    node=st.one_of(st.none(), st.sampled_from(NODES)),
    phase=st.sampled_from(["Failed", "Running", "Succeeded"]),
    reason=st.sampled_from([None, "Evicted", "NodeLost", "Preempted", "OOMKilled", "Error", "Terminated", "Killed"]),
    exit_code=st.sampled_from([None, 0, 1, 3, 28, 124, 143]),
)
JOB = st.builds(
    JobInfo,
    name=st.just("wf-train-1"),
    uid=st.just("u"),
    queue=st.sampled_from(["gpu-a", "spare", "other"]),
    phase=st.sampled_from(["Failed", "Aborted"]),
    min_available=st.integers(0, 3),
    pods=st.lists(POD, max_size=3),
)


HISTORY = st.builds(  # many attempts, mixed kinds: exit codes, blamed nodes, progress or none
    AttemptRecord,
    attempt=st.integers(1, 5),
    job=st.just("j"),
    gpus=st.integers(0, 16),
    outcome=st.just("Failed"),
    exit_codes=st.lists(st.sampled_from([1, 3]), max_size=2),
    checkpoint_step=st.sampled_from([0, 5]),
    nodes=st.lists(st.sampled_from(NODES), max_size=1),
)


@st.composite
def observations(draw: st.DrawFn) -> Observation:
    per_pod = draw(st.sampled_from([1, 2, 8]))
    gpus = per_pod * draw(st.sampled_from([1, 3, 4, 16]))
    micro = draw(st.sampled_from([1, 3]))
    fallback = draw(st.sampled_from(["", "spare", "gpu-a"]))  # none, another, the queue itself
    wanted = {
        "gpus": gpus,
        "gpus_min": draw(st.integers(1, gpus)),
        "gpus_per_pod": per_pod,
        "global_batch": gpus * micro * draw(st.sampled_from([1, 5])),
        "micro_batch": micro,
        "queue": "gpu-a",
        "fallback_queue": fallback,
        "max_steps": draw(st.sampled_from([1, 200, 10**9])),
        "attempt": draw(st.integers(1, 5)),
        "max_attempts": draw(st.integers(1, 4)),
        "avoid_nodes": draw(st.lists(st.sampled_from(NODES), max_size=2)),
        "priority_class": draw(st.sampled_from(["", "high", "urgent"])),
    }
    step = draw(st.sampled_from([0, 5, 200, 10**12]))
    try:
        return Observation.model_validate(
            {
                "time": 1000.0,
                "request": wanted,
                "queue": draw(st.none() | queues("gpu-a")),
                "fallback_queue": draw(st.none() | queues(fallback)) if fallback not in ("", "gpu-a") else None,
                "nodes": draw(st.lists(NODE, max_size=4)),
                # a queue or PriorityClass the cluster does not have (None: the classes were not read)
                "missing_queues": draw(st.lists(st.sampled_from(["gpu-a", "spare"]), max_size=2, unique=True)),
                "priority_classes": draw(st.none() | st.just(["high"])),
                "job": draw(st.none() | JOB),
                "history": draw(st.lists(HISTORY, max_size=4)),
                "checkpoint": draw(st.none() | st.just({"path": f"/ws/ckpt/step-{step}", "step": step})),
                "throughput": draw(
                    st.none()
                    | st.builds(
                        dict,
                        samples_per_s=st.sampled_from([1e-3, 16.0, 1e308]),
                        gpus=st.sampled_from([1, 4, 10**6]),
                        checkpoint_save_s=st.sampled_from([0.0, 2.0, 1000.0]),
                    )
                ),
            }
        )
    except ValidationError:
        assume(False)
        raise


@given(observations(), st.sampled_from(["plan", "diagnose"]))
@example(  # nothing left to train, a save measured: the checkpoint interval divided by zero seconds
    Observation(
        time=1000.0,
        request=request(),
        nodes=[node()],
        checkpoint=CheckpointInfo(path="/ws/ckpt/step-200", step=200),
        throughput=Throughput(samples_per_s=16.0, gpus=4, checkpoint_save_s=2.0),
    ),
    "diagnose",
)
@example(  # no node observed, the queue closed: a proceed Volcano's admission refuses
    Observation(time=1000.0, request=request(), queue=QueueSnapshot(name="gpu-a", state="Closed")), "plan"
)
def test_any_cluster_state_gets_a_sound_decision(observation: Observation, stage: Stage) -> None:
    assert_sound(observation, stage)
