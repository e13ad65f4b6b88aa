"""detect-logs over one log source cut by time: two days of one service, the first the baseline, the second current."""

from __future__ import annotations

import json
import random
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from components.logs.__main__ import main
from components.logs.cli import app
from components.logs.detect import detect
from components.logs.interval import parse_window

DAY1 = "2026-11-01T00:00/2026-11-02T00:00"
DAY2 = "2026-11-02T00:00/2026-11-03T00:00"


def _one_source(tmp_path: Path) -> Path:
    """service.log: day 1 calm, day 2 a new error with a stack trace (lines without a time); requests.jsonl: epoch-ms
    times, and on day 2 one kind of prompt slows from ~100 ms to ~400 ms while the other stays as it was."""
    rng = random.Random(3)
    logs = tmp_path / "logs"
    logs.mkdir()
    service = []
    for day in (1, 2):
        for i in range(300):
            stamp = f"2026-11-0{day} {i // 60 % 24:02d}:{i % 60:02d}:00,000"
            service.append(f"{stamp} INFO [worker-1] http: served request from 10.0.0.{i % 250} in {i % 90} ms")
            if day == 2 and i % 10 == 0:
                service.append(f"{stamp} ERROR [worker-1] engine: model timeout after {30 + i % 60}s")
                service.append("Traceback (most recent call last):")
                service.append('  File "engine.py", line 12, in generate')
    (logs / "service.log").write_text("\n".join(service) + "\n")
    requests = []
    for day in (1, 2):
        start_ms = 1_793_491_200_000 + (day - 1) * 86_400_000  # 2026-11-01T00:00Z in milliseconds
        for i in range(200):
            slow = day == 2 and i % 2 == 0
            prompt = f"Summarize ticket {i}" if i % 2 == 0 else f"What is {i} plus {i}?"
            latency = rng.uniform(380, 420) if slow else rng.uniform(90, 110)
            record = {"timestamp": start_ms + i * 60_000, "prompt": prompt, "latency_ms": round(latency, 1)}
            requests.append(json.dumps(record))
    (logs / "requests.jsonl").write_text("\n".join(requests) + "\n")
    return logs


def test_two_days_of_one_source_compare_by_time_with_stack_traces_in_their_day(tmp_path: Path) -> None:
    logs = _one_source(tmp_path)
    now = datetime(2026, 11, 30, tzinfo=UTC)  # the windows are absolute: `now` plays no part
    report = detect(
        [logs],
        tmp_path / "out" / "report.json",
        baseline_window=parse_window(DAY1, now),
        current_window=parse_window(DAY2, now),
    )
    assert report.compared_with == "baseline" and report.baseline is not None
    assert report.baseline.window == "2026-11-01T00:00:00Z/2026-11-02T00:00:00Z"
    assert (report.baseline.log_lines, report.baseline.requests) == (300, 200)
    # 300 served + 30 errors, each with its traceback's lines folded in (`multiline.fold`): events, not lines
    assert (report.current.log_lines, report.current.requests) == (330, 200)
    assert report.current.first_timestamp == "2026-11-02T00:00:00Z"
    assert report.current.last_timestamp == "2026-11-02T04:59:00Z"

    kinds = {(f.kind, f.template) for f in report.findings}
    assert ("new_template", "model timeout after <*>") in kinds
    slowed = [f for f in report.findings if f.kind == "template_latency"]
    assert [f.template for f in slowed] == ["Summarize ticket <*>"]
    assert re.search(r"grew: p50 1\d\d → [34]\d\d ms \(×3\.\d\), p95 1\d\d → 4\d\d ms", slowed[0].summary)
    row = next(t for t in report.top_templates if t.template == "Summarize ticket <*>")
    assert row.current_latency_p95_ms is not None and 390 < row.current_latency_p95_ms < 430
    assert row.baseline_latency_p95_ms is not None and row.baseline_latency_p95_ms < 115
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert (
        "| time window | 2026-11-01T00:00:00Z/2026-11-02T00:00:00Z | 2026-11-02T00:00:00Z/2026-11-03T00:00:00Z |"
        in (markdown)
    )


