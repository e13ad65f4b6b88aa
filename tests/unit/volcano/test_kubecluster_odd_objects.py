"""KubeCluster meeting names and objects it did not expect: nothing reaches a URL it should not, nothing crashes.

A name that is no Kubernetes name ("." or "..") would be resolved by urllib3 into another URL (the collection of
jobs, or out of the namespace), so it is refused before any request. An object the API server may return that the
models cannot read (a Queue capability of "1e999", which the CRD's pattern accepts; an annotation's odd index; a
task of 2^31-1 replicas) is a ClusterError in one sentence, or read sanely, never an uncaught exception or a hang.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_apiserver import FakeApiServer

from agent.observation import PlanRequest
from agent.observe import observe
from agent.policy_rules import RulePolicy
from components.volcano.cluster import ClusterError, Invalid, JobNotFound, QueueNotFound
from components.volcano.cluster_k8s import KubeCluster
from components.volcano.k8s_status import TASK_INDEX, pod_info

QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
PODGROUPS = "/apis/scheduling.volcano.sh/v1beta1/podgroups"
UID = "0b9a3c1e-5d2f-4a57-9b0e-2f5f0a1c7d11"
JOB = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "big", "namespace": "default", "uid": UID},
    "spec": {
        "queue": "default",
        "minAvailable": 1,
        "tasks": [{"name": "worker", "replicas": 2**31 - 1, "template": {"spec": {"containers": [{"name": "c"}]}}}],
    },
    "status": {"state": {"phase": "Failed"}},
}


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[tuple[FakeApiServer, KubeCluster]]:
    server = FakeApiServer()
    cluster = KubeCluster(server.kubeconfig(tmp_path), sleep=lambda _: None)
    namespaced = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups"
    for path in (QUEUES, PODGROUPS, namespaced, "/api/v1/pods", "/api/v1/namespaces/default/pods"):
        server.routes[("GET", path)] = [(200, {"items": []})]
    server.routes[("GET", "/api/v1/namespaces/default/events")] = [(200, {"items": []})]
    yield server, cluster
    cluster.close()
    server.stop()


@pytest.mark.parametrize(
    ("name", "namespace"), [(".", "default"), ("..", "default"), ("ft", ".."), ("ft", "a/../b"), ("Ft_1", "default")]
)
def test_a_name_that_is_no_kubernetes_name_sends_no_request(fake, name, namespace):
    server, cluster = fake
    with pytest.raises(JobNotFound, match="is not an? (object|namespace) name"):
        cluster.get(name, namespace)
    with pytest.raises(JobNotFound, match="does not exist"):
        cluster.delete(name, namespace)
    cluster.delete(name, namespace, missing_ok=True)
    with pytest.raises(QueueNotFound, match="is not an object name"):
        cluster.queue("..")
    with pytest.raises(Invalid, match="is not a namespace name"):
        cluster.list_jobs(namespace="..")
    assert server.requests == []


def route_queue(server: FakeApiServer, capability: Any) -> None:
    queue = {"metadata": {"name": "default"}, "spec": {"capability": {"nvidia.com/gpu": capability}}}
    server.routes[("GET", f"{QUEUES}/default")] = [(200, queue)]
    server.routes[("GET", QUEUES)] = [(200, {"items": [queue]})]


def test_a_queue_capability_out_of_range_is_a_cluster_error_and_the_rules_still_decide(fake):
    server, cluster = fake
    route_queue(server, "1e999")  # the Queue CRD's quantity pattern takes it
    with pytest.raises(ClusterError, match=r"queue default from the API server cannot be read: .*1e999"):
        cluster.queue("default")
    with pytest.raises(ClusterError, match="cannot be read"):
        cluster.queues()
    request = PlanRequest(gpus=4, gpus_min=1, global_batch=16, micro_batch=1)
    seen = observe(cluster, request)
    assert seen.queue is None and any("1e999" in note for note in seen.notes)
    assert RulePolicy().decide(seen, "plan").action.kind in {"proceed", "downscale", "wait", "abort"}


@pytest.mark.parametrize("capability", ["8", "8000m", "1k", 8])
def test_queue_capabilities_in_any_quantity_read_as_gpus(fake, capability):
    server, cluster = fake
    route_queue(server, capability)
    assert cluster.queue("default").capability["nvidia.com/gpu"] in {8.0, 1000.0}


def test_a_node_whose_gpus_are_out_of_range_is_a_cluster_error(fake):
    server, cluster = fake
    ready = [{"type": "Ready", "status": "True"}]
    node = {"metadata": {"name": "n1"}, "status": {"conditions": ready, "allocatable": {"nvidia.com/gpu": "1e999"}}}
    server.routes[("GET", "/api/v1/nodes")] = [(200, {"items": [node]})]
    with pytest.raises(ClusterError, match="the nodes from the API server cannot be read"):
        cluster.nodes()


def test_a_job_of_two_billion_replicas_reads_at_once(fake):
    server, cluster = fake
    server.routes[("GET", "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs/big")] = [(200, JOB)]
    server.routes[("GET", "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs")] = [(200, {"items": [JOB]})]
    started = time.monotonic()
    assert cluster.get("big").phase == "Failed"
    assert [job.name for job in cluster.list_jobs(namespace="default")] == ["big"]
    assert cluster.events("big") == []
    assert time.monotonic() - started < 5


def test_a_job_the_models_cannot_read_is_a_cluster_error(fake):
    server, cluster = fake
    odd = copy.deepcopy(JOB)
    odd["status"]["retryCount"] = "many"
    server.routes[("GET", "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs/big")] = [(200, odd)]
    with pytest.raises(ClusterError, match="job default/big from the API server cannot be read"):
        cluster.get("big")


@pytest.mark.parametrize("index", ["²", "9" * 5000, "-1", ""])
def test_an_odd_task_index_annotation_reads_as_zero(index):
    pod = {"metadata": {"name": "big-worker-x", "annotations": {TASK_INDEX: index}}, "status": {"phase": "Running"}}
    assert pod_info(pod).index == 0


def test_cancel_job_returns_once_the_deletion_is_accepted(fake):
    # Foreground deletion waits for the pods, and a training pod writes its checkpoint in a grace period of 5 min:
    # cancel_job held the one-call-at-a-time MCP server, then said Timeout after 120 s of a deletion going well.
    from agent.tools import ToolContext, call_tool

    server, cluster = fake
    path = "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs/big"
    ours = copy.deepcopy(JOB)
    ours["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "vcpilot"}
    server.routes[("GET", path)] = [(200, ours)]
    server.routes[("DELETE", path)] = [(200, {"kind": "Status", "status": "Success"})]
    result = call_tool(ToolContext(cluster=cluster), "cancel_job", {"name": "big"})
    assert result.ok and result.data["phase_before"] == "Failed", result.error
    deletes = [(path_, query) for method, path_, query in server.requests if method == "DELETE"]
    assert deletes == [(path, {"propagationPolicy": ["Background"]})]
    assert server.requests[-1][0] == "DELETE"  # nothing polled after it

    server.requests.clear()  # a caller that waits (the pipeline's steps) still gets Foreground
    server.routes[("GET", path)] = [(200, JOB), (404, {"kind": "Status", "code": 404})]
    cluster.delete("big")
    assert [q for m, _, q in server.requests if m == "DELETE"] == [{"propagationPolicy": ["Foreground"]}]
