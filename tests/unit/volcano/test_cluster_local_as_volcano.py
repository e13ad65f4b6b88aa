"""Where LocalCluster once differed from Volcano v1.15, through its own API: each test names the upstream rule.

- a task's minAvailable (the PodGroup's minTaskMember) holds the gang as minAvailable does (plugins/gang, job_info.go);
- a child queue is not capped by its parent's capability under deploy/'s scheduler configuration (proportion);
- a policy's timeout delays its action (pkg/controllers/job: applyPolicies, AddDelayActionForJob).

Pods here sleep until their job is deleted: only the scheduler's and the controller's decisions are under test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from clock_kit import Clock
from vcjob_factory import GPU, vcjob, vcjob_task

from components.volcano.cluster_local import LocalCluster
from components.volcano.localconfig import LocalClusterConfig

SLEEP = "sleep 600"


@pytest.fixture
def make_cluster(tmp_path: Path, clock: Clock) -> Iterator:
    clusters: list[LocalCluster] = []

    def make(config: dict | None = None) -> LocalCluster:
        cluster = LocalCluster(
            tmp_path / f"home{len(clusters)}",
            LocalClusterConfig.model_validate(config or {}),
            clock=clock,
            hook=False,
        )
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in clusters:
        for job in cluster.list_jobs():
            cluster.delete(job.name, job.namespace, missing_ok=True)
        cluster.close()


def running(cluster: LocalCluster, job: str) -> list[str]:
    return sorted(p.name for p in cluster.get(job).pods if p.phase == "Running")


# --- minTaskMember: every task's minAvailable, not only the job's ---------------------------------------------------


def two_tasks(a_pod: dict | None = None, b_pod: dict | None = None) -> dict:
    """Task a: 3 pods, minAvailable 1; task b: 2 pods, minAvailable 2; the job's minAvailable 3 (their sum)."""
    a = {**vcjob_task("a", 3, 1, SLEEP, **(a_pod or {})), "minAvailable": 1}
    b = {**vcjob_task("b", 2, 1, SLEEP, **(b_pod or {})), "minAvailable": 2}
    return vcjob("pair", tasks=[a, b], min_available=3)


def test_a_task_below_its_min_available_keeps_the_whole_gang_waiting(make_cluster):
    # gang.go JobReady = CheckTaskReady && IsReady: three pods of a meet minAvailable 3, but b needs both of its
    # pods and only one node (1 GPU) takes them, so Volcano binds nothing; LocalCluster bound a×3 + b-0.
    nodes = [{"name": "big", "gpus": 4, "labels": {"pool": "a"}}, {"name": "small", "gpus": 1, "labels": {"pool": "b"}}]
    cluster = make_cluster({"nodes": nodes})
    cluster.submit(two_tasks({"nodeSelector": {"pool": "a"}}, {"nodeSelector": {"pool": "b"}}))
    info = cluster.get("pair")
    assert info.phase == "Pending" and running(cluster, "pair") == []
    assert info.message == (
        "3/5 pods of the gang could be placed, but only 1 of task 'b', whose minAvailable is 2: "
        "0/2 nodes are available: 1 node does not match the pod's node selector, 1 node has insufficient nvidia.com/gpu"
    )
    assert {n.name: n.gpu_allocated for n in cluster.nodes()} == {"big": 0, "small": 0}


def test_the_tasks_take_turns_so_each_meets_its_minimum_before_a_task_takes_the_rest(make_cluster):
    # allocate tries pods by index (helpers.CompareTask): a-0, b-0, a-1, b-1 fill the node, both tasks at their
    # minimum; a-2 finds no GPU and waits. LocalCluster tried a-0..a-2 first and ran a×3 + b-0.
    cluster = make_cluster({"nodes": [{"name": "node", "gpus": 4}]})
    cluster.submit(two_tasks())
    assert cluster.get("pair").phase == "Running"
    assert running(cluster, "pair") == ["pair-a-0", "pair-a-1", "pair-b-0", "pair-b-1"]


def test_min_resources_follow_the_controllers_sum_below_the_tasks_minima(make_cluster):
    # calcPGMinResources: minAvailable 2 < 1 + 2, so minResources are the first 2 pods by replicas (a's, 1 GPU
    # each), not a's minimum plus one of b's 4-GPU pods (5 GPUs, which no queue capped at 4 admits).
    cluster = make_cluster({"nodes": [{"name": "node", "gpus": 8}], "queues": [{"name": "q", "capability": {GPU: 4}}]})
    a = {**vcjob_task("a", 3, 1, SLEEP), "minAvailable": 1}
    b = {**vcjob_task("b", 2, 4, SLEEP), "minAvailable": 2}
    cluster.submit(vcjob("mixed", tasks=[a, b], min_available=2, queue="q"))
    assert cluster.queue("q").inqueue_gpus + cluster.queue("q").running_gpus == 2
    assert running(cluster, "mixed") == ["mixed-a-0", "mixed-a-1", "mixed-a-2"]


