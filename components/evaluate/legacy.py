"""The first pipeline's stand-in model (`model.pt` of `components.finetune.tiny`), scored until it is gone.

The minimal trainer still writes a regression model, not a language model; while it does, the pipeline's
evaluate step scores such a candidate the old way (negative mean squared error on held-out batches) and reports
no champion. Delete this module once `components.finetune` writes Hugging Face model directories.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["is_legacy_model", "legacy_report"]


def is_legacy_model(directory: str | Path) -> bool:
    """Whether `directory` holds the stand-in regression model rather than a language model."""
    path = Path(directory)
    return (path / "model.pt").is_file() and not (path / "config.json").is_file()


def legacy_report(directory: str | Path) -> dict[str, object]:
    """The evaluate report for a stand-in model: its negative MSE, and no champion to compare with."""
    import torch

    from components.finetune.tiny import batch, make_model

    model = make_model()
    model.load_state_dict(torch.load(Path(directory) / "model.pt"))
    with torch.no_grad():
        losses = [float(torch.nn.functional.mse_loss(model(x), y)) for x, y in (batch(-i, 64) for i in range(1, 9))]
    return {"candidate_score": -sum(losses) / len(losses), "champion_score": None, "metric": "neg_mse"}
