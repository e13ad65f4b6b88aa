"""pipelines/local/watch.py: a line for each step that starts or ends, once."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from pipelines.local.watch import NodeEvents, resume_hint


def _status(**phases: str) -> dict[str, Any]:
    nodes = {"wf": {"id": "wf", "name": "wf", "displayName": "wf", "type": "DAG", "phase": "Running"}}
    for name, phase in phases.items():
        nodes[name] = {
            "id": name,
            "name": f"wf.{name}",
            "displayName": name,
            "type": "Pod",
            "templateName": "step",
            "phase": phase,
            "startedAt": "2026-12-01T10:00:00Z",
            "finishedAt": None if phase in ("Pending", "Running") else "2026-12-01T10:00:42Z",
        }
    return {"phase": "Running", "nodes": nodes}


def test_each_change_of_a_step_is_one_line_and_groups_are_left_to_the_tree() -> None:
    lines: list[str] = []
    events = NodeEvents(lines.append, lambda: "wf")
    events(_status(a="Pending"))
    events(_status(a="Running"))
    events(_status(a="Running", b="Running"))
    done = _status(a="Succeeded", b="Failed")
    done["nodes"]["b"]["message"] = "main: Error (exit code 1)"
    events(done)
    events(done)
    assert lines == [
        "run wf Running: `vcpilot runs show wf` shows it",
        "▶ a (step) Running",
        "▶ b (step) Running",
        "✔ a (step) Succeeded in 42s",
        "✖ b (step) Failed in 42s: main: Error (exit code 1)",
    ]


def test_plain_output_reports_what_a_running_step_last_wrote_when_it_changed_and_escaped(tmp_path: Path) -> None:
    logs = {"train": tmp_path / "train.log", "plan": tmp_path / "plan.log"}
    lines: list[str] = []
    events = NodeEvents(lines.append, logs=logs.get)
    events(_status(train="Running", plan="Running"))
    logs["train"].write_text("loading\nstep 10/200 loss 2.31\n\n")
    events.say_running()  # the plan wrote nothing yet: no line for it
    events.say_running()  # nothing changed: nothing said again
    logs["train"].write_text("step 20/200 loss 2.05\n")
    logs["plan"].write_text("waiting: \x1b[31mqueue full\n")
    events.say_running()
    events(_status(train="Succeeded", plan="Running"))
    logs["train"].write_text("done\n")
    events.say_running()  # a step that ended says nothing more
    assert lines[2:] == [
        "· train: step 10/200 loss 2.31",
        "· train: step 20/200 loss 2.05",
        "· plan: waiting: \\x1b[31mqueue full",
        "✔ train (step) Succeeded in 42s",
    ]


def test_saying_reports_from_its_own_thread_while_the_run_goes_and_stops_with_it(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("step 1\n")
    said = threading.Event()
    lines: list[str] = []

    def event(line: str) -> None:
        lines.append(line)
        if line.startswith("·"):
            said.set()

    events = NodeEvents(event, logs=lambda node: log, every_s=0.01)
    events(_status(train="Running"))
    with events.saying():
        assert said.wait(5)
    count = len(lines)
    log.write_text("step 2\n")
    threading.Event().wait(0.05)
    assert lines[count - 1] == "· train: step 1" and len(lines) == count  # the thread ended with the block


def test_the_resume_hint_names_the_command() -> None:
    assert resume_hint("llm-autopilot-1") == "continue it with: vcpilot resume llm-autopilot-1"
