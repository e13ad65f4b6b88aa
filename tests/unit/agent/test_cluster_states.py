"""The agent against cluster states users have: each built as the API server (or LocalCluster) holds it, observed
through the cluster, and decided by the rule policy.

KubeCluster reads a fake API server on loopback (tests/fake_apiserver.py) that answers with the objects below,
shaped as Kubernetes v1.35 and Volcano v1.15 write them; LocalCluster builds its states through its own API. The
semantics each test holds the agent to are named with it (agent/capacity.py cites the upstream source).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from fake_apiserver import FakeApiServer
from vcjob_factory import vcjob, vcjob_task

from agent.actions import Abort, Downscale, Proceed
from agent.observation import Observation, PlanRequest
from agent.observe import observe
from agent.policy_llm import check_answer
from agent.policy_rules import RulePolicy
from components.volcano.cluster import Invalid, QueueLimit
from components.volcano.cluster_k8s import KubeCluster
from components.volcano.cluster_local import LocalCluster
from components.volcano.localconfig import LocalClusterConfig

GPU = "nvidia.com/gpu"
SCHEDULING = "/apis/scheduling.volcano.sh/v1beta1"
POLICY = RulePolicy()


def request(**changes: Any) -> PlanRequest:
    values: dict[str, Any] = {"gpus": 8, "gpus_per_pod": 4, "global_batch": 32, "micro_batch": 4, "queue": "gpu-a"}
    return PlanRequest(**{"max_steps": 200, **values, **changes})


# ---- the API objects ---------------------------------------------------------------------------------------


def node(
    name: str,
    gpus: int = 4,
    *,
    allocatable: int | None = None,
    ready: str | None = "True",
    unschedulable: bool = False,
    taints: tuple[dict[str, str], ...] = (),
) -> dict[str, Any]:
    """A GPU node as the API server returns it; `ready` None: no Ready condition reported yet."""
    spec: dict[str, Any] = {"taints": list(taints)} if taints else {}
    if unschedulable:  # `kubectl cordon`; the node lifecycle controller adds the taint that goes with it
        spec = {"unschedulable": True, "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}
    conditions = [{"type": "Ready", "status": ready}] if ready else []
    amounts = {"cpu": "32", "memory": "256Gi", "pods": "110"}
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": spec,
        "status": {
            "capacity": {**amounts, GPU: str(gpus)},
            "allocatable": {**amounts, GPU: str(gpus if allocatable is None else allocatable)},
            "conditions": conditions,
        },
    }


def pod(name: str, on: str, gpus: int, **spec: Any) -> dict[str, Any]:
    """A running pod bound to `on`; by default one kube-scheduler placed (a Deployment's, not Volcano's)."""
    container = {"name": "c", "image": "x", "resources": {"limits": {GPU: str(gpus)}}}
    return {
        "metadata": {"name": name, "namespace": "serving"},
        "spec": {"schedulerName": "default-scheduler", "nodeName": on, "containers": [container], **spec},
        "status": {"phase": "Running"},
    }


def queue(
    name: str,
    *,
    state: str | None = "Open",
    allocated: int = 0,
    **spec: Any,
) -> dict[str, Any]:
    """A Volcano Queue as the API server returns it (cluster-scoped), `spec` as given."""
    status: dict[str, Any] = {"allocated": {GPU: str(allocated)}}
    if state:
        status["state"] = state
    return {"metadata": {"name": name}, "spec": {"weight": 1, **spec}, "status": status}


def podgroup(name: str, queue_name: str, phase: str | None, gpus: int, members: int, **status: Any) -> dict[str, Any]:
    """A PodGroup in `queue_name` asking `gpus` GPUs for `members` pods, in `phase` (None: no status yet)."""
    group: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"queue": queue_name, "minMember": members, "minResources": {GPU: str(gpus)}},
    }
    if phase:
        group["status"] = {"phase": phase, **status}
    return group


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[tuple[FakeApiServer, KubeCluster]]:
    server = FakeApiServer()
    cluster = KubeCluster(server.kubeconfig(tmp_path), sleep=lambda _: None)
    yield server, cluster
    cluster.close()
    server.stop()


def serve(
    server: FakeApiServer,
    nodes: list[dict[str, Any]],
    *,
    pods: Sequence[dict[str, Any]] = (),
    queues: Sequence[dict[str, Any]] | None = None,
    podgroups: Sequence[dict[str, Any]] = (),
) -> None:
    """Answer KubeCluster's reads with these objects (the queue `gpu-a`, Open, unless `queues` are given)."""
    queues = [queue("root"), queue("default"), queue("gpu-a")] if queues is None else queues
    server.routes[("GET", "/api/v1/nodes")] = [(200, {"items": nodes})]
    server.routes[("GET", "/api/v1/pods")] = [(200, {"items": list(pods)})]
    server.routes[("GET", f"{SCHEDULING}/queues")] = [(200, {"items": queues})]
    server.routes[("GET", f"{SCHEDULING}/podgroups")] = [(200, {"items": list(podgroups)})]
    for q in queues:
        server.routes[("GET", f"{SCHEDULING}/queues/{q['metadata']['name']}")] = [(200, q)]


