"""A tiny character-level causal LM built from scratch, saved as an ordinary Hugging Face model directory.

The demo and the tests cannot download a model, so they create one: a small Llama-architecture model with a
character tokenizer (PreTrainedTokenizerFast over a WordLevel vocabulary of single characters). Everything
downstream loads it the way it would load any model: `AutoModelForCausalLM.from_pretrained(path)` and
`AutoTokenizer.from_pretrained(path)`.
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, PreTrainedTokenizerFast

__all__ = ["ALPHABET", "build_tokenizer", "create_tiny_model", "generate", "load"]

ALPHABET = string.ascii_letters + string.digits + string.punctuation + " \n"
SPECIAL = ["<pad>", "<unk>", "<bos>", "<eos>"]


def build_tokenizer(alphabet: str = ALPHABET) -> PreTrainedTokenizerFast:
    """One token per character of `alphabet`, plus pad/unk/bos/eos."""
    vocab = {token: i for i, token in enumerate(SPECIAL + sorted(set(alphabet)))}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", unk_token="<unk>", bos_token="<bos>", eos_token="<eos>"
    )
    tokenizer.clean_up_tokenization_spaces = False
    return tokenizer


def create_tiny_model(path: str | Path, *, hidden: int = 128, layers: int = 2, heads: int = 4, seed: int = 0) -> Path:
    """Create, seed and save a small randomly initialised model with its tokenizer; returns the directory."""
    tokenizer = build_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 4,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=128,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    out = Path(path)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def load(path: str | Path) -> tuple[Any, Any]:
    """Load a model directory (ours or any Hugging Face causal LM) for inference on CPU."""
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    model.eval()
    return model, tokenizer


@torch.no_grad()
def generate(model: Any, tokenizer: Any, prompt: str, max_new_tokens: int = 16) -> str:
    """Greedy completion of `prompt`, stopped at the end-of-sequence token."""
    ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids
    out = model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return str(tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True))
