"""Where load-test prompts come from: a data set (as fine-tuning and evaluation read one) or a seeded synthetic set."""

from __future__ import annotations

import random
from pathlib import Path

from components.errors import InputError, VcpilotError
from components.loadtest.records import RequestSpec

__all__ = ["DatasetError", "load_requests", "synthetic_requests"]

_WORDS = (
    "model latency token cluster queue stream answer request window batch record drift prompt server client "
    "node gang volcano argo metric error budget report sample"
).split()


class DatasetError(VcpilotError):
    """The dataset cannot feed a load test; the message says why in one sentence."""


def synthetic_requests(count: int, *, prompt_words: int = 6, max_tokens: int = 16, seed: int = 0) -> list[RequestSpec]:
    """`count` short prompts of `prompt_words` random words each, the same for the same seed."""
    rng = random.Random(seed)
    return [
        RequestSpec(prompt=" ".join(rng.choice(_WORDS) for _ in range(prompt_words)), max_tokens=max_tokens)
        for _ in range(count)
    ]


def load_requests(path: Path, count: int, *, max_tokens: int = 16) -> list[RequestSpec]:
    """`count` requests from a data set (any shape `finetune.records` reads, answers optional), cycling it."""
    from components.finetune.records import read_records
    from components.serving.engine import plain_chat

    if not path.exists():
        raise DatasetError(f"dataset {path} does not exist")
    try:
        records = read_records(path, "dataset", answered=False)
    except InputError as err:
        raise DatasetError(str(err)) from None
    rows = [
        RequestSpec(
            prompt=plain_chat(r["messages"]), messages=r["messages"], max_tokens=max_tokens, expected=r["completion"]
        )
        if "messages" in r
        else RequestSpec(prompt=r["prompt"], max_tokens=max_tokens, expected=r["completion"])
        for r in records
    ]
    if not rows:
        raise DatasetError(f"dataset {path} holds no requests")
    return [rows[i % len(rows)] for i in range(count)]