def plan(cluster: Any, wanted: PlanRequest | None = None) -> tuple[Observation, Any]:
    observation = observe(cluster, wanted or request(), now=1000.0)
    return observation, POLICY.decide(observation, "plan").action


# ---- nodes -------------------------------------------------------------------------------------------------


def test_a_cordoned_nodes_free_gpus_are_no_capacity(kube):
    server, cluster = kube
    serve(server, [node("gpu-0", unschedulable=True), node("gpu-1")])
    observation, action = plan(cluster)
    assert [(n.name, n.unschedulable, n.gpu_allocatable) for n in observation.nodes] == [
        ("gpu-0", True, 4),
        ("gpu-1", False, 4),
    ]
    assert isinstance(action, Downscale) and action.gpus == 4
    assert "4 GPUs free on healthy nodes (left out: gpu-0 cordoned)" in action.rationale
    assert {c.gpus: c for c in action.candidates}[8].note == "the healthy nodes offer at most 4 GPUs in whole pods"


def test_a_taint_training_pods_do_not_tolerate_keeps_them_off_and_a_preference_does_not(kube):
    server, cluster = kube
    serve(
        server,
        [
            node("gpu-0", taints=({"key": "dedicated", "value": "inference", "effect": "NoSchedule"},)),
            node("gpu-1", taints=({"key": "maintenance", "effect": "NoExecute"},)),
            node("gpu-2", taints=({"key": "spot", "effect": "PreferNoSchedule"},)),
        ],
    )
    observation, action = plan(cluster)
    assert observation.nodes[0].taints == [{"key": "dedicated", "value": "inference", "effect": "NoSchedule"}]
    assert isinstance(action, Downscale) and action.gpus == 4
    assert "(left out: gpu-0 taint dedicated=inference:NoSchedule, gpu-1 taint maintenance:NoExecute)" in (
        action.rationale
    )


@pytest.mark.parametrize("ready", ["False", "Unknown", None])
def test_a_node_not_ready_or_unheard_from_offers_nothing(kube, ready):
    # Ready Unknown: the node controller lost the kubelet's heartbeats (it taints the node unreachable).
    server, cluster = kube
    serve(server, [node("gpu-0", ready=ready), node("gpu-1")])
    observation, action = plan(cluster)
    assert (observation.nodes[0].ready, observation.nodes[0].gpu_allocatable) == (False, 0)
    assert isinstance(action, Downscale) and action.gpus == 4
    assert "(left out: gpu-0 NotReady)" in action.rationale


