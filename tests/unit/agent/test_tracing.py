"""A decision's trace, before MLflow: the exchange the LLM policy records, and the span tree made from a record."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

from agent.actions import Proceed
from agent.guardrails import Guardrails
from agent.observation import Observation, PlanRequest
from agent.policy_llm import LLMPolicy
from agent.policy_rules import RulePolicy
from agent.records import read_decision, write_decision
from agent.tracing import PlannedSpan, decision_spans
from components.volcano.cluster import NodeInfo, QueueSnapshot

KEY = "sk-unit-trace-00112233"
STAGES = ["observe", "candidates", "policy: {}", "guardrails", "action"]
NODES = [NodeInfo(name=f"n{i}", ready=True, gpu_capacity=4, gpu_allocatable=4, gpu_allocated=2) for i in (1, 2)]


def observation() -> Observation:
    request = PlanRequest(gpus=8, gpus_min=2, global_batch=64, micro_batch=2)
    queue = QueueSnapshot(name="default", state="Open", pending=1, pending_gpus=8)
    return Observation(time=1000.0, request=request, queue=queue, nodes=NODES)


def proceed(**changes) -> dict:
    action = Proceed(gpus=8, micro_batch=2, grad_accum=4, queue="default", rationale="the queue is idle")
    return action.model_dump() | changes


def reply(*calls: tuple[str, object]) -> dict:
    tool_calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        for i, (name, args) in enumerate(calls)
    ]
    return {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": tool_calls}}]}


def scripted(*bodies: dict) -> tuple[LLMPolicy, list[dict]]:
    """An LLM policy whose endpoint answers `bodies` in order (MockTransport), with a clock ticking 1 s a call."""
    asked: list[dict] = []
    answers = iter(bodies)

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(json.loads(request.content))
        body = next(answers)
        return httpx.Response(body.pop("status", 200), json=body)

    ticks = itertools.count(2000)
    policy = LLMPolicy(
        "http://llm.test/v1",
        "m",
        KEY,
        guardrails=Guardrails(),
        transport=httpx.MockTransport(handler),
        clock=lambda: float(next(ticks)),
    )
    return policy, asked


def names(span: PlannedSpan) -> list[tuple[str, str]]:
    return [(child.name, child.span_type) for child in span.children]


def by_name(span: PlannedSpan, name: str) -> PlannedSpan:
    (found,) = [s for s in span.walk() if s.name == name]
    return found


def test_a_rule_decision_is_five_stages_in_order() -> None:
    decision = RulePolicy().decide(observation(), "plan")
    root = decision_spans(decision, now_s=5000.0)
    assert (root.name, root.span_type) == ("plan-1", "CHAIN")
    assert [n for n, _ in names(root)] == [s.format("rules") for s in STAGES]
    assert [c.start_ns for c in root.children] == sorted(c.start_ns for c in root.children)
    assert all(root.start_ns <= s.start_ns <= s.end_ns <= root.end_ns for s in root.walk())
    assert len(by_name(root, "candidates").outputs["candidates"]) == len(decision.action.candidates) > 1
    assert by_name(root, "policy: rules").outputs["rationale"] == decision.action.rationale
    assert by_name(root, "guardrails").outputs["verdict"] == "not checked"
    assert by_name(root, "action").outputs["action"]["kind"] == decision.action.kind
    assert root.outputs["summary"] == decision.summary


def test_the_llm_exchange_is_recorded_as_it_happened_and_traced_from_the_record() -> None:
    policy, asked = scripted(reply(("list_nodes", {})), reply(("decide", proceed())))
    decision = policy.decide(observation(), "plan")
    assert decision.policy == "llm" and decision.exchange is not None
    exchange = decision.exchange
    first, second = exchange.rounds
    assert (first.started_s, first.duration_s) == (2000.0, 1.0)
    (call,) = first.tool_calls  # no tool context: list_nodes is not offered, and the model is told so
    assert call.name == "list_nodes" and "it is not offered" in call.result and call.id == "c0"
    assert [c.name for c in second.tool_calls] == ["decide"]
    assert [(c.name, c.passed) for c in exchange.checks] == [
        (n, True) for n in ("action", "stage", "guardrails", "invariants")
    ]
    assert exchange.tools == ["decide"] and exchange.used

    root = decision_spans(decision, now_s=3000.0)
    policy_span = by_name(root, "policy: llm")
    assert names(policy_span) == [("chat.completions 1", "LLM"), ("list_nodes", "TOOL"), ("chat.completions 2", "LLM")]
    # Each request's messages, rebuilt from the record, are the ones the endpoint received.
    assert by_name(root, "chat.completions 1").inputs["messages"] == asked[0]["messages"]
    assert by_name(root, "chat.completions 2").inputs["messages"] == asked[1]["messages"]
    assert by_name(root, "list_nodes").outputs["content"] == asked[1]["messages"][-1]["content"]
    assert by_name(root, "guardrails").outputs["verdict"] == "passed"
    assert policy_span.outputs["answer"] == proceed()
    assert KEY not in root.model_dump_json()


def test_an_endpoint_error_is_a_failed_request_span_and_the_rules_stand_in() -> None:
    policy, _ = scripted({"status": 500, "error": {"message": f"bad key {KEY}"}})
    decision = policy.decide(observation(), "plan")
    assert decision.policy == "rules" and "HTTP 500" in decision.fallback
    root = decision_spans(decision, now_s=3000.0)
    failed = by_name(root, "chat.completions 1")
    assert failed.error == decision.fallback and failed.outputs == {"error": decision.fallback}
    assert "***" in failed.error and KEY not in root.model_dump_json()
    assert [n for n, _ in names(by_name(root, "policy: llm"))] == ["chat.completions 1", "fallback: rules"]
    assert by_name(root, "guardrails").outputs["verdict"] == "no answer to check"


def test_a_refused_answer_shows_the_guardrails_verdict() -> None:
    policy, _ = scripted(reply(("decide", proceed(gpus=16, grad_accum=2))))  # the cap is 8
    decision = policy.decide(observation(), "plan")
    guardrails = by_name(decision_spans(decision, now_s=3000.0), "guardrails")
    assert guardrails.outputs["verdict"] == "refused"
    assert guardrails.inputs["proposed"]["gpus"] == 16
    *passed, refused = guardrails.outputs["checks"]
    assert [c["name"] for c in passed] == ["action", "stage"] and all(c["passed"] for c in passed)
    assert refused["name"] == "guardrails" and "max_gpus_per_job" in refused["detail"] and not refused["passed"]
    assert guardrails.outputs["refusals"] == decision.refusals


def test_a_written_record_gives_back_the_same_trace(tmp_path: Path) -> None:
    policy, _ = scripted(reply(("list_nodes", {})), reply(("decide", proceed())))
    decision = policy.decide(observation(), "plan")
    path = write_decision(decision, tmp_path, tracking_uri="")
    assert decision_spans(read_decision(path), 3000.0) == decision_spans(decision, 3000.0)


def test_without_tracking_nothing_is_traced_and_mlflow_is_not_imported(tmp_path: Path) -> None:
    code = (
        "import sys; from agent.policy_rules import RulePolicy; from agent.records import write_decision;"
        "from agent.observation import Observation, PlanRequest;"
        "d = RulePolicy().decide(Observation(time=1.0, request=PlanRequest(gpus=1, global_batch=4, micro_batch=4)),"
        " 'plan');"
        f"write_decision(d, {str(tmp_path)!r}, workflow='wf');"
        "sys.exit('mlflow' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "plan-1.json").is_file()
