"""Lineage of a model version: the training set's digest, the tags, the metrics taken from a report."""

from __future__ import annotations

import hashlib
import json

import pytest

from components.release.register import Lineage, dataset_digest, lineage_from, lineage_tags, read_metrics


def test_the_dataset_digest_is_the_sha256_of_the_training_set(tmp_path):
    (tmp_path / "train.jsonl").write_text('{"prompt": "a", "completion": "b"}\n')
    expected = "sha256:" + hashlib.sha256((tmp_path / "train.jsonl").read_bytes()).hexdigest()
    assert dataset_digest(tmp_path / "train.jsonl") == dataset_digest(tmp_path) == expected
    with pytest.raises(ValueError, match="does not exist") as err:
        dataset_digest(tmp_path / "nothing")
    assert "\n" not in str(err.value)


def test_lineage_becomes_tags_and_metrics_come_from_a_report(tmp_path):
    report = tmp_path / "evaluate.json"
    report.write_text(json.dumps({"candidate_score": 0.75, "champion_score": None, "promote": True, "metric": "em"}))
    (tmp_path / "train.jsonl").write_text("{}\n")
    lineage = lineage_from(
        workflow="wf-1", dataset=tmp_path, base_model="tiny", checkpoint="step-20", metrics=read_metrics(report)
    )
    assert lineage_tags(lineage) == {
        "vcpilot.workflow": "wf-1",
        "vcpilot.dataset": str(tmp_path / "train.jsonl"),
        "vcpilot.dataset_digest": dataset_digest(tmp_path),
        "vcpilot.base_model": "tiny",
        "vcpilot.checkpoint": "step-20",
        "vcpilot.metric.candidate_score": "0.75",
    }
    assert lineage_tags(Lineage()) == {}
    with pytest.raises(ValueError, match="is not JSON"):
        (tmp_path / "bad.json").write_text("{")
        read_metrics(tmp_path / "bad.json")
