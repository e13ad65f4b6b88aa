"""A small prompt/completion dataset for the fine-tuning tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

PAIRS = [(f"Q: price of item {i}?\nA:", f" ${10 + 7 * i % 80}") for i in range(12)]


def write_dataset(directory: Path, pairs=PAIRS, eval_pairs=PAIRS[:4]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train", pairs), ("eval", eval_pairs)):
        lines = [json.dumps({"prompt": p, "completion": c}) for p, c in rows]
        (directory / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    return directory


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """`train.jsonl` with 12 pairs and `eval.jsonl` with 4 of them."""
    return write_dataset(tmp_path / "data")
