"""Fixtures for the tests that run against the e2e control plane (deploy/e2e/up.sh): skipped without one."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from real_kit import REAL_NODE_LABEL, InClusterMlflow, mlflow_objects, on_real_nodes

ROOT = Path(__file__).resolve().parents[2]
E2E_KUBECONFIG = "VCPILOT_E2E_KUBECONFIG"


@pytest.fixture(scope="session")
def kubeconfig() -> Path:
    """The admin kubeconfig of the running e2e cluster; the test skips when VCPILOT_E2E_KUBECONFIG is unset."""
    path = os.environ.get(E2E_KUBECONFIG)
    if not path or not Path(path).is_file():
        pytest.skip(f"set {E2E_KUBECONFIG} to the kubeconfig of a running e2e cluster (deploy/e2e/up.sh)")
    # The cluster's address lives in its network namespace: without it, traffic to that address would leave
    # this machine, which tests must never do.
    netns = os.environ.get("VCPILOT_E2E_NETNS", "vcpilot-e2e")
    if not Path("/run/netns", netns).exists():
        pytest.fail(f"the e2e cluster's network namespace {netns} does not exist: start it with deploy/e2e/up.sh")
    return Path(path)


@pytest.fixture(scope="session")
def admin(kubeconfig: Path) -> Iterator[Any]:
    """An ApiClient with the cluster admin's credentials (to set up and inspect, never as the thing tested)."""
    from kubernetes import config

    api = config.new_client_from_config(str(kubeconfig))
    yield api
    api.close()


@pytest.fixture
def namespace(admin: Any) -> Iterator[str]:
    """A namespace of this test's own, deleted (with whatever is left in it) afterwards."""
    from kubernetes import client

    core = client.CoreV1Api(admin)
    name = f"e2e-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


@pytest.fixture
def eventually() -> Callable[..., Any]:
    """`eventually(what, check, timeout)`: poll `check` until truthy; fail naming `what` after `timeout` s."""

    def poll(what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() >= deadline:
                pytest.fail(f"timed out waiting until {what}")
            time.sleep(0.3)

    return poll


@pytest.fixture
def cluster(kubeconfig: Path) -> Iterator[Any]:
    """A KubeCluster with the admin's kubeconfig; nodes it failed are made Ready again afterwards."""
    from components.volcano.cluster_k8s import KubeCluster

    kube = KubeCluster(kubeconfig)
    failed: list[str] = []
    fail_node = kube.fail_node

    def tracked(node: str) -> list[str]:
        failed.append(node)
        return fail_node(node)

    kube.fail_node = tracked  # type: ignore[method-assign]
    yield kube
    for node in failed:
        kube.recover_node(node)
    deadline = time.monotonic() + 60
    while failed and time.monotonic() < deadline and not all(n.ready for n in kube.nodes() if n.name in failed):
        time.sleep(0.5)
    kube.close()


# ---- real nodes (deploy/e2e/nodes.sh): kubelets on containerd running the step image -------------------------------


def _required(what: str) -> None:
    """Skip, or fail where `make e2e` asked for real nodes (VCPILOT_E2E_REQUIRE_REAL=1): CI never skips them."""
    if os.environ.get("VCPILOT_E2E_REQUIRE_REAL") == "1":
        pytest.fail(f"{what} (VCPILOT_E2E_REQUIRE_REAL=1)")
    pytest.skip(what)


@pytest.fixture(scope="session")
def real_nodes(admin: Any) -> list[Any]:
    """The Ready real nodes (label type=real), each advertising nvidia.com/gpu; skipped when the cluster has none."""
    from kubernetes import client

    key, value = REAL_NODE_LABEL
    nodes = client.CoreV1Api(admin).list_node(label_selector=f"{key}={value}").items
    ready = [n for n in nodes if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])]
    if len(ready) < 2:
        _required(f"the e2e cluster has {len(ready)} Ready real nodes, these tests need 2 (VCPILOT_E2E_REAL_NODES)")
    return ready


@pytest.fixture(scope="session")
def step_image() -> str:
    """The step image every real node holds (deploy/e2e/image.sh; up.sh imports it)."""
    image = os.environ.get("VCPILOT_E2E_STEP_IMAGE", "")
    if not image:
        _required("set VCPILOT_E2E_STEP_IMAGE to the step image that the real nodes hold (deploy/e2e/image.sh)")
    return image


