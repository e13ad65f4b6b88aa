"""`vcpilot doctor` without a cluster: what it reads from deploy/, URLs, the report, and every check against a fake.

The fake API server on loopback holds what `kubectl apply -k deploy/` installs (the manifests themselves, the
template with the kustomization's patched defaults) and answers SubjectAccessReviews by RBAC's rules over the
roles it holds; it also plays the Argo Server and MLflow's /health behind the service proxy. Taking one object
away at a time shows that the matching check, and only it, fails with its fix.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from pipelines import deployment
from pipelines.argo_address import argo_server_url, verify_tls
from pipelines.cli import app
from pipelines.deployment import DEPLOY, Grant
from pipelines.doctor import CHECKS, VOLCANO_CRDS, run_checks
from pipelines.doctor_http import ServiceRef, check_argo_server, check_mlflow, service_ref
from pipelines.doctor_report import Check, exit_code, render_json, render_text

ROOT = Path(__file__).resolve().parents[2]
NS = "vcpilot"
ACCOUNT = f"system:serviceaccount:{NS}:vcpilot-workflow"


# ---- what deploy/ says ----------------------------------------------------------------------------------------


def test_the_grants_are_what_the_e2e_rbac_test_expects_of_the_account():
    spec = importlib.util.spec_from_file_location("e2e_test_rbac", ROOT / "tests" / "e2e" / "test_rbac.py")
    assert spec is not None and spec.loader is not None
    rbac = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rbac)
    grants = deployment.rbac_grants(rbac.NS)
    ours = {(g.namespace or "", g.resource, g.verb) for g in grants}
    assert ours <= rbac.EXPECTED
    # the rest of test_rbac.py's list: the ClusterRole's grants, which hold in every namespace too
    cluster_wide = {(g.resource, g.verb) for g in grants if g.namespace is None}
    assert {(r, v) for _, r, v in rbac.EXPECTED - ours} <= cluster_wide


def test_grants_follow_the_bindings_and_expand_a_wildcard(tmp_path):
    (tmp_path / "kustomization.yaml").write_text("resources: [roles.yaml]\n")
    WF = [{"kind": "ServiceAccount", "name": "vcpilot-workflow"}]  # noqa: N806
    docs = [
        {
            "kind": "Role",
            "metadata": {"name": "r"},
            "rules": [{"apiGroups": ["a", "b"], "resources": ["x"], "verbs": ["get"]}],
        },
        {"kind": "RoleBinding", "metadata": {"name": "r"}, "roleRef": {"kind": "Role", "name": "r"}, "subjects": WF},
        {"kind": "ClusterRole", "metadata": {"name": "c"}, "rules": [{"resources": ["nodes"], "verbs": ["*"]}]},
        {
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "c"},
            "roleRef": {"kind": "ClusterRole", "name": "c"},
            "subjects": WF,
        },
        {
            "kind": "RoleBinding",
            "metadata": {"name": "o"},
            "roleRef": {"kind": "ClusterRole", "name": "other"},
            "subjects": [{"kind": "ServiceAccount", "name": "someone-else"}],
        },
        {
            "kind": "ClusterRole",
            "metadata": {"name": "unbound"},
            "rules": [{"resources": ["secrets"], "verbs": ["get"]}],
        },
    ]
    (tmp_path / "roles.yaml").write_text(yaml.safe_dump_all(docs))
    grants = deployment.rbac_grants("team", tmp_path)
    assert grants[:2] == [
        Grant(group="a", resource="x", verb="get", namespace="team"),
        Grant(group="b", resource="x", verb="get", namespace="team"),
    ]
    assert {g.verb for g in grants[2:]} == set(deployment.STANDARD_VERBS)
    assert all(g.resource == "nodes" and g.namespace is None for g in grants[2:])
    assert grants[0].describe() == "get x.a in team" and grants[2].describe().endswith("nodes cluster-wide")


def test_the_queues_and_classes_are_the_ones_the_kustomization_lists():
    queues, classes = deployment.volcano_names()
    docs = [
        d
        for f in ("queues.yaml", "priorityclasses.yaml")
        for d in yaml.safe_load_all((DEPLOY / "volcano" / f).read_text())
    ]
    assert queues == [d["metadata"]["name"] for d in docs if d["kind"] == "Queue"] and queues
    assert classes == [d["metadata"]["name"] for d in docs if d["kind"] == "PriorityClass"] and classes
    assert deployment.namespace() == NS


def test_a_missing_deploy_folder_is_one_sentence(tmp_path):
    with pytest.raises(deployment.DeployError, match=r"^cannot read .*kustomization.yaml: No such file or directory$"):
        deployment.manifests(tmp_path)


# ---- URLs -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "ref"),
    [
        ("http://vcpilot-mlflow:5000", ServiceRef(name="vcpilot-mlflow", namespace=NS, port=5000)),
        ("http://mlflow.team:5000", ServiceRef(name="mlflow", namespace="team", port=5000, certain=False)),
        ("http://mlflow.team.svc:5000/", ServiceRef(name="mlflow", namespace="team", port=5000, path="/")),
        (
            "https://mlflow.team.svc.cluster.local/mlflow",
            ServiceRef(name="mlflow", namespace="team", port=443, scheme="https", path="/mlflow"),
        ),
        ("http://mlflow", ServiceRef(name="mlflow", namespace=NS, port=80)),
        ("http://mlflow.example.com:5000", None),
        ("http://10.0.0.7:5000", None),
        ("http://localhost:5000", None),
        ("sqlite:///mlflow.db", None),
        ("", None),
        ("http://vcpilot-mlflow:http", None),
    ],
)
def test_service_urls_are_recognised_as_a_pod_resolves_them(uri, ref):
    assert service_ref(uri, NS) == ref


def test_the_proxy_path_reaches_the_service_port_and_keeps_a_prefix():
    assert service_ref("http://vcpilot-mlflow:5000", NS).proxy_path("/health") == (  # type: ignore[union-attr]
        "/api/v1/namespaces/vcpilot/services/vcpilot-mlflow:5000/proxy/health"
    )
    https = service_ref("https://mlflow.team.svc/mlflow/", NS)
    assert https is not None
    assert https.proxy_path("/health") == "/api/v1/namespaces/team/services/https:mlflow:443/proxy/mlflow/health"


def test_the_argo_server_address_follows_the_argo_clis_variables():
    assert argo_server_url("10.0.0.1:2746", {}) == "https://10.0.0.1:2746"
    assert argo_server_url("10.0.0.1:2746", {"ARGO_SECURE": "false"}) == "http://10.0.0.1:2746"
    assert argo_server_url("http://argo:2746/", {"ARGO_SECURE": "true"}) == "http://argo:2746"
    with pytest.raises(ValueError, match="ARGO_SECURE=maybe is neither true nor false"):
        argo_server_url("argo:2746", {"ARGO_SECURE": "maybe"})
    # A server behind a path: the argo CLI appends ARGO_BASE_HREF to host:port.
    assert argo_server_url("argo.example.com", {"ARGO_BASE_HREF": "/argo/"}) == "https://argo.example.com/argo"
    # The argo CLI turns TLS off only for the word `false`, and skips the certificate check only for `true`
    # (conn.go: `!= "false"`, `== "true"`): a spelling it reads otherwise than it means is refused, either way.
    assert argo_server_url("argo:2746", {"ARGO_SECURE": "True"}) == "https://argo:2746"  # both read true
    for name, value, meant, argo in (("ARGO_SECURE", "0", "false", "true"), ("ARGO_SECURE", "off", "false", "true")):
        with pytest.raises(ValueError) as caught:
            argo_server_url("argo:2746", {name: value})
        assert (
            str(caught.value) == f"{name}={value} reads as {meant}, but the argo CLI reads it as {argo}; write {meant}"
        )
    assert verify_tls({"ARGO_INSECURE_SKIP_VERIFY": "true"}) is False and verify_tls({}) is True
    assert verify_tls({"ARGO_INSECURE_SKIP_VERIFY": "no"}) is True  # both read false
    with pytest.raises(
        ValueError, match="ARGO_INSECURE_SKIP_VERIFY=1 reads as true, but the argo CLI reads it as false"
    ):
        verify_tls({"ARGO_INSECURE_SKIP_VERIFY": "1"})


# ---- the report -----------------------------------------------------------------------------------------------

PASSED = Check(check="api-server", ok=True, detail="Kubernetes v1.35.3 at https://10.250.0.1:6443")
FAILED = Check(check="queues", ok=False, detail="queue fallback does not exist", fix="kubectl apply -k deploy/")


def test_the_text_report_is_one_aligned_line_per_check_with_the_fix_of_a_failure():
    assert render_text([PASSED, FAILED]).splitlines() == [
        "api-server  ok    Kubernetes v1.35.3 at https://10.250.0.1:6443",
        "queues      FAIL  queue fallback does not exist; fix: kubectl apply -k deploy/",
    ]


def test_the_json_report_lists_check_ok_detail_fix():
    assert json.loads(render_json([PASSED, FAILED])) == [
        {"check": "api-server", "ok": True, "detail": PASSED.detail, "fix": None},
        {"check": "queues", "ok": False, "detail": FAILED.detail, "fix": "kubectl apply -k deploy/"},
    ]


def test_the_exit_code_is_zero_only_when_every_check_passed():
    assert exit_code([PASSED, PASSED]) == 0
    assert exit_code([PASSED, FAILED]) == 1
    assert exit_code([]) == 1


# ---- the Argo Server and MLflow over HTTP ---------------------------------------------------------------------


def answering(status: int, body: Any, seen: list[httpx.Request] | None = None) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        return httpx.Response(status, json=body) if not isinstance(body, str) else httpx.Response(status, text=body)

    return httpx.MockTransport(handle)


def refusing() -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    return httpx.MockTransport(handle)


def test_the_argo_server_answers_its_version_with_the_token_sent():
    seen: list[httpx.Request] = []
    env = {"ARGO_SERVER": "argo:2746", "ARGO_TOKEN": "abc"}
    check = check_argo_server(None, env, transport=answering(200, {"version": "v4.1.2"}, seen))
    assert check == Check(check="argo-server", ok=True, detail="Argo Workflows v4.1.2 at https://argo:2746")
    assert str(seen[0].url) == "https://argo:2746/api/v1/version"
    assert seen[0].headers["Authorization"] == "Bearer abc"


@pytest.mark.parametrize(
    ("server", "env", "transport", "detail", "fix"),
    [
        (None, {}, None, "no Argo Server named", "set ARGO_SERVER"),
        ("argo:2746", {}, refusing(), "cannot reach the Argo Server at https://argo:2746 (", "argo-server"),
        ("argo:2746", {}, answering(401, {"message": "no token"}), "refused the request (HTTP 401)", "ARGO_TOKEN"),
        ("argo:2746", {"ARGO_INSECURE_SKIP_VERIFY": "sure"}, None, "ARGO_INSECURE_SKIP_VERIFY=sure", "true or false"),
        ("argo:2746", {}, answering(200, "<html>"), "did not answer as an Argo Server does", "--argo-server"),
    ],
)
def test_an_argo_server_that_cannot_be_used_says_what_to_fix(server, env, transport, detail, fix):
    check = check_argo_server(server, env, transport=transport)
    assert not check.ok and detail in check.detail and fix in (check.fix or "")


@pytest.mark.parametrize(
    ("uri", "detail"),
    [
        ("", "is empty"),
        ("sqlite:////tmp/mlflow.db", "need an http(s) tracking server"),
        ("http://localhost:5000", "the step's own pod"),
        ("http://127.0.0.1:5000", "the step's own pod"),
    ],
)
def test_a_tracking_uri_the_pods_cannot_share_fails_before_any_request(uri, detail):
    check = check_mlflow(None, NS, uri, transport=refusing())  # type: ignore[arg-type]
    assert not check.ok and detail in check.detail and "mlflow-tracking-uri" in (check.fix or "")


def test_a_tracking_server_on_a_normal_host_is_fetched_directly():
    seen: list[httpx.Request] = []
    ok = check_mlflow(None, NS, "https://mlflow.example.com", transport=answering(200, "OK", seen))  # type: ignore[arg-type]
    assert ok.ok and str(seen[0].url) == "https://mlflow.example.com/health"
    down = check_mlflow(None, NS, "https://mlflow.example.com", transport=answering(503, "down"))  # type: ignore[arg-type]
    assert not down.ok and "HTTP 503" in down.detail


# ---- every check against a fake API server --------------------------------------------------------------------

PATHS = {  # kind -> the API path of a named object (namespaced ones in NS)
    "Namespace": "/api/v1/namespaces/{name}",
    "PersistentVolumeClaim": "/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts/{name}",
    "Service": "/api/v1/namespaces/{ns}/services/{name}",
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments/{name}",
    "Queue": "/apis/scheduling.volcano.sh/v1beta1/queues/{name}",
    "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses/{name}",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles/{name}",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings/{name}",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{name}",
    "WorkflowTemplate": "/apis/argoproj.io/v1alpha1/namespaces/{ns}/workflowtemplates/{name}",
    "CronWorkflow": "/apis/argoproj.io/v1alpha1/namespaces/{ns}/cronworkflows/{name}",
    "CustomResourceDefinition": "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}",
}
CRD_PATH = PATHS["CustomResourceDefinition"]
MLFLOW_HEALTH = f"/api/v1/namespaces/{NS}/services/vcpilot-mlflow:5000/proxy/health"


def installed() -> dict[str, Any]:
    """deploy/ as the API server stores it: objects by path, the template's defaults patched as deploy/ says."""
    objects = {}
    for obj in deployment.manifests(DEPLOY):
        obj = copy.deepcopy(obj)
        obj["metadata"].setdefault("namespace", NS)
        objects[PATHS[obj["kind"]].format(ns=NS, name=obj["metadata"]["name"])] = obj
    template = objects[PATHS["WorkflowTemplate"].format(ns=NS, name="llm-autopilot")]
    for patch in yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["patches"]:
        for op in yaml.safe_load(patch["patch"]):
            *parents, key = op["path"].strip("/").split("/")
            node = template
            for part in parents:
                node = node[int(part)] if isinstance(node, list) else node[part]
            assert op["op"] == "replace" or node[key] == op["value"]
            node[key] = op["value"]
    established = {"status": {"conditions": [{"type": "Established", "status": "True"}]}}
    crds = [
        *VOLCANO_CRDS,
        *(f"{p}.argoproj.io" for p in ("workflows", "workflowtemplates", "cronworkflows", "workflowtaskresults")),
    ]
    objects |= {CRD_PATH.format(name=name): {"metadata": {"name": name}, **established} for name in crds}
    return objects


