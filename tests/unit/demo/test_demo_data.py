"""The demo data: the same seed gives the same bytes, and the current window really drifts from the baseline."""

from __future__ import annotations

import gzip
import json
import re

import pytest

from components.demo.__main__ import main
from components.demo.data import DemoConfig, generate, write_demo
from components.lm.tiny import ALPHABET


def jsonl(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.decode().splitlines()]


@pytest.fixture(scope="module")
def demo():
    files, summary = generate(DemoConfig(seed=7))
    return files, summary


def test_the_same_seed_writes_the_same_bytes_and_another_seed_does_not(tmp_path):
    first = write_demo(tmp_path / "a", DemoConfig(seed=3))
    write_demo(tmp_path / "b", DemoConfig(seed=3))
    write_demo(tmp_path / "c", DemoConfig(seed=4))
    for relative in first.files:
        assert (tmp_path / "a" / relative).read_bytes() == (tmp_path / "b" / relative).read_bytes(), relative
    assert (tmp_path / "a" / "logs/current/requests.jsonl.gz").read_bytes() != (
        tmp_path / "c" / "logs/current/requests.jsonl.gz"
    ).read_bytes()
    assert sorted(p.relative_to(tmp_path / "a").as_posix() for p in (tmp_path / "a").rglob("*") if p.is_file()) == [
        "data/baseline/eval.jsonl",
        "data/baseline/train.jsonl",
        "data/current/eval.jsonl",
        "data/drifted/eval.jsonl",
        "demo.json",
        "logs/baseline/requests.jsonl.gz",
        "logs/baseline/service.log",
        "logs/current/requests.jsonl.gz",
        "logs/current/service.log",
    ]


def test_the_baseline_answers_are_wrong_on_most_of_the_drifted_eval_set(demo):
    files, summary = demo
    baseline = {row["prompt"]: row["completion"] for row in jsonl(files["data/baseline/train.jsonl"])}
    drifted = jsonl(files["data/drifted/eval.jsonl"])
    assert len(drifted) == len(summary.changed) + len(summary.new) >= 20
    assert all(baseline.get(row["prompt"]) != row["completion"] for row in drifted)
    current = jsonl(files["data/current/eval.jsonl"])
    wrong = sum(baseline.get(row["prompt"]) != row["completion"] for row in current)
    assert wrong / len(current) >= 0.5
    assert jsonl(files["data/baseline/eval.jsonl"]) == sorted(
        jsonl(files["data/baseline/train.jsonl"]), key=lambda row: row["prompt"]
    )


def test_users_complain_and_correct_in_the_current_window_only(demo):
    files, summary = demo
    baseline = jsonl(gzip.decompress(files["logs/baseline/requests.jsonl.gz"]))
    current = jsonl(gzip.decompress(files["logs/current/requests.jsonl.gz"]))

    def negative_share(records):
        return sum(r["feedback"] == "negative" for r in records) / len(records)

    assert negative_share(baseline) < 0.05 < 0.3 < negative_share(current)
    assert not any("correction" in r for r in baseline)
    truth = {row["prompt"]: row["completion"] for row in jsonl(files["data/drifted/eval.jsonl"])}
    corrections = {r["prompt"]: r["correction"] for r in current if "correction" in r}
    assert corrections == truth, "every drifted item is corrected, always with its current answer"
    for record in current:
        assert set(record) <= {"timestamp", "request_id", "prompt", "completion", "latency_ms", "status", "feedback",
                               "correction", "category"}  # fmt: skip
        assert record["category"] == record["prompt"].removesuffix("?\nA:").split()[-1]
        assert record["status"] in ("ok", "error") and record["feedback"] in ("positive", "negative", "none")
        if "correction" in record:
            assert record["feedback"] == "negative" and record["completion"] != record["correction"]
    assert [r["timestamp"] for r in current] == sorted(r["timestamp"] for r in current)
    assert summary.windows["current"]["corrections"] == len([r for r in current if "correction" in r])


def test_the_task_fits_the_tiny_model(demo):
    files, _ = demo
    rows = jsonl(files["data/current/eval.jsonl"]) + jsonl(files["data/baseline/train.jsonl"])
    assert 40 <= len(jsonl(files["data/current/eval.jsonl"])) <= 80
    for row in rows:
        assert len(row["prompt"]) <= 30 and len(row["completion"]) <= 8
        assert set(row["prompt"] + row["completion"]) <= set(ALPHABET)
        assert re.fullmatch(r"Q: price of [a-z ]+\?\nA:", row["prompt"]) and re.fullmatch(r" \$\d+", row["completion"])


def test_service_logs_are_plain_loghub_like_lines_and_the_current_window_names_the_changes(demo):
    files, summary = demo
    for window in ("baseline", "current"):
        lines = files[f"logs/{window}/service.log"].decode().splitlines()
        assert all(
            re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARN|ERROR) \[[\w-]+\] ", line) for line in lines
        )
        assert [line[:23] for line in lines] == sorted(line[:23] for line in lines)
    current = files["logs/current/service.log"].decode()
    assert current.count("changed from $") == len(summary.changed)
    assert "changed from" not in files["logs/baseline/service.log"].decode()


def test_bad_options_get_one_sentence(tmp_path, capsys):
    assert main(["--out", str(tmp_path / "d"), "--items", "2"]) == 1  # EXIT_INPUT
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "--items" in err
    (tmp_path / "file").write_text("x")
    assert main(["--out", str(tmp_path / "file")]) == 1
    assert f"--out {tmp_path / 'file'} is a file; give the path of a directory" in capsys.readouterr().err
    assert main(["--out", str(tmp_path / "file" / "d")]) == 1  # under a file: said before anything is written
    assert "is under" in capsys.readouterr().err
    assert main(["--out", str(tmp_path / "ok"), "--requests", "60", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["windows"]["current"]["requests"] == 60
    assert main(["--out", str(tmp_path / "few"), "--requests", "20"]) == 1
    assert "at least the 60 items" in capsys.readouterr().err
