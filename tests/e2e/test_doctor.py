"""`vcpilot doctor` against the real deployment: every check passes, and each fails with its fix when its piece goes.

The cluster is shared with the other e2e tests, so what a case takes away it puts back at once, exactly as it was
(the object as read, less what the API server assigns), and what it adds it deletes. Cases that only need a
broken address (the API server, the Argo Server) change nothing in the cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipelines.doctor import CHECKS, run_checks
from pipelines.doctor_report import Check, render_text

pytestmark = [pytest.mark.e2e, pytest.mark.real_pods]

ROOT = Path(__file__).resolve().parents[2]
ARGO = ("argoproj.io", "v1alpha1")
SCHEDULING = ("scheduling.volcano.sh", "v1beta1")
APPLY = "kubectl apply -k deploy/"


def doctor(deployment: Any, **overrides: Any) -> dict[str, Check]:
    """The checks as run_checks reports them, by name, with the deployment's addresses unless overridden."""
    args = {"kubeconfig": deployment.kubeconfig, "argo_server": deployment.argo_server, **overrides}
    checks = run_checks(args["kubeconfig"], deployment.namespace, args["argo_server"], environ=deployment.argo_env)
    assert [c.check for c in checks] == list(CHECKS)
    return {c.check: c for c in checks}


def failing(deployment: Any, **overrides: Any) -> dict[str, Check]:
    return {name: c for name, c in doctor(deployment, **overrides).items() if not c.ok}


