"""Shortest run first: run-band PriorityClasses, how the policies give them and what Volcano does with them."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # benchmarks/ is not an installed package; `make bench` runs it from the checkout
    sys.path.insert(0, str(ROOT))

from agent.actions import Downscale, Proceed, RetryFromCheckpoint  # noqa: E402
from agent.guardrails import Guardrails, GuardrailViolation  # noqa: E402
from agent.observation import Observation, PlanRequest  # noqa: E402
from agent.policy import Decision  # noqa: E402
from agent.policy_llm import LLMPolicy  # noqa: E402
from agent.policy_rules import RulePolicy, RulesConfig  # noqa: E402
from agent.run_bands import band_for, is_run_band, run_bands  # noqa: E402
from benchmarks.agent_sim import SimJob, Simulation  # noqa: E402
from benchmarks.agent_strategies import priority_classes  # noqa: E402
from components.volcano.cluster import NodeInfo, QueueSnapshot  # noqa: E402
from components.volcano.resources import GPU  # noqa: E402
from components.volcano.scheduler import QueueState  # noqa: E402

BANDS = ["vcpilot-run-30m", "vcpilot-run-1h", "vcpilot-run-2h", "vcpilot-run-4h"]
POLICY = RulePolicy(RulesConfig(prior_samples_per_gpu_s=1.0, scaling_efficiency=0.9))


def test_run_bands_are_the_classes_named_for_a_whole_number_of_minutes_or_hours_shortest_first() -> None:
    classes = ["vcpilot-high", "vcpilot-run-2h", "vcpilot-run-90m", "vcpilot-run-45m", "system-node-critical"]
    assert run_bands(classes) == ["vcpilot-run-45m", "vcpilot-run-90m", "vcpilot-run-2h"]
    for name in [
        "vcpilot-run-0m",
        "vcpilot-run-1.5h",
        "vcpilot-run-90",
        "vcpilot-run-2d",
        "x-vcpilot-run-2h",
        "vcpilot-run-02h",
        "vcpilot-run-123456h",
        "vcpilot-run-",
    ]:
        assert not is_run_band(name), name
    assert run_bands(["vcpilot-run-60m", "vcpilot-run-1h"]) == ["vcpilot-run-1h"]  # one bound, named once
    assert band_for(1800, BANDS) == "vcpilot-run-30m"  # a bound is inclusive
    assert band_for(1801, BANDS) == "vcpilot-run-1h"
    assert band_for(4 * 3600 + 1, BANDS) == "" and band_for(60, []) == ""


def request(**changes) -> PlanRequest:
    values = {
        "gpus": 8,
        "gpus_min": 2,
        "global_batch": 32,
        "micro_batch": 4,
        "queue": "gpu-a",
        "max_steps": 200,
        "fallback_queue": "spare",
    }
    return PlanRequest(**{**values, **changes})


def observation(used: tuple[int, ...] = (0, 0), **changes) -> Observation:
    nodes = [
        NodeInfo(name=f"n{i}", ready=True, gpu_capacity=4, gpu_allocatable=4, gpu_allocated=u)
        for i, u in enumerate(used)
    ]
    queues = {
        "queue": QueueSnapshot(name="gpu-a", state="Open"),
        "fallback_queue": QueueSnapshot(name="spare", state="Open"),
    }
    base = {"time": 1000.0, "request": request(), "nodes": nodes, "run_bands": BANDS, **queues}
    return Observation(**{**base, **changes})


def test_the_rules_give_a_gang_the_band_its_estimated_training_fits_in() -> None:
    obs = observation()
    action = POLICY.plan(obs)
    # 200 steps × 32 samples at 8 GPUs × 0.9³ = 1,097 s: the 30-minute band.
    assert isinstance(action, Proceed) and POLICY.run_s(obs, 8) == pytest.approx(1097.4, abs=0.1)
    assert action.priority_class == "vcpilot-run-30m"
    # Downscaled to 4 GPUs it trains ~33 min: the hour band, from the size it will run at.
    small = POLICY.plan(observation(used=(4, 0)))
    assert isinstance(small, Downscale) and small.gpus == 4 and small.priority_class == "vcpilot-run-1h"
    # Longer than every band: no class, as before.
    assert POLICY.plan(observation(request=request(max_steps=5000))).priority_class == ""


def test_with_run_bands_the_rules_queue_at_once_where_without_them_they_wait() -> None:
    busy = observation(used=(4, 4))  # nothing starts now, in either queue
    assert POLICY.plan(busy.model_copy(update={"run_bands": []})).kind == "wait"
    assert POLICY.plan(busy.model_copy(update={"request": request(priority_class="vcpilot-low")})).kind == "wait"
    queued = POLICY.plan(busy)
    assert isinstance(queued, Proceed | Downscale) and queued.priority_class.startswith("vcpilot-run-")
    assert "; queued now: the run bands start the queue's shorter runs first" in queued.rationale


def test_a_run_that_names_its_class_a_borrower_a_cluster_without_bands_and_the_switch_off_get_no_band() -> None:
    assert POLICY.plan(observation(request=request(priority_class="vcpilot-low"))).priority_class == "vcpilot-low"
    assert POLICY.plan(observation(run_bands=[])).priority_class == ""
    off = RulePolicy(RulesConfig(shortest_run_first=False))
    assert off.plan(observation()).priority_class == ""
    # The target queue full: the fallback queue's borrower stays below that queue's owner.
    taken = QueueSnapshot(name="gpu-a", state="Open", capability={GPU: 8}, allocated={GPU: 8})
    full = observation(queue=taken, request=request(gpus_min=8))
    borrower = POLICY.plan(full)
    assert borrower.queue == "spare" and borrower.priority_class == ""  # type: ignore[union-attr]
    assert POLICY.priority_class(full, 8, "gpu-a") == "vcpilot-run-30m"


def test_a_retry_gets_the_band_of_what_is_left() -> None:
    from agent.observation import CheckpointInfo
    from components.volcano.cluster import JobInfo, PodInfo

    pod = PodInfo(name="t-0", task="worker", index=0, node="n1", phase="Failed", reason="Evicted")
    job = JobInfo(name="t", uid="u", queue="gpu-a", phase="Failed", min_available=2, pods=[pod])
    halfway = CheckpointInfo(path="/c/step-100", step=100)
    action = POLICY.diagnose(observation(request=request(max_steps=1000, attempt=1), job=job, checkpoint=halfway))
    assert isinstance(action, RetryFromCheckpoint) and action.gpus == 4  # n1 left out: 4 healthy GPUs
    # 900 steps left × 32 samples at 4 GPUs × 0.9² = 8,889 s: the 4-hour band.
    left = observation(request=request(max_steps=1000), checkpoint=halfway)
    assert POLICY.run_s(left, 4) == pytest.approx(8888.9, abs=0.1)
    assert action.priority_class == "vcpilot-run-4h"


# ---- the LLM policy: the band is the rules' arithmetic, not the model's choice -------------------------------


def decide_reply(action) -> dict:
    call = {"id": "c1", "type": "function", "function": {"name": "decide", "arguments": action.model_dump_json()}}
    return {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}


def llm_decides(priority_class: str) -> Decision:
    answer = Proceed(gpus=8, micro_batch=4, grad_accum=1, queue="gpu-a", priority_class=priority_class, rationale="r")
    guardrails = Guardrails(queues=["gpu-a", "spare"])
    transport = httpx.MockTransport(lambda r: httpx.Response(200, json=decide_reply(answer)))
    policy = LLMPolicy("http://llm.test/v1/chat/completions", "m", guardrails=guardrails, transport=transport)
    return policy.decide(observation(), "plan")


def test_the_llm_leaves_the_class_out_and_gets_the_band_but_cannot_pick_a_higher_one() -> None:
    left_out = llm_decides("")
    assert left_out.policy == "llm" and left_out.action.priority_class == "vcpilot-run-30m"
    assert llm_decides("vcpilot-run-30m").policy == "llm"
    # A shorter band than its training earns is queue-jumping, whatever a log line asked for.
    refused = llm_decides("vcpilot-run-4h")
    assert refused.policy == "rules" and refused.action.priority_class == "vcpilot-run-30m"
    assert "is not the run's, nor its run band 'vcpilot-run-30m'" in refused.fallback
    assert llm_decides("system-cluster-critical").policy == "rules"


def test_the_default_guardrails_allow_run_bands_and_nothing_else() -> None:
    rails = Guardrails()
    for allowed in ("", "vcpilot-run-30m"):
        rails.check_priority_class(allowed)
    for refused in ("vcpilot-high", "system-cluster-critical", "vcpilot-runaway"):
        with pytest.raises(GuardrailViolation, match="priority_classes"):
            rails.check_priority_class(refused)
    Guardrails(priority_classes=["team-*"]).check_priority_class("team-a")
    with pytest.raises(GuardrailViolation):
        Guardrails(priority_classes=["team-*"]).check_priority_class("")


# ---- the deployed classes and the simulator ----------------------------------------------------------------


def test_the_deployed_bands_are_shorter_higher_just_above_vcpilot_low_and_never_preempt() -> None:
    classes = priority_classes()  # deploy/volcano/priorityclasses.yaml, as the benchmark reads it
    bands = run_bands(classes)
    assert len(bands) >= 8 and {n for n in classes if n.startswith("vcpilot-run-")} == set(bands)
    values = [classes[b][0] for b in bands]
    assert values == sorted(values, reverse=True) and len(set(values)) == len(values)
    assert classes["vcpilot-low"][0] < min(values) and max(values) < classes["vcpilot-high"][0]
    assert not any(classes[b][1] for b in bands) and classes["vcpilot-high"][1]
    text = (ROOT / "deploy/volcano/priorityclasses.yaml").read_text(encoding="utf-8")
    written = {doc["metadata"]["name"]: doc.get("preemptionPolicy") for doc in yaml.safe_load_all(text)}
    assert all(written[b] == "Never" for b in bands)


def test_a_gang_whose_class_never_preempts_reclaims_nothing() -> None:
    def reclaims(preempts: bool) -> int:
        queues = (QueueState("ml-team", capability={GPU: 4.0}), QueueState("ml-spare", capability={GPU: 4.0}))
        sim = Simulation(("node-0",), 4, queues, start_s=0.0, reclaimable=("ml-spare",))
        sim.at(0.0, lambda: sim.submit(SimJob("default/owner", "ml-spare", 4, 1)))
        sim.at(10.0, lambda: sim.submit(SimJob("default/ours", "ml-team", 2, 1, preempts=preempts)))
        sim.run(lambda: False, 100.0)
        return sim.reclaims

    assert reclaims(True) == 1  # ml-team below its deserved half takes back what ml-spare holds above its own
    assert reclaims(False) == 0  # Volcano's reclaim skips a task whose preemptionPolicy is Never
