"""The fine-tuning data: the records of a data set turned into padded batches, in an order that survives restarts.

The order of samples is a pure function of (seed, epoch): a seeded permutation per epoch, read as one endless
stream. A position in that stream — epoch and offset — is all a checkpoint needs to continue mid-epoch, and the
samples of one optimizer step do not depend on how many ranks share them: the global batch is cut into
contiguous blocks, one per rank, each cut into micro-batches. So 2 ranks x accumulation 2 see exactly the
micro-batches that 1 rank x accumulation 4 sees.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from components.errors import InputError
from components.finetune.errors import FinetuneError
from components.finetune.records import Record, read_records
from components.serving.engine import chat_prompt

__all__ = [
    "Batch",
    "DataPosition",
    "Example",
    "collate",
    "load_examples",
    "rank_micro_batches",
    "take",
    "tokenize",
]

IGNORE = -100  # the label cross-entropy skips: prompt tokens and padding


@dataclass(frozen=True)
class Example:
    """One tokenized sequence: prompt + completion + eos, with labels only on the completion."""

    input_ids: tuple[int, ...]
    labels: tuple[int, ...]

    @functools.cached_property
    def target_tokens(self) -> int:
        """How many tokens this example contributes to the loss (labels are compared one position ahead)."""
        return sum(1 for label in self.labels[1:] if label != IGNORE)


@dataclass(frozen=True)
class DataPosition:
    """Where the next sample comes from: `offset` samples into the permutation of `epoch`."""

    epoch: int = 0
    offset: int = 0


@dataclass(frozen=True)
class Batch:
    """A padded micro-batch, ready for the model."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    labels: torch.Tensor

    def to(self, device: torch.device) -> Batch:
        """The same batch on `device`."""
        return Batch(self.input_ids.to(device), self.attention_mask.to(device), self.labels.to(device))


def load_examples(directory: Path, split: str = "train", *, required: bool = True) -> list[Record]:
    """The records of `<directory>/<split>.jsonl` (any shape `records` reads); FinetuneError for missing or bad data."""
    path = directory / f"{split}.jsonl"
    if not path.is_file():
        if not required:
            return []
        if not directory.exists():
            problem = "does not exist"
        elif not directory.is_dir():
            problem = "is not a directory"
        else:
            problem = f"holds no {split}.jsonl"
        raise FinetuneError(f"dataset directory {directory} {problem}; pass a directory with {split}.jsonl in it.")
    try:
        records = read_records(path, f"{split} set")
    except InputError as err:
        raise FinetuneError(str(err)) from None
    if not records:  # an eval set given empty would be no evaluation, without a word
        raise FinetuneError(f"{path} is empty; give it at least one record.")
    return records


def tokenize(records: Sequence[Record], tokenizer: Any, max_length: int) -> list[Example]:
    """Prompt and completion tokenized apart (as the prompt is at inference), eos appended, cut at `max_length`.

    A conversation's prompt is rendered as `vcpilot serve` renders a chat request for this tokenizer.
    """
    if tokenizer.eos_token_id is None:
        raise FinetuneError("the tokenizer has no end-of-sequence token; the model could never learn to stop.")
    examples = []
    for number, record in enumerate(records, start=1):
        try:
            text = chat_prompt(tokenizer, record["messages"]) if "messages" in record else record["prompt"]
        except ValueError as err:  # the model's chat template refuses the conversation
            raise FinetuneError(f"record {number} of the training set: {err}") from None
        prompt = tokenizer(text, add_special_tokens=False)["input_ids"]
        completion = tokenizer(record["completion"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        ids = (prompt + completion)[:max_length]
        labels = ([IGNORE] * len(prompt) + completion)[:max_length]
        examples.append(Example(tuple(ids), tuple(labels)))
    return examples


@functools.lru_cache(maxsize=2)  # the current epoch and the next: a step may span both
def _permutation(size: int, seed: int, epoch: int) -> tuple[int, ...]:
    order = list(range(size))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return tuple(order)


def take(position: DataPosition, count: int, size: int, seed: int) -> tuple[list[int], DataPosition]:
    """The next `count` sample indices of the endless stream of per-epoch permutations, and the position after."""
    indices: list[int] = []
    epoch, offset = position.epoch, position.offset
    while len(indices) < count:
        order = _permutation(size, seed, epoch)
        chunk = order[offset : offset + count - len(indices)]
        indices += chunk
        offset += len(chunk)
        if offset >= size:
            epoch, offset = epoch + 1, 0
    return indices, DataPosition(epoch, offset)


def rank_micro_batches(indices: Sequence[int], rank: int, world_size: int, micro_batch: int) -> list[list[int]]:
    """Rank `rank`'s contiguous block of the global batch, cut into micro-batches in order."""
    share = len(indices) // world_size
    block = list(indices[rank * share : (rank + 1) * share])
    return [block[i : i + micro_batch] for i in range(0, len(block), micro_batch)]


def collate(examples: Sequence[Example], pad_id: int) -> Batch:
    """Right-pad to the longest example; padding is masked out of attention and of the loss."""
    width = max(len(e.input_ids) for e in examples)
    ids, mask, labels = [], [], []
    for example in examples:
        pad = width - len(example.input_ids)
        ids.append([*example.input_ids, *[pad_id] * pad])
        mask.append([1] * len(example.input_ids) + [0] * pad)
        labels.append([*example.labels, *[IGNORE] * pad])
    return Batch(torch.tensor(ids), torch.tensor(mask), torch.tensor(labels))
