"""llm-autopilot end to end on this machine: the compiled template, the local runner and LocalCluster together."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

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


def mlflow_children(home, parent):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{home / 'mlflow.db'}")
    return client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'"
    )


def reviewed(home, run):
    """The review on a parent run, downloaded: summary.md's text, and the names under plots/, decisions/, manifests/."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{home / 'mlflow.db'}")
    out = home / "downloaded"
    client.download_artifacts(run.info.run_id, "", str(out))
    for png in (out / "plots").glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000, png
    listing = {d: sorted(p.name for p in (out / d).glob("*")) for d in ("plots", "decisions", "manifests")}
    return {**listing, "summary.md": (out / "summary.md").read_text()}


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


def test_a_killed_training_pod_is_diagnosed_and_retried_from_its_checkpoint(tmp_path):
    result = run_autopilot("pod-kill", QUICK, home=tmp_path, name="recover", bootstrap=False)
    phases = by_path(result)
    assert result.phase == "Succeeded", phases
    assert phases["finetune/train"] == "Failed"
    assert phases["finetune/diagnose"] == "Succeeded"
    assert phases["finetune/recurse/train"] == "Succeeded"
    assert phases["finetune/give-up"] == "Skipped"
    assert phases["release"] == "Succeeded"

    finetune = next(n for n in result.status["nodes"].values() if n["displayName"] == "finetune")
    model_uri = {p["name"]: p["value"] for p in finetune["outputs"]["parameters"]}["model-uri"]
    assert model_uri.endswith("/runs/recover/train-2/model"), "the model comes from the attempt that succeeded"
    summary = json.loads(
        (tmp_path / "workspace" / "runs" / "recover" / "train-2" / "model" / "summary.json").read_text()
    )
    assert summary["resumed_from"] and "/checkpoints/step-" in summary["resumed_from"]
    release = json.loads((tmp_path / "workspace" / "runs" / "recover" / "release.json").read_text())
    assert release["released"] is True and release["model_uri"] == model_uri
    run = mlflow_run(tmp_path, "recover")
    assert run.info.status == "FINISHED" and run.data.tags["vcpilot.status"] == "Succeeded"
    assert "evaluate.candidate_score" in run.data.metrics
    # The agent's decisions: in the workspace, and as child runs of the workflow's MLflow run.
    decisions = tmp_path / "workspace" / "runs" / "recover" / "decisions"
    retry = json.loads((decisions / "diagnose-1.json").read_text())["action"]
    assert retry["kind"] == "retry" and "/checkpoints/step-" in retry["checkpoint"] and retry["avoid_nodes"] == []
    assert "ended from outside the job" in retry["rationale"]
    children = mlflow_children(tmp_path, run)
    assert {"plan-1", "diagnose-1", "plan-2"} <= {child.info.run_name for child in children}
    # One parent (mlflow_run unpacks exactly one) for both attempts, keyed and tagged by the workflow's uid.
    uid = json.loads((tmp_path / "runs" / "recover" / "status.json").read_text())["metadata"]["uid"]
    assert run.data.tags["vcpilot.key"] == run.data.tags["vcpilot.workflow.uid"] == uid
    assert run.data.tags["vcpilot.trigger"] == "local" and run.data.tags["vcpilot.image"]
    assert run.data.tags["vcpilot.template.version"].startswith("vcpilot-")
    attempts = {c.info.run_name: c.data.tags for c in children if c.data.tags.get("vcpilot.step") == "finetune"}
    assert sorted(attempts) == ["finetune-1", "finetune-2"]
    assert attempts["finetune-2"]["vcpilot.vcjob"] == "recover-train-2"
    assert attempts["finetune-2"]["vcpilot.attempt"] == "2"
    steps = {c.data.tags.get("vcpilot.step") for c in children}
    assert {"detect-logs", "loadtest", "evaluate"} <= steps
    # The review on the parent run: summary.md, every picture as a real PNG, the decisions and the manifests.
    review = reviewed(tmp_path, run)
    assert set(review["plots"]) == {f"{n}.png" for n in ("training_loss", "latency_cdf", "throughput", "scores")} | {
        "log_windows.png"
    }
    assert {"plan-1.json", "diagnose-1.json", "plan-2.json"} <= set(review["decisions"])
    assert any(name.startswith("recover-") for name in review["manifests"])
    summary = review["summary.md"]
    assert summary.startswith("# recover: Succeeded") and "**Outcome.** released shop-assistant version" in summary
    assert (
        "**Diagnose, attempt 1.** retry by rules: pod recover-train-1-master-0 ended" in summary
        and "p95 TTFT" in summary
    )


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
