"""What the agent can decide: one typed action, with the rationale and the candidates it was chosen from.

Every policy (rules, LLM) returns one of these; the guardrails check it, the pipeline turns it into its next
step and the decision record keeps it. An action is data: replaying an observation must give an equal action.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from components.volcano.validation import describe_validation_error

__all__ = [
    "Abort",
    "Action",
    "Candidate",
    "Downscale",
    "Proceed",
    "RetryFromCheckpoint",
    "Wait",
    "action_schema",
    "parse_action",
]


class _Frozen(BaseModel):
    # Built when first validated: most of these are only ever fields of another model (benchmarks/cli.py).
    # Finite numbers only: a model's 1e999 is inf, which a decision record stores as null and cannot read back.
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True, allow_inf_nan=False)


class Candidate(_Frozen):
    """One option the policy weighed: a GPU count in a queue and its estimated time to finish."""

    gpus: int = Field(gt=0)
    queue: str
    grad_accum: int = Field(gt=0)
    # Expected wait before the gang is admitted; 0 with feasible=False: never (a candidate the rules rule out for
    # another reason, `note` says which, keeps its estimate).
    wait_s: float = Field(ge=0)
    run_s: float = Field(ge=0)  # expected training time at this size
    feasible: bool = True
    note: str = ""

    @property
    def finish_s(self) -> float:
        """Expected time from now to the end of training."""
        return self.wait_s + self.run_s


class _Decision(_Frozen):
    rationale: str = Field(min_length=1)
    candidates: list[Candidate] = Field(default_factory=list)


class _Shape(_Decision):
    """How a training attempt uses the cluster; gpus × micro_batch × grad_accum is the global batch."""

    gpus: int = Field(gt=0)
    micro_batch: int = Field(gt=0)
    grad_accum: int = Field(gt=0)
    queue: str = Field(min_length=1)
    priority_class: str = ""
    # Steps between periodic checkpoints of this attempt; 0: the run's own checkpoint-every.
    checkpoint_every: int = Field(default=0, ge=0)

    @property
    def global_batch(self) -> int:
        """Samples per optimizer step across every rank."""
        return self.gpus * self.micro_batch * self.grad_accum


class Proceed(_Shape):
    """Train now at the size asked for."""

    kind: Literal["proceed"] = "proceed"


class Downscale(_Shape):
    """Train on fewer GPUs (possibly in the fallback queue), accumulation raised so the global batch is unchanged."""

    kind: Literal["downscale"] = "downscale"
    from_gpus: int = Field(gt=0)

    @model_validator(mode="after")
    def _fewer(self) -> Downscale:
        if self.gpus >= self.from_gpus:
            raise ValueError(f"a downscale must use fewer than the {self.from_gpus} GPUs asked for, not {self.gpus}")
        return self


class Wait(_Decision):
    """Do nothing yet: look again after `recheck_s` seconds."""

    kind: Literal["wait"] = "wait"
    reason: str = Field(min_length=1)
    recheck_s: float = Field(gt=0)


class RetryFromCheckpoint(_Shape):
    """Start the next attempt from `checkpoint` ("" = from scratch), keeping off `avoid_nodes`."""

    kind: Literal["retry"] = "retry"
    checkpoint: str = ""
    checkpoint_step: int = Field(default=0, ge=0)
    avoid_nodes: list[str] = Field(default_factory=list)


class Abort(_Decision):
    """Stop: retrying would fail the same way or the budget is spent."""

    kind: Literal["abort"] = "abort"
    reason: str = Field(min_length=1)


Action = Annotated[Proceed | Downscale | Wait | RetryFromCheckpoint | Abort, Field(discriminator="kind")]


@functools.cache
def _action() -> TypeAdapter[Action]:
    return TypeAdapter(Action)


def parse_action(data: Any) -> Action:
    """An action from JSON text or a dict; ValueError in one sentence when it is not exactly one valid action."""
    try:
        if isinstance(data, str | bytes):
            return _action().validate_json(data)
        return _action().validate_python(data)
    except ValidationError as err:
        raise ValueError(f"not a valid action: {describe_validation_error(err)}") from None


def action_schema() -> dict[str, Any]:
    """The JSON schema of an action (what an LLM's `decide` tool takes)."""
    return _action().json_schema()
