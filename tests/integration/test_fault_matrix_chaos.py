"""Three rows of the fault matrix through one whole `vcpilot run` (issue 16): the queue is nearly full when the plan
step runs, MLflow goes away for a minute while the model trains, and the runner is SIGKILLed in that minute;
`vcpilot resume` finishes the run.

The user's commands, as a user types them (`vcpilot run`, `kill -9`, `vcpilot resume`) on LocalCluster, against a
real `mlflow server` that is paused (SIGSTOP: it accepts nothing and answers nothing) for 60 s. Someone else's job
holds 7 of the cluster's 8 GPUs from before the run to its end. A file of its own, so that `make test`'s two
workers run it beside the other pipeline row (`--dist loadfile`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from fault_table import record_fault
from mlflow_kit import MlflowServer
from vcjob_factory import vcjob, vcjob_task

from components.tracking.replay import replay_all
from components.volcano.cluster_local import LocalCluster

pytestmark = pytest.mark.integration

NAME = "chaos"
STEPS = 30
OUTAGE_S = 60.0
VCPILOT = [sys.executable, "-m", "pipelines.cli"]


def vcpilot(home: Path, *args: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "VCPILOT_HOME": str(home), "VCPILOT_STEP_DELAY": "0.5"}
    with log.open("ab") as out:
        return subprocess.Popen([*VCPILOT, *args], env=env, stdout=out, stderr=subprocess.STDOUT)


def started(home: Path) -> dict[str, str]:
    """The start time of every node of the run that has finished (Succeeded or Skipped), by id."""
    nodes = json.loads((home / "runs" / NAME / "status.json").read_text())["status"].get("nodes", {})
    done = ("Succeeded", "Skipped")
    return {i: n["startedAt"] for i, n in nodes.items() if n["phase"] in done and n["type"] == "Pod"}


def steps_trained(workspace: Path) -> list[int]:
    path = workspace / "train-1" / "model" / "metrics.jsonl"
    return [json.loads(line)["step"] for line in path.read_text().splitlines()] if path.is_file() else []


def test_a_runner_killed_while_mlflow_is_down_resumes_with_no_step_rerun_no_job_doubled_and_every_metric_once(
    tmp_path, record_property
):
    from mlflow.tracking import MlflowClient

    server = MlflowServer(tmp_path / "mlflow")
    server.start()
    model = f"chaos-{uuid.uuid4().hex[:8]}"
    params = {
        "base-model": "tiny",
        "train-max-steps": str(STEPS),
        "checkpoint-every": "5",
        "mlflow-tracking-uri": server.url,
        "registered-model": model,
        "slo-ttft-ms": "60000",  # the row is about MLflow and the runner, not a busy machine's first token
        "slo-tpot-ms": "10000",
    }
    home, log = tmp_path / "home", tmp_path / "vcpilot.log"
    workspace = home / "workspace" / "runs" / NAME
    cluster = LocalCluster(home)  # the default one `vcpilot run` uses: 2 nodes x 4 GPUs, one queue
    cluster.submit(vcjob("other", tasks=[vcjob_task(replicas=7, gpus=1, script="sleep 3600")]))
    cluster.wait("other", ["Running"], timeout=60)
    runner = vcpilot(home, "run", "--name", NAME, *(a for k, v in params.items() for a in ("-p", f"{k}={v}")), log=log)
    resumed: subprocess.Popen[bytes] | None = None
    try:
        deadline = time.monotonic() + 600
        while len(steps_trained(workspace)) < 3:
            assert runner.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        server.pause()
        down_at = time.monotonic()
        trained_before = len(steps_trained(workspace))
        while len(steps_trained(workspace)) < trained_before + 4:  # steps trained while MLflow answers nothing
            assert runner.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        finished = started(home)
        runner.send_signal(signal.SIGKILL)
        assert runner.wait() == -signal.SIGKILL
        killed_at_step = max(steps_trained(workspace))
        assert killed_at_step < STEPS, "the runner is meant to die while the model still trains"

        resumed = vcpilot(home, "resume", NAME, log=log)
        time.sleep(max(0.0, down_at + OUTAGE_S - time.monotonic()))
        server.resume()
        assert resumed.wait(timeout=max(60.0, deadline - time.monotonic())) == 0, log.read_text()[-3000:]
    finally:
        for proc in (runner, resumed):
            if proc is not None and proc.poll() is None:
                proc.kill()
        server.resume()
        cluster.delete("other", missing_ok=True)

    try:
        status = json.loads((home / "runs" / NAME / "status.json").read_text())["status"]
        assert status["phase"] == "Succeeded", {n["displayName"]: n["phase"] for n in status["nodes"].values()}
        after = started(home)
        assert all(after.get(i) == at for i, at in finished.items()), "no finished step ran again"
        jobs = {j.name: j for j in cluster.list_jobs()}
        assert sorted(j for j in jobs if "train" in j) == [f"{NAME}-train-1"], list(jobs)
        plan = json.loads((workspace / "decisions" / "plan-1.json").read_text())["action"]
        assert plan["kind"] == "downscale" and plan["gpus"] == 1, plan
        assert plan["micro_batch"] * plan["grad_accum"] * plan["gpus"] == 8, "the global batch is kept"
        train = jobs[f"{NAME}-train-1"]
        assert train.phase == "Completed" and len(train.pods) == 1 and all(p.node for p in train.pods), train.pods
        trained = steps_trained(workspace)
        assert sorted(trained) == list(range(1, STEPS + 1)), "the job was not started again: each step once"

        client = MlflowClient(server.url)
        experiment = client.get_experiment_by_name("llm-autopilot")
        (parent,) = client.search_runs([experiment.experiment_id], filter_string=f"tags.`vcpilot.workflow` = '{NAME}'")
        assert parent.data.tags["vcpilot.status"] == "Succeeded"
        children = client.search_runs(
            [experiment.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'"
        )
        (finetune,) = [c for c in children if c.info.run_name == "finetune-1"]
        steps = sorted(m.step for m in client.get_metric_history(finetune.info.run_id, "loss"))
        assert steps == list(range(1, STEPS + 1)), "every step in MLflow exactly once after the outage"
        assert "evaluate.candidate_score" in parent.data.metrics
        assert replay_all(workspace / "tracking", server.url).sent == 0, "nothing waits in a spool"
    finally:
        server.stop()
        cluster.close()
    record_fault(
        record_property, "queue-full", "7 of 8 GPUs held: downscaled 2 -> 1 GPU (global batch 8 kept); whole gang",
        "0", "none",
    )  # fmt: skip
    record_fault(
        record_property, "mlflow-down", f"MLflow paused {OUTAGE_S:.0f} s; the run Succeeded; {STEPS} steps once each",
        "0", "none",
    )  # fmt: skip
    record_fault(
        record_property, "runner-killed",
        f"runner killed at step {killed_at_step}; resume Succeeded; {len(finished)} finished steps kept, 1 job",
        "0", "none",
    )  # fmt: skip
