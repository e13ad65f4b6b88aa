"""Distributed training that survives a killed or stopped rank: same global batch, same curve, same final loss."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from components.finetune.checkpoint import Checkpointer
from components.finetune.errors import EXIT_STOPPED

pytestmark = pytest.mark.integration

STEPS, EVERY = 12, 4
SHAPE = ("--max-steps", str(STEPS), "--checkpoint-every", str(EVERY), "--global-batch", "8", "--micro-batch", "2")
WORKFLOW = "llm-autopilot-test"


def losses(run):
    return [m["loss"] for m in run.metrics()]


@pytest.fixture(scope="module")
def two_ranks(launch, dataset, tmp_path_factory):
    """An uninterrupted run: 2 ranks x micro batch 2 x accumulation 2."""
    root = tmp_path_factory.mktemp("two-ranks")
    run = launch(2, dataset, root / "out", root / "checkpoints", *SHAPE)
    assert run.wait() == [0, 0], run.stderr()
    return run


@pytest.fixture(scope="module")
def one_rank(launch, dataset, tmp_path_factory):
    """The same global batch on 1 rank x micro batch 2 x accumulation 4, logging to MLflow under a workflow."""
    root = tmp_path_factory.mktemp("one-rank")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    run = launch(
        1,
        dataset,
        root / "out",
        root / "checkpoints",
        *SHAPE,
        MLFLOW_TRACKING_URI=uri,
        VCPILOT_WORKFLOW=WORKFLOW,
        VCPILOT_TRACKING_SPOOL=str(root / "spool"),
    )
    assert run.wait() == [0], run.stderr()
    run.tracking_uri = uri
    return run


def test_two_ranks_with_accumulation_2_follow_the_loss_curve_of_one_rank_with_accumulation_4(two_ranks, one_rank):
    assert (two_ranks.summary()["grad_accum"], one_rank.summary()["grad_accum"]) == (2, 4)
    assert two_ranks.summary()["global_batch"] == one_rank.summary()["global_batch"] == 8
    assert len(losses(two_ranks)) == STEPS
    assert losses(two_ranks) == pytest.approx(losses(one_rank), rel=1e-4, abs=1e-6)
    assert losses(two_ranks)[-1] < losses(two_ranks)[0] / 2, "the model learns"


def test_rank_0_logs_every_step_to_a_child_run_of_the_workflow(one_rank):
    from mlflow.tracking import MlflowClient

    from components.tracking.runs import workflow_run

    parent = workflow_run(one_rank.tracking_uri, "llm-autopilot", WORKFLOW)
    client = MlflowClient(one_rank.tracking_uri)
    experiment = client.get_run(parent).info.experiment_id
    (child,) = client.search_runs([experiment], filter_string=f"tags.`mlflow.parentRunId` = '{parent}'")
    assert child.info.status == "FINISHED"
    history = sorted(client.get_metric_history(child.info.run_id, "loss"), key=lambda m: m.step)
    assert [m.step for m in history] == list(range(1, STEPS + 1))
    assert [m.value for m in history] == pytest.approx(losses(one_rank))
    assert {"lr", "tokens_per_s", "step_time_s"} <= set(child.data.metrics)
    assert child.data.params["global_batch"] == "8"


def test_a_rank_killed_mid_training_resumes_with_exactly_the_same_final_loss(two_ranks, launch, dataset, tmp_path):
    checkpoints = tmp_path / "checkpoints"
    killed = launch(2, dataset, tmp_path / "killed", checkpoints, *SHAPE, VCPILOT_STEP_DELAY="0.4")
    deadline = time.monotonic() + 180
    while not ((checkpoints / "step-4" / "metadata.json").is_file() and len(killed.metrics()) >= EVERY + 2):
        assert time.monotonic() < deadline, "the run never got past its first checkpoint"
        assert all(p.poll() is None for p in killed.procs), killed.stderr()
        time.sleep(0.1)
    killed.procs[1].send_signal(signal.SIGKILL)
    codes = killed.wait(timeout=120)
    assert codes[1] == -signal.SIGKILL and codes[0] != 0, "the surviving rank fails instead of hanging"
    done = len(killed.metrics())  # rank 0 cannot finish a step without rank 1, so this is final
    assert done < STEPS

    resumed = launch(2, dataset, tmp_path / "resumed", checkpoints, *SHAPE, "--resume", "auto")
    assert resumed.wait() == [0, 0], resumed.stderr()
    summary = resumed.summary()
    resumed_step = int(str(summary["resumed_from"]).rsplit("step-", 1)[1])
    assert done - resumed_step <= EVERY, f"lost {done - resumed_step} steps, more than one checkpoint interval"
    assert summary["steps"] == STEPS and summary["steps_run"] == STEPS - resumed_step
    assert summary["final_loss"] == two_ranks.summary()["final_loss"], "exactly, not approximately"
    assert losses(resumed) == losses(two_ranks)[resumed_step:]


# Rank 0's background write of step 4 waits for a file the test makes: it is in flight as long as the test wants.
_HOLD_STEP_4 = """
import os, time
from pathlib import Path
import components.finetune.checkpoint as checkpoint
real, gate = checkpoint._save, Path(os.environ["VCPILOT_TEST_RELEASE"])
def held(value, path):
    deadline = time.monotonic() + 120
    while path.parent.name.startswith(".tmp-step-4-") and not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    real(value, path)