class FakeCluster:
    """An API server over `objects` (path -> object), an authorizer over their roles, and an Argo Server."""

    def __init__(self) -> None:
        self.objects = installed()
        self.mlflow_up = True
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else every answer waits out the client's delayed ACK

            def log_message(self, *args: Any) -> None:
                pass

            def reply(self, status: int, body: Any) -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                path = urlparse(self.path).path.rstrip("/")
                if path == "/version":
                    return self.reply(200, {"gitVersion": "v1.35.3"})
                if path == "/api/v1/version":  # the Argo Server's
                    return self.reply(200, {"version": "v4.1.2"})
                if path == "/api/v1/nodes":
                    image = {"names": ["ghcr.io/vcpilot/vcpilot:0.1.0"], "sizeBytes": 1}
                    return self.reply(200, {"items": [{"metadata": {"name": "n1"}, "status": {"images": [image]}}]})
                if path == MLFLOW_HEALTH:
                    if fake.mlflow_up:
                        return self.reply(200, b"OK")
                    return self.reply(
                        503, {"kind": "Status", "message": 'no endpoints available for service "vcpilot-mlflow"'}
                    )
                if path in fake.objects:
                    return self.reply(200, fake.objects[path])
                return self.reply(404, {"kind": "Status", "code": 404, "message": f"{path} not found"})

            def do_POST(self) -> None:
                path = urlparse(self.path).path
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                if path.endswith("/selfsubjectreviews"):
                    return self.reply(201, {"status": {"userInfo": {"username": "kubernetes-admin"}}})
                if path.endswith("/subjectaccessreviews"):
                    return self.reply(201, {"status": {"allowed": fake.allows(body["spec"])}})
                return self.reply(404, {"kind": "Status", "code": 404, "message": "not found"})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.httpd.server_address[1]}"

    def allows(self, spec: dict[str, Any]) -> bool:
        """RBAC: a binding names the user (a service account) and its role has a rule that matches."""
        attrs, user = spec["resourceAttributes"], spec["user"]
        for obj in list(self.objects.values()):
            if obj.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
                continue
            scope = obj["metadata"]["namespace"] if obj["kind"] == "RoleBinding" else None
            if scope is not None and attrs.get("namespace") != scope:
                continue
            if not any(user == f"system:serviceaccount:{s['namespace']}:{s['name']}" for s in obj["subjects"]):
                continue
            ref = obj["roleRef"]
            role = self.objects.get(PATHS[ref["kind"]].format(ns=scope, name=ref["name"])) or {}
            for rule in role.get("rules") or []:
                if (
                    attrs["group"] in rule.get("apiGroups", [""])
                    and attrs["resource"] in rule["resources"]
                    and (attrs["verb"] in rule["verbs"] or "*" in rule["verbs"])
                ):
                    return True
        return False

    def take(self, kind: str, name: str) -> None:
        del self.objects[PATHS[kind].format(ns=NS, name=name)]

    def template_parameter(self, name: str, value: str) -> None:
        template = self.objects[PATHS["WorkflowTemplate"].format(ns=NS, name="llm-autopilot")]
        (parameter,) = [p for p in template["spec"]["arguments"]["parameters"] if p["name"] == name]
        parameter["value"] = value


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[tuple[FakeCluster, Path]]:
    cluster = FakeCluster()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": f"http://{cluster.address}"}}],
                "users": [{"name": "admin", "user": {"token": "t"}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "admin"}}],
                "current-context": "fake",
            }
        )
    )
    yield cluster, kubeconfig
    cluster.httpd.shutdown()
    cluster.httpd.server_close()


