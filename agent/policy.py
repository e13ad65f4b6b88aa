"""The one interface every policy implements, and the decision it returns (what the record keeps).

A policy is asked at one of two stages: `plan` (how to train: Proceed, Downscale or Wait) and `diagnose` (what a
failed attempt calls for: RetryFromCheckpoint or Abort). It returns a `Decision`: the action, which policy chose
it, and — when a policy could not answer and another did — why it fell back; for the LLM policy, the exchange
with the model (`agent.exchange`), from which the decision's MLflow trace is made.
"""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from agent.actions import Action
from agent.exchange import Exchange
from agent.observation import Observation

__all__ = ["Decision", "Policy", "Stage"]

Stage = Literal["plan", "diagnose"]


class Decision(BaseModel):
    """A policy's answer with its provenance: the record written to MLflow and the workspace."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    stage: Stage
    policy: str  # "rules" or "llm"
    action: Action
    observation: Observation
    fallback: str = ""  # why the asked-for policy did not decide ("" when it did)
    refusals: list[str] = Field(default_factory=list)  # guardrail refusals met on the way, one sentence each
    exchange: Exchange | None = None  # what the LLM was asked and answered (None: no model was asked)

    @property
    def summary(self) -> str:
        """One line for logs and the DAG: what was decided, by whom, and why."""
        by = f"{self.policy} (fallback: {self.fallback})" if self.fallback else self.policy
        return f"{self.stage}: {self.action.kind} by {by}: {self.action.rationale}"


@runtime_checkable
class Policy(Protocol):
    """Something that turns an observation into a decision; pure for the rules, networked for the LLM."""

    name: str

    def decide(self, observation: Observation, stage: Stage) -> Decision:
        """Choose one action for `stage`; never raises for a bad answer of its own (it falls back instead)."""
        ...
