"""The agent's reasoning as an MLflow trace: a reviewer opens a decision's run, then its Traces tab, and sees why.

The trace is made after the decision, from its record alone — the `Decision`, and for the LLM policy the
`Exchange` it carries — so it shows what happened, can be made again from a decision file, and is tested without
a model. `decision_spans` is the pure part: the tree of spans, with their inputs, outputs and times, which
`agent.records` spools with the decision's run; the replay sends it (`components.tracking.traces`), linked to that
run (the trace's `mlflow.sourceRun`, which is what the run's Traces tab lists), in the run's experiment. The tree:

    plan-1                      CHAIN      the request in; the action, the policy and the summary out
    ├── observe                 RETRIEVER  what the agent saw: queue, nodes, failed job, checkpoint, notes
    ├── candidates              CHAIN      the options weighed, with their estimated wait and run time
    ├── policy: llm             AGENT      the model, the endpoint, the tools offered; its answer out
    │   ├── chat.completions 1  LLM        that request's messages in, the reply out (with its real times)
    │   ├── get_queue_status    TOOL       the call's arguments in, the result the model got back out
    │   ├── chat.completions 2  LLM
    │   └── fallback: rules     CHAIN      only when the answer was not used: the rules' choice and why
    ├── guardrails              GUARDRAIL  the proposed action in; each check's verdict and the refusals out
    └── action                  CHAIN      the action taken, its rationale, the fallback's reason

For the rule policy the policy span has no children, and the guardrails span says that the rules build their
action within the request's limits (the guardrails check the LLM's answers and tool calls). Nothing secret
reaches a span: the exchange is scrubbed of the API key when it is recorded, and no header is ever recorded.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from agent.actions import Wait
from agent.exchange import Exchange
from agent.observation import Observation, as_json
from agent.policy import Decision
from agent.prompts import SYSTEM_PROMPT, render_observation
from components.tracking.traces import PlannedSpan

__all__ = ["PlannedSpan", "decision_spans"]

_NS = 1_000_000_000
_TICK_NS = 1000  # the stages without a recorded duration get a microsecond each, in order
_RULES_GUARDRAILS = (
    "the rule policy builds its action within the request's limits; the guardrails check the LLM's answers "
    "and tool calls"
)


def decision_spans(decision: Decision, now_s: float) -> PlannedSpan:
    """The span tree of `decision`, recorded at `now_s` (seconds since the epoch); pure."""
    # The conversation's recorded times place the policy; the stages around it take a tick each, in order.
    first, last = _conversation_window(decision.exchange, int(now_s * _NS))
    begun, over = first - _TICK_NS, last + _TICK_NS
    start, end = begun - 2 * _TICK_NS, over + 2 * _TICK_NS
    action = decision.action
    stage = decision.stage
    observation = decision.observation
    children = [
        PlannedSpan(
            name="observe",
            span_type="RETRIEVER",
            start_ns=start,
            end_ns=start + _TICK_NS,
            inputs={"stage": stage, "time": observation.time},
            outputs=_seen(observation),
        ),
        PlannedSpan(
            name="candidates",
            span_type="CHAIN",
            start_ns=start + _TICK_NS,
            end_ns=begun,
            outputs={"candidates": [_candidate(c) for c in action.candidates]},
        ),
        _policy_span(decision, begun, over),
        _guardrails_span(decision, over),
        PlannedSpan(
            name="action",
            span_type="CHAIN",
            start_ns=end - _TICK_NS,
            end_ns=end,
            inputs={"policy": decision.policy},
            outputs={
                "action": action.model_dump(mode="json", exclude={"candidates"}),
                "fallback": decision.fallback,
                "summary": decision.summary,
            },
        ),
    ]
    return PlannedSpan(
        name=f"{stage}-{observation.request.attempt}",
        span_type="CHAIN",
        start_ns=start,
        end_ns=end,
        inputs={"stage": stage, "attempt": observation.request.attempt, "request": observation.request.model_dump()},
        outputs={"action": action.kind, "policy": decision.policy, "summary": decision.summary},
        attributes={"vcpilot.policy": decision.policy, "vcpilot.fallback": decision.fallback},
        children=children,
    )


# -- the stages ---------------------------------------------------------------------------------------------


def _conversation_window(exchange: Exchange | None, now_ns: int) -> tuple[int, int]:
    """When the LLM was first asked and when its last request or tool call ended; `now_ns` without one."""
    if exchange is None or not exchange.rounds:
        return now_ns, now_ns
    ends = [r.started_s + r.duration_s for r in exchange.rounds]
    ends += [c.started_s + c.duration_s for r in exchange.rounds for c in r.tool_calls if c.name != "decide"]
    return int(exchange.rounds[0].started_s * _NS), int(max(ends) * _NS)


def _seen(observation: Observation) -> dict[str, Any]:
    """What the agent saw, short: the full observation is in the run's decision.json."""
    seen: dict[str, Any] = {}
    for key in ("queue", "fallback_queue"):
        if (queue := getattr(observation, key)) is not None:
            seen[key] = as_json(queue, exclude_defaults=True)
    seen["nodes"] = [
        {
            "name": n.name,
            "ready": n.ready,
            "gpus_free": max(0, n.gpu_allocatable - n.gpu_allocated),
            "gpus": n.gpu_allocatable,
        }
        for n in observation.nodes
    ]
    if observation.job is not None:
        job = observation.job
        pods = [as_json(p, include={"name", "node", "phase", "reason", "exit_code"}) for p in job.pods]
        seen["job"] = {"name": job.name, "phase": job.phase, "pods": pods}
    if observation.events:
        seen["events"] = [as_json(e, exclude_defaults=True) for e in observation.events[-10:]]
    for key in ("checkpoint", "throughput"):
        if (part := getattr(observation, key)) is not None:
            seen[key] = part.model_dump(mode="json")
    if observation.history:
        seen["history"] = [h.model_dump(mode="json", exclude_defaults=True) for h in observation.history]
    if observation.notes:
        seen["notes"] = observation.notes
    return seen