def doctor(fake: tuple[FakeCluster, Path]) -> dict[str, Check]:
    cluster, kubeconfig = fake
    checks = run_checks(kubeconfig, NS, cluster.address, environ={"ARGO_SECURE": "false"})
    assert [c.check for c in checks] == list(CHECKS)
    return {c.check: c for c in checks}


def failing(fake: tuple[FakeCluster, Path]) -> dict[str, Check]:
    return {name: c for name, c in doctor(fake).items() if not c.ok}


def test_a_complete_deployment_passes_every_check(fake):
    checks = doctor(fake)
    assert all(c.ok for c in checks.values()), render_text(list(checks.values()))
    assert "(the template uses training, fallback)" in checks["queues"].detail
    assert checks["rbac"].detail.startswith(f"{ACCOUNT} has the {len(deployment.rbac_grants(NS))} grants of")
    assert checks["mlflow"].detail.startswith("MLflow at http://vcpilot-mlflow:5000 answers /health")
    assert "1 of 1 nodes hold it" in checks["image"].detail


def test_the_cli_exits_0_when_all_pass_and_1_with_the_failure_in_its_json(fake):
    cluster, kubeconfig = fake
    runner = CliRunner()
    args = ["doctor", "--kubeconfig", str(kubeconfig), "--argo-server", cluster.address]
    assert runner.invoke(app, args, env={"ARGO_SECURE": "false"}).exit_code == 0
    # The cluster `vcpilot plan` and `vcpilot mcp` are pointed at (VCPILOT_KUBECONFIG) is the one checked.
    env = {"ARGO_SECURE": "false", "VCPILOT_KUBECONFIG": str(kubeconfig), "KUBECONFIG": str(kubeconfig) + ".none"}
    assert runner.invoke(app, ["doctor", "--argo-server", cluster.address], env=env).exit_code == 0
    cluster.take("Queue", "fallback")
    result = runner.invoke(app, [*args, "--json"], env={"ARGO_SECURE": "false"})
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert [r["check"] for r in report if not r["ok"]] == ["queues"]
    assert report[2]["fix"] == "kubectl apply -k deploy/"


