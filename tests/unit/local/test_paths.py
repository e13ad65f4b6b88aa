"""The /tmp and /argo paths a template spells out move into the node's own directory; parameter values do not."""

from __future__ import annotations

from pathlib import Path

from pipelines.local.engine.executors import localize, mark_paths

NODE = Path("/home/u/.vcpilot/runs/wf/nodes/wf-1")


def resolved(text: str) -> str:
    marked = mark_paths({"container": {"args": [text]}})
    return localize(marked["container"]["args"][0], NODE)


def test_tmp_and_staging_paths_move_into_the_node_dir() -> None:
    assert resolved("echo hi > /tmp/out.txt") == f"echo hi > {NODE}/tmp/out.txt"
    assert resolved("/argo/staging/script") == f"{NODE}/argo/staging/script"
    assert resolved("cd /tmp") == f"cd {NODE}/tmp"
    assert resolved('"/tmp/hera-outputs"') == f'"{NODE}/tmp/hera-outputs"'


def test_other_paths_stay() -> None:
    for text in ("/tmpfoo", "/var/tmp/x", "./tmp/x", "~/tmp", "$HOME/tmp/x", "http://h/tmp/x"):
        assert resolved(text) == text


def test_output_paths_are_marked_and_values_are_not() -> None:
    template = {
        "inputs": {"parameters": [{"name": "p", "default": "/tmp/host-file"}]},
        "script": {"source": "open('/tmp/x', 'w')", "env": [{"name": "D", "value": "/tmp/hera-outputs"}]},
        "outputs": {"parameters": [{"name": "x", "valueFrom": {"path": "/tmp/x"}}]},
    }
    marked = mark_paths(template)
    assert localize(marked["outputs"]["parameters"][0]["valueFrom"]["path"], NODE) == f"{NODE}/tmp/x"
    assert localize(marked["script"]["env"][0]["value"], NODE) == f"{NODE}/tmp/hera-outputs"
    assert marked["inputs"] == template["inputs"]
    assert localize("/tmp/from-a-parameter", NODE) == "/tmp/from-a-parameter"
