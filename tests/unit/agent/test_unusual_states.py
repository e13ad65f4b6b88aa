"""Unusual but legal cluster states: what the rule policy and `explain_pending` say must be true and actionable.

The states a sweep of odd clusters found the agent wrong about: every node NotReady or tainted, nodes too small
for one pod (3, 5 or 7 GPUs for pods of 4 or 8), a queue capped by other queues' guarantees or by its parent, a
queue or PriorityClass the cluster does not have. An abort names what stops the run and only changes that would
let it train; a plan never sends a job where it can never start; an explanation never calls a gang that can never
start merely spread out, nor a queue with no room free.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from vcjob_factory import vcjob, vcjob_task

from agent.actions import Abort, Proceed, RetryFromCheckpoint
from agent.observation import Observation, PlanRequest
from agent.observe import observe
from agent.pending import explain
from agent.policy_llm import check_answer
from agent.policy_rules import RulePolicy
from agent.tools import ToolContext, call_tool
from components.volcano.cluster import JobInfo, NodeInfo, PodInfo, QueueLimit, QueueSnapshot
from components.volcano.cluster_local import LocalCluster
from components.volcano.localconfig import LocalClusterConfig
from components.volcano.models import parse_job

GPU = "nvidia.com/gpu"
POLICY = RulePolicy()


def request(**changes: Any) -> PlanRequest:
    values: dict[str, Any] = {"gpus": 8, "gpus_per_pod": 4, "global_batch": 32, "micro_batch": 4, "queue": "gpu-a"}
    return PlanRequest(**{"max_steps": 200, **values, **changes})


def node(name: str, gpus: int = 4, **fields: Any) -> NodeInfo:
    return NodeInfo(name=name, ready=True, gpu_capacity=gpus, gpu_allocatable=gpus, gpu_allocated=0, **fields)


def plan(nodes: list[NodeInfo], wanted: PlanRequest | None = None, **seen: Any) -> Any:
    return POLICY.plan(Observation(time=1000.0, request=wanted or request(), nodes=nodes, **seen))


# ---- an abort names what stops the run, and only fixes that would let it train ------------------------------


def test_every_node_out_names_them_and_asks_for_them_back_not_a_lower_gpus_min() -> None:
    down = NodeInfo(name="gpu-0", ready=False, gpu_capacity=4, gpu_allocatable=0, gpu_allocated=0)
    tainted = node("gpu-1", taints=[{"key": "dedicated", "value": "serving", "effect": "NoSchedule"}])
    action = plan([down, tainted])
    assert isinstance(action, Abort)
    assert action.reason.endswith(
        "the healthy nodes offer at most 0 GPUs in whole pods (left out: gpu-0 NotReady, "
        "gpu-1 taint dedicated=serving:NoSchedule)"
    )
    assert action.rationale.endswith("; bring back the nodes left out or add GPU nodes")
    assert "gpus-min" not in action.rationale and "queue" not in action.rationale


@pytest.mark.parametrize(("node_gpus", "per_pod"), [(3, 4), (5, 8), (7, 8)])
def test_nodes_smaller_than_one_pod_ask_for_smaller_pods(node_gpus: int, per_pod: int) -> None:
    # Three nodes hold 9 to 21 GPUs in all, yet not one pod of `per_pod`: no gpus-min and no queue helps.
    wanted = request(gpus=per_pod, gpus_per_pod=per_pod, global_batch=per_pod, micro_batch=1)
    action = plan([node(f"gpu-{i}", node_gpus) for i in range(3)], wanted)
    assert isinstance(action, Abort)
    assert action.rationale.endswith(
        f"; lower gpus-per-pod (no healthy node has {per_pod} GPUs; the most is {node_gpus})"
    )


def test_a_lower_gpus_min_is_named_only_with_a_size_that_would_run() -> None:
    wanted = request(gpus=64, gpus_min=16, global_batch=64, micro_batch=1)
    action = plan([node("gpu-0", 8)], wanted)
    assert isinstance(action, Abort)
    assert action.rationale.endswith("; lower gpus-min to 8, or add GPU nodes")


@pytest.mark.parametrize(
    ("queue", "fix"),
    [
        (QueueSnapshot(name="gpu-a", state="Closed"), "name a queue that takes jobs"),
        (QueueSnapshot(name="gpu-a", state="Open", capability={GPU: 2}), "raise queue gpu-a's capability"),
        (
            QueueSnapshot(name="gpu-a", state="Open", guaranteed_elsewhere={GPU: 100}),
            "lower the other queues' guarantees",
        ),
        (
            QueueSnapshot(name="gpu-a", state="Open", ancestors=[QueueLimit(name="team", capability={GPU: 0})]),
            "raise queue team's capability",
        ),
    ],
)
def test_a_queue_that_stops_every_size_is_named_with_what_would_lift_it(queue: QueueSnapshot, fix: str) -> None:
    action = plan([node("gpu-0"), node("gpu-1")], queue=queue)
    assert isinstance(action, Abort)
    assert action.rationale.endswith(f"; {fix}")
    assert "add capacity" not in action.rationale and "gpus-min" not in action.rationale


def test_a_retry_capped_by_other_queues_guarantees_says_so() -> None:
    capped = QueueSnapshot(name="gpu-a", state="Open", guaranteed_elsewhere={GPU: 8})
    killed = PodInfo(name="m-0", task="master", index=0, node="gpu-0", phase="Failed", reason="Killed")
    job = JobInfo(name="wf-train-1", uid="u", queue="gpu-a", phase="Failed", min_available=1, pods=[killed])
    obs = Observation(time=1000.0, request=request(), queue=capped, nodes=[node("gpu-0"), node("gpu-1")], job=job)
    action = POLICY.diagnose(obs)
    assert isinstance(action, Abort)
    assert action.rationale.endswith("; lower the other queues' guarantees and run again")


# ---- names the cluster does not have -----------------------------------------------------------------------


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalCluster]:
    """Two nodes × 4 GPUs, the queue `default`, the PriorityClass `high`."""
    config = LocalClusterConfig.model_validate(
        {"nodes": [{"name": "node", "count": 2, "gpus": 4}], "priorityClasses": {"high": 1000}}
    )
    cluster = LocalCluster(tmp_path / "home", config, hook=False)
    yield cluster
    cluster.close()


def test_a_queue_that_does_not_exist_is_never_planned_into(local: LocalCluster) -> None:
    # Volcano's admission refuses a job into a queue it does not have: the plan takes the fallback, or stops.
    observation = observe(local, request(queue="gone", fallback_queue="default"), now=1000.0)
    assert observation.missing_queues == ["gone"]
    action = POLICY.plan(observation)
    assert isinstance(action, Proceed) and action.queue == "default"
    assert action.rationale.startswith("queue gone does not exist on this cluster; 8 GPUs free on healthy nodes")
    with pytest.raises(ValueError, match="queue gone does not exist on this cluster"):
        check_answer(action.model_copy(update={"queue": "gone"}), observation, "plan")

    alone = POLICY.plan(observe(local, request(queue="gone"), now=1000.0))
    assert isinstance(alone, Abort) and alone.reason.endswith("can ever run: queue gone does not exist on this cluster")


def test_a_priority_class_that_does_not_exist_stops_the_run(local: LocalCluster) -> None:
    # The API server refuses every pod naming a PriorityClass it does not have: such a job never starts.
    observation = observe(local, request(queue="default", priority_class="urgent"), now=1000.0)
    assert observation.priority_classes == ["high"]
    action = POLICY.plan(observation)
    assert isinstance(action, Abort)
    assert action.reason == (
        "priority class 'urgent' does not exist on this cluster (its priority classes: high): the API server "
        "refuses every pod that names it"
    )
    proceed = Proceed(gpus=8, micro_batch=4, grad_accum=1, queue="default", priority_class="urgent", rationale="x")
    with pytest.raises(ValueError, match="priority class 'urgent' does not exist"):
        check_answer(proceed, observation, "plan")
    assert isinstance(POLICY.plan(observe(local, request(queue="default", priority_class="high"), now=1000.0)), Proceed)

    killed = PodInfo(name="m-0", task="master", index=0, node="node-0", phase="Failed", reason="Killed")
    job = JobInfo(name="wf-train-1", uid="u", queue="default", phase="Failed", min_available=1, pods=[killed])
    retry = POLICY.diagnose(observation.model_copy(update={"job": job}))
    assert isinstance(retry, Abort) and "priority class 'urgent' does not exist" in retry.reason
    # Unread (an old record, no RBAC to list them): the class is not called missing.
    unread = POLICY.diagnose(observation.model_copy(update={"job": job, "priority_classes": None}))
    assert isinstance(unread, RetryFromCheckpoint)


# ---- explain_pending ---------------------------------------------------------------------------------------


def pending(queue: str = "gpu-a") -> JobInfo:
    return JobInfo(name="ft", uid="u", queue=queue, phase="Pending", min_available=2)


def manifest(pods: int = 2, gpus: int = 4, **job: Any) -> Any:
    return parse_job(vcjob("ft", queue="gpu-a", tasks=[vcjob_task("main", pods, gpus=gpus)], **job))


@pytest.mark.parametrize(("node_gpus", "pods", "gpus"), [(3, 2, 4), (7, 1, 8), (5, 2, 8)])
def test_a_gang_whose_pods_fit_no_node_is_told_it_never_starts_not_that_it_is_spread(
    node_gpus: int, pods: int, gpus: int
) -> None:
    nodes = [node(f"n-{i}", node_gpus) for i in range(4)]
    why = explain(pending(), manifest(pods, gpus), nodes, QueueSnapshot(name="gpu-a", state="Open"))
    assert "spread over nodes" not in why.summary
    said = (
        f"the gang cannot start as asked: even with every GPU free, the nodes it may use (the largest has {node_gpus})"
    )
    assert said in why.summary
    assert "ask for fewer GPUs per pod or bring nodes back" in why.summary


def test_a_gang_spread_by_other_pods_is_told_so() -> None:
    # 2 of each node's 4 GPUs are taken: 4 free in all, no node with 4 free; the pods fit once those jobs end.
    nodes = [NodeInfo(name=f"n-{i}", ready=True, gpu_capacity=4, gpu_allocatable=4, gpu_allocated=2) for i in (0, 1)]
    why = explain(pending(), manifest(1, 4), nodes, QueueSnapshot(name="gpu-a", state="Open"))
    assert "4 GPUs are free but spread over nodes so that its pod (4 GPUs) fits on no node" in why.summary
    assert "cannot start as asked" not in why.summary


@pytest.mark.parametrize(
    ("queue", "said"),
    [
        (
            QueueSnapshot(name="gpu-a", state="Open", guaranteed_elsewhere={GPU: 6}),
            "queue gpu-a can hold at most 2 GPUs: other queues are guaranteed 6 of the cluster's 8, and the gang "
            "needs 8, so it never fits there",
        ),
        (
            QueueSnapshot(
                name="gpu-a", state="Open", ancestors=[QueueLimit(name="team", capability={GPU: 8}, allocated={GPU: 4})]
            ),
            "queue 'gpu-a' has room for 4 more GPUs now (4 of team's 8 GPUs allocated) and the gang needs 8",
        ),
    ],
)
def test_a_queue_limited_beyond_its_own_capability_is_named(queue: QueueSnapshot, said: str) -> None:
    why = explain(pending(), manifest(), [node("n-0"), node("n-1")], queue)
    assert said in why.summary and "nothing blocks it" not in why.summary


def test_explain_pending_names_a_priority_class_the_cluster_does_not_have(local: LocalCluster) -> None:
    # LocalCluster refuses such a job at submit; a KubeCluster's stays Pending, its pods refused by the API server.
    job = manifest(priority_class="urgent")
    nodes = local.nodes()
    why = explain(pending("default"), job, nodes, local.queue("default"), priority_classes=local.priority_classes())
    assert "priority class 'urgent' does not exist on this cluster, so the API server refuses the job's pods" in (
        why.summary
    )
    assert "nothing blocks it" not in why.summary
    assert "priority class" not in explain(pending("default"), job, nodes, local.queue("default")).summary

    local.submit(vcjob("ft", tasks=[vcjob_task("main", 4, gpus=4)], priority_class="high"))
    answer = call_tool(ToolContext(cluster=local), "explain_pending", {"name": "ft"})
    assert answer.ok and "priority class" not in answer.data["summary"]
