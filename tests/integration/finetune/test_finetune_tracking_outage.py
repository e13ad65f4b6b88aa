"""A fine-tune whose MLflow server goes away: every metric step arrives exactly once, during or after the outage.

A real `python -m components.finetune` run of the tiny model with no server at all until the step has ended. (A
server paused for a minute while a whole `vcpilot run` trains is tests/integration/test_fault_matrix_chaos.py.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow_kit import MlflowServer

from components.tracking.adapter import KEY_TAG, PARENT_TAG, client
from components.tracking.replay import replay_all
from components.tracking.runs import WorkflowRun, close_workflow_run
from components.tracking.spool import Spool

pytestmark = pytest.mark.integration

STEPS = 20
SHAPE = ("--max-steps", str(STEPS), "--checkpoint-every", "8", "--global-batch", "8", "--micro-batch", "2")
EXPERIMENT = "outage"


@pytest.fixture
def server(tmp_path):
    made = MlflowServer(tmp_path / "mlflow")
    yield made
    made.stop()


def training_env(server: MlflowServer, spool: Path, uid: str) -> dict[str, str]:
    return {
        "MLFLOW_TRACKING_URI": server.url,
        "MLFLOW_EXPERIMENT_NAME": EXPERIMENT,
        "VCPILOT_WORKFLOW": f"wf-{uid}",
        "VCPILOT_WORKFLOW_UID": uid,
        "VCPILOT_ATTEMPT": "1",
        "VCPILOT_JOB": f"wf-{uid}-train-1",
        "VCPILOT_TRACKING_SPOOL": str(spool),
        "VCPILOT_TRACKING_FLUSH_S": "0.5",
        "VCPILOT_STEP_DELAY": "0.5",
    }


def loss_steps(url: str, uid: str) -> tuple[list[int], object]:
    mlflow = client(url)
    experiment = mlflow.get_experiment_by_name(EXPERIMENT).experiment_id
    (parent,) = mlflow.search_runs([experiment], filter_string=f"tags.`{KEY_TAG}` = '{uid}'")
    (child,) = mlflow.search_runs([experiment], filter_string=f"tags.`{PARENT_TAG}` = '{parent.info.run_id}'")
    assert child.data.tags["vcpilot.vcjob"] == f"wf-{uid}-train-1" and child.info.run_name == "finetune-1"
    return sorted(m.step for m in mlflow.get_metric_history(child.info.run_id, "loss")), child


def test_a_server_that_comes_back_only_after_the_step_gets_it_all_from_the_exit_handler(
    server, launch, dataset, tmp_path
):
    spool = tmp_path / "spool"  # the server is not started: it is down for the whole step
    env = {**training_env(server, spool, "uid-b"), "VCPILOT_STEP_DELAY": "0"}
    run = launch(1, dataset, tmp_path / "out", tmp_path / "ckpt", *SHAPE, **env)
    assert run.wait() == [0], "a step never fails because tracking is unavailable"
    warnings = [line for line in run.stderr().splitlines() if "MLflow" in line]
    assert len(warnings) == 1 and str(spool / "finetune-1.jsonl") in warnings[0], warnings
    assert Spool(spool / "finetune-1.jsonl").pending() == 2 + 1 + STEPS + 1  # parent, run, params, steps, end

    server.start()
    run_id = close_workflow_run(
        server.url, EXPERIMENT, WorkflowRun(name="wf-uid-b", uid="uid-b"), "Succeeded", {}, spool_dir=spool
    )
    steps, child = loss_steps(server.url, "uid-b")
    assert steps == list(range(1, STEPS + 1)) and child.info.status == "FINISHED"
    saves = client(server.url).get_metric_history(child.info.run_id, "checkpoint_save_s")  # what the agent reads
    assert sorted(m.step for m in saves) == [8, 16, 20] and all(m.value > 0 for m in saves)
    assert client(server.url).get_run(run_id).info.status == "FINISHED"
    assert replay_all(spool, server.url).sent == 0
    close_workflow_run(server.url, EXPERIMENT, WorkflowRun(name="wf-uid-b", uid="uid-b"), "Succeeded", {}, spool)
    assert loss_steps(server.url, "uid-b")[0] == steps, "closing twice sends nothing twice"
