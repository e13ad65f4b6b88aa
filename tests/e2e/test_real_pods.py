"""Real pods under real Volcano: the step image on two kubelet nodes (deploy/e2e/nodes.sh), DDP between them.

The training VCJob is the one the pipeline's plan renders (`pipelines.vcjobs.build_training_job_for` after the
agent's rule policy decides), submitted through KubeCluster. Two things are changed for this machine and said
where they are: the pods select and tolerate the real nodes (kwok's fake nodes serve the contract suite), and they
ask for 1.5 CPUs instead of 2, because a real node here has 2 CPUs and the in-cluster MLflow needs a little.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fault_table import record_fault
from real_kit import kill_container_process, on_real_nodes
from vcjob_factory import vcjob, vcjob_task

from agent import observe as observe_module
from agent import policy_rules
from agent.actions import Proceed, RetryFromCheckpoint
from agent.observation import PlanRequest
from agent.policies import plan_within
from pipelines.rules import EvaluationReport, LoadtestReport, decide_release
from pipelines.steps_training import DIAGNOSE_SETTLE_S
from pipelines.vcjobs import JobContext, TrainingShape, build_loadtest_job, build_training_job_for

pytestmark = [pytest.mark.e2e, pytest.mark.real_pods]

ROOT = Path(__file__).resolve().parents[2]
STEPS, EVERY = 24, 4
GLOBAL_BATCH, MICRO_BATCH = 8, 2
WORKSPACE = "/workspace"
WORKFLOW = "e2e-real"
PLAN_WAIT_S = 120.0  # the plan's max-plan-wait-s here: a preemptor still Pending has started well within it
PAIRS = [(f"Q: price of item {i}?\nA:", f" ${10 + 7 * i % 80}") for i in range(12)]


def write_dataset(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps({"prompt": p, "completion": c}) + "\n" for p, c in PAIRS)
    for name in ("train.jsonl", "eval.jsonl"):
        (directory / name).write_text(lines)
    directory.chmod(0o777)


def fit_this_machine(manifest: dict[str, Any], nodes: list[Any], cpu: str = "1500m", memory: str = "4Gi") -> None:
    """Select the real nodes and ask for what a 2-CPU node holds (the only changes to the rendered VCJob)."""
    for task in manifest["spec"]["tasks"]:
        spec = on_real_nodes(task["template"]["spec"], nodes)
        for container in spec["containers"]:
            for kind in ("requests", "limits"):
                amounts = container.get("resources", {}).get(kind)
                if amounts:
                    amounts.update(cpu=cpu, memory=memory)


def on_host(host: Path, pod_path: str) -> Path:
    """Where a path of the pods' workspace is on this machine (the hostPath behind the workspace PVC)."""
    return host / Path(pod_path).relative_to(WORKSPACE)


def in_pod(host: Path, host_path: str) -> str:
    """The pods' path of a file of the workspace seen from here."""
    return str(WORKSPACE / Path(host_path).relative_to(host))


def plan_request(namespace: str) -> PlanRequest:
    """What the tests ask the agent for: 2 GPUs (1 at least), the global batch kept."""
    return PlanRequest(
        gpus=2, gpus_min=1, global_batch=GLOBAL_BATCH, micro_batch=MICRO_BATCH, namespace=namespace, max_steps=STEPS
    )


