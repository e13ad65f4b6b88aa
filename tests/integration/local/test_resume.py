"""A runner killed with SIGKILL mid-run resumes without running finished nodes again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from vcjob_factory import vcjob

from pipelines.local.runner import resume
from pipelines.local.workflow import WorkflowError

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]

# A and D finish at once; B runs long the first time only; C waits for B. Every node appends to a marker file.
WORKFLOW = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "Workflow",
    "metadata": {"name": "resume-me"},
    "spec": {
        "entrypoint": "main",
        "arguments": {"parameters": [{"name": "dir"}]},
        "templates": [
            {
                "name": "main",
                "dag": {
                    "tasks": [
                        {"name": "A", "template": "mark", "arguments": {"parameters": [{"name": "n", "value": "A"}]}},
                        {"name": "D", "template": "mark", "arguments": {"parameters": [{"name": "n", "value": "D"}]}},
                        {"name": "B", "template": "slow-once", "depends": "A"},
                        {
                            "name": "C",
                            "template": "mark",
                            "depends": "B && D",
                            "arguments": {"parameters": [{"name": "n", "value": "{{tasks.A.outputs.result}}C"}]},
                        },
                    ]
                },
            },
            {
                "name": "mark",
                "inputs": {"parameters": [{"name": "n"}]},
                "container": {
                    "image": "alpine",
                    "command": ["sh", "-c", "echo run >> {{workflow.parameters.dir}}/{{inputs.parameters.n}}; echo A"],
                },
            },
            {
                "name": "slow-once",
                "script": {
                    "image": "alpine",
                    "command": ["sh"],
                    "source": (
                        "m={{workflow.parameters.dir}}/B\n"
                        'if [ -f "$m" ]; then echo again >> "$m"; else echo first >> "$m"; sleep 60; fi\n'
                    ),
                },
            },
        ],
    },
}


def _status(path: Path) -> dict:
    try:
        return json.loads(path.read_text())["status"]
    except (OSError, ValueError, KeyError):
        return {}


def test_sigkilled_runner_resumes_without_rerunning_finished_nodes(tmp_path: Path) -> None:
    marks, home = tmp_path / "marks", tmp_path / "home"
    marks.mkdir()
    source = tmp_path / "wf.yaml"
    source.write_text(json.dumps(WORKFLOW))  # JSON is YAML: PyYAML's safe_dump writes `n`, which go-yaml reads as false
    env = {**os.environ, "VCPILOT_HOME": str(home)}
    cmd = [sys.executable, "-m", "pipelines.local.cli", "run-workflow", str(source), "-p", f"dir={marks}", "--json"]
    runner = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    status_path = home / "runs" / "resume-me" / "status.json"
    deadline = time.monotonic() + 30
    while True:
        nodes = {n["displayName"]: n["phase"] for n in _status(status_path).get("nodes", {}).values()}
        if nodes.get("B") == "Running" and nodes.get("D") == "Succeeded" and (marks / "B").exists():
            break
        assert runner.poll() is None, runner.stderr.read() if runner.stderr else ""
        assert time.monotonic() < deadline, f"B never started: {nodes}"
        time.sleep(0.05)
    with pytest.raises(WorkflowError, match="still running in another process"):
        resume("resume-me", home=home)  # one runner per run
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    assert _status(status_path)["phase"] == "Running"

    result = resume("resume-me", home=home)

    assert result.phase == "Succeeded"
    assert (marks / "A").read_text() == "run\n"  # finished before the kill: not run again
    assert (marks / "D").read_text() == "run\n"
    assert (marks / "B").read_text() == "first\nagain\n"  # interrupted: its stale process was killed, then rerun
    assert (marks / "AC").read_text() == "run\n"  # C got A's output from the first run
    phases = {n["displayName"]: n["phase"] for n in result.status["nodes"].values()}
    assert phases == {"resume-me": "Succeeded", "A": "Succeeded", "B": "Succeeded", "C": "Succeeded", "D": "Succeeded"}
    time.sleep(0.2)
    assert (marks / "B").read_text() == "first\nagain\n"  # the first B process is gone for good


VCJOB_WORKFLOW = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "Workflow",
    "metadata": {"name": "reattach"},
    "spec": {
        "entrypoint": "train",
        "arguments": {"parameters": [{"name": "marker"}]},
        "templates": [
            {
                "name": "train",
                "resource": {
                    "action": "create",
                    "successCondition": "status.state.phase == Completed",
                    "manifest": yaml.safe_dump(
                        vcjob("train-", "sleep 2; echo ran >> {{workflow.parameters.marker}}", generate_name=True)
                    ),
                },
            }
        ],
    },
}


def test_resumed_resource_node_reattaches_to_its_job(tmp_path: Path) -> None:
    from components.volcano.cluster_local import LocalCluster

    home, marker = tmp_path / "home", tmp_path / "marker"
    source = tmp_path / "wf.yaml"
    source.write_text(yaml.safe_dump(VCJOB_WORKFLOW))
    env = {**os.environ, "VCPILOT_HOME": str(home)}
    cmd = [sys.executable, "-m", "pipelines.local.cli", "run-workflow", str(source), "-p", f"marker={marker}", "--json"]
    runner = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cluster = LocalCluster(home)
    try:
        deadline = time.monotonic() + 30
        while not [j for j in cluster.list_jobs() if j.phase == "Running"]:
            assert runner.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        runner.send_signal(signal.SIGKILL)
        runner.wait()

        result = resume("reattach", home=home, cluster=cluster)

        assert result.phase == "Succeeded"
        jobs = cluster.list_jobs()
        assert len(jobs) == 1 and jobs[0].phase == "Completed"  # the same job, not a second one
        assert marker.read_text() == "ran\n"
    finally:
        cluster.close()
