"""Choosing the policy: an LLM that is not configured never stops a run — the rules decide and say why."""

from __future__ import annotations

import pytest

from agent.observation import Observation, PlanRequest
from agent.policies import decide, select_policy
from agent.policy_llm import LLMPolicy
from agent.policy_rules import RulePolicy


def test_the_rules_are_chosen_by_name_with_nothing_to_explain():
    policy, fallback = select_policy("rules")
    assert isinstance(policy, RulePolicy) and fallback == ""


def test_an_llm_without_an_endpoint_falls_back_to_the_rules_and_the_decision_says_so():
    policy, fallback = select_policy("llm", environ={})
    assert isinstance(policy, RulePolicy)
    assert fallback.startswith("the LLM policy is not configured") and "VCPILOT_LLM_URL" in fallback
    observation = Observation(time=0.0, request=PlanRequest(gpus=2, global_batch=8, micro_batch=2))
    decision = decide(policy, observation, "plan", fallback)
    assert decision.policy == "rules" and decision.fallback == fallback
    assert "fallback: the LLM policy is not configured" in decision.summary


def test_a_configured_llm_is_used_with_the_rules_behind_it():
    environ = {
        "VCPILOT_LLM_URL": "http://127.0.0.1:9/v1",
        "VCPILOT_LLM_MODEL": "m",
        "VCPILOT_LLM_API_KEY": "sk-secret-123",
    }
    policy, fallback = select_policy("llm", environ=environ)
    assert isinstance(policy, LLMPolicy) and fallback == ""
    assert "sk-secret-123" not in repr(policy)


def test_an_unknown_policy_is_one_sentence():
    with pytest.raises(ValueError, match=r"^unknown agent policy 'oracle'; choose one of rules, llm$"):
        select_policy("oracle")
