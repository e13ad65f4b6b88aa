"""`kubectl apply -k deploy/` against the e2e control plane: what kubectl renders is what the unit tests check,
the API server accepts all of it (server-side dry run, with Argo's CRDs installed), and once applied the queues
are Volcano's, open, as deploy/volcano/ says, and the workflow's account may do what tests/e2e/test_rbac.py
requires, no more. Everything it created is deleted afterwards (Argo's CRDs only when they were not there).
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import test_rbac as rbac  # tests/e2e/test_rbac.py: its checks run here against what deploy/ installed
import yaml

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
ARGO_CRDS = Path("third_party") / "argo-workflows-v4.1.2" / "manifests" / "base" / "crds" / "full"  # as install.yaml
CAN_I = next(m for m in rbac.test_kubectl_auth_can_i_agrees.pytestmark if m.name == "parametrize").args[1]


@pytest.fixture(scope="module")
def kubectl() -> str:
    """The e2e build's kubectl (the API server's version, kustomize built in), else one on PATH; or skip."""
    found = subprocess.run([str(DEPLOY / "e2e" / "build.sh"), "--bin-dir"], capture_output=True, text=True)
    built = Path(found.stdout.strip().splitlines()[-1]) / "kubectl" if found.returncode == 0 and found.stdout else None
    if built is not None and built.is_file():
        return str(built)
    on_path = shutil.which("kubectl")
    if on_path is None:
        pytest.skip("no kubectl: neither in the e2e build (deploy/e2e/build.sh --bin-dir) nor on PATH")
    return on_path


def run(kubectl: str, kubeconfig: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [kubectl, "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True, timeout=300
    )
    if check and done.returncode != 0:
        pytest.fail(f"kubectl {' '.join(args)} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done


def rendered(kubectl: str, directory: Path) -> list[dict[str, Any]]:
    out = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True, check=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


@pytest.fixture(scope="module")
def argo_crds(kubectl: str, kubeconfig: Path, shared_dir: Path) -> Iterator[None]:
    """Argo v4.1.2's CRDs, applied server-side as Argo's install does (they are too large for client-side)."""
    before = set(run(kubectl, kubeconfig, "get", "crd", "-o", "name").stdout.split())
    files = sorted((shared_dir / ARGO_CRDS).glob("argoproj.io_*.yaml"))
    assert files, f"no Argo CRDs under {shared_dir / ARGO_CRDS}"
    names = [
        f"customresourcedefinition.apiextensions.k8s.io/{yaml.safe_load(f.read_text())['metadata']['name']}"
        for f in files
    ]
    run(kubectl, kubeconfig, "apply", "--server-side", "--force-conflicts", *[a for f in files for a in ("-f", str(f))])
    run(kubectl, kubeconfig, "wait", "--for=condition=Established", "--timeout=60s", *names)
    yield
    created = [name for name in names if name not in before]
    if created:
        run(kubectl, kubeconfig, "delete", "--ignore-not-found", "--wait=false", *created, check=False)


@pytest.fixture(scope="module")
def installed(kubectl: str, kubeconfig: Path, argo_crds: None) -> Iterator[list[dict[str, Any]]]:
    """deploy/ applied for real (after a server-side dry run of all of it); deleted with everything in it after."""
    namespace = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["namespace"]
    wait_until_gone(kubectl, kubeconfig, namespace)  # test_rbac.py's namespace of a previous run may be going
    # A dry run cannot create the namespace its other objects go into: create that first, then try all of it.
    run(kubectl, kubeconfig, "apply", "-f", str(DEPLOY / "workspace" / "namespace.yaml"))
    try:
        run(kubectl, kubeconfig, "apply", "--dry-run=server", "-k", str(DEPLOY))
        run(kubectl, kubeconfig, "apply", "-k", str(DEPLOY))
        yield rendered(kubectl, DEPLOY)
    finally:
        run(kubectl, kubeconfig, "delete", "--ignore-not-found", "--wait=false", "-k", str(DEPLOY), check=False)
        wait_until_gone(kubectl, kubeconfig, namespace)


def wait_until_gone(kubectl: str, kubeconfig: Path, namespace: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if run(kubectl, kubeconfig, "get", "namespace", namespace, "--ignore-not-found", "-o", "name").stdout == "":
            return
        time.sleep(1)


@pytest.fixture(scope="module")
def account(installed: list[dict[str, Any]], kubeconfig: Path, admin: Any, kubectl: str) -> Iterator[dict[str, Any]]:
    """What test_rbac.py's `workflow_account` yields, for the service account that deploy/ installed."""
    from kubernetes import client

    accounts = {o["metadata"]["name"]: o for o in installed if o["kind"] == "ServiceAccount"}
    assert rbac.SA in accounts, "test_rbac.py checks another account than deploy/ installs"
    sa = accounts[rbac.SA]  # (the other, vcpilot-job, is the guard's: the terminate test shows what it may do)
    name, namespace = sa["metadata"]["name"], sa["metadata"]["namespace"]
    assert namespace == rbac.NS
    token = (
        client.CoreV1Api(admin)
        .create_namespaced_service_account_token(name, namespace, {"spec": {"expirationSeconds": 3600}})
        .status.token
    )
    cluster_entry = yaml.safe_load(kubeconfig.read_text())["clusters"][0]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster_entry],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [
            {"name": name, "context": {"cluster": cluster_entry["name"], "user": name, "namespace": namespace}}
        ],
        "current-context": name,
    }
    path = kubeconfig.parent / f"{name}-deploy-{token[-8:]}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    yield {"kubeconfig": path, "kubectl": kubectl}
    path.unlink(missing_ok=True)