@pytest.fixture
def workspace(admin: Any, namespace: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A workspace PVC every pod of the namespace can mount read-write, and the host directory behind it.

    Both real nodes are this machine, so a hostPath volume is what an RWX volume (NFS, CephFS) is on a real
    cluster: the same files from every node. Pods run as uid 1000 (the image's user), hence the open mode.
    """
    from kubernetes import client

    core = client.CoreV1Api(admin)
    host = tmp_path_factory.mktemp("workspace")
    host.chmod(0o777)
    pv = f"workspace-{namespace}"
    core.create_persistent_volume(
        {
            "metadata": {"name": pv},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "hostPath": {"path": str(host), "type": "Directory"},
                "claimRef": {"namespace": namespace, "name": "workspace"},
            },
        }
    )
    core.create_namespaced_persistent_volume_claim(
        namespace,
        {
            "metadata": {"name": "workspace"},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "volumeName": pv,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )
    yield "workspace", host
    core.delete_persistent_volume(pv)


@pytest.fixture
def mlflow_in_cluster(
    admin: Any, namespace: str, real_nodes: list[Any], step_image: str, eventually: Callable[..., Any]
) -> InClusterMlflow:
    """deploy/mlflow's server in this test's namespace, on a real node, with its store in the pod (emptyDir)."""
    import httpx
    from kubernetes import client, utils

    core = client.CoreV1Api(admin)
    objects = mlflow_objects(namespace=namespace, image=step_image, also_allow="")
    service = next(o for o in objects if o["kind"] == "Service")
    name, port = service["metadata"]["name"], service["spec"]["ports"][0]["port"]
    ip = core.create_namespaced_service(namespace, service).spec.cluster_ip
    host_uri = f"http://{ip}:{port}"
    # This test reads it through the Service's cluster IP, a Host header the shipped server would refuse.
    objects = mlflow_objects(namespace=namespace, image=step_image, also_allow=f"{ip}:{port}")
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    on_real_nodes(deployment["spec"]["template"]["spec"], real_nodes)
    utils.create_from_dict(admin, deployment, namespace=namespace)

    def healthy() -> bool:
        try:
            return httpx.get(f"{host_uri}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    eventually("the in-cluster MLflow answers /health through its Service", healthy, timeout=180)
    return InClusterMlflow(f"http://{name}.{namespace}.svc.cluster.local:{port}", host_uri)


# ---- vcpilot installed with Argo (deploy/e2e/install.py, what `make cluster` leaves running) -----------------------


@pytest.fixture(scope="session")
def deployment(admin: Any, kubeconfig: Path, real_nodes: list[Any], step_image: str) -> Any:
    """`kubectl apply -k deploy/` in the cluster with Argo, the demo seeded: installed once, kept if already there.

    Needs the Argo Server up.sh starts with real nodes; the tests submit through it, as the UI and the CLI do.
    """
    import subprocess
    import sys

    from deployment_kit import E2E, Deployment, e2e_env
    from kubernetes import client

    env = e2e_env()
    namespace = env["VCPILOT_NAMESPACE"]
    argo_env = {k: v for k, v in env.items() if k.startswith("ARGO_")}
    try:
        import httpx

        httpx.get(f"https://{argo_env['ARGO_SERVER']}/api/v1/version", verify=False, timeout=5).raise_for_status()
    except Exception as err:  # noqa: BLE001 — any way of not answering is the same skip
        _required(f"the e2e cluster runs no Argo Server at {argo_env['ARGO_SERVER']} ({err}): up.sh with real nodes")
    templates = client.CustomObjectsApi(admin).list_namespaced_custom_object(
        "argoproj.io", "v1alpha1", namespace, "workflowtemplates"
    )["items"]
    if not templates:
        subprocess.run([sys.executable, str(E2E / "install.py"), "--image", step_image], check=True)
    pv = client.CoreV1Api(admin).read_persistent_volume("e2e-vcpilot-workspace")
    bin_dir = Path(next(p for p in env["PATH"].split(":") if Path(p, "argo").is_file()))
    return Deployment(
        kubeconfig=kubeconfig,
        namespace=namespace,
        argo_server=argo_env["ARGO_SERVER"],
        argo_env=argo_env,
        admin=admin,
        mlflow_uri=env["MLFLOW_TRACKING_URI"],
        step_image=step_image,
        workspace=Path(pv.spec.host_path.path),
        bin=bin_dir,
    )


@pytest.fixture
def kill_node() -> Iterator[Callable[[str], None]]:
    """`kill_node(name)`: a real node dies (deploy/e2e/node-fault.sh kill); revived, and Ready, after the test."""
    import subprocess

    from deployment_kit import E2E

    killed: list[str] = []

    def kill(node: str) -> None:
        subprocess.run([str(E2E / "node-fault.sh"), "kill", node], check=True)
        killed.append(node)

    yield kill
    for node in killed:
        subprocess.run([str(E2E / "node-fault.sh"), "revive", node], check=True)


@pytest.fixture
def priority_classes(admin: Any) -> None:
    """deploy/volcano's priority classes: vcpilot-low and vcpilot-high, and the run bands plan gives a run."""
    from kubernetes import utils
    from kubernetes.utils import FailToCreateError

    try:
        utils.create_from_yaml(admin, str(ROOT / "deploy/volcano/priorityclasses.yaml"))
    except FailToCreateError as err:  # a test before this one made them already
        assert all(e.status == 409 for e in err.api_exceptions), err