def as_created(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as read, ready to create again: without status and what the API server assigned."""
    keep = ("name", "namespace", "labels", "annotations")
    meta = {k: v for k, v in obj["metadata"].items() if k in keep and v is not None}
    return {**{k: v for k, v in obj.items() if k not in ("metadata", "status")}, "metadata": meta}


def until_gone(read: Callable[[], Any], timeout: float = 30.0) -> None:
    from kubernetes.client.exceptions import ApiException

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            read()
        except ApiException as err:
            if err.status == 404:
                return
            raise
        time.sleep(0.2)
    pytest.fail("an object the test deleted did not go")


@contextmanager
def taken_away(
    read: Callable[[], Any], delete: Callable[[], Any], create: Callable[[dict[str, Any]], Any]
) -> Iterator[None]:
    """The object gone while the block runs, created again from what was read before."""
    saved = as_created(read())
    delete()
    try:
        until_gone(read)
        yield
    finally:
        create(saved)


@pytest.fixture(scope="module")
def apis(deployment: Any) -> Any:
    from kubernetes import client

    class Apis:
        core = client.CoreV1Api(deployment.admin)
        custom = client.CustomObjectsApi(deployment.admin)
        rbac = client.RbacAuthorizationV1Api(deployment.admin)
        scheduling = client.SchedulingV1Api(deployment.admin)
        raw = deployment.admin.sanitize_for_serialization

    return Apis


def test_every_check_passes_and_the_cli_exits_0(deployment: Any) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipelines.cli",
            "doctor",
            "--kubeconfig",
            str(deployment.kubeconfig),
            "--namespace",
            deployment.namespace,
            "--argo-server",
            deployment.argo_server,
            "--json",
        ],
        cwd=ROOT,
        env={**os.environ, **deployment.argo_env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(done.stdout)
    assert done.returncode == 0, "\n".join(f"{r['check']}: {r['detail']} ({r['fix']})" for r in report if not r["ok"])
    assert [r["check"] for r in report] == list(CHECKS) and all(r["ok"] and r["fix"] is None for r in report)


def test_an_unreachable_api_server_fails_first_and_skips_what_needs_it(deployment: Any, tmp_path: Path) -> None:
    config = yaml.safe_load(deployment.kubeconfig.read_text())
    for entry in config["clusters"]:
        entry["cluster"]["server"] = "https://127.0.0.1:1"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    started = time.monotonic()
    failed = failing(deployment, kubeconfig=kubeconfig)
    assert time.monotonic() - started < 30
    assert set(failed) == set(CHECKS) - {"argo-server"}
    assert "--kubeconfig" in (failed["api-server"].fix or "")
    assert all(c.detail.startswith("skipped:") for name, c in failed.items() if name != "api-server")


def test_a_missing_queue_or_priority_class_fails_queues(deployment: Any, apis: Any) -> None:
    def queue() -> Any:
        return apis.custom.get_cluster_custom_object(*SCHEDULING, "queues", "serving")

    with taken_away(
        queue,
        lambda: apis.custom.delete_cluster_custom_object(*SCHEDULING, "queues", "serving"),
        lambda body: apis.custom.create_cluster_custom_object(*SCHEDULING, "queues", body),
    ):
        failed = failing(deployment)
    assert list(failed) == ["queues"] and "queue serving does not exist" in failed["queues"].detail
    assert failed["queues"].fix == APPLY

    with taken_away(
        lambda: apis.raw(apis.scheduling.read_priority_class("vcpilot-high")),
        lambda: apis.scheduling.delete_priority_class("vcpilot-high"),
        lambda body: apis.scheduling.create_priority_class(body),
    ):
        failed = failing(deployment)
    assert list(failed) == ["queues"] and "priority class vcpilot-high does not exist" in failed["queues"].detail


def test_without_the_role_binding_rbac_names_the_missing_verbs(deployment: Any, apis: Any) -> None:
    ns = deployment.namespace
    with taken_away(
        lambda: apis.raw(apis.rbac.read_namespaced_role_binding("vcpilot-workflow", ns)),
        lambda: apis.rbac.delete_namespaced_role_binding("vcpilot-workflow", ns),
        lambda body: apis.rbac.create_namespaced_role_binding(ns, body),
    ):
        failed = failing(deployment)
    assert list(failed) == ["rbac"]
    assert f"may not create/get/list/watch/delete jobs.batch.volcano.sh in {ns}" in failed["rbac"].detail
    assert failed["rbac"].fix == f"{APPLY} (deploy/rbac/ grants them)"


def test_a_grant_beyond_the_steps_fails_rbac(deployment: Any, apis: Any) -> None:
    ns, name = deployment.namespace, "doctor-e2e-extra"
    role = {
        "metadata": {"name": name},
        "rules": [{"apiGroups": ["batch.volcano.sh"], "resources": ["jobs"], "verbs": ["update"]}],
    }
    binding = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "vcpilot-workflow", "namespace": ns}],
    }
    apis.rbac.create_namespaced_role(ns, role)
    try:
        apis.rbac.create_namespaced_role_binding(ns, binding)
        failed = failing(deployment)
    finally:
        apis.rbac.delete_namespaced_role_binding(name, ns)
        apis.rbac.delete_namespaced_role(name, ns)
    assert list(failed) == ["rbac"]
    assert f"may also update jobs.batch.volcano.sh in {ns}, beyond what the steps use" in failed["rbac"].detail


def test_without_the_workflow_template_argo_fails_and_its_checks_skip(deployment: Any, apis: Any) -> None:
    ns = deployment.namespace
    with taken_away(
        lambda: apis.custom.get_namespaced_custom_object(*ARGO, ns, "workflowtemplates", "llm-autopilot"),
        lambda: apis.custom.delete_namespaced_custom_object(*ARGO, ns, "workflowtemplates", "llm-autopilot"),
        lambda body: apis.custom.create_namespaced_custom_object(*ARGO, ns, "workflowtemplates", body),
    ):
        failed = failing(deployment)
    assert list(failed) == ["argo", "mlflow", "image"]
    assert f"WorkflowTemplate {ns}/llm-autopilot not installed" in failed["argo"].detail
    assert failed["argo"].fix == APPLY and failed["mlflow"].detail.startswith("skipped:")


def test_a_closed_argo_server_port_fails_argo_server(deployment: Any) -> None:
    host = deployment.argo_server.rpartition(":")[0]
    failed = failing(deployment, argo_server=f"{host}:1")
    assert list(failed) == ["argo-server"] and "cannot reach the Argo Server" in failed["argo-server"].detail


@contextmanager
def template_defaults(apis: Any, namespace: str, values: dict[str, str]) -> Iterator[None]:
    """The installed template's defaults of `values` changed while the block runs, then put back."""
    get = apis.custom.get_namespaced_custom_object(*ARGO, namespace, "workflowtemplates", "llm-autopilot")
    parameters = get["spec"]["arguments"]["parameters"]
    index = {p["name"]: i for i, p in enumerate(parameters)}

    def patch(new: dict[str, str]) -> None:
        ops = []
        for name, value in new.items():
            path = f"/spec/arguments/parameters/{index[name]}"
            ops += [
                {"op": "test", "path": f"{path}/name", "value": name},
                {"op": "replace", "path": f"{path}/value", "value": value},
            ]
        apis.custom.patch_namespaced_custom_object(
            *ARGO, namespace, "workflowtemplates", "llm-autopilot", ops, _content_type="application/json-patch+json"
        )

    saved = {name: parameters[index[name]].get("value", "") for name in values}
    patch(values)
    try:
        yield
    finally:
        patch(saved)


def test_a_tracking_server_without_pods_and_an_empty_image_fail_their_checks(deployment: Any, apis: Any) -> None:
    ns, name = deployment.namespace, "doctor-e2e-no-pods"
    service = {"metadata": {"name": name}, "spec": {"selector": {"doctor-e2e": "nothing"}, "ports": [{"port": 5000}]}}
    apis.core.create_namespaced_service(ns, service)
    try:
        with template_defaults(apis, ns, {"mlflow-tracking-uri": f"http://{name}:5000", "image": ""}):
            failed = failing(deployment)
    finally:
        apis.core.delete_namespaced_service(name, ns)
    assert list(failed) == ["mlflow", "image"], render_text(list(failed.values()))
    assert "through the API server's proxy" in failed["mlflow"].detail
    assert f"kubectl -n {ns} get endpoints {name}" in (failed["mlflow"].fix or "")
    assert "image parameter is empty" in failed["image"].detail
