"""The tracking spool against a real sqlite store: in order, once, whatever the replays, torn lines or rivals.

MLflow's own store decides what "once" means for metrics, so the first test pins the behaviour the spool relies on.
"""

from __future__ import annotations

import io
import json

import pytest

from components.tracking.adapter import KEY_TAG, PARENT_TAG, WORKFLOW_TAG, client
from components.tracking.recorder import Recorder
from components.tracking.replay import replay, replay_all
from components.tracking.runs import WorkflowRun, start_parent, workflow_run
from components.tracking.spool import Spool
from components.tracking.steps import StepLog, log_step_run, start_step_run

EXPERIMENT = "spool"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    """One real sqlite store for the module: creating its tables takes seconds."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


def runs_of(store: str, filter_string: str):
    mlflow = client(store)
    experiment = mlflow.get_experiment_by_name(EXPERIMENT).experiment_id
    return mlflow.search_runs([experiment], filter_string=filter_string)


def spool_a_training(recorder: Recorder, run: WorkflowRun, steps: int = 3) -> str:
    key = start_step_run(recorder, EXPERIMENT, run, "finetune", attempt=1, job="wf-train-1")
    recorder.log_params(key, {"global_batch": 8})
    for step in range(1, steps + 1):
        recorder.log_metrics(key, {"loss": 1.0 / step, "lr": 0.1}, step)
    recorder.set_tags(key, {"outcome": "done"})
    recorder.end_run(key, "FINISHED")
    return key


def test_mlflows_sql_store_keeps_an_identical_metric_row_once(store):
    """What makes a replay of metrics harmless: same (key, value, timestamp, step) → one row; a new time → two."""
    from mlflow.entities import Metric

    mlflow = client(store)
    experiment = mlflow.get_experiment_by_name(EXPERIMENT) or mlflow.get_experiment(
        mlflow.create_experiment(EXPERIMENT)
    )
    run_id = mlflow.create_run(experiment.experiment_id).info.run_id
    for _ in range(3):
        mlflow.log_batch(run_id, metrics=[Metric("loss", 0.5, 1_000, 1)])
    assert len(mlflow.get_metric_history(run_id, "loss")) == 1
    mlflow.log_batch(run_id, metrics=[Metric("loss", 0.5, 2_000, 1)])
    assert len(mlflow.get_metric_history(run_id, "loss")) == 2


def test_a_spool_is_sent_in_order_once_and_replaying_again_sends_nothing(store, tmp_path):
    run = WorkflowRun(name="wf-once", uid="uid-once", trigger="local")
    recorder = Recorder(Spool(tmp_path / "finetune-1.jsonl"), store, flush_every_s=None)
    key = spool_a_training(recorder, run)
    first = replay(recorder.spool, store)
    assert (first.sent, first.pending, first.skipped) == (8, 0, 0)
    assert replay(recorder.spool, store).sent == 0, "the cursor says all was sent"
    # A replayer that died after MLflow took the lines but before it saved the cursor: everything goes again.
    recorder.spool.cursor_path.unlink()
    assert replay(recorder.spool, store).sent == 8
    (parent,) = runs_of(store, f"tags.`{KEY_TAG}` = 'uid-once'")
    (child,) = runs_of(store, f"tags.`{KEY_TAG}` = '{key}'")
    assert parent.data.tags[WORKFLOW_TAG] == "wf-once" and parent.data.tags["vcpilot.trigger"] == "local"
    assert child.data.tags[PARENT_TAG] == parent.info.run_id
    assert child.data.tags["vcpilot.attempt"] == "1" and child.data.tags["vcpilot.vcjob"] == "wf-train-1"
    assert child.info.status == "FINISHED" and child.data.params == {"global_batch": "8"}
    history = client(store).get_metric_history(child.info.run_id, "loss")
    assert sorted(m.step for m in history) == [1, 2, 3], "each step exactly once"


def test_a_torn_last_line_waits_and_the_next_writer_ends_it_as_one_skipped_line(store, tmp_path):
    run = WorkflowRun(name="wf-torn", uid="uid-torn")
    spool = Spool(tmp_path / "detect-1.jsonl")
    recorder = Recorder(spool, store, flush_every_s=None)
    key = start_step_run(recorder, EXPERIMENT, run, "detect-logs")
    recorder.log_metrics(key, {"lines": 1.0}, 1)
    with spool.path.open("ab") as file:  # a writer killed in the middle of its line
        file.write(b'{"op":"metrics","key":"' + key.encode())
    result = replay(spool, store)
    assert (result.sent, result.pending, result.skipped) == (3, 0, 0), "the torn line is not a line yet"
    recorder.log_metrics(key, {"lines": 2.0}, 2)  # the restarted pod goes on writing
    result = replay(spool, store)
    assert (result.sent, result.skipped) == (1, 1)
    (child,) = runs_of(store, f"tags.`{KEY_TAG}` = '{key}'")
    assert sorted(m.step for m in client(store).get_metric_history(child.info.run_id, "lines")) == [1, 2]


def test_two_replayers_never_send_one_spool_at_once(store, tmp_path):
    spool = Spool(tmp_path / "evaluate-1.jsonl")
    recorder = Recorder(spool, store, flush_every_s=None)
    start_parent(recorder, EXPERIMENT, WorkflowRun(name="wf-lock", uid="uid-lock"))
    with spool.locked():
        busy = replay(spool, store, wait_s=0.2)
    assert (busy.sent, busy.pending) == (0, 1) and "another process" in busy.reason
    assert replay(spool, store).sent == 1


def test_a_record_mlflow_refuses_for_good_is_skipped_not_retried_for_ever(store, tmp_path):
    recorder = Recorder(Spool(tmp_path / "finetune-2.jsonl"), store, flush_every_s=None)
    key = start_step_run(recorder, EXPERIMENT, WorkflowRun(name="wf-refused", uid="uid-refused"), "finetune")
    recorder.log_params(key, {"resumed_from": ""})
    recorder.log_params(key, {"resumed_from": "step-4"})  # a pod restarted within the attempt: MLflow refuses
    recorder.log_metrics(key, {"loss": 0.25}, 5)
    result = replay(recorder.spool, store)
    assert (result.sent, result.pending, result.skipped) == (4, 0, 1)


def test_a_retried_step_and_a_resumed_workflow_record_under_one_parent(store, tmp_path):
    env = {
        "MLFLOW_TRACKING_URI": store,
        "MLFLOW_EXPERIMENT_NAME": EXPERIMENT,
        "VCPILOT_WORKFLOW": "wf-retried",
        "VCPILOT_WORKFLOW_UID": "uid-retried",
        "VCPILOT_TRACKING_SPOOL": str(tmp_path),
    }
    # A decision record made with the name only (the agent's) comes first: the keyed records adopt its parent.
    named = workflow_run(store, EXPERIMENT, "wf-retried")
    warnings = io.StringIO()
    first = log_step_run(StepLog(step="evaluate", metrics={"score": 0.5}), env, warn=warnings)
    again = log_step_run(StepLog(step="evaluate", metrics={"score": 0.5}), env, warn=warnings)
    second_attempt = log_step_run(StepLog(step="evaluate"), {**env, "VCPILOT_ATTEMPT": "2"}, warn=warnings)
    assert warnings.getvalue() == ""
    assert first == again != second_attempt, "one run per step and attempt, found again by its key"
    (parent,) = runs_of(store, f"tags.`{WORKFLOW_TAG}` = 'wf-retried'")
    assert parent.info.run_id == named == workflow_run(store, EXPERIMENT, "wf-retried", uid="uid-retried")
    assert parent.data.tags[KEY_TAG] == "uid-retried"
    children = runs_of(store, f"tags.`{PARENT_TAG}` = '{named}'")
    assert sorted(child.data.tags[KEY_TAG] for child in children) == [
        "uid-retried/evaluate/1",
        "uid-retried/evaluate/2",
    ]


def test_the_exit_handlers_sweep_sends_every_spool_of_the_run(store, tmp_path):
    down = "http://127.0.0.1:9"
    run = WorkflowRun(name="wf-sweep", uid="uid-sweep")
    for step in ("detect-logs", "loadtest"):
        recorder = Recorder(Spool(tmp_path / f"{step}-1.jsonl"), down, flush_every_s=None)
        key = start_step_run(recorder, EXPERIMENT, run, step)
        recorder.log_metrics(key, {"errors": 0.0})
        recorder.end_run(key)
    swept = replay_all(tmp_path, store)
    assert (swept.sent, swept.pending) == (8, 0)
    assert replay_all(tmp_path, store).sent == 0
    assert len(runs_of(store, "tags.`vcpilot.key` LIKE 'uid-sweep%'")) == 3
    lines = (tmp_path / "loadtest-1.jsonl").read_text().splitlines()
    assert [json.loads(line)["op"] for line in lines] == ["run", "run", "metrics", "end"]
