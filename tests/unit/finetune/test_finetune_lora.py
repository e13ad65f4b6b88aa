"""LoRA: only the adapters train, only they are checkpointed, and the export is a plain merged model."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from components.finetune.config import TrainConfig
from components.finetune.distributed import Distributed
from components.finetune.errors import FinetuneError
from components.finetune.model import load_model
from components.finetune.train import train
from components.lm.tiny import create_tiny_model


def config(tmp_path, dataset, **overrides):
    settings = dict(
        data=dataset,
        out=tmp_path / "out",
        checkpoint_dir=tmp_path / "ck",
        max_steps=3,
        checkpoint_every=3,
        micro_batch=2,
        global_batch=4,
        lora=True,
        lora_r=4,
        lr=1e-2,
    )
    return TrainConfig(**{**settings, **overrides})


def test_lora_trains_only_the_adapters_of_q_and_v(tmp_path, dataset):
    summary = train(config(tmp_path, dataset), Distributed())
    assert summary.steps == 3

    checkpoint = torch.load(tmp_path / "ck" / "step-3" / "model.pt", weights_only=True)
    assert checkpoint and all("lora_" in name for name in checkpoint), "a checkpoint holds the adapters only"

    base = AutoModelForCausalLM.from_pretrained(create_tiny_model(tmp_path / "base")).state_dict()
    tuned = AutoModelForCausalLM.from_pretrained(tmp_path / "out").state_dict()
    assert set(tuned) == set(base), "the export is a plain model: adapters merged, no peft names"
    changed = {name for name in base if not torch.equal(base[name], tuned[name])}
    assert changed and all(name.endswith(("q_proj.weight", "v_proj.weight")) for name in changed), changed


def test_lora_parameters_are_the_only_trainable_ones(tmp_path, dataset):
    model, _ = load_model(config(tmp_path, dataset))
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    frozen = [name for name, p in model.named_parameters() if not p.requires_grad]
    assert trainable and all("lora_" in name for name in trainable)
    assert any("embed_tokens" in name for name in frozen)


@pytest.mark.parametrize("target", ["query", ""])  # "": the model itself, which named_modules() calls ''
def test_an_unknown_target_module_is_refused_in_one_sentence(tmp_path, dataset, target):
    with pytest.raises(FinetuneError) as err:
        load_model(config(tmp_path, dataset, lora_targets=(target,)))
    assert "--lora-target" in str(err.value) and "\n" not in str(err.value)