def planned_training(cluster: Any, namespace: str, image: str, pvc: str, mlflow_uri: str, **shape: Any) -> Any:
    """What `plan-training` does: the agent decides on the cluster as it is, the pipeline renders the VCJob.

    As the plan step, it looks again while the answer is Wait (every 2 s here, not every minute): right after a
    preemption the victim has failed while the preemptor may still be Pending ahead, and the plan rightly waits
    behind it until it runs.
    """
    look = functools.partial(observe_module.observe, cluster, plan_request(namespace))
    # These tests pin recovery on real pods, at the size asked for: without the run bands (deploy's, which the
    # preemption test installs), so the plan waits for room rather than queueing at once (test_agent_sim_vs_volcano
    # runs the bands on real Volcano).
    rules = policy_rules.RulePolicy(policy_rules.RulesConfig(shortest_run_first=False))
    action = plan_within(look, rules, PLAN_WAIT_S, sleep=_look_again_soon).action
    assert isinstance(action, Proceed) and action.gpus == 2, action.rationale
    context = JobContext(
        workflow=WORKFLOW,
        namespace=namespace,
        workspace=WORKSPACE,
        workspace_pvc=pvc,
        image=image,
        queue=action.queue,
        mlflow_tracking_uri=mlflow_uri,
        mlflow_experiment="e2e",
        priority_class=shape.get("priority_class", ""),
    )
    training = TrainingShape(
        attempt=shape.get("attempt", 1),
        gpus=action.gpus,
        gpus_per_pod=1,
        micro_batch=action.micro_batch,
        grad_accum=action.grad_accum,
        global_batch=action.global_batch,
        queue=action.queue,
        avoid_nodes=shape.get("avoid_nodes", []),
        resume_checkpoint=shape.get("resume_checkpoint", ""),
    )
    job = build_training_job_for(
        context, training, base_model="tiny", dataset_dir=f"{WORKSPACE}/data", max_steps=STEPS, checkpoint_every=EVERY
    )
    return context, job.to_dict()


def _look_again_soon(recheck_s: float) -> None:
    time.sleep(min(recheck_s, 2.0))


