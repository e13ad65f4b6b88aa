"""The finetune loop on real Volcano: the agent plans, the VCJob fails, the agent diagnoses and retries or aborts.

This is what `train-with-recovery` does step by step (plan → train → diagnose → recurse | give-up), driven here
directly: the agent's observe + rule policy decide, KubeCluster submits and waits, kwok's chaos labels fail a
node or make every rank exit 1.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent import observe as observe_module
from agent import policy_rules
from agent.actions import Abort, Proceed, RetryFromCheckpoint
from agent.failures import attempt_record
from agent.observation import PlanRequest
from components.volcano.builder import TrainingRequest, build_training_job
from pipelines.steps_training import DIAGNOSE_SETTLE_S

pytestmark = pytest.mark.e2e


KWOK_COMPLETE = "pod-complete.stage.kwok.x-k8s.io"
KWOK_FAILED = "pod-failed.stage.kwok.x-k8s.io"


def training_job(action: Any, name: str, namespace: str, *, runs: str, exit_code: int = 0) -> dict[str, Any]:
    """The attempt's VCJob as the pipeline builds it, with kwok playing the trainer: run `runs`, then exit."""
    request = TrainingRequest(
        name=name,
        namespace=namespace,
        image="ghcr.io/vcpilot/vcpilot:0.1.0",
        command=["python", "-m", "components.finetune"],
        total_gpus=action.gpus,
        gpus_per_pod=1,
        micro_batch=action.micro_batch,
        grad_accum=action.grad_accum,
        global_batch=action.global_batch,
        queue=action.queue,
        avoid_nodes=list(getattr(action, "avoid_nodes", [])),
        cpu_per_pod="1",
        memory_per_pod="1Gi",
        max_retry=1,  # as pipelines.vcjobs: the first fault ends the attempt and diagnose decides
    )
    manifest = build_training_job(request).to_dict()
    for task in manifest["spec"]["tasks"]:
        meta = task["template"]["metadata"]
        meta["annotations"] = {f"{KWOK_COMPLETE}/delay": runs}
        if exit_code:
            meta["labels"][KWOK_FAILED] = "true"
            meta["annotations"].update({f"{KWOK_FAILED}/delay": runs, f"{KWOK_FAILED}/exit-code": str(exit_code)})
    return manifest


def test_a_node_fault_is_retried_off_the_failed_node(cluster, namespace):
    policy = policy_rules.RulePolicy()
    request = PlanRequest(gpus=2, gpus_min=1, global_batch=8, micro_batch=2, namespace=namespace, max_attempts=3)

    plan = policy.plan(observe_module.observe(cluster, request))
    assert isinstance(plan, Proceed) and plan.gpus == 2, plan.rationale
    cluster.submit(training_job(plan, "ft-1", namespace, runs="86400s"))
    running = cluster.wait("ft-1", {"Running"}, timeout=60, namespace=namespace)
    bad = running.pods[0].node
    assert bad and {p.node for p in running.pods} == {bad}, "binpack keeps the two ranks on one node"

    cluster.fail_node(bad)
    failed = cluster.wait("ft-1", timeout=120, namespace=namespace)
    assert failed.phase == "Failed"

    # As the pipeline's diagnose step: the job may read Failed before the eviction events that say why are written.
    observation = observe_module.observe(cluster, request, job_name="ft-1", settle_s=DIAGNOSE_SETTLE_S)
    retry = policy.diagnose(observation)
    assert isinstance(retry, RetryFromCheckpoint), retry.rationale
    assert retry.avoid_nodes == [bad] and retry.gpus == 2, retry.rationale
    assert bad in retry.rationale

    cluster.submit(training_job(retry, "ft-2", namespace, runs="2s"))
    done = cluster.wait("ft-2", timeout=120, namespace=namespace)
    assert done.phase == "Completed"
    assert done.pods and all(p.node and p.node != bad for p in done.pods)


def test_a_bug_is_retried_once_then_aborted(cluster, namespace):
    policy = policy_rules.RulePolicy()
    request = PlanRequest(gpus=2, gpus_min=2, global_batch=4, micro_batch=2, namespace=namespace, max_attempts=3)
    plan = policy.plan(observe_module.observe(cluster, request))
    assert isinstance(plan, Proceed), plan.rationale

    history = []
    decisions = []
    for attempt in (1, 2):
        name = f"bug-{attempt}"
        cluster.submit(training_job(plan, name, namespace, runs="1s", exit_code=1))
        assert cluster.wait(name, timeout=120, namespace=namespace).phase == "Failed"
        asked = request.model_copy(update={"attempt": attempt})
        observation = observe_module.observe(cluster, asked, job_name=name, history=history, settle_s=DIAGNOSE_SETTLE_S)
        failed = [p for p in observation.job.pods if p.phase == "Failed"]
        assert failed and {p.exit_code for p in failed} == {1}, observation.job.pods
        decisions.append(policy.diagnose(observation))
        history.append(attempt_record(observation))

    assert isinstance(decisions[0], RetryFromCheckpoint), decisions[0].rationale
    assert isinstance(decisions[1], Abort), decisions[1].rationale
    assert "exactly as attempt 1" in decisions[1].reason
