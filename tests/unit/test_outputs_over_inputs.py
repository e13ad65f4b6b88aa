"""An output that is one of a command's inputs is refused in one sentence, before anything is read or written.

`evaluate --eval-set e.jsonl --report e.jsonl` replaced the evaluation set with the report and exited 0; so did
`loadtest --records` over its `--dataset`, `release register --report` over the evaluation it recorded, and
`finetune --out` over its `--base-model`. Each now refuses as `logs parse app.log --out app.log` does
(tests/unit/logs), through `components.files.refuse_overwriting`: a link or a second name of the file counts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from components.files import overwrite_problem
from components.loadtest.cli import step_app
from pipelines.cli import app

Case = Callable[[Path], tuple[list[str], str]]


def _files(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data set, a model directory (refused before it loads, so any files do), reports, and a link to each."""
    monkeypatch.setenv("VCPILOT_HOME", str(tmp_path / "home"))
    work = tmp_path / "work"
    (work / "data").mkdir(parents=True)
    (work / "data" / "train.jsonl").write_text('{"prompt": "q1 ", "completion": "a1"}\n')
    (work / "data" / "eval.jsonl").write_text('{"prompt": "q0 ", "completion": "a0"}\n')
    (work / "model").mkdir()
    (work / "model" / "config.json").write_text('{"model_type": "llama"}\n')
    (work / "model" / "model.safetensors").write_bytes(b"\x00" * 64)
    (work / "evaluate.json").write_text('{"candidate_score": 0.5}\n')
    (work / "loadtest.json").write_text('{"ttft_p95_ms": 10.0, "tpot_p95_ms": 2.0, "errors": 0}\n')
    (work / "eval-link.jsonl").symlink_to(work / "data" / "eval.jsonl")
    (work / "model-link").symlink_to(work / "model")
    return work


def _same(option: str, path: Path, what: str) -> str:
    return f"error: {option} {path} is {what} being read: writing there would replace it; give another {option}"


def _inside(option: str, path: Path, what: str) -> str:
    return (
        f"error: {option} {path} is inside {what} being read: writing there would replace part of it; "
        f"give another {option}"
    )


def _evaluate(w: Path, *more: str) -> list[str]:
    return ["evaluate", "--model", str(w / "model"), *more]


def _register(w: Path, *more: str) -> list[str]:
    return ["release", "register", "--model", str(w / "model"), "--registered-model", "shop", *more]


def _loadtest(w: Path, *more: str) -> list[str]:
    return ["loadtest", "--url", "http://127.0.0.1:9", "--requests", "1", "--concurrency", "1", *more]