def test_allocatable_gpus_below_capacity_are_what_counts(kube):
    # The device plugin reports 2 of gpu-0's 8 GPUs unhealthy: capacity 8, allocatable 6.
    server, cluster = kube
    serve(server, [node("gpu-0", 8, allocatable=6)])
    observation, action = plan(cluster, request(gpus_per_pod=2))
    assert (observation.nodes[0].gpu_capacity, observation.nodes[0].gpu_allocatable) == (8, 6)
    assert isinstance(action, Downscale) and action.gpus == 4  # 6 split the global batch 32 unevenly
    assert "6 GPUs free on healthy nodes" in action.rationale


def test_gpus_held_by_pods_of_other_schedulers_are_not_free(kube):
    # A serving Deployment's pod (kube-scheduler) holds 2 GPUs on each node; its init container asked 3 on gpu-1,
    # which the node keeps for the pod's whole life (PodRequests: the largest of the init containers and the sum).
    server, cluster = kube
    init = [{"name": "warm", "image": "x", "resources": {"limits": {GPU: "3"}}}]
    serve(
        server,
        [node("gpu-0"), node("gpu-1")],
        pods=[pod("serve-0", "gpu-0", 2), pod("serve-1", "gpu-1", 2, initContainers=init)],
    )
    observation, action = plan(cluster, request(gpus_per_pod=1))
    assert [n.gpu_allocated for n in observation.nodes] == [2, 3]
    assert isinstance(action, Downscale) and "3 GPUs free on healthy nodes" in action.rationale
    waits = {c.gpus: c.wait_s for c in action.candidates}
    assert waits[2] == 0 and waits[4] > 0 and waits[8] > 0  # 3 GPUs free (3 does not split the batch evenly)


