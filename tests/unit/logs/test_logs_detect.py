"""detect-logs end to end: a drifted window triggers for the right reason and leaves a report and a training set."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from components.logs.__main__ import main
from components.logs.cli import app
from components.logs.detect import PREVIOUS_WINDOW, detect
from components.logs.interval import parse_window
from components.logs.parse import parse_files
from pipelines.rules import DetectReport

WindowsFactory = Callable[..., Path]  # the make_windows fixture (conftest.py)


def test_a_drifted_window_triggers_with_the_reason_and_writes_every_file(
    make_windows: WindowsFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = make_windows()
    report_path = tmp_path / "out" / "report.json"
    assert main(["--source", str(source), "--report", str(report_path)]) == 0
    assert capsys.readouterr().out.startswith("drift: negative feedback on template prompt:")

    data = json.loads(report_path.read_text())
    gate = DetectReport.model_validate(data)  # what the pipeline's gate reads
    assert gate.drift is True and "'Reverse the word <*> please'" in gate.reason
    assert data["compared_with"] == "baseline"
    kinds = {(f["kind"], f["template"]) for f in data["findings"] if f["severity"] == "trigger"}
    assert ("negative_feedback", "Reverse the word <*> please") in kinds
    assert ("new_template", "model timeout after <*>") in kinds
    assert ("error_rate", None) in kinds
    feedback = next(f for f in data["findings"] if f["kind"] == "negative_feedback" and f["template"])
    assert feedback["evidence"]["test"]["p_value"] < feedback["evidence"]["alpha"]
    assert feedback["examples"] and "Reverse the word ticket" in feedback["examples"][0]

    markdown = (tmp_path / "out" / "report.md").read_text()
    assert markdown.startswith("# Log drift report\n\n**Verdict: the model needs work**")
    assert "two-proportion z-test" in markdown

    train = [json.loads(line) for line in (tmp_path / "out" / "train.jsonl").read_text().splitlines()]
    evaluation = [json.loads(line) for line in (tmp_path / "out" / "eval.jsonl").read_text().splitlines()]
    assert train and evaluation and data["train_examples"] == len(train) and data["eval_examples"] == len(evaluation)
    for row in train + evaluation:
        ticket = row["prompt"].removeprefix("Reverse the word ticket").removesuffix(" please")
        assert row["completion"] == f"{ticket[::-1]}tekcit"  # the user's correction, not the model's answer
    assert len({row["prompt"] for row in train + evaluation}) == len(train) + len(evaluation)


def test_a_calm_window_does_not_trigger(make_windows: WindowsFactory, tmp_path: Path) -> None:
    source = make_windows(drift=False)
    report = detect([source / "current"], tmp_path / "report.json", baseline=[source / "baseline"])
    assert not report.drift
    assert report.reason.startswith("no significant change against the baseline")
    assert [f for f in report.findings if f.severity == "trigger"] == []


def test_a_nightly_run_compares_with_the_window_the_previous_run_saved(
    make_windows: WindowsFactory, tmp_path: Path
) -> None:
    source = make_windows()
    state = tmp_path / "state"
    first = detect([source / "baseline"], tmp_path / "night1" / "report.json", state_dir=state)
    assert first.compared_with == "budgets" and (state / PREVIOUS_WINDOW).is_file()
    second = detect([source / "current"], tmp_path / "night2" / "report.json", state_dir=state)
    assert second.compared_with == "previous run" and second.drift
    assert second.baseline is not None and second.baseline.requests == first.current.requests
    # Yesterday's templates kept their ids: only tonight's new events are new.
    new = {f.template for f in second.findings if f.kind == "new_template"}
    assert new == {"model timeout after <*>", "Reverse the word <*> please"}


def test_malformed_lines_are_reported_not_fatal(make_windows: WindowsFactory, tmp_path: Path) -> None:
    source = make_windows()
    with (source / "current" / "requests.jsonl").open("ab") as out:
        out.write(b'{"prompt": "cut sho\n\x00\x00binary\n\xff\xfe not utf-8\n')
    report = detect([source / "current"], tmp_path / "report.json", baseline=[source / "baseline"])
    assert report.current.malformed.counts == {"invalid_json": 1, "binary": 1, "invalid_utf8": 1}
    assert report.malformed_lines == 3 and report.drift
    assert "| invalid_json | 0 | 1 |" in (tmp_path / "report.md").read_text()


def test_detect_command_writes_into_out_dir(make_windows: WindowsFactory, tmp_path: Path) -> None:
    source = make_windows()
    out = tmp_path / "detect"
    args = ["detect", "--baseline", str(source / "baseline"), "--current", str(source / "current"), "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("drift: ")
    assert {p.name for p in out.iterdir()} == {"report.json", "report.md", "train.jsonl", "eval.jsonl"}


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "error: the log source {root}/nope does not exist: give a file, a directory or a glob"),
        ("empty", "error: the current window ({root}/empty) holds no log lines: point it at the service's logs"),
        (
            "garbage",
            "error: the current window ({root}/garbage) holds no log lines (2 malformed lines skipped): "
            "point it at the service's logs",
        ),
    ],
)
def test_bad_input_is_one_sentence(tmp_path: Path, setup: str, message: str) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / "blob.bin").write_bytes(b"\x00\x01\x02\n\x03\x04\n")
    current = {"missing": "nope", "empty": "empty", "garbage": "garbage"}[setup]
    out = tmp_path / "o" / "detect"
    result = CliRunner().invoke(app, ["detect", "--current", str(tmp_path / current), "--out", str(out)])
    assert result.exit_code == 1  # EXIT_INPUT
    assert result.output.strip().splitlines() == [message.format(root=tmp_path)]
    assert not (tmp_path / "o").exists(), "a refused input creates no directory"
    step = CliRunner().invoke(app, ["step", "--source", str(tmp_path / current), "--report", str(out / "r.json")])
    assert (step.exit_code, step.output.strip().splitlines()) == (1, [message.format(root=tmp_path)])
    assert not (tmp_path / "o").exists()


def test_the_step_entry_point_rejects_a_missing_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--source", str(tmp_path / "nope"), "--report", str(tmp_path / "r.json")]) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        f"error: the log source {tmp_path / 'nope'} does not exist: give a file, a directory or a glob"
    ]


def test_an_unwritable_output_is_one_sentence(make_windows: WindowsFactory, tmp_path: Path) -> None:
    source = make_windows()
    (tmp_path / "file").write_text("not a directory")
    out = tmp_path / "file" / "detect"
    result = CliRunner().invoke(app, ["detect", "--current", str(source / "current"), "--out", str(out)])
    assert result.exit_code == 1  # EXIT_INPUT
    said = f"error: --out {out} is under {tmp_path / 'file'}, a file; give a path under a directory"
    assert result.output.strip().splitlines() == [said]


@pytest.mark.parametrize(("current_5xx", "trigger"), [(0.2, True), (0.01, False)])
def test_a_rising_share_of_5xx_in_an_access_log_triggers(tmp_path: Path, current_5xx: float, trigger: bool) -> None:
    # A model served behind nginx: only its access log shows the server failing requests. It read as 0 errors.
    def window(name: str, day: int, share: float) -> Path:
        lines = [
            f"10.0.0.{i % 250 + 1} - - [{day:02d}/Dec/2026:10:{i // 60 % 60:02d}:{i % 60:02d} +0000] "
            f'"POST /v1/completions HTTP/1.1" {500 if i % round(1 / share) == 0 else 200} {100 + i} "-" "httpx/0.27"'
            for i in range(600)
        ]
        path = tmp_path / name
        path.write_text("\n".join(lines) + "\n")
        return path

    baseline, current = window("before.log", 2, 0.01), window("after.log", 3, current_5xx)
    report = detect([current], tmp_path / "out" / "report.json", baseline=[baseline])
    assert report.baseline.log_errors == 6
    assert report.current.log_errors == round(600 * current_5xx)
    assert report.trigger is trigger
    assert ("error_rate" in {finding.kind for finding in report.findings}) is trigger


def test_detect_joins_templates_with_the_merge_pass_of_logs_parse(tmp_path: Path) -> None:
    names = ["admin", "oracle", "test", "guest", "ubuntu", "postgres", "git", "pi"]
    lines = [f"2026-11-01 00:00:{i:02d} INFO sshd: Invalid user {names[i % 8]}" for i in range(40)]
    log = tmp_path / "auth.log"
    log.write_text("\n".join(lines) + "\n")

    report = detect([log], tmp_path / "detect" / "report.json")
    parse_files([log], tmp_path / "parsed.csv")
    with (tmp_path / "parsed.csv").open(newline="") as handle:
        parsed = {row["EventTemplate"] for row in csv.DictReader(handle)}
    assert [(t.template, t.current_count) for t in report.top_templates] == [("Invalid user <*>", 40)]
    assert parsed == {"Invalid user <*>"}


def test_a_credential_in_a_log_line_is_masked_in_the_report_its_tags_and_outputs(tmp_path: Path) -> None:
    # Example lines, templates and the reason go to MLflow (artifacts, a tag) and the workflow's outputs.
    token = "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJlc2VjcmV0"
    key = "sk-" + "abcdefghijklmnopqrstuvwx"  # letters only: no mask for variables takes it
    baseline = tmp_path / "baseline.log"
    baseline.write_text("".join(f"2026-11-01 00:00:{i % 60:02d} INFO app: request {i} ok\n" for i in range(100)))
    current = tmp_path / "current.log"
    current.write_text(
        "".join(
            f"2026-11-02 00:00:{i % 60:02d} ERROR app: upstream refused {token} with key {key}\n" for i in range(80)
        )
    )
    report = detect([current], tmp_path / "out" / "report.json", baseline=[baseline])
    assert report.trigger and "upstream refused" in report.reason
    for text in (
        report.model_dump_json(),
        (tmp_path / "out" / "report.json").read_text(),
        (tmp_path / "out" / "report.md").read_text(),
    ):
        assert "eyJhbGci" not in text and key not in text and "***" in text


def test_a_report_path_that_is_a_directory_is_refused_before_anything_is_written(
    make_windows: WindowsFactory, tmp_path: Path
) -> None:
    # it was refused only after train/eval.jsonl were written beside it, naming report.tmp, which it left behind
    source, report = make_windows(), tmp_path / "out" / "rep"
    report.mkdir(parents=True)
    result = CliRunner().invoke(app, ["step", "--source", str(source / "current"), "--report", str(report)])
    assert result.exit_code == 1
    assert result.stderr.strip() == f"error: --report {report} is a directory; give the path of a file to write"
    assert sorted(p.name for p in report.parent.iterdir()) == ["rep"]
    out = tmp_path / "parsed.csv"
    out.mkdir()
    parsed = CliRunner().invoke(app, ["parse", str(source / "current"), "--out", str(out)])
    assert parsed.exit_code == 1 and parsed.stderr.strip().endswith("is a directory; give the path of a file to write")
    assert list(out.iterdir()) == [] and not (tmp_path / ".parsed.csv.tmp").exists()


def test_a_log_among_the_files_detect_writes_is_refused_and_kept(tmp_path: Path) -> None:
    # A glob or a directory that takes in the last run's output (`--current runs/ --out runs/`) was overwritten.
    out = tmp_path / "out"
    out.mkdir()
    log = out / "train.jsonl"
    content = "".join(f'{{"prompt": "q{i}", "completion": "a{i}"}}\n' for i in range(40))
    log.write_text(content)
    result = CliRunner().invoke(app, ["detect", "--current", str(out), "--out", str(out)])
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"error: --out {log} is one of the logs being read: writing there would replace it; give another --out"
    )
    assert log.read_text() == content
    assert [path.name for path in out.iterdir()] == ["train.jsonl"]


def test_chat_requests_are_requests_their_corrections_learnt_as_conversations(tmp_path: Path) -> None:
    # A chat service logs OpenAI's `messages`, not a `prompt`: every such line was a plain log event, so negative
    # feedback was never counted and no correction became training data.
    from components.finetune.records import read_records

    def request(i: int, feedback: str, correction: str | None) -> str:
        messages = [
            {"role": "system", "content": "You are the shop's assistant."},
            {"role": "user", "content": [{"type": "text", "text": f"where is order {i}?"}]},
        ]
        record = {"request_id": f"r{i}", "messages": messages, "response": "no idea", "feedback": feedback}
        return json.dumps(record | ({"correction": f"Order {i} ships today."} if correction else {}))

    baseline, current = tmp_path / "before.jsonl", tmp_path / "after.jsonl"
    baseline.write_text("".join(request(i, "positive", None) + "\n" for i in range(60)))
    current.write_text(
        "".join(request(i, "negative", "yes") + "\n" for i in range(40))
        + "".join(request(i, "positive", None) + "\n" for i in range(40, 60))
        + '{"messages": [{"role": "robot", "content": "x"}]}\n'  # a role no chat has: one sentence, counted
        + '{"level": "info", "msg": "queue drained", "messages": 3}\n'  # a count of messages: a log event
    )
    report = detect([current], tmp_path / "out" / "report.json", baseline=[baseline])
    assert (report.current.requests, report.current.negative_feedback, report.current.log_lines) == (60, 40, 1)
    assert report.current.malformed.counts == {"invalid_record": 1}
    assert report.current.malformed.examples["invalid_record"][0].endswith(
        "the request message 1 has role 'robot'; use one of system, developer, user, assistant, tool"
    )
    assert [t.template for t in report.top_templates if t.key.startswith("prompt")] == ["where is order <*>"]
    assert report.trigger
    learnt = read_records(tmp_path / "out" / "train.jsonl", "training set") + read_records(
        tmp_path / "out" / "eval.jsonl", "evaluation set"
    )
    assert len(learnt) == 40
    assert learnt[0]["messages"][0] == {"role": "system", "content": "You are the shop's assistant."}
    assert learnt[0]["messages"][1]["content"].startswith("where is order ")
    assert learnt[0]["completion"].startswith("Order ")


def test_the_step_names_its_report_option_and_an_unwritable_output_is_named_as_given(tmp_path: Path) -> None:
    # `logs step` was told its --report was `--out`; `logs parse --out /proc/x.csv` named its work file `.x.csv.ids`.
    current = tmp_path / "logs"
    current.mkdir()
    log = current / "report.json"
    log.write_text("".join(f"2026-12-03 10:00:{i:02d} INFO request {i} done\n" for i in range(40)))
    step = CliRunner().invoke(app, ["step", "--source", str(current), "--report", str(log)])
    assert (step.exit_code, step.output.strip()) == (
        1,
        f"error: --report {log} is one of the logs being read: writing there would replace it; give another --report",
    )
    parse = CliRunner().invoke(app, ["parse", str(log), "--out", "/proc/x.csv"])
    assert (parse.exit_code, parse.output.strip()) == (  # refused up front now, before a line is parsed
        1,
        "error: --out /proc/x.csv cannot be written: no file can be created in /proc (No such file or directory); "
        "give a path in a writable directory",
    )


def test_wrapped_json_lines_are_timed_by_their_prefix_and_mined_as_parse_mines_them(tmp_path: Path) -> None:
    # A request record inside a CRI line has no time of its own: the runtime's prefix dates it for the windows.
    lines = [
        f'2026-12-03T10:{i // 60:02d}:{i % 60:02d}.000000000Z stdout F {{"prompt":"order {i}","feedback":"negative"}}'
        for i in range(40)
    ]
    log = tmp_path / "web.log"
    log.write_text("\n".join(lines) + "\n")
    window = parse_window("2026-12-03T10:00/2026-12-03T10:00:30", datetime(2026, 12, 4, tzinfo=UTC))
    report = detect([log], tmp_path / "out" / "report.json", current_window=window)
    assert (report.current.requests, report.current.negative_feedback, report.current.untimed_lines) == (30, 30, 0)
    parse_files([log], tmp_path / "parsed.csv")
    with (tmp_path / "parsed.csv").open(newline="") as handle:
        assert {row["EventTemplate"] for row in csv.DictReader(handle)} == {"order <*>"}
