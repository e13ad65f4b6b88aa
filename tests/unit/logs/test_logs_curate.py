"""The fine-tuning set: corrections become completions, a prompt counts once, the split never moves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.logs.curate import Curator
from components.logs.records import RequestRecord


def record(prompt: str, correction: str | None, completion: str = "wrong") -> RequestRecord:
    return RequestRecord(prompt=prompt, completion=completion, correction=correction, feedback="negative")


def rows(path: str) -> list[dict[str, str]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def curate(directory: Path, records: list[RequestRecord], eval_fraction: float = 0.2) -> tuple[list, list, object]:
    curator = Curator(directory, eval_fraction)
    for r in records:
        curator.offer(r)
    summary = curator.close()
    return rows(summary.train), rows(summary.eval), summary


def test_corrections_become_completions_deduplicated_by_prompt(tmp_path: Path) -> None:
    records = [
        record("Reverse abc", "cba"),
        record("Reverse  abc ", "CBA?"),  # the same prompt up to spaces: the first correction wins
        record("Reverse xyz", None),  # no correction: not training data
        record("Reverse qrs", "   "),  # an empty correction neither
        record("Reverse def", "fed"),
    ]
    train, evaluation, summary = curate(tmp_path, records)
    pairs = {r["prompt"]: r["completion"] for r in train + evaluation}
    assert pairs == {"Reverse abc": "cba", "Reverse def": "fed"}
    assert set(train[0]) == {"prompt", "completion"}
    assert summary.corrections == 3 and summary.duplicates == 1  # type: ignore[attr-defined]


def test_the_split_is_deterministic_and_near_the_fraction(tmp_path: Path) -> None:
    records = [record(f"Reverse word{i}", f"{i}drow") for i in range(1000)]
    train, evaluation, _ = curate(tmp_path / "a", records)
    again_train, again_eval, _ = curate(tmp_path / "b", list(reversed(records)))
    assert 150 <= len(evaluation) <= 250 and len(train) + len(evaluation) == 1000
    assert {r["prompt"] for r in evaluation} == {r["prompt"] for r in again_eval}
    assert not {r["prompt"] for r in train} & {r["prompt"] for r in evaluation}


def test_a_small_set_still_gets_an_eval_example(tmp_path: Path) -> None:
    # Find a pair of prompts that both hash to train, then check one of them is moved to eval.
    candidates = [record(f"p{i}", "c") for i in range(40)]
    train, evaluation, _ = curate(tmp_path / "probe", candidates)
    both_train = [r for r in candidates if r.prompt in {t["prompt"] for t in train}][:2]
    train, evaluation, summary = curate(tmp_path / "small", both_train)
    assert len(train) == 1 and len(evaluation) == 1
    assert summary.train_examples == 1 and summary.eval_examples == 1  # type: ignore[attr-defined]


def test_a_split_file_that_is_a_link_is_written_where_it_points(tmp_path: Path) -> None:
    # The training set linked to where the trainer reads it: renamed over, the link became a plain file and the
    # trainer kept reading the old set.
    target = tmp_path / "volume" / "train.jsonl"
    target.parent.mkdir()
    target.write_text("stale\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "train.jsonl").symlink_to(target)
    train, evaluation, summary = curate(tmp_path / "out", [record(f"Reverse w{i}", f"{i}w") for i in range(50)])
    assert (tmp_path / "out" / "train.jsonl").is_symlink()
    assert rows(str(target)) == train and len(train) + len(evaluation) == 50
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["eval.jsonl", "train.jsonl"], "no temporary left"


def test_a_bad_fraction_is_refused() -> None:
    with pytest.raises(ValueError, match="eval fraction"):
        Curator(Path("."), 1.5)


def test_a_credential_a_user_pasted_is_masked_before_a_model_learns_it(tmp_path: Path) -> None:
    key, token = "sk-" + "a1B2c3D4e5F6g7H8i9J0", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJlc2VjcmV0"
    records = [record(f"Why does my key {key} fail?", f"Rotate it: curl -H 'Authorization: Bearer {token}' …")]
    train, evaluation, _ = curate(tmp_path, records)
    written = json.dumps(train + evaluation)
    assert key not in written and token not in written and "***" in written
