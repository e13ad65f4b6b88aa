"""The agent and MLflow: decisions become child runs of the workflow's run; measured speed is read back from it.

MLflow is a view: when it is down the workspace record is still written and the planner falls back to its prior.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest

from agent.observation import Observation, PlanRequest, Throughput
from agent.observe import measured_throughput
from agent.policy_rules import RulePolicy
from agent.records import write_decision
from components.volcano.cluster import NodeInfo

pytestmark = pytest.mark.integration

UNREACHABLE = "http://127.0.0.1:9"  # nothing listens on the discard port


@pytest.fixture(scope="module")
def tracking(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


def decision():
    nodes = [NodeInfo(name="node-0", ready=True, gpu_capacity=4, gpu_allocatable=4, gpu_allocated=2)]
    observation = Observation(time=1.0, request=PlanRequest(gpus=4, global_batch=16, micro_batch=4), nodes=nodes)
    return RulePolicy().decide(observation, "plan")


def test_a_decision_is_a_child_run_of_the_workflows_run_with_its_rationale_and_record(
    tracking: str, tmp_path: Path
) -> None:
    from mlflow.tracking import MlflowClient

    from components.tracking.runs import workflow_run

    chosen = decision()
    write_decision(
        chosen, tmp_path, workflow="wf-records", tracking_uri=tracking, experiment="llm-autopilot", spool_dir=tmp_path
    )
    client = MlflowClient(tracking)
    parent = workflow_run(tracking, "llm-autopilot", "wf-records")
    experiment = client.get_experiment_by_name("llm-autopilot").experiment_id
    (child,) = client.search_runs([experiment], filter_string=f"tags.`mlflow.parentRunId` = '{parent}'")
    assert child.info.run_name == "plan-1" and child.info.status == "FINISHED"
    assert "vcpilot.workflow" not in child.data.tags  # that tag marks the parent, which steps find by it
    assert child.data.tags["vcpilot.rationale"] == chosen.action.rationale
    assert child.data.params == {
        "stage": "plan",
        "policy": "rules",
        "action": "downscale",
        "attempt": "1",
        "gpus": "2",
        "micro_batch": "4",
        "grad_accum": "2",
        "queue": "default",
        "from_gpus": "4",
    }
    artifact = client.download_artifacts(child.info.run_id, "decision.json", str(tmp_path / "download"))
    assert json.loads(Path(artifact).read_text()) == chosen.model_dump(mode="json")


def test_with_mlflow_down_the_record_is_still_written_one_line_warns_and_the_spool_sends_it_later_once(
    tracking: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from mlflow.tracking import MlflowClient

    from components.tracking.replay import replay
    from components.tracking.runs import workflow_run
    from components.tracking.spool import Spool

    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="agent.records"):
        path = write_decision(decision(), tmp_path, workflow="wf-late", tracking_uri=UNREACHABLE, spool_dir=tmp_path)
    assert time.monotonic() - started < 30
    assert path.is_file()
    (warning,) = caplog.messages
    spool = Spool(tmp_path / "decision-plan-1.jsonl")
    assert warning.startswith("decision not logged to MLflow yet (") and "\n" not in warning
    assert f"it is in {path}" in warning and warning.endswith(f"wait in {spool.path}")

    # The server answers again: the sweep sends the decision's run, record and trace; a second sweep adds nothing.
    assert replay(spool, tracking).pending == 0
    assert replay(spool, tracking).sent == 0
    client = MlflowClient(tracking)
    parent = workflow_run(tracking, "llm-autopilot", "wf-late")
    experiment = client.get_experiment_by_name("llm-autopilot").experiment_id
    (child,) = client.search_runs([experiment], filter_string=f"tags.`mlflow.parentRunId` = '{parent}'")
    assert child.info.run_name == "plan-1" and child.info.status == "FINISHED"
    (trace,) = client.search_traces(locations=[experiment], run_id=child.info.run_id)
    assert trace.info.tags["vcpilot.decision"] == decision().action.kind
    spool.save_cursor(spool.cursor().model_copy(update={"offset": 0}))  # as if the cursor were lost in a crash
    assert replay(spool, tracking).pending == 0
    assert len(client.search_traces(locations=[experiment], run_id=child.info.run_id)) == 1
    assert len(client.search_runs([experiment], filter_string=f"tags.`mlflow.parentRunId` = '{parent}'")) == 1


def test_measured_throughput_reads_what_finetune_logs(
    tracking: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The contract with components.finetune: its MLflow sink's params and step times give samples per second,
    its checkpoints the stall and the write beside training (the medians)."""
    from components.finetune.tracking import open_sink

    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking)  # as in a training pod
    env = {"MLFLOW_TRACKING_URI": tracking, "VCPILOT_WORKFLOW": "wf-speed", "VCPILOT_TRACKING_SPOOL": str(tmp_path)}
    sink = open_sink(env, is_main=True)
    sink.log_params({"global_batch": 32, "world_size": 4, "micro_batch": 4, "grad_accum": 2})
    for step, seconds in enumerate([9.0, 2.0, 2.0, 2.0], start=1):  # the first step warms up and is left out
        sink.log_metrics(step, {"step_time_s": seconds, "loss": 1.0})
        if step % 2 == 0:  # a checkpoint every 2 steps, as the trainer logs its stall and its write
            sink.log_metrics(step, {"checkpoint_save_s": 1.5 * step, "checkpoint_write_s": 10.0 * step})
    sink.finish(succeeded=False)
    measured = measured_throughput(tracking, "llm-autopilot", "wf-speed")
    assert measured == Throughput(
        samples_per_s=16.0, gpus=4, source="mlflow", checkpoint_save_s=4.5, checkpoint_write_s=30.0
    )
    assert measured_throughput(tracking, "llm-autopilot", "another-run") is None


def test_measured_throughput_is_none_without_tracking_or_when_mlflow_is_unreachable() -> None:
    assert measured_throughput("", "llm-autopilot", "wf") is None
    started = time.monotonic()
    assert measured_throughput(UNREACHABLE, "llm-autopilot", "wf") is None
    assert time.monotonic() - started < 30
