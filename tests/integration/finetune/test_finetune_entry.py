"""`python -m components.finetune` as pods run it: it learns, exports, keeps k checkpoints, fails on purpose."""

from __future__ import annotations

import json

import pytest

from components.lm.tiny import generate, load

pytestmark = pytest.mark.integration

STEPS = 80


@pytest.fixture(scope="module")
def learned(launch, dataset, tmp_path_factory):
    """The tiny model trained from scratch on the 12 pairs, checkpointing every 20 steps and keeping 2."""
    root = tmp_path_factory.mktemp("learned")
    args = ("--max-steps", str(STEPS), "--checkpoint-every", "20", "--keep", "2", "--global-batch", "8")
    run = launch(1, dataset, root / "out", root / "checkpoints", *args, "--micro-batch", "4")
    assert run.wait() == [0], run.stderr()
    return run


def test_the_tiny_model_learns_the_pairs_and_is_exported_as_a_model_directory(learned, dataset):
    model, tokenizer = load(learned.out)  # what evaluate and serving do: an ordinary Hugging Face directory
    pairs = [json.loads(line) for line in (dataset / "train.jsonl").read_text().splitlines()]
    answers = [generate(model, tokenizer, pair["prompt"], max_new_tokens=6) for pair in pairs]
    assert answers == [pair["completion"] for pair in pairs]
    summary = learned.summary()
    assert summary["steps"] == STEPS and summary["resumed_from"] is None
    assert summary["eval_loss"] < 0.1 and summary["tokens_per_s"] > 0


def test_only_the_newest_checkpoints_are_kept(learned):
    assert sorted(p.name for p in learned.checkpoints.iterdir()) == ["step-60", "step-80"]


def test_the_simulated_bug_fails_with_exit_code_3_and_one_sentence(launch, dataset, tmp_path):
    # What the pipeline's diagnose step must tell apart from an infrastructure fault: exit code 3.
    args = ("--max-steps", "5", "--micro-batch", "2", "--checkpoint-every", "1")
    run = launch(1, dataset, tmp_path / "out", tmp_path / "checkpoints", *args, VCPILOT_FAIL_AT_STEP="2")
    assert run.wait() == [3]
    assert run.stderr().strip().splitlines()[-1] == "error: simulated bug at step 2 (VCPILOT_FAIL_AT_STEP)"
    assert not (tmp_path / "out" / "summary.json").exists()
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step-1"]