checkpoint._save = held
"""


def test_a_write_in_flight_when_a_peer_dies_is_finished_before_rank_0_ends(two_ranks, launch, dataset, tmp_path):
    """A node fault kills rank 1 while rank 0 writes step 4 beside training: rank 0 fails, but only once that
    write is whole, so the run resumes from step 4, not from the checkpoint before (the agent benchmark's
    `Training._lost` counts on it where rank 0's node lives)."""
    hook, release, checkpoints = tmp_path / "hook", tmp_path / "release", tmp_path / "checkpoints"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_HOLD_STEP_4)
    path = os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH", "")]))
    run = launch(
        2,
        dataset,
        tmp_path / "out",
        checkpoints,
        *SHAPE,
        VCPILOT_STEP_DELAY="0.4",
        PYTHONPATH=path,
        VCPILOT_TEST_RELEASE=str(release),
    )
    deadline = time.monotonic() + 180
    while not (list(checkpoints.glob(".tmp-step-4-*")) and len(run.metrics()) >= EVERY + 1):
        assert time.monotonic() < deadline, "step 4's write never started while training went on"
        assert all(p.poll() is None for p in run.procs), run.stderr()
        time.sleep(0.05)
    run.procs[1].send_signal(signal.SIGKILL)
    assert run.procs[1].wait(timeout=30) == -signal.SIGKILL
    time.sleep(2)  # rank 0's next collective fails on the dead peer; its write is still held
    assert run.procs[0].poll() is None, "rank 0 waits for the write in flight"
    assert not (checkpoints / "step-4").exists()
    release.touch()
    assert run.procs[0].wait(timeout=120) != 0, "the surviving rank fails instead of hanging"
    assert Checkpointer(checkpoints).latest() == checkpoints / "step-4"
    assert not list(checkpoints.glob(".tmp-*")), "the write ended whole, renamed into place"

    resumed = launch(2, dataset, tmp_path / "resumed", checkpoints, *SHAPE, "--resume", "auto")
    assert resumed.wait() == [0, 0], resumed.stderr()
    assert resumed.summary()["resumed_from"] == str(checkpoints / "step-4")
    assert resumed.summary()["final_loss"] == two_ranks.summary()["final_loss"], "exactly, not approximately"


# ---- told to stop: SIGTERM, as the kubelet sends it to a pod that is preempted, evicted or deleted ----------

NO_PERIODIC = ("--checkpoint-every", "100")  # the only checkpoint a stopped run writes is the one it stops at


def wait_for_steps(run, steps):
    deadline = time.monotonic() + 180
    while len(run.metrics()) < steps:
        assert time.monotonic() < deadline, "the run never reached the steps to stop at"
        assert all(p.poll() is None for p in run.procs), run.stderr()
        time.sleep(0.05)


def stop_checkpoint(run):
    """The one checkpoint the stopped run wrote, as (directory name, metadata)."""
    (checkpoint,) = run.checkpoints.iterdir()
    return checkpoint.name, json.loads((checkpoint / "metadata.json").read_text())


