"""Decision records: written whole, read back equal, replayed to the same decision, and the recursion's memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.observation import CheckpointInfo, Observation, PlanRequest
from agent.policy_rules import RulePolicy
from agent.records import decisions_dir, read_decision, read_history, replay, write_decision
from components.volcano.cluster import JobInfo, NodeInfo, PodInfo, QueueSnapshot

POLICY = RulePolicy()
NODES = [NodeInfo(name=f"node-{i}", ready=True, gpu_capacity=4, gpu_allocatable=4, gpu_allocated=2) for i in range(2)]


def crashed(attempt: int, code: int = 3) -> Observation:
    pods = [
        PodInfo(name=f"wf-train-{attempt}-master-0", task="master", index=0, node="node-0", phase="Failed",
                reason="Error", exit_code=code),
        PodInfo(name=f"wf-train-{attempt}-worker-0", task="worker", index=0, node="node-1", phase="Failed",
                reason="Terminated", exit_code=137),
    ]  # fmt: skip
    job = JobInfo(name=f"wf-train-{attempt}", uid="u", queue="default", phase="Failed", min_available=2, pods=pods)
    request = PlanRequest(gpus=2, global_batch=8, micro_batch=4, attempt=attempt)
    return Observation(time=float(attempt), request=request, job=job, nodes=NODES)


def test_a_decision_is_written_whole_and_read_back_equal(tmp_path: Path) -> None:
    crowded = QueueSnapshot(name="default", state="Open", pending=1, pending_gpus=4)
    observation = Observation(
        time=7.0,
        request=PlanRequest(gpus=8, global_batch=32, micro_batch=4, max_steps=100),
        queue=crowded,
        nodes=NODES * 2,
        checkpoint=CheckpointInfo(path="/c/step-10", step=10),
    )
    decision = POLICY.decide(observation, "plan")
    directory = decisions_dir(str(tmp_path), "wf")
    path = write_decision(decision, directory, tracking_uri="")
    assert path == tmp_path / "runs" / "wf" / "decisions" / "plan-1.json"
    assert [p.name for p in directory.iterdir()] == ["plan-1.json"]  # no temporary file left behind
    assert read_decision(path) == decision
    assert json.loads(path.read_text())["action"]["rationale"] == decision.action.rationale


def test_replaying_a_recorded_observation_gives_the_same_decision(tmp_path: Path) -> None:
    for stage, observation in (
        ("plan", Observation(time=1.0, request=PlanRequest(gpus=4, global_batch=16, micro_batch=4), nodes=NODES)),
        ("diagnose", crashed(1)),
    ):
        recorded = POLICY.decide(observation, stage)  # type: ignore[arg-type]
        path = write_decision(recorded, tmp_path, tracking_uri="")
        assert replay(path, POLICY) == recorded


def test_the_history_of_a_run_is_rebuilt_from_its_diagnose_records(tmp_path: Path) -> None:
    for attempt in (2, 1):
        write_decision(POLICY.decide(crashed(attempt), "diagnose"), tmp_path, tracking_uri="")
    write_decision(POLICY.decide(crashed(1), "plan"), tmp_path, tracking_uri="")  # plan records are not attempts
    (tmp_path / "diagnose-9.json").write_text("{not json")
    history = read_history(tmp_path)
    assert [(h.attempt, h.job, h.exit_codes, h.failed_ranks, h.ranks) for h in history] == [
        (1, "wf-train-1", [3], 1, 2),
        (2, "wf-train-2", [3], 1, 2),
    ]
    assert read_history(tmp_path / "absent") == []


def test_the_second_identical_crash_read_back_from_the_records_aborts(tmp_path: Path) -> None:
    write_decision(POLICY.decide(crashed(1), "diagnose"), tmp_path, tracking_uri="")
    second = crashed(2).model_copy(update={"history": read_history(tmp_path)})
    action = POLICY.decide(second, "diagnose").action
    assert action.kind == "abort" and "exactly as attempt 1 did" in action.reason


def test_a_file_that_is_not_a_record_is_one_sentence(tmp_path: Path) -> None:
    bad = tmp_path / "plan-1.json"
    bad.write_text('{"stage": "plan"}')
    with pytest.raises(ValueError, match=r"^.*plan-1.json is not a decision record: policy: field is required$"):
        read_decision(bad)
    with pytest.raises(ValueError, match="^cannot read decision record"):
        read_decision(tmp_path / "none.json")
