"""The agent in the pipeline's plan and diagnose steps, on a LocalCluster whose pods are `sleep`s and crashes.

What a user of `vcpilot run` would see: a crowded queue makes plan downscale (the global batch kept), an idle one
trains at full size; a dead node makes diagnose retry from the latest complete checkpoint off that node, and the
next attempt's VCJob says so; a crash that repeats the same way is aborted with a reason a person understands.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agent.policy_rules import RulePolicy
from agent.records import read_decision, replay
from components.volcano.cluster_local import LocalCluster
from components.volcano.localconfig import LocalClusterConfig
from pipelines import steps_training
from pipelines.vcjobs import WORKFLOW_LABEL

pytestmark = pytest.mark.integration

GPU = "nvidia.com/gpu"
IMAGE = "ghcr.io/vcpilot/vcpilot:0.1.0"
RESTART_ON_FAULT = [{"event": "PodEvicted", "action": "RestartJob"}, {"event": "PodFailed", "action": "RestartJob"}]


@pytest.fixture
def local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[dict[str, Any]], LocalCluster]]:
    """Make the LocalCluster the steps observe (through VCPILOT_HOME) from a config; its pods die with the test."""
    made: list[LocalCluster] = []

    def make(config: dict[str, Any]) -> LocalCluster:
        home = tmp_path / "home"
        cluster = LocalCluster(home, LocalClusterConfig.model_validate(config))
        monkeypatch.setenv("VCPILOT_HOME", str(home))
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        for job in cluster.list_jobs():
            cluster.delete(job.name, job.namespace, missing_ok=True)
        cluster.close()


def run_values(workspace: Path, workflow: str, **changes: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "workflow_name": workflow,
        "workspace": str(workspace),
        "image": IMAGE,
        "gpus": 8,
        "global_batch": 32,
        "micro_batch": 4,
        "train_max_steps": 200,
    }
    return {**values, **changes}


def plan(workspace: Path, workflow: str, **changes: Any) -> steps_training.TrainingPlan:
    values = run_values(workspace, workflow, base_model="tiny", checkpoint_every=5, **changes)
    return steps_training.plan_training(steps_training.TrainingPlanInput(**values))


def diagnose(workspace: Path, workflow: str, **changes: Any) -> steps_training.Diagnosis:
    return steps_training.diagnose(steps_training.DiagnoseInput(**run_values(workspace, workflow, **changes)))


def pod_spec(manifest: str) -> dict[str, Any]:
    return json.loads(manifest)["spec"]["tasks"][0]["template"]["spec"]


def test_a_crowded_queue_downscales_to_the_fastest_size_and_an_idle_one_trains_at_full_size(
    tmp_path: Path, local, make_job
) -> None:
    cluster = local(
        {"nodes": [{"name": "node", "count": 4, "gpus": 4}], "queues": [{"name": "gpu-a", "capability": {GPU: 12}}]}
    )
    workspace = tmp_path / "ws"

    idle = plan(workspace, "idle", queue="gpu-a")
    assert (idle.action, idle.gpus, idle.grad_accum) == ("proceed", 8, 1)
    assert json.loads(idle.manifest)["spec"]["minAvailable"] == 8

    # Another tenant holds 8 of the queue's 12 GPUs, and a 6-GPU gang waits ahead of ours.
    cluster.submit(make_job("tenant-running", "sleep 60", pods=2, gpus=4, queue="gpu-a"))
    cluster.submit(make_job("tenant-waiting", "sleep 60", pods=2, gpus=3, queue="gpu-a"))
    assert cluster.get("tenant-waiting").phase == "Pending"

    crowded = plan(workspace, "crowded", queue="gpu-a")
    assert (crowded.action, crowded.gpus, crowded.micro_batch, crowded.grad_accum) == ("downscale", 4, 4, 2)
    assert crowded.gpus * crowded.micro_batch * crowded.grad_accum == 32
    manifest = json.loads(crowded.manifest)
    assert manifest["spec"]["minAvailable"] == 4 and manifest["spec"]["queue"] == "gpu-a"
    env = {e["name"]: e["value"] for e in pod_spec(crowded.manifest)["containers"][0]["env"]}
    assert (env["VCPILOT_GLOBAL_BATCH"], env["VCPILOT_GRAD_ACCUM"]) == ("32", "2")
    assert "queue gpu-a has 6 GPUs pending ahead and 8 of its 12 GPUs allocated" in crowded.reason
    assert "4 GPUs now finishes in ~33 min vs ~2.8 h waiting for 8" in crowded.reason
    record = read_decision(workspace / "runs" / "crowded" / "decisions" / "plan-1.json")
    assert record.action.kind == "downscale" and [c.gpus for c in record.action.candidates] == [8, 4, 2, 1]
    assert replay(workspace / "runs" / "crowded" / "decisions" / "plan-1.json", RulePolicy()) == record


def test_a_dead_node_is_retried_from_the_latest_checkpoint_off_that_node_on_the_gpus_left(
    tmp_path: Path, local, make_job
) -> None:
    cluster = local({"nodes": [{"name": "node", "count": 2, "gpus": 2}]})
    workspace = tmp_path / "ws"
    labels = {"metadata": {"name": "wf-train-1", "labels": {WORKFLOW_LABEL: "wf"}}}
    job = make_job("wf-train-1", "sleep 60", pods=4, gpus=1, max_retry=1, policies=RESTART_ON_FAULT)
    cluster.submit({**job, **labels})
    cluster.wait("wf-train-1", ["Running"], timeout=30)
    checkpoints = workspace / "runs" / "wf" / "checkpoints"
    for step, complete in ((5, True), (10, False)):  # step-10 was being written when the node died
        (checkpoints / f"step-{step}").mkdir(parents=True)
        if complete:
            (checkpoints / f"step-{step}" / "metadata.json").write_text(json.dumps({"step": step}))
    cluster.fail_node("node-0")
    assert cluster.wait("wf-train-1", timeout=30).phase == "Failed"

    diagnosis = diagnose(workspace, "wf", job_name="wf-train-1", gpus=4, global_batch=16, micro_batch=2)
    assert (diagnosis.action, diagnosis.next_attempt) == ("retry", 2)
    assert diagnosis.avoid_nodes == ["node-0"]
    assert diagnosis.resume_checkpoint == str(checkpoints / "step-5")
    # node-1's 2 GPUs are all that is healthy: the retry is smaller, the global batch the same.
    assert (diagnosis.gpus, diagnosis.micro_batch, diagnosis.grad_accum) == (2, 2, 4)
    assert "node-0 (node-0 NotReady)" in diagnosis.reason and "at 2 GPUs" in diagnosis.reason

    retry = plan(
        workspace,
        "wf",
        attempt=diagnosis.next_attempt,
        gpus=diagnosis.gpus,
        global_batch=16,
        micro_batch=2,
        avoid_nodes=diagnosis.avoid_nodes,
        resume_checkpoint=diagnosis.resume_checkpoint,
    )
    assert (retry.action, retry.gpus, retry.job_name) == ("proceed", 2, "wf-train-2")
    spec = pod_spec(retry.manifest)
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["node-0"]}]}
    ]
    env = {e["name"]: e["value"] for e in spec["containers"][0]["env"]}
    assert env["VCPILOT_RESUME"] == str(checkpoints / "step-5")


def test_the_same_crash_twice_is_aborted_with_a_reason_a_person_understands(tmp_path: Path, local, make_job) -> None:
    cluster = local({"nodes": [{"name": "node", "count": 2, "gpus": 4}]})
    workspace = tmp_path / "ws"
    actions = []
    for attempt in (1, 2):
        name = f"wf-train-{attempt}"
        cluster.submit(make_job(name, "exit 3", pods=2, gpus=1, max_retry=1, policies=RESTART_ON_FAULT))
        assert cluster.wait(name, timeout=30).phase == "Failed"
        actions.append(diagnose(workspace, "wf", job_name=name, attempt=attempt, gpus=2, global_batch=8))
    first, second = actions
    assert first.action == "retry" and "a first failure is retried once" in first.reason
    assert second.action == "abort"
    assert second.reason.startswith("training fails deterministically: ")
    assert "exited with code 3, exactly as attempt 1 did from the same checkpoint (step 0)" in second.reason
    assert second.reason.endswith("a retry would repeat it, so fix the code or data and run again")
    recorded = workspace / "runs" / "wf" / "decisions" / "diagnose-2.json"
    assert replay(recorded, RulePolicy()) == read_decision(recorded)


def test_vcpilot_plan_prints_the_decision_and_the_vcjob_without_submitting(local) -> None:
    from components.entry import new_app
    from pipelines.cli_plan import plan_command

    cluster = local({"nodes": [{"name": "node", "count": 2, "gpus": 4}]})
    app = new_app()  # the contract (components.entry) is in the app, not in the command
    app.command("plan")(plan_command)
    app.callback()(lambda: None)
    runner = CliRunner()

    shown = runner.invoke(app, ["plan", "--gpus", "8", "--min-gpus", "2", "--dry-run", "--json"])
    assert shown.exit_code == 0, shown.output
    document = json.loads(shown.stdout)
    assert document["decision"]["action"]["kind"] == "proceed" and document["decision"]["policy"] == "rules"
    assert document["vcjob"]["spec"]["minAvailable"] == 8
    assert cluster.list_jobs() == []  # nothing was submitted

    human = runner.invoke(app, ["plan", "--gpus", "4"])
    assert human.exit_code == 0 and human.stdout.startswith("plan: proceed by rules: ")
    assert "VCJob vcpilot-plan-train-1 (not submitted):" in human.stdout

    bad = runner.invoke(app, ["plan", "--gpus", "2", "--min-gpus", "4"])
    assert bad.exit_code == 1 and bad.stderr == "error: --min-gpus 4 is above --gpus 2\n"
