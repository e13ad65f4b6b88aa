"""The first pipeline's toy regression model and data, kept only for `components/evaluate/legacy.py` until it goes."""

from __future__ import annotations

import torch

__all__ = ["batch", "make_model"]


def make_model() -> torch.nn.Module:
    """The model, identically initialised on every rank."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def batch(index: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample `index` of the endless data stream: the same on every run, so runs are comparable."""
    gen = torch.Generator().manual_seed(10_000 + index)
    x = torch.randn(size, 8, generator=gen)
    return x, torch.sin(x.sum(dim=1, keepdim=True))
