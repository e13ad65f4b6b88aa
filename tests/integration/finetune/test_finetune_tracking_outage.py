"""A fine-tune whose MLflow server goes away: every metric step arrives exactly once, during or after the outage.

A real `mlflow server` (tests/mlflow_kit.py) is paused (SIGSTOP) and let go on (SIGCONT) while a real
`python -m components.finetune` run of the tiny model trains; the second test has no server at all until the step
has ended.
"""

from __future__ import annotations

import time
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


def test_metrics_written_while_the_server_was_down_arrive_exactly_once(server, launch, dataset, tmp_path):
    server.start()
    spool = tmp_path / "spool"
    run = launch(1, dataset, tmp_path / "out", tmp_path / "ckpt", *SHAPE, **training_env(server, spool, "uid-a"))
    deadline = time.monotonic() + 180
    while len(run.metrics()) < 3:
        assert time.monotonic() < deadline and run.procs[0].poll() is None, run.stderr()
        time.sleep(0.1)
    server.pause()
    down_at = len(run.metrics())
    while len(run.metrics()) < down_at + 4:  # steps trained while nothing listens
        assert time.monotonic() < deadline and run.procs[0].poll() is None, run.stderr()
        time.sleep(0.1)
    server.resume()
    assert run.procs[0].poll() is None, "the outage is meant to end while the step still trains"
    assert run.wait() == [0], run.stderr()
    # At most one line: a flusher whose request hung through the whole outage saw no failure to speak of.
    assert len([line for line in run.stderr().splitlines() if "MLflow" in line]) <= 1
    steps, child = loss_steps(server.url, "uid-a")
    assert steps == list(range(1, STEPS + 1)), "every step once: none lost in the outage, none sent twice"
    assert child.info.status == "FINISHED"
    assert Spool(spool / "finetune-1.jsonl").pending() == 0
    assert replay_all(spool, server.url).sent == 0, "replaying again sends nothing"


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
    assert client(server.url).get_run(run_id).info.status == "FINISHED"
    assert replay_all(spool, server.url).sent == 0
    close_workflow_run(server.url, EXPERIMENT, WorkflowRun(name="wf-uid-b", uid="uid-b"), "Succeeded", {}, spool)
    assert loss_steps(server.url, "uid-b")[0] == steps, "closing twice sends nothing twice"