def single_process_summary(data: Path, out: Path) -> dict[str, Any]:
    """The same training on one process with the same global batch (micro 2 x accumulation 4), here on the host."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MLFLOW_TRACKING_URI": "", "VCPILOT_RESUME": ""}
    for key in ("WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    command = [sys.executable, "-m", "components.finetune", "--dataset-dir", str(data), "--output-dir", str(out)]
    command += ["--checkpoint-dir", str(out.with_name("single-checkpoints")), "--max-steps", str(STEPS)]
    command += ["--checkpoint-every", str(EVERY), "--global-batch", str(GLOBAL_BATCH)]
    command += ["--micro-batch", str(MICRO_BATCH), "--json"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((out / "summary.json").read_text())


def test_the_planned_training_gang_runs_ddp_across_both_real_nodes(
    cluster, namespace, real_nodes, step_image, workspace, mlflow_in_cluster, tmp_path
):
    pvc, host = workspace
    write_dataset(host / "data")
    context, manifest = planned_training(cluster, namespace, step_image, pvc, mlflow_in_cluster.cluster_uri)
    fit_this_machine(manifest, real_nodes)
    name = manifest["metadata"]["name"]

    cluster.submit(manifest)
    running = cluster.wait(name, {"Running", "Completed", "Failed"}, timeout=180, namespace=namespace)
    assert running.phase != "Failed", running
    nodes = {p.node for p in running.pods}
    assert nodes == {n.metadata.name for n in real_nodes}, f"one rank on each real node: {running.pods}"

    done = cluster.wait(name, timeout=600, namespace=namespace)
    assert done.phase == "Completed", (done, cluster.events(name, namespace=namespace))

    out = on_host(host, context.paths.model(1))
    summary = json.loads((out / "summary.json").read_text())
    checkpoints = on_host(host, context.paths.checkpoints)
    assert (checkpoints / f"step-{STEPS}").is_dir(), sorted(p.name for p in checkpoints.iterdir())

    single = single_process_summary(host / "data", tmp_path / "single")
    assert summary["final_loss"] == pytest.approx(single["final_loss"], rel=1e-4, abs=1e-6)

    losses = mlflow_in_cluster.metric_history(WORKFLOW, "loss")
    assert len(losses) == STEPS, "rank 0 logged every step to the in-cluster MLflow"
    assert losses[-1] == pytest.approx(summary["final_loss"], rel=1e-4, abs=1e-6)


def trained_model(host: Path) -> str:
    """A trained model in the workspace, as train leaves it; its path in the pods."""
    write_dataset(host / "data")
    single_process_summary(host / "data", host / "model")
    for path in (host / "model", *(host / "model").rglob("*")):
        path.chmod(0o777 if path.is_dir() else 0o666)
    return f"{WORKSPACE}/model"


def test_the_loadtest_gang_measures_the_server_pod_and_the_slo_gate_decides_from_it(
    cluster, namespace, real_nodes, step_image, workspace, tmp_path
):
    pvc, host = workspace
    model = trained_model(host)
    context = JobContext(
        workflow=WORKFLOW, namespace=namespace, workspace=WORKSPACE, workspace_pvc=pvc, image=step_image
    )
    manifest = build_loadtest_job(context, model_uri=model, slo_ttft_ms=1000, slo_tpot_ms=200).to_dict()
    fit_this_machine(manifest, real_nodes, cpu="900m", memory="3Gi")
    name = manifest["metadata"]["name"]

    cluster.submit(manifest)
    done = cluster.wait(name, timeout=300, namespace=namespace)
    assert done.phase == "Completed", (done, cluster.events(name, namespace=namespace))
    # CompleteJob kills the server and Volcano deletes the pods it killed: the client's pod is what stays.
    assert [p.phase for p in done.pods if "-client-" in p.name] == ["Succeeded"], done.pods

    report = LoadtestReport.model_validate_json((on_host(host, context.paths.loadtest_report)).read_text())
    assert report.errors == 0 and report.ttft_p95_ms > 0 and report.tpot_p95_ms > 0, report
    won = EvaluationReport(candidate_score=1.0)
    assert decide_release(report, won, slo_ttft_ms=1e6, slo_tpot_ms=1e6, margin=0).released
    refused = decide_release(report, won, slo_ttft_ms=report.ttft_p95_ms / 2, slo_tpot_ms=1e6, margin=0)
    assert not refused.released and "TTFT" in refused.reason


def test_the_load_test_server_dying_mid_test_counts_errors_fails_the_gate_and_releases_nothing(
    cluster, namespace, real_nodes, step_image, workspace, admin, eventually, record_property
):
    from kubernetes import client

    pvc, host = workspace
    model = trained_model(host)
    context = JobContext(
        workflow=WORKFLOW, namespace=namespace, workspace=WORKSPACE, workspace_pvc=pvc, image=step_image
    )
    slo = {"slo_ttft_ms": 60000.0, "slo_tpot_ms": 10000.0}  # generous: only the errors may fail the gate
    requests = 1000  # long enough for the server to die in the middle
    manifest = build_loadtest_job(context, model_uri=model, requests=requests, **slo).to_dict()
    fit_this_machine(manifest, real_nodes, cpu="900m", memory="3Gi")
    name = manifest["metadata"]["name"]
    cluster.submit(manifest)

    core = client.CoreV1Api(admin)
    pods = cluster.wait(name, {"Running", "Completed", "Failed"}, timeout=300, namespace=namespace).pods
    server, load = (next(p.name for p in pods if f"-{task}-" in p.name) for task in ("server", "client"))

    def ended() -> int:  # the client's progress lines: "requests N/1000"
        log = core.read_namespaced_pod_log(load, namespace)
        return max((int(m) for m in re.findall(rf"requests (\d+)/{requests}", log)), default=0)

    eventually("the client has had answers from the server", lambda: ended() > 0, 300)
    kill_container_process(core.read_namespaced_pod(server, namespace).metadata.uid, "components.serving")

    done = cluster.wait(name, timeout=300, namespace=namespace)
    assert done.phase == "Completed", (done, cluster.events(name, namespace=namespace))
    report = json.loads(on_host(host, context.paths.loadtest_report).read_text())
    assert report["errors"] > 0 and report["completed"] > 0, report
    assert report["completed"] + report["errors"] == requests and report["slo_passed"] is False, report
    won = EvaluationReport(candidate_score=1.0, champion_score=None)  # the best candidate there could be
    decision = decide_release(LoadtestReport.model_validate(report), won, margin=0.0, **slo)
    assert not decision.released and decision.reason == f"{report['errors']} load-test requests failed", decision
    outcome = f"{report['errors']} of {requests} requests failed; gate failed; not released"
    record_fault(record_property, "loadtest-server-dies", outcome, "0", "none")


def diagnosed(cluster: Any, namespace: str, name: str, checkpoints: Path) -> Any:
    """What the pipeline's diagnose does: let the failed job settle, observe it, ask the rule policy."""
    observation = observe_module.observe(
        cluster, plan_request(namespace), job_name=name, checkpoints=str(checkpoints), settle_s=DIAGNOSE_SETTLE_S
    )
    return policy_rules.RulePolicy().diagnose(observation)


