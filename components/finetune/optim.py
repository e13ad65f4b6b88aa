"""The optimizer and learning-rate schedule: AdamW with linear warm-up and cosine decay to a tenth of the peak.

The schedule is a pure function of the step (`lr_factor`), so a resumed run — whose scheduler state is only the
step count — continues on exactly the curve it left.
"""

from __future__ import annotations

import math

import torch

from components.finetune.config import TrainConfig

__all__ = ["build_optimizer", "build_scheduler", "default_lr", "lr_factor"]

FLOOR = 0.1  # the schedule ends at a tenth of the peak rate, not zero: the last steps still learn
SMALL_MODEL = 20_000_000  # parameters; below it a model is a toy trained (nearly) from scratch


def default_lr(model: torch.nn.Module, lora: bool) -> float:
    """The peak rate when none is given: large for small models, middling for LoRA adapters, small otherwise.

    A small model (the demo's tiny one, whether fresh or a previous champion) learns at 3e-3 in a few hundred
    steps; adapters on a real LLM want about 2e-4, and full fine-tuning of one about 2e-5.
    """
    if sum(p.numel() for p in model.parameters()) < SMALL_MODEL:
        return 3e-3
    return 2e-4 if lora else 2e-5


def lr_factor(step: int, warmup: int, total: int) -> float:
    """The fraction of the peak rate for the optimizer step that follows `step` completed steps."""
    if warmup and step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return FLOOR + (1 - FLOOR) * 0.5 * (1 + math.cos(math.pi * progress))


def build_optimizer(model: torch.nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    """AdamW over the trainable parameters; no weight decay on biases and norms (1-d tensors)."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": config.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(
        [g for g in groups if g["params"]],
        lr=config.lr or default_lr(model, config.lora),
        betas=(0.9, 0.95),
        foreach=True,  # one kernel per step for all tensors: the default loops over them on CPU
    )


def build_scheduler(optimizer: torch.optim.Optimizer, config: TrainConfig) -> torch.optim.lr_scheduler.LambdaLR:
    """The warm-up + cosine schedule over `config.max_steps` steps."""
    warmup, total = config.warmup, config.max_steps
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_factor(step, warmup, total))
