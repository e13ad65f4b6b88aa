"""`vcpilot plan` shows the very VCJob the pipeline's plan step submits for the same parameters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from components.errors import InputError
from components.volcano.cluster_local import LocalCluster
from components.volcano.localconfig import LocalClusterConfig
from pipelines import steps_training
from pipelines.cli import app

GPU = "nvidia.com/gpu"


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalCluster]:
    """The LocalCluster both paths observe (through VCPILOT_HOME): 2 nodes × 4 GPUs, a queue capped at 4."""
    home = tmp_path / "home"
    config = {
        "nodes": [{"name": "node", "count": 2, "gpus": 4}],
        "queues": [{"name": "small", "capability": {GPU: 4}}],
        "priorityClasses": {"high": 1000},
    }
    made = LocalCluster(home, LocalClusterConfig.model_validate(config))
    monkeypatch.setenv("VCPILOT_HOME", str(home))
    yield made
    made.close()


def cli_manifest(flags: list[str]) -> dict[str, Any]:
    shown = CliRunner().invoke(app, ["plan", *flags, "--json"])
    assert shown.exit_code == 0, shown.output
    vcjob: dict[str, Any] = json.loads(shown.stdout)["vcjob"]
    return vcjob


@pytest.mark.parametrize(
    ("flags", "inputs"),
    [
        ([], {}),
        (
            [
                *("--gpus", "8", "--min-gpus", "2", "--queue", "small", "--global-batch", "64", "--micro-batch", "2"),
                *("--max-steps", "120", "--checkpoint-every", "20", "--base-model", "Qwen/Qwen2.5-0.5B-Instruct"),
                *("--workspace-pvc", "vcpilot-workspace", "--priority-class", "high", "--namespace", "team-a"),
                *("--resume-checkpoint", "/workspace/runs/wf/checkpoints/step-40", "--image", "img:2"),
            ],
            {
                "gpus": 8,
                "gpus_min": 2,
                "queue": "small",
                "global_batch": 64,
                "micro_batch": 2,
                "train_max_steps": 120,
                "checkpoint_every": 20,
                "base_model": "Qwen/Qwen2.5-0.5B-Instruct",
                "workspace_pvc": "vcpilot-workspace",
                "priority_class": "high",
                "namespace": "team-a",
                "resume_checkpoint": "/workspace/runs/wf/checkpoints/step-40",
                "image": "img:2",
            },
        ),
    ],
    ids=["defaults", "downscaled"],
)
def test_plan_renders_the_vcjob_the_pipelines_plan_step_submits(
    cluster: LocalCluster, tmp_path: Path, flags: list[str], inputs: dict[str, Any]
) -> None:
    workspace = str(tmp_path / "ws")
    shown = cli_manifest(["--workflow", "wf", "--workspace", workspace, *flags])
    values: dict[str, Any] = {
        "gpus": 4,
        "global_batch": 32,
        "micro_batch": 4,
        "train_max_steps": 200,
        "checkpoint_every": 50,
        "base_model": "tiny",
        "image": "ghcr.io/vcpilot/vcpilot:0.1.0",
        **inputs,
    }
    planned = steps_training.plan_training(
        steps_training.TrainingPlanInput(workflow_name="wf", workspace=workspace, **values)
    )
    assert shown == json.loads(planned.manifest)
    assert shown["metadata"]["name"] == "wf-train-1" and shown["spec"]["maxRetry"] == 1
    if flags:  # the capped queue made the agent downscale, keeping the global batch
        assert planned.action == "downscale" and shown["spec"]["minAvailable"] == 4
        assert shown["spec"]["volumes"] == [{"mountPath": workspace, "volumeClaimName": "vcpilot-workspace"}]
    assert cluster.list_jobs() == []  # neither path submits: the resource template does


@pytest.mark.parametrize(
    ("flags", "fragments"),
    [
        (["--queue", "nope"], ("queue 'nope' does not exist", "its queues are default, small")),
        (["--fallback-queue", "spare"], ("fallback queue 'spare' does not exist", "default, small")),
        (["--queue", ""], ("the queue is empty", "name one of this cluster's queues: default, small")),
        (["--priority-class", "urgent"], ("priority class 'urgent' does not exist", "its priority classes are high")),
    ],
)
@pytest.mark.parametrize("as_json", [False, True])
def test_plan_refuses_a_queue_or_priority_class_that_does_not_exist(
    cluster: LocalCluster, flags: list[str], fragments: tuple[str, ...], as_json: bool
) -> None:
    shown = CliRunner().invoke(app, ["plan", *flags, *(["--json"] if as_json else [])])
    assert shown.exit_code == InputError.exit_code, shown.output
    assert "proceed" not in shown.stdout and "VCJob" not in shown.stdout and '"vcjob"' not in shown.stdout
    sentence = shown.stderr.strip()
    assert sentence.count("\n") == 0 and "Traceback" not in shown.output
    for fragment in fragments:
        assert fragment in sentence
    assert cluster.list_jobs() == []


def test_plan_in_a_fresh_process_imports_no_hera(cluster: LocalCluster, tmp_path: Path) -> None:
    # Hera's models take about a second to import, some three times the rest of the command (benchmarks/cli.py);
    # `logging` (with the redacting filter it brings) is 1 % of the command, which logs nothing; the scheduler (2 %:
    # its dataclasses) runs only for a gang that waits, and the agent reads taints through components.volcano.placement.
    root = Path(__file__).resolve().parents[2]
    probe = (
        "import sys\n"
        "from pipelines.cli import app\n"
        "try:\n    app(['plan', '--dry-run', '--workspace', sys.argv[1]])\nexcept SystemExit as end:\n"
        "    assert not end.code, end.code\n"
        "heavy = ('hera', 'mlflow', 'torch', 'mcp', 'fastapi', 'httpx', 'kubernetes', 'logging',"
        " 'components.volcano.scheduler')\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "ws")], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout + done.stderr
    assert "VCJob wf" not in done.stdout and "VCJob vcpilot-plan-train-1" in done.stdout


@pytest.mark.parametrize(
    ("flags", "code", "fragments"),
    [
        (["--checkpoint-every", "0"], 2, ("--checkpoint-every", "1")),
        (["--checkpoint-every", "-5"], 2, ("--checkpoint-every", "1")),
        (["--workspace-pvc", "Bad_PVC"], 1, ("--workspace-pvc", "'Bad_PVC'", "lower-case")),
        (["--image", "a b"], 1, ("--image", "'a b'", "without spaces")),
        (["--image", "Team/App:1"], 1, ("--image", "lowercase/path")),
        # rendered into the VCJob and failed only when its training pod loaded it
        (["--base-model", "x y"], 1, ("--base-model 'x y' is not a model", "Hugging Face id")),
        (["--base-model", "org/team/model"], 1, ("--base-model 'org/team/model' is not a model",)),
        # the rules `vcpilot run` holds its parameters to (pipelines.parameters), which plan took unchecked
        (["--resume-checkpoint", "foo"], 1, ("--resume-checkpoint is 'foo'", "absolute path", "step-N")),
        (["--workspace", "rel/ws"], 1, ("--workspace is 'rel/ws'", "absolute path")),
        # they said `name:` and `namespace:`, not the options
        (["--workflow", "Bad_W"], 1, ("--workflow 'Bad_W' cannot name the training's VCJob", "'Bad_W-train-1'")),
        # names Argo takes for a workflow, which the VCJob's Service cannot carry (a DNS-1035 label)
        (["--workflow", "a.b"], 1, ("--workflow 'a.b' cannot name the training's VCJob", "starts with a letter")),
        (["--workflow", "1abc"], 1, ("--workflow '1abc' cannot name the training's VCJob",)),
        # a VCJob name shortened to fit, but a label value Argo and the VCJob's labels refuse: it said "labels: value"
        (["--workflow", "w" * 64], 1, ("--workflow 'wwww", "is not a run name", "at most 63")),
        (["--namespace", "Bad"], 1, ("--namespace 'Bad' is not a namespace name",)),
        # sizes no run has, which the rules weighed size by size for minutes (1e9 GPUs) or overflowed a float in
        (["--gpus", "1000000000", "--global-batch", "4000000000"], 1, ("--gpus must be at most 100000",)),
        (["--max-steps", "1" + "0" * 30], 1, ("--max-steps must be at most 1000000000000",)),
        (["--global-batch", "10000000000"], 1, ("--global-batch must be at most 1000000000",)),
        # every name an option: it said "… a multiple of gpus × --micro-batch"
        (["--global-batch", "12"], 1, ("--global-batch 12 is not a multiple of --gpus × --micro-batch = 4 × 4",)),
    ],
)
def test_plan_refuses_an_option_the_vcjob_could_not_carry(
    cluster: LocalCluster, flags: list[str], code: int, fragments: tuple[str, ...]
) -> None:
    shown = CliRunner().invoke(app, ["plan", *flags])
    assert shown.exit_code == code, shown.output
    sentence = shown.stderr.strip()
    assert sentence.startswith("error: ") and sentence.count("\n") == 0 and "VCJob" not in shown.stdout
    for fragment in fragments:
        assert fragment in sentence
    assert cluster.list_jobs() == []


@pytest.mark.parametrize("image", ["ghcr.io/vcpilot/vcpilot:0.1.0", "localhost:5000/a/b_c:dev", "python:3.11-slim"])
def test_plan_takes_an_image_a_runtime_pulls(cluster: LocalCluster, image: str) -> None:
    containers = cli_manifest(["--image", image])["spec"]["tasks"][0]["template"]["spec"]["containers"]
    assert {c["image"] for c in containers} == {image}


def test_on_a_cluster_with_run_bands_the_vcjob_takes_the_band_its_training_fits_unless_a_class_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    bands = {"vcpilot-run-30m": 1003, "vcpilot-run-2h": 1002, "vcpilot-run-24h": 1001, "high": 5000}
    config = {"nodes": [{"name": "node", "count": 2, "gpus": 4}], "priorityClasses": bands}
    LocalCluster(home, LocalClusterConfig.model_validate(config)).close()
    monkeypatch.setenv("VCPILOT_HOME", str(home))
    # Nothing measured: the prior, 1 sample/s a GPU; 300 steps × 16 samples at 8 GPUs × 0.9³ trains ~14 min.
    short = cli_manifest(["--gpus", "8", "--global-batch", "16", "--micro-batch", "2", "--max-steps", "300"])
    assert short["spec"]["priorityClassName"] == "vcpilot-run-30m"
    assert {t["template"]["spec"]["priorityClassName"] for t in short["spec"]["tasks"]} == {"vcpilot-run-30m"}
    longer = cli_manifest(["--gpus", "8", "--global-batch", "16", "--micro-batch", "2", "--max-steps", "1500"])
    assert longer["spec"]["priorityClassName"] == "vcpilot-run-2h"  # ~69 min
    named = ["--gpus", "8", "--global-batch", "16", "--micro-batch", "2", "--priority-class", "high"]
    assert cli_manifest(named)["spec"]["priorityClassName"] == "high"


def test_the_candidates_table_says_never_only_for_a_size_that_can_never_run() -> None:
    from agent.actions import Candidate
    from pipelines.cli_plan import _candidates

    table = _candidates(
        [
            Candidate(gpus=8, queue="gpu-a", grad_accum=1, wait_s=3600, run_s=1100, note="waits ~60 min"),
            Candidate(gpus=8, queue="spare", grad_accum=1, wait_s=780, run_s=1100, feasible=False, note="ruled out"),
            Candidate(gpus=16, queue="spare", grad_accum=1, wait_s=0, run_s=600, feasible=False, note="too big"),
        ]
    ).splitlines()
    assert table[1].split()[3:6] == ["3600s", "1100s", "4700s"]
    assert table[2].split()[3:] == ["780s", "1100s", "1880s", "ruled", "out"], "a ruled-out size keeps its estimate"
    assert table[3].split()[3:] == ["-", "-", "never", "too", "big"]
