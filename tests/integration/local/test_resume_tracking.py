"""A workflow run resumed after its runner was SIGKILLed records under the same MLflow parent run: its uid's."""

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

from pipelines.local.runner import resume

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]

# Each step logs a child run as a step pod would (log_step_run with the workflow's name and uid in its env);
# B then sleeps the first time, long enough to be killed in the middle.
LOG = (
    "import os, sys, time; from components.tracking.steps import StepLog, log_step_run; "
    "log_step_run(StepLog(step=sys.argv[1], metrics={'n': 1.0})); "
    "marker = os.path.join(os.environ['MARKS'], sys.argv[1]); first = not os.path.exists(marker); "
    "open(marker, 'a').write('run\\n'); time.sleep(60 if first and sys.argv[1] == 'b' else 0)"
)


def step(name: str) -> dict:
    env = {
        "VCPILOT_WORKFLOW": "{{workflow.name}}",
        "VCPILOT_WORKFLOW_UID": "{{workflow.uid}}",
        "VCPILOT_TRIGGER": "local",
        "MLFLOW_TRACKING_URI": "{{workflow.parameters.store}}",
        "VCPILOT_TRACKING_SPOOL": "{{workflow.parameters.spool}}",
        "MARKS": "{{workflow.parameters.marks}}",
    }
    return {
        "name": name,
        "container": {
            "image": "vcpilot",
            # From PATH (the test puts the venv first): the runner gives a spelled-out /tmp path the node's own
            # /tmp, as a container has, and a checkout under /tmp would send sys.executable there.
            "command": ["python3", "-c", LOG, name],
            "env": [{"name": k, "value": v} for k, v in env.items()],
        },
    }


WORKFLOW = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "Workflow",
    "metadata": {"name": "tracked"},
    "spec": {
        "entrypoint": "main",
        "arguments": {"parameters": [{"name": "store"}, {"name": "spool"}, {"name": "marks"}]},
        "templates": [
            {
                "name": "main",
                "dag": {"tasks": [{"name": "a", "template": "a"}, {"name": "b", "template": "b", "depends": "a"}]},
            },
            step("a"),
            step("b"),
        ],
    },
}


def test_a_resumed_run_does_not_make_a_second_parent_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from components.tracking.adapter import client

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    home, marks = tmp_path / "home", tmp_path / "marks"
    marks.mkdir()
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    source = tmp_path / "wf.yaml"
    source.write_text(yaml.safe_dump(WORKFLOW))
    params = [f"store={store}", f"spool={tmp_path / 'spool'}", f"marks={marks}"]
    cmd = [sys.executable, "-m", "pipelines.local.cli", "run-workflow", str(source), "--json"]
    cmd += [arg for param in params for arg in ("-p", param)]
    env = {**os.environ, "VCPILOT_HOME": str(home), "PYTHONPATH": str(ROOT)}
    runner = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 180
    while not (marks / "b").exists():
        assert runner.poll() is None, runner.stderr.read() if runner.stderr else ""
        assert time.monotonic() < deadline, "b never ran"
        time.sleep(0.1)
    runner.send_signal(signal.SIGKILL)
    runner.wait()

    result = resume("tracked", home=home)

    assert result.phase == "Succeeded" and (marks / "b").read_text() == "run\nrun\n", "b ran twice"
    uid = json.loads((home / "runs" / "tracked" / "status.json").read_text())["metadata"]["uid"]
    mlflow = client(store)
    experiment = mlflow.get_experiment_by_name("llm-autopilot").experiment_id
    (parent,) = mlflow.search_runs([experiment], filter_string="tags.`vcpilot.workflow` = 'tracked'")
    assert parent.data.tags["vcpilot.workflow.uid"] == uid and parent.data.tags["vcpilot.trigger"] == "local"
    assert "vcpilot.workflow.url" not in parent.data.tags, "no Argo UI locally: no link"
    children = mlflow.search_runs([experiment], filter_string=f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    assert sorted(child.data.tags["vcpilot.key"] for child in children) == [f"{uid}/a/1", f"{uid}/b/1"]
