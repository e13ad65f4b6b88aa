"""Strategy (f): the LLM policy, through an in-process OpenAI-compatible endpoint that answers with the rules.

The endpoint is an `httpx.MockTransport` handler: every chat completion is answered with one `decide` call whose
arguments are the rule policy's action for the observation being decided. So the LLM policy's whole path runs —
the prompt rendered, the request sent, the reply parsed, the answer checked against the guardrails and the
request's invariants — and what it costs and how often it falls back are measured, not the model's wisdom (a real
model's latency is not in the figure).
"""

from __future__ import annotations

import time

import httpx

from agent.actions import Action
from agent.guardrails import Guardrails
from agent.observation import Observation
from agent.policy import Decision, Stage
from agent.policy_llm import LLMPolicy
from agent.policy_rules import RulePolicy, RulesConfig
from benchmarks.agent_trace import FALLBACK_QUEUE, TARGET_QUEUE

__all__ = ["ReplayedLLM"]


class ReplayedLLM:
    """A `Policy`: the LLM policy asking an endpoint that replays `RulePolicy`; it counts decisions and fallbacks."""

    name = "llm"

    def __init__(self, config: RulesConfig) -> None:
        self.rules = RulePolicy(config)
        self._answer: Action | None = None
        guardrails = Guardrails(queues=[TARGET_QUEUE, FALLBACK_QUEUE], max_gpus_per_job=8)
        self.llm = LLMPolicy(
            "http://rules.replay.invalid/v1",
            "rules-replay",
            guardrails=guardrails,
            fallback=self.rules,
            transport=httpx.MockTransport(self._complete),
        )
        self.decisions = 0
        self.fallbacks: dict[str, int] = {}
        self.llm_s = 0.0  # wall time inside the LLM policy, the rules' own decision excluded
        self.rules_s = 0.0

    def decide(self, observation: Observation, stage: Stage) -> Decision:
        """The rules' action, asked of the LLM policy; a fallback's reason is counted."""
        started = time.perf_counter()
        self._answer = self.rules.decide(observation, stage).action
        asked = time.perf_counter()
        decision = self.llm.decide(observation, stage)
        self.rules_s += asked - started
        self.llm_s += time.perf_counter() - asked
        self.decisions += 1
        if decision.fallback:
            self.fallbacks[decision.fallback] = self.fallbacks.get(decision.fallback, 0) + 1
        return decision

    def _complete(self, request: httpx.Request) -> httpx.Response:
        assert self._answer is not None, "decide sets the answer before the LLM policy asks"
        function = {"name": "decide", "arguments": self._answer.model_dump_json()}
        call = {"id": "call_1", "type": "function", "function": function}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return httpx.Response(200, json={"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]})

    def summary(self) -> dict[str, object]:
        """Decisions made, the fallback rate and its reasons, the LLM path's mean overhead per decision."""
        fell = sum(self.fallbacks.values())
        return {
            "decisions": self.decisions,
            "fallback_rate": round(fell / self.decisions, 4) if self.decisions else None,
            "fallback_reasons": dict(sorted(self.fallbacks.items(), key=lambda item: -item[1])),
            "overhead_ms_per_decision": round(1000 * self.llm_s / self.decisions, 2) if self.decisions else None,
            "rules_ms_per_decision": round(1000 * self.rules_s / self.decisions, 2) if self.decisions else None,
        }
