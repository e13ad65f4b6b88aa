"""One contract suite, two clusters: LocalCluster in `make test`, KubeCluster on the e2e control plane under `-m e2e`.

Jobs are written for both clusters by `contract_kit`. Each KubeCluster test gets a namespace of its own and
leaves no job, queue or failed node behind.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from contract_kit import E2E_KUBECONFIG, Ctx

from components.volcano.cluster import Cluster
from components.volcano.cluster_local import LocalCluster
from components.volcano.localconfig import LocalClusterConfig


def _local(tmp_path: Path) -> Iterator[Ctx]:
    # The e2e control plane's shape: two nodes of four GPUs.
    cluster = LocalCluster(tmp_path / "home", LocalClusterConfig())

    def residue(job: str) -> list[str]:
        with sqlite3.connect(cluster.home / "cluster.db") as db:
            return [r[0] for r in db.execute("SELECT name FROM pods WHERE job = ?", (job,))]

    ctx = Ctx(cluster, "default", "local", residue)
    yield ctx
    for job in cluster.list_jobs():
        cluster.delete(job.name, job.namespace, missing_ok=True)
    cluster.close()


def _kube() -> Iterator[Ctx]:
    kubeconfig = os.environ.get(E2E_KUBECONFIG)
    if not kubeconfig or not Path(kubeconfig).is_file():
        pytest.skip(f"set {E2E_KUBECONFIG} to the kubeconfig of a running e2e cluster (deploy/e2e/up.sh)")
    netns = os.environ.get("VCPILOT_E2E_NETNS", "vcpilot-e2e")  # without it the address would leave the machine
    if not Path("/run/netns", netns).exists():
        pytest.fail(f"the e2e cluster's network namespace {netns} does not exist: start it with deploy/e2e/up.sh")
    from kubernetes import client, config

    from components.volcano.cluster_k8s import KubeCluster

    cluster = KubeCluster(kubeconfig)
    admin = config.new_client_from_config(kubeconfig)
    core, custom = client.CoreV1Api(admin), client.CustomObjectsApi(admin)
    ns = f"contract-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})

    def residue(job: str) -> list[str]:
        pods = core.list_namespaced_pod(ns, label_selector=f"volcano.sh/job-name={job}").items
        groups = custom.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", ns, "podgroups")["items"]
        mine = [g for g in groups if g["metadata"]["name"].startswith(f"{job}-")]
        return [f"Pod/{p.metadata.name}" for p in pods] + [f"PodGroup/{g['metadata']['name']}" for g in mine]

    ctx = Ctx(cluster, ns, "kube", residue)
    yield ctx
    # Each step on its own: a cluster that went away mid-test must not leave the namespace or a node behind.
    steps = [lambda n=node: cluster.recover_node(n) for node in ctx.failed_nodes]
    steps.append(lambda: [cluster.delete(j.name, ns, missing_ok=True) for j in cluster.list_jobs(namespace=ns)])
    steps += [
        lambda q=queue: custom.delete_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", q)
        for queue in ctx.queues
    ]
    steps.append(lambda: core.delete_namespace(ns))
    for node in ctx.failed_nodes:  # the next test needs every node Ready again
        steps.append(
            lambda n=node: ctx.eventually(
                f"node {n} is Ready", lambda: any(x.name == n and x.ready for x in cluster.nodes())
            )
        )
    for step in steps:
        with contextlib.suppress(Exception):
            step()
    cluster.close()
    admin.close()


@pytest.fixture(params=["local", pytest.param("kube", marks=pytest.mark.e2e)])
def ctx(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ctx]:
    """The cluster under test: LocalCluster, or KubeCluster on the e2e control plane (marked e2e)."""
    if request.param == "local":
        yield from _local(tmp_path)
    else:
        yield from _kube()


@pytest.fixture
def cluster(ctx: Ctx) -> Cluster:
    """The Cluster under test (parametrized through `ctx`)."""
    return ctx.cluster  # type: ignore[no-any-return]