def test_other_gpu_resources_are_not_the_nvidia_gpus_training_asks_for(kube):
    # The job builder asks nvidia.com/gpu; a node advertising only amd.com/gpu or MIG slices offers none of it.
    server, cluster = kube
    amd, mig = node("amd-0", 0), node("mig-0", 0)
    amd["status"]["allocatable"]["amd.com/gpu"] = amd["status"]["capacity"]["amd.com/gpu"] = "8"
    mig["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] = "7"
    serve(server, [amd, mig, node("gpu-0")])
    observation, action = plan(cluster)
    assert [n.gpu_allocatable for n in observation.nodes] == [0, 4, 0]
    assert isinstance(action, Downscale) and action.gpus == 4


# ---- queues ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["Closed", "Closing", "Unknown"])
def test_a_queue_that_is_not_open_takes_no_job_so_the_plan_goes_to_the_fallback_or_aborts(kube, state):
    # admit_job.go validateJobCreate: "can only submit job to queue with state `Open`".
    server, cluster = kube
    serve(server, [node("gpu-0"), node("gpu-1")], queues=[queue("gpu-a", state=state), queue("spare")])
    observation, action = plan(cluster)
    assert observation.queue is not None and observation.queue.state == state
    assert isinstance(action, Abort)
    assert f"queue gpu-a is {state}: Volcano admits no new job into a queue that is not Open" in action.reason

    observation, action = plan(cluster, request(fallback_queue="spare"))
    assert isinstance(action, Proceed) and (action.gpus, action.queue) == (8, "spare")
    assert f"8 GPUs can never run here: queue gpu-a is {state}" in action.rationale
    with pytest.raises(ValueError, match=f"queue gpu-a is {state}"):
        check_answer(action.model_copy(update={"queue": "gpu-a"}), observation, "plan")
    with pytest.raises(Invalid, match=f"queue 'gpu-a' is {state}, it accepts no new jobs"):
        cluster.submit(vcjob("ft", queue="gpu-a", tasks=[vcjob_task("main", 1, gpus=4)]))


def test_a_capability_without_gpus_is_unlimited_and_one_of_zero_gpus_admits_none(kube):
    server, cluster = kube
    nodes = [node("gpu-0"), node("gpu-1")]
    serve(server, nodes, queues=[queue("gpu-a", capability={"cpu": "64"})])
    observation, action = plan(cluster)
    assert observation.queue is not None and observation.queue.capability == {"cpu": 64.0}
    assert isinstance(action, Proceed) and action.gpus == 8

    serve(server, nodes, queues=[queue("gpu-a", capability={"cpu": "64", GPU: "0"})])
    _, action = plan(cluster)
    assert isinstance(action, Abort) and "queue gpu-a's capability is 0 GPUs" in action.reason


def test_a_parent_queues_capability_caps_its_child(kube):
    # capacity.go: a child without a GPU capability inherits its parent's, and a gang is checked against every
    # ancestor; a parent's status.allocated is its subtree's (session.go).
    server, cluster = kube
    tree = [
        queue("root"),
        queue("team", parent="root", capability={GPU: "4"}),
        queue("gpu-a", parent="team"),
        queue("gpu-b", parent="team"),
    ]
    serve(server, [node("gpu-0"), node("gpu-1")], queues=tree)
    observation, action = plan(cluster)
    assert observation.queue is not None and observation.queue.parent == "team"
    assert observation.queue.ancestors == [
        QueueLimit(name="team", capability={GPU: 4.0}, allocated={GPU: 0.0}),
        QueueLimit(name="root", capability={}, allocated={GPU: 0.0}),
    ]
    assert isinstance(action, Downscale) and action.gpus == 4
    assert {c.gpus: c for c in action.candidates}[8].note == "queue gpu-a is under team, whose capability is 4 GPUs"

    # The sibling holds the parent's 4: the child waits, though its own queue holds nothing.
    tree[1] = queue("team", parent="root", capability={GPU: "4"}, allocated=4)
    serve(server, [node("gpu-0"), node("gpu-1")], queues=tree, pods=[pod("b-0", "gpu-0", 4)])
    _, action = plan(cluster, request(gpus=4))
    assert action.kind == "wait" and "4 of team's 4 GPUs allocated" in action.reason


def test_a_queue_with_child_queues_takes_no_job(kube):
    # admit_job.go: "can only submit job to leaf queue"; root is no queue for jobs either.
    server, cluster = kube
    tree = [queue("root"), queue("gpu-a", parent="root"), queue("gpu-a-1", parent="gpu-a")]
    serve(server, [node("gpu-0"), node("gpu-1")], queues=tree)
    observation, action = plan(cluster)
    assert observation.queue is not None and observation.queue.children == ["gpu-a-1"]
    assert isinstance(action, Abort)
    assert "queue gpu-a has child queues (gpu-a-1): Volcano admits jobs only into a leaf" in action.reason
    job = vcjob("ft", queue="gpu-a", tasks=[vcjob_task("main", 1, gpus=4)])
    with pytest.raises(Invalid, match="queue 'gpu-a' is the parent of gpu-a-1; submit to a queue without child"):
        cluster.submit(job)
    with pytest.raises(Invalid, match="queue 'root' is the top of Volcano's queue tree"):
        cluster.submit({**job, "spec": {**job["spec"], "queue": "root"}})


def test_deserved_caps_nothing_and_other_queues_guarantees_are_held_back(kube):
    # proportion.go: realCapability = min(capability, total allocatable − every guarantee + the queue's own);
    # deserved only marks what a queue may lose to reclaim.
    server, cluster = kube
    nodes = [node("gpu-0", 8), node("gpu-1", 8)]
    wanted = request(gpus=16, gpus_per_pod=8, global_batch=64)
    own = {"deserved": {GPU: "2"}, "guarantee": {"resource": {GPU: "2"}}}
    serve(server, nodes, queues=[queue("root"), queue("gpu-a", **own)])
    observation, action = plan(cluster, wanted)
    assert observation.queue is not None
    assert (observation.queue.deserved, observation.queue.guarantee) == ({GPU: 2.0}, {GPU: 2.0})
    assert isinstance(action, Proceed) and action.gpus == 16

    other = queue("serving", guarantee={"resource": {GPU: "8"}})
    serve(server, nodes, queues=[queue("root"), queue("gpu-a", **own), other])
    observation, action = plan(cluster, wanted)
    assert observation.queue is not None and observation.queue.guaranteed_elsewhere == {GPU: 8.0}
    assert isinstance(action, Downscale) and action.gpus == 8
    assert {c.gpus: c for c in action.candidates}[16].note == (
        "queue gpu-a can hold at most 8 GPUs: other queues are guaranteed 8 of the cluster's 16"
    )


# ---- PodGroups -----------------------------------------------------------------------------------------------


def test_podgroups_are_demand_by_phase_and_an_unknown_gang_waits_for_what_it_lacks(kube):
    server, cluster = kube
    groups = [
        podgroup("pending", "gpu-a", "Pending", 4, 1),
        podgroup("new", "gpu-a", None, 1, 1),  # no status yet: Pending, as Volcano's IsPending reads it
        podgroup("admitted", "gpu-a", "Inqueue", 2, 2),
        podgroup("training", "gpu-a", "Running", 8, 2, running=2),
        podgroup("done", "gpu-a", "Completed", 8, 2, succeeded=2),
        # 3 of 4 members run and the 4th found no node: it lacks 2 of its 8 GPUs.
        podgroup("short", "gpu-a", "Unknown", 8, 4, running=3),
        # minMember met, a task below its minTaskMember: still one pod short (4 GPUs a pod).
        podgroup("uneven", "gpu-a", "Unknown", 8, 2, running=2),
    ]
    groups[-1]["spec"]["minTaskMember"] = {"master": 1, "worker": 2}
    serve(server, [node("gpu-0", 8), node("gpu-1", 8)], podgroups=groups)
    observation, action = plan(cluster)
    snapshot = observation.queue
    assert snapshot is not None
    assert (snapshot.pending, snapshot.pending_gpus, snapshot.inqueue, snapshot.inqueue_gpus) == (2, 5, 1, 2)
    assert (snapshot.running, snapshot.running_gpus, snapshot.unknown, snapshot.unknown_gpus) == (1, 8, 2, 6)
    assert "queue gpu-a has 13 GPUs pending ahead" in action.rationale


# ---- LocalCluster ------------------------------------------------------------------------------------------


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalCluster]:
    """Three nodes × 4 GPUs; node-2 tainted for inference."""
    taint = {"key": "dedicated", "value": "inference", "effect": "NoSchedule"}
    config = LocalClusterConfig.model_validate(
        {"nodes": [{"name": "node", "count": 2, "gpus": 4}, {"name": "node-2", "gpus": 4, "taints": [taint]}]}
    )
    cluster = LocalCluster(tmp_path / "home", config, hook=False)
    yield cluster
    cluster.close()