@pytest.mark.parametrize(
    ("remove", "check", "detail", "fix"),
    [
        (
            ("CustomResourceDefinition", "podgroups.scheduling.volcano.sh"),
            "volcano-crds",
            "podgroups.scheduling.volcano.sh",
            "install Volcano",
        ),
        (
            ("PriorityClass", "vcpilot-low"),
            "queues",
            "priority class vcpilot-low does not exist",
            "kubectl apply -k deploy/",
        ),
        (
            ("ServiceAccount", "vcpilot-workflow"),
            "rbac",
            "service account vcpilot/vcpilot-workflow does not exist",
            "kubectl apply -k deploy/",
        ),
        (
            ("CronWorkflow", "llm-autopilot-nightly"),
            "argo",
            "CronWorkflow vcpilot/llm-autopilot-nightly not installed",
            "kubectl apply -k deploy/",
        ),
        (
            ("CustomResourceDefinition", "workflowtaskresults.argoproj.io"),
            "argo",
            "workflowtaskresults.argoproj.io",
            "install Argo Workflows",
        ),
        (
            ("Service", "vcpilot-mlflow"),
            "mlflow",
            "Service vcpilot/vcpilot-mlflow, which does not exist",
            "mlflow-tracking-uri",
        ),
    ],
)
def test_taking_one_piece_away_fails_its_check_with_the_fix(fake, remove, check, detail, fix):
    fake[0].take(*remove)
    failed = failing(fake)
    assert list(failed) == [check]
    assert detail in failed[check].detail and fix in (failed[check].fix or "")


