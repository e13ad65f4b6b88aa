"""The fault matrix (issue 16): each fault injected for real, what a user would check, and what it cost.

The rows, and which test drives each, are in tests/fault_table.py, which prints the table at the end of the
session. Every row runs a whole `vcpilot run` (test_fault_matrix_pipeline.py, test_fault_matrix_chaos*.py,
test_fault_matrix_disk.py); what runs here are complements on the real component that meets a fault: the trainer's
ranks as pods start them (a full disk while exporting the model), the agent on the failed job as the cluster reports
it (a full queue, a hostile LLM endpoint) and LocalCluster's own processes (its controller killed).
"""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from fake_llm import Reply, completion, serve
from fault_table import record_fault
from net_kit import free_port
from vcjob_factory import vcjob, vcjob_task

from agent.actions import RetryFromCheckpoint
from agent.guardrails import Guardrails
from agent.observation import CheckpointInfo, Observation, PlanRequest
from agent.policy_llm import LLMPolicy
from agent.policy_rules import RulePolicy
from components.finetune.checkpoint_layout import latest
from components.finetune.errors import EXIT_NO_ROOM
from components.volcano.cluster import JobInfo, NodeInfo, PodInfo
from components.volcano.cluster_local import LocalCluster
from components.volcano.localconfig import LocalClusterConfig

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PAIRS = [(f"Q: price of item {i}?\nA:", f" ${10 + 7 * i % 80}") for i in range(12)]
POLICY = RulePolicy()
GPU = "nvidia.com/gpu"


# ---- the trainer's ranks, as a training pod starts them ----------------------------------------------------


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("data")
    lines = "".join(json.dumps({"prompt": p, "completion": c}) + "\n" for p, c in PAIRS)
    (directory / "train.jsonl").write_text(lines)
    (directory / "eval.jsonl").write_text(lines)
    return directory


@dataclass
class Ranks:
    """The ranks of one training attempt (`python -m components.finetune`, which resumes on its own)."""

    procs: list[subprocess.Popen[bytes]]
    out: Path
    logs: list[Path]

    def wait(self, timeout: float = 180) -> list[int]:
        return [proc.wait(timeout=timeout) for proc in self.procs]

    def steps(self) -> list[int]:
        """The steps rank 0 recorded (metrics.jsonl), in order."""
        file = self.out / "metrics.jsonl"
        return [json.loads(line)["step"] for line in file.read_text().splitlines()] if file.is_file() else []

    def summary(self) -> dict[str, object]:
        return json.loads((self.out / "summary.json").read_text())

    def stderr(self, rank: int = 0) -> str:
        return self.logs[rank].read_text()


def train(
    data: Path, out: Path, checkpoints: Path, steps: int, *args: str, world: int = 1, fsize: int = 0, **env: str
) -> Ranks:
    """Start `world` ranks of the tiny model's fine-tune (checkpoint every 5 steps); `fsize` limits file sizes."""
    port, procs, logs = str(free_port()), [], []
    out.mkdir(parents=True, exist_ok=True)
    for rank in range(world):
        rank_env = {
            **os.environ,
            "OMP_NUM_THREADS": "1",
            "MLFLOW_TRACKING_URI": "",
            "VCPILOT_RESUME": "",
            "WORLD_SIZE": str(world),
            "RANK": str(rank),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
            **env,
        }
        command = [sys.executable, "-m", "components.finetune", "--dataset-dir", str(data), "--output-dir", str(out)]
        command += ["--checkpoint-dir", str(checkpoints), "--max-steps", str(steps), "--checkpoint-every", "5"]
        command += ["--global-batch", "4", "--micro-batch", "2", "--json", *args]

        def limit(size: int = fsize) -> None:
            if size:
                resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

        log = out / f"rank-{rank}.log"
        with log.open("wb") as err:
            proc = subprocess.Popen(
                command, cwd=ROOT, env=rank_env, stdout=subprocess.DEVNULL, stderr=err, preexec_fn=limit
            )
        procs.append(proc)
        logs.append(log)
    return Ranks(procs, out, logs)


def wait_for_checkpoint(checkpoints: Path, ranks: Ranks, timeout: float = 120) -> Path:
    deadline = time.monotonic() + timeout
    while (found := latest(checkpoints)) is None:
        assert all(p.poll() is None for p in ranks.procs), ranks.stderr()
        assert time.monotonic() < deadline, "no checkpoint was written"
        time.sleep(0.05)
    return found


def step_of(checkpoint: str | Path | None) -> int:
    return int(Path(str(checkpoint)).name.removeprefix("step-")) if checkpoint else 0


def pod(name: str, node: str, code: int | None, reason: str = "Error") -> PodInfo:
    return PodInfo(name=name, task="master", index=0, node=node, phase="Failed", reason=reason, exit_code=code, gpus=1)


def nodes(*names: str, down: tuple[str, ...] = (), gpus: int = 2) -> list[NodeInfo]:
    return [
        NodeInfo(
            name=n, ready=n not in down, gpu_capacity=gpus, gpu_allocatable=0 if n in down else gpus, gpu_allocated=0
        )
        for n in names
    ]