def test_local_cluster_tainted_and_failed_nodes_and_a_closed_queue(local):
    wanted = request(queue="default")
    _, action = plan(local, wanted)
    assert isinstance(action, Proceed) and action.gpus == 8
    assert "(left out: node-2 taint dedicated=inference:NoSchedule)" in action.rationale

    local.fail_node("node-0")
    _, action = plan(local, wanted)
    assert isinstance(action, Downscale) and action.gpus == 4
    assert "(left out: node-0 NotReady, node-2 taint dedicated=inference:NoSchedule)" in action.rationale

    local.apply_queue({"metadata": {"name": "default"}, "status": {"state": "Closed"}})
    _, action = plan(local, wanted)
    assert isinstance(action, Abort) and "queue default is Closed" in action.reason


def test_local_cluster_parent_queue_caps_its_child(local):
    local.apply_queue({"metadata": {"name": "team"}, "spec": {"capability": {GPU: 4}}})
    local.apply_queue({"metadata": {"name": "gpu-a"}, "spec": {"parent": "team"}})
    observation, action = plan(local)
    assert observation.queue is not None and [a.name for a in observation.queue.ancestors] == ["team"]
    assert isinstance(action, Downscale) and action.gpus == 4
    _, action = plan(local, request(queue="team"))
    assert isinstance(action, Abort) and "queue team has child queues (gpu-a)" in action.reason