def test_without_the_role_binding_the_account_misses_the_roles_verbs(fake):
    fake[0].take("RoleBinding", "vcpilot-workflow")
    (rbac,) = failing(fake).values()
    assert rbac.detail.startswith(
        f"{ACCOUNT} may not create/get/list/watch/delete jobs.batch.volcano.sh in vcpilot, get podgroups"
    )
    assert "list queues" not in rbac.detail  # the ClusterRole's grants still hold
    assert rbac.fix == "kubectl apply -k deploy/ (deploy/rbac/ grants them)"


def test_a_grant_beyond_what_the_steps_use_fails_least_privilege(fake):
    cluster = fake[0]
    role = PATHS["Role"].format(ns=NS, name="vcpilot-workflow")
    cluster.objects[role]["rules"][0]["verbs"] = ["*"]
    (rbac,) = failing(fake).values()
    assert "may also deletecollection/patch/update jobs.batch.volcano.sh in vcpilot, beyond" in rbac.detail
    assert "grep vcpilot-workflow" in (rbac.fix or "")


def test_without_the_template_its_checks_are_skipped_and_the_manifests_names_still_checked(fake):
    fake[0].take("WorkflowTemplate", "llm-autopilot")
    checks = doctor(fake)
    assert {n for n, c in checks.items() if not c.ok} == {"argo", "mlflow", "image"}
    assert checks["mlflow"].detail == "skipped: WorkflowTemplate vcpilot/llm-autopilot is not installed"
    assert "WorkflowTemplate vcpilot/llm-autopilot not installed" in checks["argo"].detail
    assert "queues training, fallback, serving" in checks["queues"].detail


