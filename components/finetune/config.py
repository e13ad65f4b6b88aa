"""What one fine-tuning run is asked to do, and the batch arithmetic that keeps the global batch exact.

`TrainConfig` is the single source of truth for a run's settings: the CLI builds it, the train loop reads it,
checkpoints record the parts that must not change on resume. `resolve_batch` is pure: given the world size it
derives the gradient accumulation that keeps `global batch = world size x micro batch x accumulation`, or says in
one sentence why that is impossible.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from components.finetune.base_model import TINY
from components.finetune.errors import FinetuneError

__all__ = ["LORA_TARGETS", "TINY", "BatchShape", "TrainConfig", "resolve_batch"]

LORA_TARGETS = ("q_proj", "v_proj")  # the attention projections LoRA adapts in Llama-style models


class TrainConfig(BaseModel):
    """Every setting of a run; defaults are the ones the command line documents."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)  # --lr inf would train to nan

    base_model: Annotated[str, Field(min_length=1)] = TINY
    data: Path
    out: Path
    checkpoint_dir: Path
    max_steps: Annotated[int, Field(gt=0)]
    checkpoint_every: Annotated[int, Field(gt=0)]
    keep: Annotated[int, Field(ge=1)] = 3
    resume: Annotated[str, Field(min_length=1)] = "none"  # '' would be the working directory as a checkpoint
    micro_batch: Annotated[int, Field(gt=0)] = 4
    grad_accum: Annotated[int | None, Field(gt=0)] = None
    global_batch: Annotated[int | None, Field(gt=0)] = None
    lr: Annotated[float | None, Field(gt=0)] = None
    warmup_steps: Annotated[int | None, Field(ge=0)] = None
    weight_decay: Annotated[float, Field(ge=0)] = 0.0
    max_grad_norm: Annotated[float, Field(gt=0)] = 1.0
    lora: bool = False
    lora_r: Annotated[int, Field(gt=0)] = 8
    lora_alpha: Annotated[int, Field(gt=0)] = 16
    lora_targets: tuple[str, ...] = LORA_TARGETS
    max_length: Annotated[int | None, Field(gt=1)] = None
    seed: int = 0
    log_every: Annotated[int, Field(gt=0)] = 10
    step_delay: Annotated[float, Field(ge=0)] = 0.0
    fail_at_step: Annotated[int, Field(ge=0)] = 0
    # no step ending for this long: the rank is hung (0: never)
    stall_timeout_s: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 900.0

    @property
    def resume_mode(self) -> Literal["none", "auto", "path"]:
        """`none` starts fresh, `auto` takes the newest complete checkpoint, anything else is a checkpoint path."""
        if self.resume in ("none", "auto"):
            return self.resume  # type: ignore[return-value]
        return "path"

    @property
    def warmup(self) -> int:
        """Linear warm-up steps: the ones given, else a tenth of the run (at most 100)."""
        return self.warmup_steps if self.warmup_steps is not None else min(100, self.max_steps // 10)


class BatchShape(BaseModel):
    """How one optimizer step's global batch is split: `global_batch == world_size * micro_batch * grad_accum`."""

    model_config = ConfigDict(frozen=True)

    world_size: int
    micro_batch: int
    grad_accum: int
    global_batch: int


def resolve_batch(world_size: int, micro_batch: int, grad_accum: int | None, global_batch: int | None) -> BatchShape:
    """Derive the missing one of accumulation and global batch; FinetuneError when the numbers cannot agree."""
    per_pass = world_size * micro_batch
    if global_batch is None:
        grad_accum = grad_accum or 1
        global_batch = per_pass * grad_accum
    if grad_accum is None:
        if global_batch % per_pass:
            raise FinetuneError(
                f"global batch {global_batch} is not divisible by world size {world_size} x micro batch {micro_batch} "
                f"= {per_pass}; choose a micro batch or a number of ranks whose product divides {global_batch}."
            )
        grad_accum = global_batch // per_pass
    if per_pass * grad_accum != global_batch:
        raise FinetuneError(
            f"global batch {global_batch} must equal world size {world_size} x micro batch {micro_batch} x "
            f"accumulation {grad_accum} = {per_pass * grad_accum}; change the micro batch or the accumulation."
        )
    return BatchShape(world_size=world_size, micro_batch=micro_batch, grad_accum=grad_accum, global_batch=global_batch)