def finishes_from(cluster: Any, namespace: str, again: dict[str, Any], retry: Any, out: Path, data: Path, tmp: Path):
    """Run the retry's VCJob; it must continue at the checkpoint's next step and end at the uninterrupted loss."""
    cluster.submit(again)
    done = cluster.wait(again["metadata"]["name"], timeout=600, namespace=namespace)
    assert done.phase == "Completed", (done, cluster.events(again["metadata"]["name"], namespace=namespace))
    assert logged_steps(out)[0] == retry.checkpoint_step + 1, "the retry continued from the checkpoint"
    single = single_process_summary(data, tmp / "single")
    final = json.loads((out / "summary.json").read_text())["final_loss"]
    assert final == pytest.approx(single["final_loss"], rel=1e-4, abs=1e-6)
    return done


def slow_steps(manifest: dict[str, Any], seconds: float) -> None:
    """Make each optimizer step last `seconds` (the trainer's hidden VCPILOT_STEP_DELAY), so faults land mid-run."""
    for task in manifest["spec"]["tasks"]:
        for container in task["template"]["spec"]["containers"]:
            container.setdefault("env", []).append({"name": "VCPILOT_STEP_DELAY", "value": str(seconds)})


def logged_steps(out: Path) -> list[int]:
    file = out / "metrics.jsonl"
    return [json.loads(line)["step"] for line in file.read_text().splitlines()] if file.is_file() else []


def high_priority_job(namespace: str, image: str, nodes: list[Any], gpus: int, seconds: int) -> dict[str, Any]:
    """Another team's short, high-priority job that needs `gpus` GPUs on one real node."""
    amounts = {"cpu": "300m", "memory": "512Mi", "nvidia.com/gpu": gpus}
    # Its container is sized for a real node's two CPUs and runs the step image, so it replaces the factory's.
    container = {
        "name": "work",
        "image": image,
        "command": ["python", "-c", f"import time; time.sleep({seconds})"],
        "resources": {"requests": dict(amounts), "limits": dict(amounts)},
    }
    pod = on_real_nodes({"priorityClassName": "vcpilot-high", "containers": [container]}, nodes)
    task = vcjob_task("work", **pod)
    return vcjob("urgent", namespace=namespace, priority_class="vcpilot-high", max_retry=1, tasks=[task])


