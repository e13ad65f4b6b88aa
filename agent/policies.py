"""Which policy decides a run: the rules, or the LLM with the rules behind it (and why the rules, if asked for it).

The pipeline's `agent-policy` parameter and `vcpilot plan --policy` name one; an LLM that is not configured (or
not installed) never stops a run: the rules decide and the decision records why in its `fallback`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Literal

from agent.actions import Wait
from agent.observation import Observation
from agent.policy import Decision, Policy, Stage
from agent.policy_rules import RulePolicy, RulesConfig

if TYPE_CHECKING:
    from agent.tools import ToolContext

__all__ = ["POLICY_NAMES", "PolicyName", "decide", "plan_within", "select_policy"]

PolicyName = Literal["rules", "llm"]
POLICY_NAMES: tuple[PolicyName, ...] = ("rules", "llm")


def select_policy(
    name: str,
    *,
    config: RulesConfig | None = None,
    environ: Mapping[str, str] | None = None,
    tools_context: ToolContext | None = None,
) -> tuple[Policy, str]:
    """The policy called `name`, and why another one stands in for it ("" when none does).

    `llm` is `agent.policy_llm.LLMPolicy.from_env` (VCPILOT_LLM_URL, VCPILOT_LLM_MODEL, …) falling back to the
    rules, calling the read-only tools against `tools_context` when given; when it cannot be built, the rules
    decide alone. An unknown name is a ValueError in one sentence.
    """
    rules = RulePolicy(config)
    if name == "rules":
        return rules, ""
    if name != "llm":
        raise ValueError(f"unknown agent policy {name!r}; choose one of {', '.join(POLICY_NAMES)}")
    try:
        from agent.policy_llm import LLMPolicy  # imported here: httpx and the prompts only when asked for
    except ImportError as err:
        return rules, f"the LLM policy is not available here ({err})"
    try:
        return LLMPolicy.from_env(fallback=rules, environ=environ, tools_context=tools_context), ""
    except ValueError as err:
        return rules, f"the LLM policy is not configured: {err}"


def decide(policy: Policy, observation: Observation, stage: Stage, fallback: str = "") -> Decision:
    """Ask `policy`, and say in the decision why it stands in for another one (`fallback`, from select_policy)."""
    decision = policy.decide(observation, stage)
    return decision.model_copy(update={"fallback": fallback}) if fallback else decision


def plan_within(
    look: Callable[[], Observation],
    policy: Policy,
    max_wait_s: float,
    *,
    fallback: str = "",
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    say: Callable[[str], None] | None = None,
) -> Decision:
    """Plan, and while the answer is Wait look again after its recheck time, for at most `max_wait_s` in all.

    When the time is up and the answer is still Wait, the rules take the best candidate anyway (Volcano queues
    the job): a run is never stuck in planning. `look` observes the cluster afresh each time; a look that finds
    the cluster as the last one did keeps that answer without asking the policy again (an LLM would be asked the
    same question once a minute for as long as the wait lasts). `say` is told each wait in one line (the plan
    step's log, so a long wait shows why).
    """
    started = clock()
    decision = decide(policy, look(), "plan", fallback)
    while isinstance(decision.action, Wait):
        left = max_wait_s - (clock() - started)
        if left <= 0:
            break
        pause = min(decision.action.recheck_s, left)
        if say is not None:
            left_s = f"{left:.0f} s of max-plan-wait-s left"
            say(f"waiting: {decision.action.reason}; looking again in {pause:.0f} s ({left_s})")
        sleep(pause)
        seen = look()
        if _unchanged(seen, decision.observation):
            decision = decision.model_copy(update={"observation": seen})
        else:
            decision = decide(policy, seen, "plan", fallback)
    if not isinstance(decision.action, Wait):
        return decision
    rules = policy if isinstance(policy, RulePolicy) else RulePolicy()
    action = rules.plan(decision.observation, may_wait=False)
    waited = f"waited {clock() - started:.0f} s, as long as max-plan-wait-s {max_wait_s:g} allows, then took the best"
    if rules is not policy:
        fallback = f"the {policy.name} policy still said wait after max-plan-wait-s {max_wait_s:g}"
    rationale = f"{waited}: {action.rationale}"
    return Decision(
        stage="plan",
        policy=rules.name,
        action=action.model_copy(update={"rationale": rationale}),
        observation=decision.observation,
        fallback=fallback,
        refusals=decision.refusals,
        exchange=decision.exchange,  # the LLM's last say (a wait), so the trace shows what was overruled
    )


def _unchanged(seen: Observation, before: Observation) -> bool:
    """Whether two looks found the same cluster: everything but the time they were taken equal."""
    return seen.model_copy(update={"time": before.time}) == before
