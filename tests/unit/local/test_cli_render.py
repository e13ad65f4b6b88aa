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
