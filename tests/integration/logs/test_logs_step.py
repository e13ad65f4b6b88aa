"""The detect-logs step as a VCJob pod runs it: `python -m components.logs --source … --report …` in its own process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def _write(directory: Path, *, drift: bool) -> None:
    directory.mkdir(parents=True)
    service = []
    for i in range(300):
        if drift and i % 3 == 0:
            service.append(f"2026-11-29 02:00:{i % 60:02d},000 ERROR engine: CUDA out of memory on device {i % 8}")
        else:
            service.append(f"2026-11-29 02:00:{i % 60:02d},000 INFO http: served request {i} in {20 + i % 9} ms")
    (directory / "service.log").write_text("\n".join(service) + "\n")
    requests = []
    for i in range(100):
        wrong = drift and i % 2 == 0
        record = {
            "request_id": f"r{i}",
            "prompt": f"Add {i} and {i + 1}",
            "completion": "0" if wrong else str(2 * i + 1),
            "latency_ms": 50 + i % 10,
            "status": 200,
            "feedback": "negative" if wrong else "positive",
        }
        if wrong:
            record["correction"] = str(2 * i + 1)
        requests.append(json.dumps(record))
    (directory / "requests.jsonl").write_text("\n".join(requests) + "\n")


def _step(source: Path, report: Path, home: Path, options: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VCPILOT_HOME": str(home)}
    env.pop("VCPILOT_LOGS_STATE", None)
    command = [sys.executable, "-m", "components.logs", "--source", str(source), "--report", str(report)]
    command += options or []
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_the_step_compares_baseline_and_current_and_remembers_the_window(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    _write(logs / "baseline", drift=False)
    _write(logs / "current", drift=True)
    home = tmp_path / "home"

    done = _step(logs, tmp_path / "run1" / "detect" / "report.json", home)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "run1" / "detect" / "report.json").read_text())
    assert report["drift"] is True and report["compared_with"] == "baseline"
    assert "CUDA out of memory on device <*>" in report["reason"] or "negative feedback" in report["reason"]
    assert report["train_examples"] + report["eval_examples"] == 50
    assert (home / "state" / "logs" / "previous-window.json").is_file()

    # The next night only tonight's logs are given: yesterday's window (the drifted one) is the baseline.
    done = _step(logs / "current", tmp_path / "run2" / "report.json", home)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "run2" / "report.json").read_text())
    assert report["compared_with"] == "previous run" and report["drift"] is False
    assert report["new_templates"] == 0


def test_the_step_fails_with_one_sentence_on_a_missing_source(tmp_path: Path) -> None:
    done = _step(tmp_path / "nowhere", tmp_path / "report.json", tmp_path / "home")
    assert done.returncode == 1 and done.stdout == ""  # EXIT_INPUT
    assert done.stderr.strip().splitlines() == [
        f"error: the log source {tmp_path / 'nowhere'} does not exist: give a file, a directory or a glob"
    ]


def test_the_step_cuts_one_source_by_time_and_refuses_a_bad_window_in_one_sentence(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    lines = []
    for day, message in ((1, "INFO http: served request {i} in 20 ms"), (2, "ERROR engine: CUDA out of memory {i}")):
        for i in range(100):
            lines.append(f"Nov  {day} {i // 60:02d}:{i % 60:02d}:00 host svc[7]: {message.format(i=i)}")
    (logs / "service.log").write_text("\n".join(lines) + "\n")
    home, report = tmp_path / "home", tmp_path / "detect" / "report.json"
    windows = ["--baseline-window", "2026-11-01/P1D", "--current-window", "2026-11-02/P1D"]

    done = _step(logs, report, home, windows)
    assert done.returncode == 0, done.stderr
    data = json.loads(report.read_text())
    assert (data["baseline"]["log_lines"], data["current"]["log_lines"]) == (100, 100)
    assert data["drift"] is True and "CUDA out of memory" in data["reason"]

    done = _step(logs, report, home, ["--current-window", "2026-11-02/2026-11-01"])
    assert done.returncode == 1
    assert done.stderr == (
        "error: --current-window '2026-11-02/2026-11-01' ends before it starts "
        "(2026-11-02T00:00:00+00:00 to 2026-11-01T00:00:00+00:00)\n"
    )
