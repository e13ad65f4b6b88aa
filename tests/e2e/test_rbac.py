"""The workflow's service account (deploy/rbac/) may do exactly what the steps do, and nothing else.

The account's own token (a TokenRequest, as a pod would mount) drives KubeCluster through a whole job's life,
and SelfSubjectAccessReviews under that token map what it may do over a grid of resources, verbs and scopes:
the grid must equal the verbs the steps use, no more.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from vcjob_factory import vcjob, vcjob_task

from components.volcano.cluster import ClusterError

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
RBAC = ROOT / "deploy" / "rbac"
NS, SA = "vcpilot", "vcpilot-workflow"
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
NAMESPACED = [
    ("batch.volcano.sh", "jobs"),
    ("scheduling.volcano.sh", "podgroups"),
    ("", "pods"),
    ("", "events"),
    ("", "secrets"),
    ("", "configmaps"),
    ("", "serviceaccounts"),
    ("argoproj.io", "workflowtaskresults"),
    ("argoproj.io", "workflows"),
    ("rbac.authorization.k8s.io", "roles"),
]
CLUSTER = [
    ("scheduling.volcano.sh", "queues"),
    ("", "nodes"),
    ("", "pods"),
    ("scheduling.volcano.sh", "podgroups"),
    ("batch.volcano.sh", "jobs"),
    ("", "namespaces"),
    ("rbac.authorization.k8s.io", "clusterroles"),
    ("scheduling.k8s.io", "priorityclasses"),
]
# What the steps use (see the comments in deploy/rbac/*.yaml): (namespace or "" for cluster-wide, resource, verb).
EXPECTED = {
    *((NS, "jobs", v) for v in ("create", "get", "list", "watch", "delete")),
    (NS, "podgroups", "get"),
    (NS, "podgroups", "list"),
    (NS, "events", "list"),
    (NS, "workflowtaskresults", "create"),
    (NS, "workflowtaskresults", "patch"),
    # the ClusterRole's reads hold in every namespace and cluster-wide
    *((ns, "pods", "list") for ns in (NS, "default", "")),
    *((ns, "podgroups", "list") for ns in ("default", "")),
    ("", "queues", "get"),
    ("", "queues", "list"),
    ("", "nodes", "list"),
    ("", "priorityclasses", "list"),
}


def _kubectl() -> str | None:
    found = shutil.which("kubectl")
    if found:
        return found
    out = subprocess.run(
        ["bash", "-c", f"source {ROOT}/deploy/e2e/lib.sh && echo $E2E_BIN/kubectl"], capture_output=True, text=True
    )
    path = out.stdout.strip()
    return path if out.returncode == 0 and Path(path).is_file() else None


@pytest.fixture(scope="module")
def workflow_account(kubeconfig: Path, admin: Any) -> Any:
    """deploy/rbac applied (kubectl apply -k when kubectl is there); yields the account's kubeconfig, then cleans up."""
    from kubernetes import client, utils

    core = client.CoreV1Api(admin)
    for _ in range(120):  # a previous run's namespace may still be terminating
        found = [n for n in core.list_namespace().items if n.metadata.name == NS]
        if not found or not found[0].metadata.deletion_timestamp:
            break
        time.sleep(0.5)
    if not found:
        core.create_namespace({"metadata": {"name": NS}})
    kubectl = _kubectl()
    docs = [
        d
        for f in sorted(RBAC.glob("*.yaml"))
        if f.name != "kustomization.yaml"
        for d in yaml.safe_load_all(f.read_text())
        if d
    ]
    if kubectl:
        subprocess.run(
            [kubectl, "--kubeconfig", str(kubeconfig), "apply", "-k", str(RBAC)], check=True, capture_output=True
        )
    else:
        for doc in docs:
            try:
                utils.create_from_dict(admin, doc)
            except utils.FailToCreateError as err:
                if not all(e.status == 409 for e in err.api_exceptions):
                    raise
    token = core.create_namespaced_service_account_token(SA, NS, {"spec": {"expirationSeconds": 3600}}).status.token
    admin_config = yaml.safe_load(kubeconfig.read_text())
    cluster_entry = admin_config["clusters"][0]
    sa_config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster_entry],
        "users": [{"name": SA, "user": {"token": token}}],
        "contexts": [{"name": SA, "context": {"cluster": cluster_entry["name"], "user": SA, "namespace": NS}}],
        "current-context": SA,
    }
    path = kubeconfig.parent / f"{SA}-{token[-8:]}.kubeconfig"
    path.write_text(yaml.safe_dump(sa_config))
    yield {"kubeconfig": path, "kubectl": kubectl}
    path.unlink(missing_ok=True)
    rbac = client.RbacAuthorizationV1Api(admin)
    rbac.delete_cluster_role_binding("vcpilot-workflow-observer")
    rbac.delete_cluster_role("vcpilot-workflow-observer")
    core.delete_namespace(NS)


