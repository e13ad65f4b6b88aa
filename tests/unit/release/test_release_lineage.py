"""Lineage of a model version: the training set's digest and the tags it becomes."""

from __future__ import annotations

import hashlib

import pytest

from components.release.register import Lineage, dataset_digest, lineage_from, lineage_tags


def test_the_dataset_digest_is_the_sha256_of_the_training_set(tmp_path):
    (tmp_path / "train.jsonl").write_text('{"prompt": "a", "completion": "b"}\n')
    expected = "sha256:" + hashlib.sha256((tmp_path / "train.jsonl").read_bytes()).hexdigest()
    assert dataset_digest(tmp_path / "train.jsonl") == dataset_digest(tmp_path) == expected
    with pytest.raises(ValueError, match="does not exist") as err:
        dataset_digest(tmp_path / "nothing")
    assert "\n" not in str(err.value)


def test_lineage_becomes_tags(tmp_path):
    (tmp_path / "train.jsonl").write_text("{}\n")
    lineage = lineage_from(
        workflow="wf-1", dataset=tmp_path, base_model="tiny", checkpoint="step-20", training_run="abc123"
    )
    assert lineage_tags(lineage) == {
        "vcpilot.workflow": "wf-1",
        "vcpilot.training_run": "abc123",
        "vcpilot.dataset": str(tmp_path / "train.jsonl"),
        "vcpilot.dataset_digest": dataset_digest(tmp_path),
        "vcpilot.base_model": "tiny",
        "vcpilot.checkpoint": "step-20",
    }
    assert lineage_tags(Lineage()) == {}
