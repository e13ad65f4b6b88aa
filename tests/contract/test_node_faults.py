"""The contract, faults: a node turned NotReady evicts its pods, and the diagnosis of that attempt avoids the node."""

from __future__ import annotations

import pytest
from contract_kit import FOREVER, KWOK_COMPLETE, Ctx, task

from agent.actions import RetryFromCheckpoint
from agent.observation import PlanRequest
from agent.observe import observe
from agent.policy_rules import RulePolicy
from components.volcano.builder import TrainingRequest, build_training_job

pytestmark = pytest.mark.integration

RESTART_ON_FAILURE = [{"event": "PodFailed", "action": "RestartJob"}, {"event": "PodEvicted", "action": "RestartJob"}]


def test_a_node_turned_not_ready_evicts_its_pods_and_the_job_restarts_elsewhere(ctx: Ctx):
    cluster = ctx.cluster
    cluster.submit(ctx.job("train", pods=2, gpus=2, runs=FOREVER, policies=RESTART_ON_FAILURE))
    first = cluster.wait("train", {"Running"}, timeout=20 * ctx.slow, namespace=ctx.ns)
    nodes = {p.node for p in first.pods}
    assert len(nodes) == 1, "binpack puts both 2-GPU pods on one node"
    bad = nodes.pop()

    assert sorted(ctx.fail_node(bad)) == ["train-main-0", "train-main-1"]
    again = ctx.restarted(
        "train",
        "the job runs again, restarted, off the failed node",
        lambda info: (
            info.phase == "Running"
            and info.retry_count >= 1  # Volcano may restart once per evicted pod: 1 or 2 here
            and len(info.pods) == 2
            and all(p.node and p.node != bad for p in info.pods)
        ),
    )
    assert {p.phase for p in again.pods} == {"Running"}
    node = next(n for n in cluster.nodes() if n.name == bad)
    assert (node.ready, node.gpu_allocatable, node.gpu_allocated) == (False, 0, 0)


def test_without_a_policy_evicted_pods_come_back_under_their_names_and_cost_no_retry(ctx: Ctx):
    """Eviction deletes a pod; Volcano's controller recreates what its job is missing, unless a policy acts."""
    cluster = ctx.cluster
    cluster.submit(ctx.job("steady", pods=2, gpus=2, runs=FOREVER))
    first = cluster.wait("steady", {"Running"}, timeout=20 * ctx.slow, namespace=ctx.ns)
    bad = first.pods[0].node
    assert {p.node for p in first.pods} == {bad}

    ctx.fail_node(bad)
    back = ctx.eventually(
        "both pods run again off the failed node",
        lambda: (
            (info := cluster.get("steady", ctx.ns)).phase == "Running"
            and [(p.name, p.phase) for p in info.pods] == [("steady-main-0", "Running"), ("steady-main-1", "Running")]
            and all(p.node != bad for p in info.pods)
            and info
        ),
        timeout=30,
    )
    assert back.retry_count == 0


def test_an_attempt_ended_by_a_failed_node_is_diagnosed_and_retried_away_from_it(ctx: Ctx):
    """The finetune loop's contract with the cluster: attempt → node fault → the agent's diagnosis → retry off it."""
    cluster = ctx.cluster

    def attempt(n: int, avoid: list[str]) -> dict:
        request = TrainingRequest(
            name=f"attempt-{n}",
            namespace=ctx.ns,
            image="busybox",
            command=["sh", "-c", "sleep 86400"],
            total_gpus=2,
            micro_batch=1,
            grad_accum=1,
            global_batch=2,
            cpu_per_pod="1",
            memory_per_pod="1Gi",
            avoid_nodes=avoid,
            max_retry=1,  # as pipelines.vcjobs: the first fault ends the attempt, diagnose decides
        )
        manifest = build_training_job(request).to_dict()
        for spec in manifest["spec"]["tasks"]:  # kwok runs the pods until deleted, as `sleep` does locally
            spec["template"]["metadata"]["annotations"] = {f"{KWOK_COMPLETE}/delay": "86400s"}
        return manifest

    cluster.submit(attempt(1, []))
    running = cluster.wait("attempt-1", {"Running"}, timeout=20 * ctx.slow, namespace=ctx.ns)
    bad = running.pods[0].node
    assert {p.node for p in running.pods} == {bad}, "binpack keeps the two 1-GPU pods together"

    ctx.fail_node(bad)
    failed = cluster.wait("attempt-1", timeout=30 * ctx.slow, namespace=ctx.ns)
    assert (failed.phase, failed.retry_count) == ("Failed", 1)
    # The evicted pods are gone; the events that tell of them may land a moment after the job reads Failed, so the
    # diagnosis settles first, as pipelines.steps_training does.
    request = PlanRequest(gpus=2, global_batch=2, micro_batch=1, namespace=ctx.ns, attempt=1, max_attempts=3)
    observation = observe(cluster, request, job_name="attempt-1", settle_s=30 * ctx.slow)
    story = [(e.object, e.reason, e.message) for e in cluster.events("attempt-1", ctx.ns)]
    assert observation.job is not None and not observation.notes, (observation.notes, story)
    evicted = [p for p in observation.job.pods if p.reason == "Evicted"]
    assert evicted and {p.node for p in evicted} == {bad}, observation.job.pods

    recovery = RulePolicy().diagnose(observation)
    assert isinstance(recovery, RetryFromCheckpoint), recovery.rationale
    assert recovery.avoid_nodes == [bad], recovery.rationale

    cluster.recover_node(bad)  # even back in service, the node the attempt failed on is avoided
    ctx.eventually(f"{bad} is Ready again", lambda: next(n for n in cluster.nodes() if n.name == bad).ready)
    cluster.submit(attempt(2, recovery.avoid_nodes))
    second = cluster.wait("attempt-2", {"Running"}, timeout=20 * ctx.slow, namespace=ctx.ns)
    assert second.pods and all(p.node and p.node != bad for p in second.pods)


def test_a_killed_pod_fails_with_exit_code_137_and_restarts_the_job(ctx: Ctx):
    cluster = ctx.cluster
    cluster.submit(ctx.job("victim", tasks=[task("main", 2, runs=FOREVER)], policies=RESTART_ON_FAILURE))
    cluster.wait("victim", {"Running"}, timeout=20 * ctx.slow, namespace=ctx.ns)
    cluster.kill_pod("victim-main-1", ctx.ns)
    again = ctx.restarted(
        "victim", "the job restarted once and runs again", lambda i: i.retry_count == 1 and i.phase == "Running"
    )
    assert len(again.pods) == 2