def test_the_account_runs_a_job_through_its_whole_life(workflow_account, kubeconfig):
    from components.volcano.cluster_k8s import KubeCluster

    cluster = KubeCluster(workflow_account["kubeconfig"])
    assert cluster.queue("default").state == "Open"
    assert {q.name for q in cluster.queues()} >= {"default"}
    assert sum(n.gpu_allocatable for n in cluster.nodes()) > 0
    # No GPU: the account's rights are the point, not the scheduling. kwok completes the pod after a second.
    kwok_completes = {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "1s"}}
    manifest = vcjob(
        "rbac-check",
        namespace=NS,
        labels={"workflows.argoproj.io/workflow": "wf-1"},
        max_retry=1,
        tasks=[vcjob_task(gpus=0, metadata=kwok_completes)],
    )
    cluster.submit(manifest)
    done = cluster.wait("rbac-check", timeout=90, namespace=NS)
    assert done.phase == "Completed" and done.pods[0].phase == "Succeeded"
    assert cluster.get_object("rbac-check", NS)["status"]["state"]["phase"] == "Completed"
    assert cluster.events("rbac-check", NS)
    assert [j.name for j in cluster.list_jobs({"workflows.argoproj.io/workflow": "wf-1"}, namespace=NS)] == [
        "rbac-check"
    ]
    cluster.delete("rbac-check", NS)

    # What no step does is refused, with a sentence that says so.
    with pytest.raises(ClusterError, match=r"^not allowed to label node .*check the kubeconfig's user or the RBAC\.$"):
        cluster.fail_node(done.pods[0].node)
    with pytest.raises(ClusterError, match="not allowed to list jobs"):
        cluster.list_jobs()
    cluster.close()


def test_the_account_may_do_exactly_what_the_steps_use(workflow_account):
    from kubernetes import client, config

    api = config.new_client_from_config(str(workflow_account["kubeconfig"]))
    authz = client.AuthorizationV1Api(api)

    def allowed(namespace: str, group: str, resource: str, verb: str) -> bool:
        attrs = {"group": group, "resource": resource, "verb": verb}
        if namespace:
            attrs["namespace"] = namespace
        review = authz.create_self_subject_access_review({"spec": {"resourceAttributes": attrs}})
        return bool(review.status.allowed)

    grid = [(ns, g, r) for ns in (NS, "default") for g, r in NAMESPACED] + [("", g, r) for g, r in CLUSTER]
    granted = {(ns, r, v) for ns, g, r in grid for v in VERBS if allowed(ns, g, r, v)}
    assert granted == EXPECTED, f"too much: {sorted(granted - EXPECTED)}; missing: {sorted(EXPECTED - granted)}"
    api.close()


@pytest.mark.parametrize(
    ("verb", "resource", "answer"),
    [
        ("create", "jobs.batch.volcano.sh", "yes"),
        ("delete", "jobs.batch.volcano.sh", "yes"),
        ("delete", "nodes", "no"),
        ("create", "secrets", "no"),
        ("get", "secrets", "no"),
        ("patch", "nodes", "no"),
        ("create", "pods", "no"),
    ],
)
def test_kubectl_auth_can_i_agrees(workflow_account, kubeconfig, verb, resource, answer):
    if not workflow_account["kubectl"]:
        pytest.skip("kubectl is not on PATH nor in the e2e build")
    out = subprocess.run(
        [
            workflow_account["kubectl"],
            "--kubeconfig",
            str(kubeconfig),
            "auth",
            "can-i",
            verb,
            resource,
            "-n",
            NS,
            f"--as=system:serviceaccount:{NS}:{SA}",
        ],
        capture_output=True,
        text=True,
    )
    assert out.stdout.strip() == answer, out.stderr