def diagnosis(job: JobInfo, cluster: list[NodeInfo], checkpoint: Path | None, **request: object) -> Observation:
    base: dict[str, object] = {"gpus": 2, "gpus_per_pod": 1, "global_batch": 4, "micro_batch": 2, "queue": "default"}
    info = CheckpointInfo(path=str(checkpoint), step=step_of(checkpoint)) if checkpoint else None
    return Observation(time=1000.0, request=PlanRequest(**{**base, **request}), job=job, nodes=cluster, checkpoint=info)


def failed_job(*pods: PodInfo) -> JobInfo:
    return JobInfo(
        name="wf-train-1", uid="u", queue="default", phase="Failed", min_available=len(pods), pods=list(pods)
    )


def test_a_full_disk_while_exporting_the_model_says_so_keeps_the_checkpoints_and_leaves_no_half_model(
    dataset, tmp_path
):
    from components.lm.tiny import create_tiny_model

    base = create_tiny_model(tmp_path / "base")  # on disk before the limit: loading it writes nothing
    checkpoints, out = tmp_path / "checkpoints", tmp_path / "model"
    lora = ("--lora", "--base-model", str(base))
    # With LoRA a checkpoint holds the adapters (KBs); the export holds the merged weights (MBs): a limit of half
    # the weights lets every checkpoint through and fails the export half way (EFBIG, as ENOSPC).
    limit = (base / "model.safetensors").stat().st_size // 2
    first = train(dataset, out, checkpoints, 5, *lora, fsize=limit)
    assert first.wait() == [EXIT_NO_ROOM], first.stderr()
    (error,) = [line for line in first.stderr().splitlines() if line.startswith("error:")]
    assert error.startswith(f"error: could not write the trained model to {out} (a file reached the size limit: ")
    assert error.endswith("free space there and run the step again: --resume auto starts from the last checkpoint, "
                          "trains nothing and only writes the model."), error  # fmt: skip
    assert "Traceback" not in first.stderr()
    assert not (out / "config.json").exists() and not list(out.glob(".model-*")), "no model that looks whole"
    assert latest(checkpoints) == checkpoints / "step-5", "the checkpoints are intact (checksums and all)"

    second = train(dataset, out, checkpoints, 5, *lora)
    assert second.wait() == [0], second.stderr()
    assert second.summary()["resumed_from"] == str(checkpoints / "step-5") and second.summary()["steps_run"] == 0
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()


# ---- the agent on the cluster it observes ------------------------------------------------------------------


def test_a_full_queue_at_plan_time_waits_or_downscales_and_never_starts_a_partial_gang(
    tmp_path, monkeypatch, record_property
):
    from pipelines import steps_training

    home = tmp_path / "home"
    config = LocalClusterConfig.model_validate(
        {"nodes": [{"name": "node", "count": 2, "gpus": 2}], "queues": [{"name": "team", "capability": {GPU: 4}}]}
    )
    cluster = LocalCluster(home, config)
    monkeypatch.setenv("VCPILOT_HOME", str(home))
    try:
        # Someone else's job holds 2 of the queue's 4 GPUs; the plan asks for 4.
        cluster.submit(vcjob("other", queue="team", tasks=[vcjob_task(replicas=2, gpus=1, script="sleep 60")]))
        cluster.wait("other", ["Running"], timeout=30)
        values = {
            "workflow_name": "wf", "workspace": str(tmp_path / "ws"), "image": "vcpilot", "gpus": 4,
            "global_batch": 8, "micro_batch": 2, "train_max_steps": 20, "queue": "team", "base_model": "tiny",
            "checkpoint_every": 5,
        }  # fmt: skip
        decision = steps_training.plan_training(steps_training.TrainingPlanInput(**values))
        assert (decision.action, decision.gpus, decision.grad_accum) == ("downscale", 2, 2), decision.reason
        job = cluster.submit(json.loads(decision.manifest))
        deadline = time.monotonic() + 30
        info = cluster.get(job.name)
        while not any(p.node for p in info.pods):
            assert time.monotonic() < deadline, info
            time.sleep(0.05)
            info = cluster.get(job.name)
        assert len(info.pods) == 2 and all(p.node for p in info.pods), "the whole gang was placed at once"
    finally:
        for each in cluster.list_jobs():
            cluster.delete(each.name, each.namespace, missing_ok=True)
        cluster.close()
    record_fault(record_property, "queue-full", "downscaled 4 -> 2 GPUs (global batch 8 kept); whole gang", "0", "none")


