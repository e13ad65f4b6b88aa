"""The live tree groups nodes the way a reader expects: steps under their group, loops and retries nested."""

from __future__ import annotations

from rich.console import Console

from pipelines.local.cli import render_status


def node(nid: str, name: str, type_: str, phase: str, children: list[str] = (), **kw: object) -> dict:
    return {"id": nid, "displayName": name, "type": type_, "phase": phase, "children": list(children), **kw}


def test_tree_nests_groups_retries_and_hooks() -> None:
    status = {
        "nodes": {
            "wf": node("wf", "wf", "DAG", "Failed", ["a"]),
            "a": node("a", "A", "Pod", "Succeeded", ["b", "h"], boundaryID="wf"),
            "b": node("b", "B", "Retry", "Failed", ["b0"], boundaryID="wf", message="No more retries left"),
            "b0": node("b0", "B(0)", "Pod", "Failed", boundaryID="wf", nodeFlag={"retried": True}),
            "h": node("h", "A.onExit", "Pod", "Succeeded", boundaryID="wf", nodeFlag={"hooked": True}),
        }
    }
    console = Console(record=True, width=100)
    console.print(render_status(status))
    lines = [line.rstrip() for line in console.export_text().splitlines()]
    assert lines == [
        "✖ wf",
        "├── ✔ A",
        "│   └── ✔ A.onExit",
        "└── ✖ B  No more retries left",
        "    └── ✖ B(0)",
    ]


def test_a_running_step_shows_the_last_line_of_its_log_each_time_the_tree_is_drawn(tmp_path) -> None:
    logs = {nid: tmp_path / nid / "main.log" for nid in ("plan", "done")}
    for log in logs.values():
        log.parent.mkdir()
    logs["plan"].write_text("observing\nwaiting: nothing can start now; looking again in 60 s\n\n")
    logs["done"].write_text("what it said while it ran\n")
    status = {
        "nodes": {
            "wf": node("wf", "wf", "DAG", "Running", ["plan", "done"]),
            "plan": node("plan", "plan", "Pod", "Running", boundaryID="wf"),
            "done": node(
                "done", "detect", "Pod", "Succeeded", boundaryID="wf", outputs={"result": "drift \x1b[31mred"}
            ),
        }
    }

    def draw(tree) -> list[str]:
        console = Console(record=True, width=120)
        console.print(tree)
        return [line.rstrip() for line in console.export_text().splitlines()]

    tree = render_status(status, lambda nid: logs.get(nid))
    assert draw(tree) == [
        "● wf",
        "├── ● plan  · waiting: nothing can start now; looking again in 60 s",
        "└── ✔ detect  → drift \\x1b[31mred",  # a step's output is quoted escaped: no terminal control from a step
    ]
    logs["plan"].write_text(
        "took 4 GPUs in queue gpu-a \x1b]0;title\x07\n"
    )  # the same tree, drawn again, reads it again
    assert draw(tree)[1] == "├── ● plan  · took 4 GPUs in queue gpu-a \\x1b]0;title\\x07"
    assert draw(render_status(status))[1] == "├── ● plan"  # after the run (no logs given): the label alone
