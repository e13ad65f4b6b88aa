"""The /tmp and /argo paths a template spells out move into the node's own directory; parameter values do not."""

from __future__ import annotations

from pathlib import Path

from pipelines.local.engine.executors import mark_paths
from pipelines.local.volumes import localize

NODE = Path("/home/u/.vcpilot/runs/wf/nodes/wf-1")


def resolved(text: str) -> str:
    marked = mark_paths({"container": {"args": [text]}}, {})
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
    marked = mark_paths(template, {})
    assert localize(marked["outputs"]["parameters"][0]["valueFrom"]["path"], NODE) == f"{NODE}/tmp/x"
    assert localize(marked["script"]["env"][0]["value"], NODE) == f"{NODE}/tmp/hera-outputs"
    assert marked["inputs"] == template["inputs"]
    assert localize("/tmp/from-a-parameter", NODE) == "/tmp/from-a-parameter"


def test_mounted_claims_and_empty_dirs_move_into_their_volumes_once() -> None:
    """One pattern, longest path first: a path moved into a volume is not moved again as a /tmp or declared root."""
    spec = {
        "volumes": [{"name": "old", "persistentVolumeClaim": {"claimName": "kept"}}],
        "volumeClaimTemplates": [{"metadata": {"name": "work"}}],
    }
    template = {
        "volumes": [{"name": "scratch", "emptyDir": {}}],
        "container": {
            "args": ["cat /mnt/w/f /tmp/s/x /tmp/y /volumes/out /srv/old/z /mnt/wide /mnt/w2"],
            "volumeMounts": [
                {"name": "work", "mountPath": "/mnt/w"},
                {"name": "scratch", "mountPath": "/tmp/s"},
                {"name": "old", "mountPath": "/srv/old/", "subPath": "a"},
            ],
        },
        "outputs": {"parameters": [{"name": "p", "valueFrom": {"path": "/volumes/out"}}]},
    }
    marked = mark_paths(template, spec)
    home, run = NODE.parents[3], NODE.parents[1]
    assert localize(marked["container"]["args"][0], NODE) == (
        f"cat {run}/volumes/work/f {NODE}/.volumes/scratch/x {NODE}/tmp/y {NODE}/volumes/out {home}/claims/kept/a/z"
        " /mnt/wide /mnt/w2"
    )
    assert marked["outputs"]["parameters"][0]["valueFrom"]["_declared_path"] == "/volumes/out"


def test_other_volumes_and_templated_mounts_stay_host_paths() -> None:
    spec = {"volumes": [{"name": "h", "hostPath": {"path": "/srv/h"}}, {"name": "ws", "persistentVolumeClaim": {
        "claimName": "{{workflow.parameters.pvc}}"}}]}  # fmt: skip
    template = {
        "container": {
            "args": ["ls /srv/h /srv/ws {{workflow.parameters.dir}}"],
            "volumeMounts": [
                {"name": "h", "mountPath": "/srv/h"},
                {"name": "ws", "mountPath": "/srv/ws"},
                {"name": "h", "mountPath": "{{workflow.parameters.dir}}"},
            ],
        }
    }
    assert localize(mark_paths(template, spec)["container"]["args"][0], NODE) == template["container"]["args"][0]