# --- queue hierarchy: deploy/'s proportion plugin reads no spec.parent ---------------------------------------------


def test_a_child_queue_is_not_capped_by_its_parents_capability_under_proportion(make_cluster):
    # deploy/volcano/scheduler/volcano-scheduler.conf enables proportion, not capacity: proportion.go builds each
    # queue's realCapability from its own capability and the cluster, and capacity.go's ancestor checks run only
    # with `enableHierarchy: true`. So a gang of 8 GPUs runs in a child of a parent capped at 4.
    cluster = make_cluster()
    cluster.apply_queue({"metadata": {"name": "team"}, "spec": {"capability": {GPU: 4}}})
    cluster.apply_queue({"metadata": {"name": "gpu-a"}, "spec": {"parent": "team"}})
    cluster.submit(vcjob("wide", SLEEP, pods=2, gpus=4, queue="gpu-a"))
    assert cluster.get("wide").phase == "Running"
    assert cluster.queue("team").allocated[GPU] == 8  # a parent's status.allocated is its subtree's (session.go)


# --- a policy's timeout ------------------------------------------------------------------------------------------


def test_a_policy_with_a_timeout_acts_only_once_the_timeout_has_passed(make_cluster, clock):
    cluster = make_cluster()
    policies = [{"event": "PodFailed", "action": "AbortJob", "timeout": "10m"}]
    cluster.submit(vcjob("slow", SLEEP, pods=2, policies=policies))
    cluster.kill_pod("slow-main-0")
    assert cluster.get("slow").phase == "Running"
    assert any(
        e.reason == "ExecuteAction" and e.message == "Execute action AbortJob after 10m" for e in cluster.events("slow")
    )
    clock.now += 599
    assert cluster.get("slow").phase == "Running" and running(cluster, "slow") == ["slow-main-1"]
    clock.now += 1
    done = cluster.get("slow")
    assert done.phase == "Aborted" and running(cluster, "slow") == []


def test_an_action_of_the_same_scope_cancels_a_waiting_one(make_cluster, clock):
    # cleanupDelayActions: the eviction's RestartJob runs at once and cancels the job-level AbortJob still waiting.
    cluster = make_cluster()
    policies = [
        {"event": "PodFailed", "action": "AbortJob", "timeout": "10m"},
        {"event": "PodEvicted", "action": "RestartJob"},
    ]
    cluster.submit(vcjob("twice", SLEEP, pods=2, policies=policies))
    cluster.kill_pod("twice-main-0")
    (node,) = {p.node for p in cluster.get("twice").pods if p.name == "twice-main-1"}
    assert node is not None
    cluster.fail_node(node)
    clock.now += 3600
    info = cluster.get("twice")
    assert (info.phase, info.retry_count) == ("Running", 1)
    assert running(cluster, "twice") == ["twice-main-0", "twice-main-1"]


def test_a_pod_that_runs_again_cancels_the_action_its_failure_set_off(make_cluster, clock):
    # CleanPodDelayActionsIfNeed: the pod's PodRunning cancels the RestartTask its failure left waiting. Here the
    # other task's failure restarts the whole job at once (a job-level action leaves a task-level one waiting), and
    # the pod runs again before the 10 minutes are up.
    cluster = make_cluster()
    later = [{"event": "PodFailed", "action": "RestartTask", "timeout": "10m"}]
    slow = vcjob_task("slow", 1, 1, SLEEP, policies=later)
    fast = vcjob_task("fast", 1, 1, SLEEP, policies=[{"event": "PodFailed", "action": "RestartJob"}])
    cluster.submit(vcjob("back", tasks=[slow, fast]))
    cluster.kill_pod("back-slow-0")
    cluster.kill_pod("back-fast-0")
    assert running(cluster, "back") == ["back-fast-0", "back-slow-0"]
    clock.now += 3600
    info = cluster.get("back")
    assert (info.phase, info.retry_count) == ("Running", 1), "the RestartTask was cancelled, not taken"


# --- the kubelet's --max-pods: a node's allocatable.pods ---------------------------------------------------------


def test_a_node_runs_at_most_its_max_pods_and_the_rest_wait(make_cluster):
    # Every node had room for any number of pods that request nothing: 400 CPU-only pods on two nodes all ran,
    # where Kubernetes' nodes (110 pods each by default) run 220 and leave the rest Pending.
    cluster = make_cluster({"nodes": [{"name": "n", "count": 2, "pods": 3}]})
    cluster.submit(vcjob("many", SLEEP, pods=8, gpus=0, min_available=1))
    assert len(running(cluster, "many")) == 6
    pending = [p for p in cluster.get("many").pods if p.phase == "Pending"]
    assert len(pending) == 2 and all(p.node is None for p in pending)
    assert all(n.pods == 110 for n in LocalClusterConfig().nodes)  # the kubelet's default