def test_a_preempted_training_checkpoints_on_sigterm_and_resumes_from_that_checkpoint(
    cluster, namespace, real_nodes, step_image, workspace, priority_classes, eventually, tmp_path, record_property
):
    pvc, host = workspace
    write_dataset(host / "data")
    context, manifest = planned_training(cluster, namespace, step_image, pvc, "", priority_class="vcpilot-low")
    fit_this_machine(manifest, real_nodes)
    slow_steps(manifest, 1.0)
    name = manifest["metadata"]["name"]
    cluster.submit(manifest)
    out = on_host(host, context.paths.model(1))
    eventually(
        "the low-priority training is past its first checkpoint", lambda: len(logged_steps(out)) > EVERY + 1, 300
    )

    # Each real node has one GPU left; a job that needs two on one node can only run by preempting a rank.
    cluster.submit(high_priority_job(namespace, step_image, real_nodes, gpus=2, seconds=20))
    failed = cluster.wait(name, timeout=180, namespace=namespace)
    assert failed.phase == "Failed", failed
    reached = max(logged_steps(out))

    retry = diagnosed(cluster, namespace, name, on_host(host, context.paths.checkpoints))
    assert isinstance(retry, RetryFromCheckpoint), retry.rationale
    assert retry.avoid_nodes == [], "a preemption is no fault of the node"
    assert "preempt" in retry.rationale, retry.rationale
    metadata = json.loads((Path(retry.checkpoint) / "metadata.json").read_text())
    assert metadata["reason"] == "stop-signal", metadata
    lost_with, lost_without = reached - retry.checkpoint_step, reached - reached // EVERY * EVERY
    print(f"preemption at step {reached}: {lost_with} steps lost with the SIGTERM checkpoint, {lost_without} without")
    assert lost_with <= 1

    resume = in_pod(host, retry.checkpoint)
    _, again = planned_training(
        cluster, namespace, step_image, pvc, "", attempt=2, resume_checkpoint=resume, priority_class="vcpilot-low"
    )
    fit_this_machine(again, real_nodes)
    finishes_from(cluster, namespace, again, retry, on_host(host, context.paths.model(2)), host / "data", tmp_path)
    outcome = f"SIGTERM checkpoint at step {retry.checkpoint_step}; resumed; same final loss"
    record_fault(record_property, "preemption", outcome, str(lost_with), "none")


def test_a_real_node_dies_mid_training_and_the_retry_resumes_off_it_from_the_latest_checkpoint(
    cluster, namespace, real_nodes, step_image, workspace, eventually, tmp_path, kill_node, record_property
):
    pvc, host = workspace
    write_dataset(host / "data")
    context, manifest = planned_training(cluster, namespace, step_image, pvc, "")
    fit_this_machine(manifest, real_nodes)
    slow_steps(manifest, 1.0)
    name = manifest["metadata"]["name"]
    cluster.submit(manifest)
    out = on_host(host, context.paths.model(1))
    eventually("attempt 1 has trained past its second checkpoint", lambda: len(logged_steps(out)) > 2 * EVERY, 300)

    running = cluster.get(name, namespace=namespace)
    dead = next(p.node for p in running.pods if "worker" in p.name)
    kill_node(dead)
    lost_at = max(logged_steps(out))
    failed = cluster.wait(name, timeout=240, namespace=namespace)
    assert failed.phase == "Failed", failed

    # The settle in `diagnosed` lets the failed job's pod on the silent node show that the node is dead.
    retry = diagnosed(cluster, namespace, name, on_host(host, context.paths.checkpoints))
    assert isinstance(retry, RetryFromCheckpoint), retry.rationale
    assert retry.avoid_nodes == [dead], retry.rationale
    assert retry.global_batch == GLOBAL_BATCH
    assert lost_at - retry.checkpoint_step <= EVERY, f"at most one interval lost: {lost_at} -> {retry.checkpoint_step}"

    resume = in_pod(host, retry.checkpoint)
    _, again = planned_training(
        cluster, namespace, step_image, pvc, "", attempt=2, avoid_nodes=retry.avoid_nodes, resume_checkpoint=resume
    )
    # On one 2-CPU node both ranks must fit: this machine's limit, not the pipeline's.
    fit_this_machine(again, real_nodes, cpu="900m", memory="3Gi")
    out2 = on_host(host, context.paths.model(2))
    done = finishes_from(cluster, namespace, again, retry, out2, host / "data", tmp_path)
    assert all(p.node != dead for p in done.pods)
    outcome = f"resumed off {dead} from step {retry.checkpoint_step}; same final loss"
    record_fault(record_property, "node-dies", outcome, str(lost_at - retry.checkpoint_step), "none")