def test_kubectl_renders_what_the_unit_tests_check(kubectl: str) -> None:
    spec = importlib.util.spec_from_file_location("unit_test_deploy", ROOT / "tests" / "unit" / "test_deploy.py")
    assert spec is not None and spec.loader is not None
    unit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(unit)
    for directory in (DEPLOY, DEPLOY / "volcano" / "scheduler"):
        key = lambda o: (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])  # noqa: E731
        theirs = {key(o): o for o in rendered(kubectl, directory)}
        ours = {key(o): o for o in unit.render(directory)}
        assert ours.keys() == theirs.keys() and ours == theirs, f"render() differs from kubectl kustomize {directory}"


def test_the_queues_are_open_as_deploy_says(installed: list[dict[str, Any]], admin: Any, eventually) -> None:
    from kubernetes import client

    api = client.CustomObjectsApi(admin)
    wanted = {o["metadata"]["name"]: o["spec"] for o in installed if o["kind"] == "Queue"}
    assert wanted
    for name, spec in wanted.items():
        live = api.get_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", name)
        assert {k: live["spec"].get(k) for k in ("weight", "reclaimable", "priority")} == {
            k: spec.get(k) for k in ("weight", "reclaimable", "priority")
        }, name
        eventually(
            f"Volcano opens queue {name}",
            lambda name=name: (
                api.get_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", name)
                .get("status", {})
                .get("state")
                == "Open"
            ),
        )
    scheduling = client.SchedulingV1Api(admin)
    for obj in (o for o in installed if o["kind"] == "PriorityClass"):
        assert scheduling.read_priority_class(obj["metadata"]["name"]).value == obj["value"]


def test_the_workflow_template_and_its_schedule_are_installed(installed: list[dict[str, Any]], admin: Any) -> None:
    from kubernetes import client

    api = client.CustomObjectsApi(admin)
    for obj in (o for o in installed if o["apiVersion"].startswith("argoproj.io/")):
        plural = {"WorkflowTemplate": "workflowtemplates", "CronWorkflow": "cronworkflows"}[obj["kind"]]
        live = api.get_namespaced_custom_object(
            "argoproj.io", "v1alpha1", obj["metadata"]["namespace"], plural, obj["metadata"]["name"]
        )
        # The API server prunes what a CRD's schema does not know and adds defaults: none of ours may go missing.
        assert contains(live["spec"], obj["spec"]), f"the API server dropped a field of {obj['kind']}"


def contains(live: Any, ours: Any) -> bool:
    if isinstance(ours, dict):
        return isinstance(live, dict) and all(k in live and contains(live[k], v) for k, v in ours.items())
    if isinstance(ours, list):
        return isinstance(live, list) and len(live) == len(ours) and all(map(contains, live, ours))
    return live == ours


def test_the_account_may_do_exactly_what_the_steps_use(account: dict[str, Any]) -> None:
    rbac.test_the_account_may_do_exactly_what_the_steps_use(account)


def test_the_account_runs_a_job_through_its_whole_life(account: dict[str, Any], kubeconfig: Path) -> None:
    rbac.test_the_account_runs_a_job_through_its_whole_life(account, kubeconfig)


@pytest.mark.parametrize(("verb", "resource", "answer"), CAN_I)
def test_kubectl_auth_can_i_agrees(account: dict[str, Any], kubeconfig: Path, verb: str, resource: str, answer: str):
    rbac.test_kubectl_auth_can_i_agrees(account, kubeconfig, verb, resource, answer)