def test_the_templates_defaults_as_installed_are_what_must_exist(fake):
    cluster = fake[0]
    cluster.template_parameter("fallback-queue", "spare")
    cluster.template_parameter("image", "")
    cluster.template_parameter("mlflow-tracking-uri", "")
    failed = failing(fake)
    assert list(failed) == ["queues", "mlflow", "image"]
    assert failed["queues"].detail.startswith("queue spare does not exist")
    assert failed["queues"].fix == "create queue spare or change the template's default"
    assert "image parameter is empty" in failed["image"].detail


def test_a_tracking_server_without_ready_pods_fails_through_the_proxy(fake):
    fake[0].mlflow_up = False
    (mlflow,) = failing(fake).values()
    assert "HTTP 503" in mlflow.detail or "no endpoints available" in mlflow.detail
    assert "kubectl -n vcpilot get endpoints vcpilot-mlflow" in (mlflow.fix or "")


def test_an_unreachable_api_server_skips_the_cluster_checks_without_a_traceback(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    checks = run_checks(kubeconfig, NS, None, environ={})
    assert [c.check for c in checks] == list(CHECKS) and not any(c.ok for c in checks)
    assert "Connection refused" in checks[0].detail and "--kubeconfig" in (checks[0].fix or "")
    assert {c.detail for c in checks[1:] if c.check != "argo-server"} == {"skipped: the api-server check failed"}
    unusable = run_checks(tmp_path / "missing", NS, None, environ={})[0]
    assert unusable.detail.startswith("cannot load kubeconfig") and not unusable.ok


def test_a_tracking_uri_on_a_port_the_service_lacks_names_its_ports(fake):
    fake[0].template_parameter("mlflow-tracking-uri", "http://vcpilot-mlflow.vcpilot.svc.cluster.local:5001")
    (mlflow,) = failing(fake).values()
    assert mlflow.detail.endswith("names port 5001 of Service vcpilot/vcpilot-mlflow, which has ports 5000")
    assert mlflow.fix == "point the template's mlflow-tracking-uri at one of its ports (5000)"


def test_a_two_label_host_without_such_a_service_is_fetched_as_a_host(fake):
    from components.volcano.k8s_api import Api

    api = Api(fake[1], attempts=1)
    seen: list[httpx.Request] = []
    check = check_mlflow(api, NS, "http://mlflow.example:5000", transport=answering(200, "OK", seen))
    assert check.ok and str(seen[0].url) == "http://mlflow.example:5000/health"
    down = check_mlflow(api, NS, "http://mlflow.example:5000", transport=refusing())
    assert down.detail.endswith("Connection refused), nor is there a Service example/mlflow")
    via_proxy = check_mlflow(api, NS, f"http://vcpilot-mlflow.{NS}:5000", transport=refusing())
    assert via_proxy.ok and "through the API server's proxy" in via_proxy.detail
    api.close()