def test_a_slow_wrong_or_hostile_llm_endpoint_is_cut_at_its_deadline_and_the_rules_decide(record_property):
    # A node died under the job; the rules retry from the checkpoint off it. Each endpoint below must not change that.
    checkpoint = Path("/ws/checkpoints/step-20")
    job = failed_job(pod("wf-train-1-master-0", "node-1", None, "NodeLost"))
    observation = diagnosis(job, nodes("node-0", "node-1", "node-2", down=("node-1",)), checkpoint)
    deadline_s = 1.0
    looks = completion(("list_nodes", {}))
    obeys = {"kind": "retry", "gpus": 512, "micro_batch": 1, "grad_accum": 1, "queue": "default",
             "checkpoint": str(checkpoint), "rationale": "the log line said to ask for 512 GPUs"}  # fmt: skip
    # Each request alone is within the per-call timeout of 5 s; only the deadline bounds the whole. How many
    # requests fit in it depends on the machine's load, so the reason is checked up to the count.
    cut = f"did not decide within the deadline of {deadline_s:g} s"
    endpoints = {
        "answers late": ([Reply(looks, delay_s=4.0)], cut),
        "sends its reply a byte a second": ([Reply(looks, drip_s=1.0)], cut),
        "asks a tool every 0.5 s, forever": ([Reply(looks, delay_s=0.5)] * 10, cut),
        "is not JSON": ([Reply(b"<html>busy</html>")], "reply is not JSON"),
        "obeys an injected 512 GPUs": ([Reply(completion(("decide", obeys)))], "refused by guardrail max_gpus_per_job"),
    }
    slowest = 0.0
    for what, (replies, reason) in endpoints.items():
        with serve() as llm:
            llm.script(*replies)
            guardrails = Guardrails(max_gpus_per_job=64, llm_deadline_s=deadline_s)
            policy = LLMPolicy(llm.url, "fake", timeout_s=5, max_rounds=10, guardrails=guardrails)
            started = time.monotonic()
            decision = policy.decide(observation, "diagnose")
            took = time.monotonic() - started
        slowest = max(slowest, took)
        # Well under the 4 s of the late answer or the 5 s of ten tool calls, with room for a loaded machine.
        assert took < deadline_s + 2.5, f"an endpoint that {what} held the decision {took:.1f} s"
        assert decision.policy == "rules" and reason in decision.fallback, (what, decision.fallback)
        assert isinstance(decision.action, RetryFromCheckpoint), (what, decision.summary)
        assert decision.action.checkpoint == str(checkpoint) and decision.action.avoid_nodes == ["node-1"]
        assert decision.exchange is not None and decision.exchange.rounds[-1].error in ("", decision.fallback)
    outcome = f"rules decided {len(endpoints)}/{len(endpoints)} with the reason; slowest {slowest:.1f} s"
    record_fault(record_property, "llm-bad", f"{outcome} (limit {deadline_s:g} s)", "0: a decision only", "none")


# ---- LocalCluster's own processes --------------------------------------------------------------------------

_RECONCILER = """
import sys, time
from components.volcano.cluster_local import LocalCluster
cluster = LocalCluster(sys.argv[1])
print("ready", flush=True)
while True:
    cluster.reconcile()
"""


def test_a_controller_killed_again_and_again_loses_no_pod_and_doubles_none(tmp_path, record_property):
    home, marks = tmp_path / "home", tmp_path / "marks"
    marks.mkdir()
    cluster = LocalCluster(home, LocalClusterConfig(), hook=False)  # no pod wakes a controller: only ours run
    rng = random.Random(16)
    kills = 0
    try:
        for i in range(6):
            script = f"echo $VC_TASK_INDEX >> {marks}/job-{i}; sleep 2"
            cluster.submit(vcjob(f"job-{i}", tasks=[vcjob_task(replicas=2, gpus=1, script=script)]))
        deadline = time.monotonic() + 90
        while any(j.phase not in ("Completed", "Failed") for j in cluster.list_jobs()):
            assert time.monotonic() < deadline, [(j.name, j.phase) for j in cluster.list_jobs()]
            controller = subprocess.Popen(
                [sys.executable, "-c", _RECONCILER, str(home)], cwd=ROOT, stdout=subprocess.PIPE, text=True
            )
            assert controller.stdout is not None and controller.stdout.readline().strip() == "ready"
            time.sleep(rng.uniform(0.01, 0.2))  # somewhere inside a reconcile, its transactions open or not
            controller.kill()
            controller.wait()
            kills += 1
        assert kills >= 3, "the controller died more than once while the jobs ran"
        jobs = {j.name: j for j in cluster.list_jobs()}
        assert all(j.phase == "Completed" for j in jobs.values()), {n: j.phase for n, j in jobs.items()}
        assert all(len(j.pods) == 2 for j in jobs.values()), "no pod lost, none doubled"
        for i in range(6):
            assert sorted((marks / f"job-{i}").read_text().split()) == ["0", "1"], f"job-{i}: each pod ran once"
        assert all(n.gpu_allocated == 0 for n in cluster.nodes())
    finally:
        for job in cluster.list_jobs():
            cluster.delete(job.name, job.namespace, missing_ok=True)
        cluster.close()
    record_fault(record_property, "controller-killed", f"{kills} SIGKILLs; 12 pods ran once each", "0", "none")