def _candidate(candidate: Any) -> dict[str, Any]:
    return {**candidate.model_dump(mode="json"), "finish_s": candidate.finish_s}


def _policy_span(decision: Decision, start: int, end: int) -> PlannedSpan:
    exchange = decision.exchange
    action = decision.action
    if exchange is None:  # the rules decided, asked for or standing in for an LLM that is not configured
        return PlannedSpan(
            name=f"policy: {decision.policy}",
            span_type="CHAIN",
            start_ns=start,
            end_ns=end,
            inputs={"stage": decision.stage},
            outputs={"choice": action.kind, "rationale": action.rationale, "fallback": decision.fallback},
        )
    children = list(_conversation(decision, exchange))
    if not exchange.used:
        children.append(
            PlannedSpan(
                name=f"fallback: {decision.policy}",
                span_type="CHAIN",
                start_ns=end - _TICK_NS,
                end_ns=end,
                inputs={"why": decision.fallback},
                outputs={"choice": action.kind, "rationale": action.rationale},
            )
        )
    answer = exchange.answer
    return PlannedSpan(
        name="policy: llm",
        span_type="AGENT",
        start_ns=start,
        end_ns=end,
        inputs={
            "stage": decision.stage,
            "model": exchange.model,
            "endpoint": exchange.endpoint,
            "tools": exchange.tools,
        },
        outputs={
            "answer": _json(answer.arguments) if answer is not None else None,
            "used": exchange.used,
            "fallback": decision.fallback,
        },
        attributes={"vcpilot.rounds": len(exchange.rounds)},
        children=children,
    )


def _conversation(decision: Decision, exchange: Exchange) -> Iterator[PlannedSpan]:
    """One LLM span per request, then one TOOL span per tool call it made, with their recorded times."""
    prompt = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": render_observation(decision.observation, decision.stage)},
    ]
    for i, done in enumerate(exchange.rounds):
        started = int(done.started_s * _NS)
        yield PlannedSpan(
            name=f"chat.completions {i + 1}",
            span_type="LLM",
            start_ns=started,
            end_ns=started + int(done.duration_s * _NS),
            inputs={"model": exchange.model, "messages": exchange.messages(prompt, i)},
            outputs={"error": done.error} if done.error else {"choices": [{"index": 0, "message": done.reply}]},
            attributes={"vcpilot.round": i + 1},
            error=done.error,
        )
        for call in done.tool_calls:
            if call.name == "decide":  # the answer: checked (the guardrails span), never run
                continue
            called = int(call.started_s * _NS)
            yield PlannedSpan(
                name=call.name,
                span_type="TOOL",
                start_ns=called,
                end_ns=called + int(call.duration_s * _NS),
                inputs=_json(call.arguments),
                outputs={"content": call.result},
                attributes={"vcpilot.tool_call_id": call.id},
            )


def _guardrails_span(decision: Decision, at: int) -> PlannedSpan:
    exchange = decision.exchange
    if exchange is None:
        proposed: Any = decision.action.model_dump(mode="json", exclude={"candidates"})
        outputs: dict[str, Any] = {"verdict": "not checked", "why": _RULES_GUARDRAILS, "refusals": decision.refusals}
    else:
        answer = exchange.answer
        proposed = _json(answer.arguments) if answer is not None else None
        failed = next((check for check in exchange.checks if not check.passed), None)
        verdict = "passed" if exchange.used else "refused" if failed is not None else "no answer to check"
        outputs = {
            "verdict": verdict,
            "checks": [check.model_dump(mode="json") for check in exchange.checks],
            "refusals": decision.refusals,
        }
    if isinstance(decision.action, Wait):
        outputs["recheck_s"] = decision.action.recheck_s
    return PlannedSpan(
        name="guardrails",
        span_type="GUARDRAIL",
        start_ns=at,
        end_ns=at + _TICK_NS,
        inputs={"proposed": proposed},
        outputs=outputs,
        attributes={"vcpilot.verdict": outputs["verdict"]},
    )


def _json(text: str) -> Any:
    """A tool call's arguments as JSON when they are, else the text the model sent."""
    try:
        return json.loads(text)
    except ValueError:
        return text
