"""pipelines/local/watch.py: a line for each step that starts or ends, once."""

from __future__ import annotations

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


def test_the_resume_hint_names_the_command() -> None:
    assert resume_hint("llm-autopilot-1") == "continue it with: vcpilot resume llm-autopilot-1"
