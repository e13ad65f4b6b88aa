"""llm-autopilot end to end on this machine: the compiled template, the local runner and LocalCluster together.

A retry from a checkpoint through the whole pipeline, with the review it leaves in MLflow, is
test_fault_matrix_pipeline.py's node-dies run; the demo is test_autopilot_demo.py.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from mlflow_kit import downloaded_review

from pipelines.autopilot_run import run_autopilot
from pipelines.local.runner import WorkflowError

pytestmark = pytest.mark.integration

# The mechanics tests train the tiny model from scratch for a few steps: no champion to bootstrap.
QUICK = {"base-model": "tiny", "train-max-steps": "20", "checkpoint-every": "5"}


def mlflow_run(home, workflow):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{home / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("llm-autopilot")
    (run,) = client.search_runs([experiment.experiment_id], filter_string=f"tags.`vcpilot.workflow` = '{workflow}'")
    return run


def reviewed(home, run):
    """The review on a parent run of the local store, downloaded (mlflow_kit.downloaded_review)."""
    return downloaded_review(f"sqlite:///{home / 'mlflow.db'}", run.info.run_id, home / "downloaded")


def by_path(result):
    """Leaf and DAG nodes as 'parent/child' display paths (e.g. 'finetune/recurse/train') -> phase."""
    nodes = result.status["nodes"]
    out = {}
    for node in nodes.values():
        path, current = [node["displayName"]], node
        while current.get("boundaryID") in nodes:
            current = nodes[current["boundaryID"]]
            if current["displayName"] != result.name:
                path.append(current["displayName"])
        out["/".join(reversed(path))] = node["phase"]
    return out


def test_a_deterministic_crash_is_retried_once_then_aborted_and_fails_the_workflow(tmp_path):
    result = run_autopilot("code-bug", QUICK, home=tmp_path, name="bug", bootstrap=False)
    phases = by_path(result)
    assert result.phase == "Failed"
    # The first crash might be transient: retried once. The same crash from the same step again: aborted.
    assert phases["finetune/train"] == "Failed" and phases["finetune/give-up"] == "Skipped"
    assert phases["finetune/recurse/train"] == "Failed"
    assert phases["finetune/recurse/recurse"] == "Skipped"
    assert phases["finetune/recurse/give-up"] == "Failed"
    assert phases["loadtest"] == "Omitted" and phases["release"] == "Omitted"
    diagnoses = [n for n in result.status["nodes"].values() if n["displayName"] == "diagnose"]
    results = sorted(n["outputs"]["result"] for n in diagnoses)
    assert results[0].startswith("diagnose: abort by rules: training fails deterministically")
    assert "exited with code 3" in results[0] and results[1].startswith("diagnose: retry by rules")
    decisions = tmp_path / "workspace" / "runs" / "bug" / "decisions"
    assert sorted(p.name for p in decisions.iterdir()) == [
        "diagnose-1.json",
        "diagnose-2.json",
        "plan-1.json",
        "plan-2.json",
    ]
    assert mlflow_run(tmp_path, "bug").info.status == "FAILED"
    summary = reviewed(tmp_path, mlflow_run(tmp_path, "bug"))["summary.md"]
    assert "**Outcome.** stopped by the agent: training fails deterministically" in summary


def test_clean_logs_stop_at_the_gate(tmp_path):
    result = run_autopilot("no-drift", QUICK, home=tmp_path, name="calm", bootstrap=False)
    phases = by_path(result)
    assert result.phase == "Succeeded"
    assert phases["gate"] == "Succeeded" and phases["finetune"] == "Skipped"
    assert phases["release"] == "Omitted"


def test_bad_input_fails_before_anything_runs(tmp_path):
    with pytest.raises(WorkflowError, match="scenario"):
        run_autopilot("meteor-strike", home=tmp_path)
    with pytest.raises(WorkflowError) as err:
        run_autopilot("drift", {"gpus-wantd": "2"}, home=tmp_path, name="typo")
    assert "gpus-wantd" in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "runs" / "typo").exists()
    cli = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "run", "-p", "mode=sometimes", "--json"],
        capture_output=True,
        text=True,
        env={"VCPILOT_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert cli.returncode == 1  # EXIT_INPUT
    assert cli.stderr.strip().count("\n") == 0 and "mode" in cli.stderr
    assert json.loads(cli.stdout) == {"error": cli.stderr.strip().removeprefix("error: "), "exit_code": 1}