def test_sigterm_writes_the_checkpoint_of_the_step_it_stops_at_and_the_resumed_run_ends_on_the_same_loss(
    one_rank, launch, dataset, tmp_path
):
    checkpoints = tmp_path / "checkpoints"
    stopped = launch(1, dataset, tmp_path / "stopped", checkpoints, *SHAPE, *NO_PERIODIC, VCPILOT_STEP_DELAY="0.4")
    wait_for_steps(stopped, 2)
    stopped.procs[0].send_signal(signal.SIGTERM)
    stopped.procs[0].send_signal(signal.SIGTERM)  # a second one (the kubelet, or a person, insisting) changes nothing
    assert stopped.wait(timeout=60) == [EXIT_STOPPED]
    done = len(stopped.metrics())
    assert 2 <= done < STEPS
    assert stopped.stderr().strip().splitlines()[-1] == (
        f"stopped on SIGTERM at step {done}; its checkpoint is written, and --resume auto continues from there"
    )
    name, metadata = stop_checkpoint(stopped)
    assert (name, metadata["step"], metadata["reason"]) == (f"step-{done}", done, "stop-signal")
    assert not (tmp_path / "stopped" / "summary.json").exists()

    resumed = launch(1, dataset, tmp_path / "resumed", checkpoints, *SHAPE, "--resume", "auto")
    assert resumed.wait() == [0], resumed.stderr()
    summary = resumed.summary()
    assert summary["resumed_from"] == str(checkpoints / f"step-{done}")
    assert summary["steps"] == STEPS and summary["steps_run"] == STEPS - done
    assert summary["final_loss"] == one_rank.summary()["final_loss"], "exactly, not approximately"
    assert losses(resumed) == losses(one_rank)[done:]


def test_sigterm_to_one_rank_stops_both_at_the_same_step_with_one_checkpoint_that_resumes_exactly(
    two_ranks, launch, dataset, tmp_path
):
    checkpoints = tmp_path / "checkpoints"
    stopped = launch(2, dataset, tmp_path / "stopped", checkpoints, *SHAPE, *NO_PERIODIC, VCPILOT_STEP_DELAY="0.4")
    wait_for_steps(stopped, 2)
    stopped.procs[1].send_signal(signal.SIGTERM)  # the worker's pod is evicted; the master's is not told yet
    assert stopped.wait(timeout=60) == [EXIT_STOPPED, EXIT_STOPPED]
    done = len(stopped.metrics())  # rank 0's record of the steps both ranks took
    assert 2 <= done < STEPS
    for rank in (0, 1):
        assert stopped.stderr(rank).strip().splitlines()[-1].startswith(f"stopped on SIGTERM at step {done};")
    name, metadata = stop_checkpoint(stopped)
    assert (name, metadata["step"], metadata["reason"], metadata["world_size"]) == (
        f"step-{done}",
        done,
        "stop-signal",
        2,
    )

    resumed = launch(2, dataset, tmp_path / "resumed", checkpoints, *SHAPE, "--resume", "auto")
    assert resumed.wait() == [0, 0], resumed.stderr()
    assert resumed.summary()["steps_run"] == STEPS - done
    assert resumed.summary()["final_loss"] == two_ranks.summary()["final_loss"], "exactly, not approximately"
    assert losses(resumed) == losses(two_ranks)[done:]


def test_a_pod_with_two_trainers_under_torchrun_stops_the_same_way(launch, dataset, tmp_path):
    """The kubelet signals the pod's main process, torchrun; its trainers stop, and the pod still exits 143."""
    args = (*SHAPE, *NO_PERIODIC)
    stopped = launch(
        1,
        dataset,
        tmp_path / "out",
        tmp_path / "checkpoints",
        *args,
        VCPILOT_STEP_DELAY="0.4",
        VCPILOT_GPUS_PER_POD="2",
    )
    wait_for_steps(stopped, 2)
    stopped.procs[0].send_signal(signal.SIGTERM)
    assert stopped.wait(timeout=60) == [EXIT_STOPPED]
    name, metadata = stop_checkpoint(stopped)
    assert (name, metadata["reason"], metadata["world_size"]) == (f"step-{len(stopped.metrics())}", "stop-signal", 2)
