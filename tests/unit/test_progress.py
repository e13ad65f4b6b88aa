"""components/progress.py: what a person reads while long work goes, on a terminal and in a pipe."""

from __future__ import annotations

import io
import sys

import pytest

from components.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_pipe_gets_one_plain_line_per_event_with_the_time_since_the_start(monkeypatch) -> None:
    monkeypatch.delenv("VCPILOT_PROGRESS", raising=False)
    clock, out = Clock(), io.StringIO()
    progress = Progress(out, clock=clock)
    progress.event("detect-logs Running")
    clock.now += 3725
    progress.event("detect-logs Succeeded")
    assert progress.mode == "plain"
    assert out.getvalue() == "[0:00:00] detect-logs Running\n[1:02:05] detect-logs Succeeded\n"


def test_steps_in_a_pipe_are_throttled_but_the_last_one_always_shows(monkeypatch) -> None:
    monkeypatch.delenv("VCPILOT_PROGRESS", raising=False)
    clock, out = Clock(), io.StringIO()
    progress = Progress(out, clock=clock)
    with progress.steps("requests", 4, every_s=5) as advance:
        advance(1, "ok")
        clock.now += 1
        advance(2)  # within 5 s of the last line: not shown
        clock.now += 5
        advance(3)
        advance(4, "done")
    assert out.getvalue().splitlines() == [
        "[0:00:00] requests 1/4  ok",
        "[0:00:06] requests 3/4",
        "[0:00:06] requests 4/4  done",
    ]


def test_a_status_in_a_pipe_says_its_message_and_each_update(monkeypatch) -> None:
    monkeypatch.delenv("VCPILOT_PROGRESS", raising=False)
    out = io.StringIO()
    with Progress(out, clock=Clock()).status("training the first champion") as update:
        update("step 10/100")
    assert out.getvalue().splitlines() == [
        "[0:00:00] training the first champion",
        "[0:00:00] training the first champion: step 10/100",
    ]


def test_a_terminal_gets_the_live_display(monkeypatch) -> None:
    monkeypatch.delenv("VCPILOT_PROGRESS", raising=False)
    out = Tty()
    progress = Progress(out)
    assert progress.mode == "live"
    with progress.steps("step", 3) as advance:
        advance(3, "loss 0.1")
    progress.event("done")
    assert "done" in out.getvalue() and "[0:00:" not in out.getvalue()


@pytest.mark.parametrize("mode", ["off", "plain"])
def test_vcpilot_progress_overrides_the_choice(monkeypatch, mode: str) -> None:
    monkeypatch.setenv("VCPILOT_PROGRESS", mode)
    out = Tty()
    progress = Progress(out, clock=Clock())
    progress.event("hello")
    with progress.steps("step", 2) as advance:
        advance(2)
    assert progress.mode == mode
    assert out.getvalue() == ("" if mode == "off" else "[0:00:00] hello\n[0:00:00] step 2/2\n")


def test_json_commands_report_on_stderr() -> None:
    assert Progress.for_command(json_output=True).stream is sys.stderr
    assert Progress.for_command(json_output=False).stream is sys.stdout
