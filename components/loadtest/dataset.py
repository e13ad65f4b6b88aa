"""Where load-test prompts come from: the evaluation set (JSONL of prompt/completion) or a seeded synthetic set."""

from __future__ import annotations

import random
from pathlib import Path

from components.errors import InputError, VcpilotError
from components.files import read_dataset
from components.loadtest.records import RequestSpec
from components.untrusted import loads_json

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
    """`count` requests from a JSONL file of {"prompt", "completion"} lines, cycling when it holds fewer."""
    if not path.exists():
        raise DatasetError(f"dataset {path} does not exist")
    try:
        lines = read_dataset(path).splitlines()
    except InputError as err:
        raise DatasetError(str(err)) from None
    rows: list[RequestSpec] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = loads_json(line)
        except ValueError:
            raise DatasetError(f"line {number} of {path} is not valid JSON") from None
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
            raise DatasetError(f'line {number} of {path} is not an object with a string "prompt"')
        expected = row.get("completion")
        rows.append(RequestSpec(prompt=row["prompt"], max_tokens=max_tokens, expected=str(expected or "")))
    if not rows:
        raise DatasetError(f"dataset {path} holds no requests")
    return [rows[i % len(rows)] for i in range(count)]
