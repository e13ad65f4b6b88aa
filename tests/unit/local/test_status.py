"""The Argo-shaped run status: node IDs, display names, links, and atomic persistence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipelines.local.engine.status import NodeFlag, RunState, node_id


def state(tmp_path: Path, **kw: Any) -> RunState:
    return RunState(tmp_path / "status.json", {"metadata": {"name": "wf"}, "spec": {}}, **kw)


def test_node_ids_are_argos_fnv32a() -> None:
    assert node_id("wf", "wf") == "wf"
    assert node_id("wf", "a") == "wf-3826002220"  # FNV-1a 32 of "a" is 0xe40c292c


def test_display_names_are_relative_to_the_boundary(tmp_path: Path) -> None:
    s = state(tmp_path)
    root = s.init_node("wf", "Steps", template_name="main", boundary_id=None, phase="Running")
    group = s.init_node("wf[0]", "StepGroup", template_name=None, boundary_id=root.id, phase="Running")
    step = s.init_node("wf[0].hello", "Pod", template_name="t", boundary_id=root.id, phase="Pending")
    loop = s.init_node("wf[0].x(0:a)", "Pod", template_name="t", boundary_id=root.id, phase="Pending")
    assert (root.display_name, group.display_name, step.display_name, loop.display_name) == (
        "wf",
        "[0]",
        "hello",
        "x(0:a)",
    )
    s.close()


def test_outbound_nodes(tmp_path: Path) -> None:
    s = state(tmp_path)
    dag = s.init_node("wf", "DAG", template_name="d", boundary_id=None, phase="Running")
    retry = s.init_node("wf.a", "Retry", template_name="t", boundary_id=dag.id, phase="Running", parents=["wf"])
    flag = NodeFlag(retried=True)
    s.init_node("wf.a(0)", "Pod", template_name="t", boundary_id=dag.id, phase="Failed", parents=["wf.a"], flag=flag)
    last = s.init_node(
        "wf.a(1)", "Pod", template_name="t", boundary_id=dag.id, phase="Running", parents=["wf.a"], flag=flag
    )
    group = s.init_node("wf.b", "TaskGroup", template_name="t", boundary_id=dag.id, phase="Running", parents=["wf"])
    kids = [
        s.init_node(f"wf.b({i}:{i})", "Pod", template_name="t", boundary_id=dag.id, phase="Running", parents=["wf.b"])
        for i in range(2)
    ]
    assert s.outbound(retry) == [last.id]
    assert s.outbound(group) == [k.id for k in kids]
    s.update(dag, outbound_nodes=[retry.id, group.id])
    assert s.outbound(dag) == [last.id, *[k.id for k in kids]]
    s.forget(last)
    assert last.id not in (retry.children or [])
    s.close()


def test_status_is_written_atomically_and_reported(tmp_path: Path) -> None:
    seen: list[dict] = []
    s = state(tmp_path, on_update=seen.append)
    node = s.init_node("wf", "Pod", template_name="t", boundary_id=None, phase="Running")
    s.mark(node, "Succeeded")
    s.set_workflow(phase="Succeeded")
    final = s.close()
    document = json.loads((tmp_path / "status.json").read_text())
    assert document["metadata"]["name"] == "wf"
    assert document["status"] == final
    assert final["nodes"]["wf"]["phase"] == "Succeeded" and final["nodes"]["wf"]["finishedAt"]
    assert seen and seen[-1] == final
    assert [p.name for p in tmp_path.iterdir()] == ["status.json"]
