"""The finetune recursion's start deadline on a LocalCluster: a gang that cannot start is deleted and re-planned.

What a user would see when the cluster is full: plan submits, start-deadline deletes the still-pending VCJob
(nothing ran), diagnose answers `replan` without counting a failure, and the next plan's decision says why; after
`RulesConfig.max_replans` re-plans the attempt waits as long as its gang takes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from vcjob_factory import vcjob

from agent.policy_rules import RulesConfig
from agent.records import read_decision
from components.volcano.cluster import JobNotFound
from components.volcano.cluster_local import LocalCluster
from components.volcano.localconfig import LocalClusterConfig
from pipelines import steps_training

GPU = "nvidia.com/gpu"
RUN = {"image": "ghcr.io/vcpilot/vcpilot:0.1.0", "gpus": 4, "gpus_min": 4, "global_batch": 16, "micro_batch": 4}


@pytest.fixture
def full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalCluster]:
    """One node of 4 GPUs, all held by another tenant's job; the run's queue `gpu-a` can hold only 2 of them.

    The steps find the cluster through VCPILOT_HOME.
    """
    home = tmp_path / "home"
    queues = [{"name": "gpu-a", "capability": {GPU: 2}}, {"name": "spare"}]
    config = {"nodes": [{"name": "node", "count": 1, "gpus": 4}], "queues": queues}
    cluster = LocalCluster(home, LocalClusterConfig.model_validate(config))
    monkeypatch.setenv("VCPILOT_HOME", str(home))
    cluster.submit(vcjob("tenant", "sleep 60", pods=1, gpus=4, queue="default"))
    cluster.wait("tenant", ["Running"], timeout=20)
    yield cluster
    for job in cluster.list_jobs():
        cluster.delete(job.name, job.namespace, missing_ok=True)
    cluster.close()


def values(workspace: Path, **changes: Any) -> dict[str, Any]:
    return {
        "workflow_name": "wf",
        "workspace": str(workspace),
        "queue": "gpu-a",
        "fallback_queue": "spare",
        "train_max_steps": 50,
        **RUN,
        **changes,
    }


def plan(workspace: Path, **changes: Any) -> steps_training.TrainingPlan:
    inputs = steps_training.TrainingPlanInput(**values(workspace, base_model="tiny", checkpoint_every=5, **changes))
    return steps_training.plan_training(inputs)


def watch(job_name: str, deadline_s: float) -> steps_training.StartDeadline:
    inputs = steps_training.StartDeadlineInput(job_name=job_name, queue="spare", start_deadline_s=deadline_s)
    verdict = steps_training.start_deadline(inputs)
    # Whatever the watch saw is its result too, which the run's tree shows (it printed `null` when not expired).
    assert verdict.result == verdict.reason
    return verdict


def test_a_gang_still_pending_at_its_deadline_is_deleted_and_planned_again(tmp_path: Path, full) -> None:
    workspace = tmp_path / "ws"
    first = plan(workspace)
    assert (first.action, first.gpus, first.queue) == ("proceed", 4, "spare")
    record = read_decision(workspace / "runs" / "wf" / "decisions" / "plan-1.json")
    (chosen,) = [c for c in record.action.candidates if (c.gpus, c.queue) == (4, "spare")]
    # The plan knew it would wait: the deadline is a multiple of its own estimate (or the floor).
    config = RulesConfig()
    assert chosen.wait_s > 0
    assert first.start_deadline_s == max(config.start_deadline_min_s, config.start_deadline_factor * chosen.wait_s)

    full.submit(json.loads(first.manifest))  # what the train step does
    verdict = watch(first.job_name, 0.3)
    assert verdict.outcome == "expired"
    assert verdict.reason == "pending 0.0 min in queue spare, re-planned"
    with pytest.raises(JobNotFound):
        full.get(first.job_name)  # deleted: the train step fails, diagnose reads the verdict
    assert full.get("tenant").phase == "Running"  # nobody else's job is touched
    # A gang in the run's own queue keeps its place in line: it gets no deadline.
    own = plan(workspace, workflow_name="own", queue="spare", fallback_queue="")
    assert (own.queue, own.start_deadline_s) == ("spare", 0)

    diagnosis = steps_training.diagnose(
        steps_training.DiagnoseInput(
            **values(workspace, job_name=first.job_name, start_outcome=verdict.outcome, start_reason=verdict.reason)
        )
    )
    assert (diagnosis.action, diagnosis.next_attempt, diagnosis.replans) == ("replan", 2, 1)
    assert diagnosis.replan_reason == verdict.reason
    # Not a failure: no diagnose decision is recorded, and the retry budget grows by the re-plan.
    assert not list((workspace / "runs" / "wf" / "decisions").glob("diagnose-*.json"))

    again = plan(workspace, attempt=2, replans=1, replan_reason=diagnosis.replan_reason)
    assert again.job_name == "wf-train-2"
    replanned = read_decision(workspace / "runs" / "wf" / "decisions" / "plan-2.json")
    assert replanned.action.rationale.startswith("pending 0.0 min in queue spare, re-planned; waited 0 s")
    assert replanned.observation.request.max_attempts == 3 + 1
    # The policy knows a gang of this run missed its deadline; it borrows spare again only because gpu-a (2 GPUs)
    # can never hold the 4 the run needs (test_policy_rules: otherwise only where the gang starts now).
    assert replanned.observation.request.replans == 1 and again.queue == "spare"
    # Bounded: after max_replans (1) the attempt has no deadline and start-deadline does not watch it.
    assert RulesConfig().max_replans == 1 and again.start_deadline_s == 0
    assert watch(again.job_name, again.start_deadline_s).outcome == "unwatched"


def test_a_gang_that_starts_before_its_deadline_is_left_to_train(full) -> None:
    full.submit(vcjob("wf-train-1", "sleep 30", pods=2, gpus=1, queue="spare"))
    full.delete("tenant")  # the GPUs free: the gang starts
    verdict = watch("wf-train-1", 20.0)
    assert verdict.outcome == "started"
    assert full.get("wf-train-1").phase == "Running"