CASES: dict[str, Case] = {
    "evaluate --report over --eval-set": lambda w: (
        _evaluate(w, "--eval-set", str(w / "data/eval.jsonl"), "--report", str(w / "data/eval.jsonl")),
        _same("--report", w / "data/eval.jsonl", "the evaluation set"),
    ),
    "evaluate --report over a link to --dataset-dir's eval.jsonl": lambda w: (
        _evaluate(w, "--dataset-dir", str(w / "data"), "--report", str(w / "eval-link.jsonl")),
        _same("--report", w / "eval-link.jsonl", "the evaluation set"),
    ),
    "evaluate --report over --loadtest-report": lambda w: (
        _evaluate(
            w,
            *("--eval-set", str(w / "data/eval.jsonl"), "--loadtest-report", str(w / "loadtest.json")),
            *("--slo-ttft-ms", "100", "--slo-tpot-ms", "10", "--report", str(w / "loadtest.json")),
        ),
        _same("--report", w / "loadtest.json", "the load-test report"),
    ),
    "evaluate --report over a file of --model": lambda w: (
        _evaluate(w, "--eval-set", str(w / "data/eval.jsonl"), "--report", str(w / "model/config.json")),
        _inside("--report", w / "model/config.json", "the model"),
    ),
    "release register --report over --evaluation": lambda w: (
        _register(w, "--evaluation", str(w / "evaluate.json"), "--report", str(w / "evaluate.json")),
        _same("--report", w / "evaluate.json", "the evaluation report"),
    ),
    "release register --report over --loadtest": lambda w: (
        _register(w, "--loadtest", str(w / "loadtest.json"), "--report", str(w / "loadtest.json")),
        _same("--report", w / "loadtest.json", "the load-test report"),
    ),
    "release register --report over a file of --dataset": lambda w: (
        _register(w, "--dataset", str(w / "data"), "--report", str(w / "data/train.jsonl")),
        _inside("--report", w / "data/train.jsonl", "the data set"),
    ),
    "release register --report over a file of --model, by a link": lambda w: (
        _register(w, "--report", str(w / "model-link/config.json")),
        _inside("--report", w / "model-link/config.json", "the model"),
    ),
    "loadtest --records over --dataset, by a link": lambda w: (
        _loadtest(w, "--dataset", str(w / "data/eval.jsonl"), "--records", str(w / "eval-link.jsonl")),
        _same("--records", w / "eval-link.jsonl", "the data set"),
    ),
    "finetune --out over --base-model": lambda w: (
        ["finetune", "--data", str(w / "data"), "--max-steps", "1", "--base-model", str(w / "model")]
        + ["--out", str(w / "model-link")],
        _same("--out", w / "model-link", "the base model"),
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_an_output_that_is_an_input_is_refused_and_nothing_changes(work: Path, case: str) -> None:
    args, sentence = CASES[case](work)
    before = _files(work)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert result.stderr.strip() == sentence
    assert _files(work) == before  # every input byte for byte, and nothing new beside them
    assert not (work.parent / "home").exists()  # no MLflow store, no registered version, no run


@pytest.mark.parametrize("records", [None, "records.jsonl"])
def test_the_pipelines_load_test_client_refuses_to_write_its_records_over_its_dataset(
    work: Path, records: str | None
) -> None:
    # `python -m components.loadtest --dataset d/records.jsonl --report d/report.json` replaced the prompts with the
    # records, the default beside the report; `--records` named the same is refused the same way.
    dataset = work / "records.jsonl"
    dataset.write_text('{"prompt": "q", "completion": "a"}\n')
    args = ["--port", "9", "--dataset", str(dataset), "--report", str(work / "report.json"), "--wait-s", "0.1"]
    args += ["--records", str(work / records)] if records else []
    before = _files(work)
    result = CliRunner().invoke(step_app, args)
    assert result.exit_code == 1, result.output
    assert result.stderr.strip() == _same("--records", dataset, "the data set")
    assert _files(work) == before
    result = CliRunner().invoke(step_app, ["--port", "9", "--dataset", str(dataset), "--report", str(dataset)])
    assert (result.exit_code, result.stderr.strip()) == (1, _same("--report", dataset, "the data set"))
    assert _files(work) == before


def test_the_pipelines_load_test_client_refuses_one_path_for_its_report_and_its_records(work: Path) -> None:
    # The records were written over the report the step had just written (neither existed before, so no input).
    args = ["--port", "9", "--report", str(work / "out/r.json"), "--records", str(work / "out/../out/r.json")]
    before = _files(work)
    result = CliRunner().invoke(step_app, [*args, "--wait-s", "0.1"])
    assert (result.exit_code, result.stderr.strip()) == (
        1,
        f"error: --records {work / 'out/../out/r.json'} is the --report file too; give each its own path",
    )
    assert _files(work) == before


def test_an_output_beside_the_inputs_or_not_there_yet_is_no_problem(work: Path) -> None:
    inputs = [(work / "model", "the model"), (work / "data/eval.jsonl", "the evaluation set")]
    assert overwrite_problem(inputs, [(work / "report.json", "--report")]) is None  # not there yet
    assert overwrite_problem(inputs, [(work / "model/report.json", "--report")]) is None  # new in the model
    assert overwrite_problem(inputs, [(work / "data/train.jsonl", "--report")]) is None  # a file not read
    assert overwrite_problem([(work / "nothing", "the data set")], [(work / "nothing", "--out")]) is None


def test_finetune_over_a_directory_named_tiny_still_trains_the_bundled_tiny_model(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 'tiny' is built in memory: a second `finetune --out tiny` (the first one's model there) is no base model read.
    monkeypatch.chdir(work)
    (work / "tiny").mkdir()
    (work / "tiny" / "config.json").write_text("{}\n")
    result = CliRunner().invoke(app, ["finetune", "--data", "data", "--out", "tiny", "--max-steps", "1"])
    assert result.exit_code == 0, result.output
    assert (work / "tiny" / "model.safetensors").is_file()