def test_the_cli_cuts_one_source_and_a_window_outside_the_logs_is_one_sentence(tmp_path: Path) -> None:
    logs = _one_source(tmp_path)
    out = tmp_path / "out"
    done = CliRunner().invoke(
        app, ["detect", "--current", str(logs), "--out", str(out), "--baseline-window", DAY1, "--current-window", DAY2]
    )
    assert done.exit_code == 0, done.output
    assert json.loads((out / "report.json").read_text())["current"]["window"].startswith("2026-11-02T00:00:00Z/")

    late = "2026-12-01/P1D"
    done = CliRunner().invoke(app, ["detect", "--current", str(logs), "--out", str(out), "--current-window", late])
    assert done.exit_code == 1
    assert done.output.strip() == (
        f"error: the current window ({logs}) holds no log lines in 2026-12-01T00:00:00Z/2026-12-02T00:00:00Z: the "
        "logs run from 2026-11-01T00:00:00Z to 2026-11-02T04:59:00Z"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--current-window", "tomorrow"], "error: --current-window 'tomorrow' is not a time window: write START/END"),
        (["--baseline-window", DAY1], "error: --baseline-window without --baseline cuts the baseline from the current"),
        (
            ["--baseline-window", DAY1, "--current-window", "2026-11-01T12:00/P1D"],
            "error: the baseline window 2026-11-01T00:00:00Z/2026-11-02T00:00:00Z and the current window "
            "2026-11-01T12:00:00Z/2026-11-02T12:00:00Z overlap",
        ),
    ],
)
def test_bad_windows_are_refused_before_any_work(tmp_path: Path, options: list[str], message: str) -> None:
    logs = _one_source(tmp_path)
    out = tmp_path / "out"
    done = CliRunner().invoke(app, ["detect", "--current", str(logs), "--out", str(out), *options])
    assert done.exit_code == 1
    assert done.output.startswith(message) and done.output.count("\n") == 1
    assert not out.exists()


def test_logs_without_times_cannot_be_cut(tmp_path: Path) -> None:
    plain = tmp_path / "plain.log"
    plain.write_text("served a request\n" * 40)
    done = CliRunner().invoke(
        app, ["detect", "--current", str(plain), "--out", str(tmp_path), "--current-window", DAY2]
    )
    assert done.exit_code == 1
    assert "holds no line with a time this reads (ISO 8601, syslog, Apache, epoch seconds ...; 40 lines without" in (
        done.output
    )
    assert done.output.count("\n") == 1


def test_lines_in_no_window_are_counted_and_reported(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    day = [f"2026-11-0{d} 10:00:{s:02d} INFO http: served in {s} ms" for d in (1, 2) for s in range(40)]
    banner = ["starting service v1.2", "  config: /etc/service.yaml", "  workers: 4"]  # before any time
    late = [f"2026-11-05 10:00:{s:02d} INFO http: served in {s} ms" for s in range(7)]  # after both windows
    (logs / "service.log").write_text("\n".join(banner + day + late) + "\n")
    (logs / "worker.log").write_text("booting\nready\n" + "\n".join(day[40:]) + "\n")  # each file starts afresh
    out = tmp_path / "out"
    options = ["--baseline-window", DAY1, "--current-window", DAY2]
    done = CliRunner().invoke(app, ["detect", "--current", str(logs), "--out", str(out), *options])
    assert done.exit_code == 0, done.output
    assert "; in no window: 5 lines before their file's first time, 7 of a time outside the windows" in done.output

    report = json.loads((out / "report.json").read_text())
    assert (report["baseline"]["log_lines"], report["current"]["log_lines"]) == (40, 80)
    # Counted once, with the current window (as malformed lines are): the baseline was cut in the same pass.
    assert (report["current"]["untimed_lines"], report["current"]["outside_lines"]) == (5, 7)
    assert (report["baseline"]["untimed_lines"], report["baseline"]["outside_lines"]) == (0, 0)
    markdown = (out / "report.md").read_text()
    assert "| lines before the first time (in no window) | 0 | 5 |" in markdown
    assert "| lines outside the time windows | 0 | 7 |" in markdown

    # Without a window every line is in the one window: no such rows, nothing said.
    done = CliRunner().invoke(app, ["detect", "--current", str(logs), "--out", str(out)])
    assert done.exit_code == 0, done.output
    assert "in no window" not in done.output and "outside the time windows" not in (out / "report.md").read_text()


def test_the_detect_pod_gets_the_pipelines_windows_as_options_its_command_reads(tmp_path: Path) -> None:
    from pipelines.vcjobs import JobContext, build_detect_job

    context = JobContext(workflow="llm-autopilot-x7k2p", workspace=str(tmp_path / "ws"), image="img:1")
    job = build_detect_job(context, log_source=str(_one_source(tmp_path)), baseline_window=DAY1, current_window=DAY2)
    args = job.spec.tasks[0].template.spec.containers[0].args or []
    assert args[args.index("--baseline-window") + 1] == DAY1 and args[args.index("--current-window") + 1] == DAY2
    assert main(list(args)) == 0  # what the pod runs: python -m components.logs <args>
    report = json.loads(Path(args[args.index("--report") + 1]).read_text())
    assert report["baseline"]["log_lines"] == 300 and report["current"]["log_lines"] == 330
    assert "--current-window" not in (
        build_detect_job(context, log_source="/logs").spec.tasks[0].template.spec.containers[0].args or []
    )
