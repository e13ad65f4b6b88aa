"""The model being fine-tuned: loaded from a path or a Hugging Face id, or built from scratch; full or LoRA.

`tiny` builds the demo's small character-level Llama with a fixed seed, so every rank (and every restart)
starts from the same weights without downloading anything. With LoRA only the adapters train, and only they go
into checkpoints; the final export merges them, so whatever loads the result needs neither peft nor the base.
The export is written aside and moved in with `config.json` last: a directory with a `config.json` is a whole
model (what serving and evaluation check), never half of one.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from components.finetune.config import TINY, TrainConfig
from components.finetune.errors import FinetuneError, why_write_failed, write_error

__all__ = ["context_length", "load_model", "load_trainable_state", "save_final", "trainable_state"]

EXPORT_PREFIX = ".model-"  # a hidden directory in the output directory: an export being written


def load_model(config: TrainConfig) -> tuple[torch.nn.Module, Any]:
    """The model to train (float32, train mode, adapters applied with --lora) and its tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer  # imported here: transformers takes seconds
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # per-shard progress bars would bury the training log

    if config.base_model == TINY:
        from components.lm.tiny import create_tiny_model

        with tempfile.TemporaryDirectory(prefix="vcpilot-tiny-") as tmp:
            path = create_tiny_model(Path(tmp) / "model", seed=config.seed)
            model: torch.nn.Module = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
            tokenizer = AutoTokenizer.from_pretrained(path)
    else:
        _check_local(config.base_model)
        try:
            model = AutoModelForCausalLM.from_pretrained(config.base_model, dtype=torch.float32)
            tokenizer = AutoTokenizer.from_pretrained(config.base_model)
        except (OSError, ValueError) as err:
            raise FinetuneError(
                f"base model {config.base_model!r} cannot be loaded ({_first_line(err).rstrip('.')}); pass a model "
                f"directory, a Hugging Face model id, or 'tiny'."
            ) from None
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token  # padding never reaches the loss, so any token will do
    if config.lora:
        model = _with_lora(model, config)
    model.train()
    return model, tokenizer


def _check_local(base_model: str) -> None:
    """A path (rather than a Hub id) must be a model directory: say so before transformers asks the Hub."""
    path = Path(base_model)
    if path.is_dir() and not (path / "config.json").is_file():
        raise FinetuneError(f"base model directory {path} holds no config.json; pass a saved Hugging Face model.")
    if not path.exists() and (path.is_absolute() or base_model.startswith(".")):
        raise FinetuneError(f"base model directory {path} does not exist; pass a model directory, a Hub id, or 'tiny'.")


def _first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


def _with_lora(model: torch.nn.Module, config: TrainConfig) -> torch.nn.Module:
    from peft import LoraConfig, get_peft_model

    # named_modules() names the model itself '': a target of '' would match it, and peft fail deep inside
    names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules() if name}
    missing = [target for target in config.lora_targets if target not in names]
    if missing:
        raise FinetuneError(
            f"the model has no modules named {', '.join(map(repr, missing))} for LoRA; pass --lora-target with names "
            f"it has (q_proj and v_proj for Llama-style models)."
        )
    lora = LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        target_modules=list(config.lora_targets),
        lora_dropout=0.0,  # no dropout: runs stay comparable across world sizes and restarts
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, lora)  # type: ignore[arg-type]


def context_length(model: torch.nn.Module, requested: int | None) -> int:
    """The longest sequence to train on: the one requested, capped by the model's positions (at most 2048)."""
    limit = int(getattr(getattr(model, "config", None), "max_position_embeddings", 0) or 2048)
    return min(requested, limit) if requested else min(limit, 2048)


def trainable_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """What a checkpoint stores: every weight in full fine-tuning, only the adapters with LoRA."""
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    state = model.state_dict()
    if len(trainable) == sum(1 for _ in model.parameters()):
        return state
    return {name: tensor for name, tensor in state.items() if name in trainable}


def load_trainable_state(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Restore `trainable_state`; FinetuneError when the checkpoint belongs to a different kind of run."""
    expected = set(trainable_state(model))
    if set(state) != expected:
        raise FinetuneError(
            "the checkpoint holds different weights than this run trains (a different base model, or --lora on one "
            "side only); resume with the settings it was written with, or start fresh."
        )
    model.load_state_dict(state, strict=False)


def save_final(model: torch.nn.Module, tokenizer: Any, out: Path) -> None:
    """Write the trained model (adapters merged) and its tokenizer as an ordinary Hugging Face model directory.

    A full disk leaves `out` as it was and raises NoRoom (exit EXIT_NO_ROOM): the run's last checkpoint holds every
    step, so the step run again (`--resume auto`) trains nothing and only writes the model.
    """
    from safetensors import SafetensorError  # what save_pretrained raises when a write fails

    final: Any = model
    if hasattr(final, "merge_and_unload"):
        final = final.merge_and_unload()
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob(f"{EXPORT_PREFIX}*"):  # an export a killed run left half-written
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=EXPORT_PREFIX, dir=out))
    try:
        final.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    except (OSError, RuntimeError, SafetensorError) as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise write_error(
            f"could not write the trained model to {out} ({why_write_failed(err)}); free space there and run the "
            "step again: --resume auto starts from the last checkpoint, trains nothing and only writes the model.",
            err,
        ) from None
    for file in sorted(tmp.iterdir(), key=lambda f: f.name == "config.json"):  # config.json last
        os.replace(file, out / file.name)
    tmp.rmdir()
