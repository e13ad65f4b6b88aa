"""`vcpilot doctor`'s checks of a real deployment: each part the workflow needs, after the parts it rests on.

Names and verbs come from deploy/'s manifests (`pipelines.deployment`) and from the WorkflowTemplate as installed
in the cluster (its parameter defaults may be patched): nothing is named twice. No check raises: a check that
cannot run because an earlier one failed is reported as skipped, and every call is bounded by a few seconds.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

from agent.run_bands import run_bands
from components.volcano.cluster import ClusterError
from components.volcano.k8s_api import BATCH, SCHEDULING, Api
from pipelines import deployment
from pipelines.autopilot import CRON_NAME, DEFAULT_IMAGE, SERVICE_ACCOUNT, TEMPLATE_NAME
from pipelines.deployment import STANDARD_VERBS, DeployError, Grant
from pipelines.doctor_http import check_argo_server, check_mlflow
from pipelines.doctor_report import Check, skipped

__all__ = ["ARGO_CRDS", "CHECKS", "VOLCANO_CRDS", "run_checks", "template_defaults"]

CHECKS = ("api-server", "volcano-crds", "queues", "rbac", "argo", "argo-server", "mlflow", "image")
ARGO = ("argoproj.io", "v1alpha1")
VOLCANO_CRDS = (f"jobs.{BATCH[0]}", f"podgroups.{SCHEDULING[0]}", f"queues.{SCHEDULING[0]}")
ARGO_CRDS = tuple(f"{p}.{ARGO[0]}" for p in ("workflows", "workflowtemplates", "cronworkflows", "workflowtaskresults"))
TIMEOUT = (3.0, 5.0)  # connect, read (seconds) of every call to the API server
APPLY = "kubectl apply -k deploy/"
_DOCS = "docs/deploy.md, Prerequisites"
_KUBECONFIG_FIX = (
    "pass --kubeconfig PATH (or set VCPILOT_KUBECONFIG or KUBECONFIG) to a kubeconfig of the cluster, and check it "
    "is up"
)
_RETRY = "try again; if it persists, report it with this line"


def run_checks(
    kubeconfig: str | Path | None,
    namespace: str,
    argo_server: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    transport: httpx.BaseTransport | None = None,
) -> list[Check]:
    """Every check, in `CHECKS` order; `kubeconfig` None means $KUBECONFIG or the pod's account, as the client does."""
    env = os.environ if environ is None else environ
    api, first = _connect(kubeconfig)
    argo_server_check = check_argo_server(argo_server, env, transport=transport)
    if api is None or not first.ok:
        if api is not None:
            api.close()
        later = [skipped(name, "the api-server check failed", "fix the api-server check first") for name in CHECKS[1:]]
        return [first, *later[:4], argo_server_check, *later[5:]]
    try:
        template, no_template = _template(api, namespace), ""
        if template is None:
            no_template = f"WorkflowTemplate {namespace}/{TEMPLATE_NAME} is not installed"
    except ClusterError as err:
        template, no_template = None, _plain(err)
    defaults = template_defaults(template)

    def needs_template(name: str, check: Callable[[], Check]) -> Check:
        return skipped(name, no_template, APPLY) if template is None else _guard(name, check)

    results = [
        first,
        _guard("volcano-crds", lambda: _volcano_crds(api)),
        _guard("queues", lambda: _queues(api, defaults, no_template)),
        _guard("rbac", lambda: _rbac(api, namespace, template)),
        _guard("argo", lambda: _argo(api, namespace)),
        argo_server_check,
        needs_template("mlflow", lambda: check_mlflow(api, namespace, defaults.get("mlflow-tracking-uri", ""))),
        needs_template("image", lambda: _image(api, defaults.get("image", ""))),
    ]
    api.close()
    return results


def template_defaults(template: Mapping[str, Any] | None) -> dict[str, str]:
    """A WorkflowTemplate's parameters and their default values."""
    parameters = (((template or {}).get("spec") or {}).get("arguments") or {}).get("parameters") or []
    return {str(p["name"]): str(p.get("value") or "") for p in parameters if p.get("name")}


def _guard(name: str, check: Callable[[], Check]) -> Check:
    """The check's result; an error it meets becomes its failure, never a traceback."""
    try:
        return check()
    except ClusterError as err:
        fix = "use a kubeconfig whose user may read these objects (a cluster admin's)"
        return Check(check=name, ok=False, detail=_plain(err), fix=fix if "not allowed" in str(err) else _RETRY)
    except DeployError as err:
        return Check(check=name, ok=False, detail=_plain(err), fix="run vcpilot doctor from a checkout of vcpilot")
    except Exception as err:  # a check must report, whatever went wrong in it
        return Check(check=name, ok=False, detail=f"the check failed: {type(err).__name__}: {err}", fix=_RETRY)


def _connect(kubeconfig: str | Path | None) -> tuple[Api | None, Check]:
    """The API client and the api-server check: the server's version, and who the kubeconfig's user is."""
    try:
        api = Api(kubeconfig, attempts=2)
    except ClusterError as err:
        return None, Check(check="api-server", ok=False, detail=_plain(err), fix=_KUBECONFIG_FIX)
    try:
        return api, _api_server(api)
    except ClusterError as err:
        return api, Check(check="api-server", ok=False, detail=_plain(err), fix=_KUBECONFIG_FIX)


def _api_server(api: Api) -> Check:
    version = api.call("read the API server's version", api.version.get_code, _request_timeout=TIMEOUT)
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    create = api.authentication.create_self_subject_review
    answer = api.call("review the kubeconfig's user", create, review, absent_ok=True, _request_timeout=TIMEOUT)
    user = (((answer or {}).get("status") or {}).get("userInfo") or {}).get("username")
    detail = f"Kubernetes {version.get('gitVersion', '(unknown version)')} at {api.host}"
    return Check(check="api-server", ok=True, detail=detail + (f" as {user}" if user else ""))


def _volcano_crds(api: Api) -> Check:
    missing = _missing_crds(api, VOLCANO_CRDS)
    if missing:
        return Check(
            check="volcano-crds",
            ok=False,
            detail=f"missing or not established: {', '.join(missing)}",
            fix=f"install Volcano ({_DOCS})",
        )
    return Check(check="volcano-crds", ok=True, detail=f"{', '.join(VOLCANO_CRDS)} established")


def _queues(api: Api, defaults: Mapping[str, str], no_template: str) -> Check:
    queues, classes = deployment.volcano_names()
    ours = {*queues, *classes}
    used = {p: defaults[p] for p in ("queue", "fallback-queue", "priority-class") if defaults.get(p)}
    queues += [q for p, q in used.items() if p != "priority-class" and q not in queues]
    classes += [c for p, c in used.items() if p == "priority-class" and c not in classes]
    missing, closed = [], []
    for name in queues:
        get = api.custom.get_cluster_custom_object
        queue = api.call(
            f"read queue {name}", get, *SCHEDULING, "queues", name, absent_ok=True, _request_timeout=TIMEOUT
        )
        if queue is None:
            missing.append(("queue", name))
        elif (queue.get("status") or {}).get("state") in ("Closed", "Closing"):
            closed.append(name)
    read = api.scheduling.read_priority_class
    for name in classes:
        if api.call(f"read priority class {name}", read, name, absent_ok=True, _request_timeout=TIMEOUT) is None:
            missing.append(("priority class", name))
    bands = run_bands(classes)
    listed = ", ".join(c for c in classes if c not in bands) + (
        f", run bands {bands[0]} … {bands[-1]}" if bands else ""
    )
    found = f"queues {', '.join(queues)} and priority classes {listed}"
    uses = f"the template uses {', '.join(used.values())}" if used else no_template or "the template names none"
    if not missing and not closed:
        return Check(check="queues", ok=True, detail=f"{found} exist ({uses})")
    problems = [f"{kind} {name} does not exist" for kind, name in missing] + [f"queue {q} is not Open" for q in closed]
    fixes = [APPLY] if any(name in ours for _, name in missing) else []
    fixes += [f"create {kind} {name} or change the template's default" for kind, name in missing if name not in ours]
    fixes += [f"open queue {q} (vcctl queue operate --name {q} --action open)" for q in closed]
    return Check(check="queues", ok=False, detail=f"{'; '.join(problems)} ({uses})", fix="; ".join(fixes))


def _rbac(api: Api, namespace: str, template: Mapping[str, Any] | None) -> Check:
    account = str(((template or {}).get("spec") or {}).get("serviceAccountName") or SERVICE_ACCOUNT)
    user = f"system:serviceaccount:{namespace}:{account}"
    read = api.core.read_namespaced_service_account
    if api.call(f"read service account {namespace}/{account}", read, account, namespace, absent_ok=True) is None:
        return Check(check="rbac", ok=False, detail=f"service account {namespace}/{account} does not exist", fix=APPLY)
    grants = deployment.rbac_grants(namespace, account=account)
    grid = _grid(grants)
    allowed = {g for g in grid if _allowed(api, user, namespace, g)}
    missing = [g for g in grants if g not in allowed]
    extra = sorted(
        (g for g in allowed if not _expected(g, grants)), key=lambda g: (g.namespace or "", g.resource, g.verb)
    )
    if not missing and not extra:
        detail = f"{user} has the {len(grants)} grants of deploy/rbac/ and no more of the {len(grid)} checked"
        return Check(check="rbac", ok=True, detail=detail)
    problems, fixes = [], []
    if missing:
        problems.append(f"{user} may not {_describe(missing)}")
        fixes.append(f"{APPLY} (deploy/rbac/ grants them)")
    if extra:
        problems.append(f"{user} may also {_describe(extra)}, beyond what the steps use")
        fixes.append(
            f"remove those grants from the roles bound to it (kubectl get rolebindings,clusterrolebindings -A -o wide"
            f" | grep {account})"
        )
    return Check(check="rbac", ok=False, detail="; ".join(problems), fix="; ".join(fixes))


def _describe(grants: list[Grant]) -> str:
    """Grants as people read them, the verbs on one resource together: `get/list queues.scheduling.volcano.sh ...`."""
    verbs: dict[Grant, list[str]] = {}
    for g in grants:
        verbs.setdefault(g.model_copy(update={"verb": ""}), []).append(g.verb)
    return ", ".join(g.model_copy(update={"verb": "/".join(v)}).describe() for g, v in verbs.items())


def _grid(grants: list[Grant]) -> set[Grant]:
    """Every standard verb (and the roles' own) on every resource and scope that the roles name."""
    verbs = set(STANDARD_VERBS) | {g.verb for g in grants}
    places = {(g.group, g.resource, g.namespace) for g in grants}
    return {Grant(group=gr, resource=r, verb=v, namespace=ns) for gr, r, ns in places for v in verbs}


def _expected(grant: Grant, grants: list[Grant]) -> bool:
    """Whether the roles give `grant`; a cluster-wide grant holds in every namespace."""
    return grant in grants or grant.model_copy(update={"namespace": None}) in grants


def _allowed(api: Api, user: str, namespace: str, grant: Grant) -> bool:
    resource, _, subresource = grant.resource.partition("/")
    attributes = {"group": grant.group, "resource": resource, "verb": grant.verb}
    attributes |= {"namespace": grant.namespace} if grant.namespace else {}
    attributes |= {"subresource": subresource} if subresource else {}
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"]
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": groups, "resourceAttributes": attributes},
    }
    create = api.authorization.create_subject_access_review
    answer = api.call(f"review whether {user} may {grant.describe()}", create, review, _request_timeout=TIMEOUT)
    return bool((answer.get("status") or {}).get("allowed"))


def _argo(api: Api, namespace: str) -> Check:
    missing_crds = _missing_crds(api, ARGO_CRDS)
    if missing_crds:
        detail = f"missing or not established: {', '.join(missing_crds)}"
        return Check(check="argo", ok=False, detail=detail, fix=f"install Argo Workflows ({_DOCS})")
    missing = []
    for plural, kind, name in (
        ("workflowtemplates", "WorkflowTemplate", TEMPLATE_NAME),
        ("cronworkflows", "CronWorkflow", CRON_NAME),
    ):
        get = api.custom.get_namespaced_custom_object
        what = f"read {kind} {namespace}/{name}"
        if api.call(what, get, *ARGO, namespace, plural, name, absent_ok=True, _request_timeout=TIMEOUT) is None:
            missing.append(f"{kind} {namespace}/{name}")
    if missing:
        return Check(check="argo", ok=False, detail=f"{' and '.join(missing)} not installed", fix=APPLY)
    detail = f"Argo's CRDs established; WorkflowTemplate {TEMPLATE_NAME} and CronWorkflow {CRON_NAME} in {namespace}"
    return Check(check="argo", ok=True, detail=detail)


def _image(api: Api, image: str) -> Check:
    if not image.strip():
        return Check(
            check="image",
            ok=False,
            detail="the WorkflowTemplate's image parameter is empty, so no step can start",
            fix=f"set its default to the step image (deploy/ installs {DEFAULT_IMAGE}): {APPLY}, or patch your overlay",
        )
    note = " (the generated default: make sure your registry serves it)" if image == DEFAULT_IMAGE else ""
    try:
        nodes = api.items("list nodes", api.core.list_node, _request_timeout=TIMEOUT)
    except ClusterError as err:
        return Check(check="image", ok=True, detail=f"{image}{note}; nodes not read: {_plain(err)}")
    wanted = {image, f"docker.io/{image}", f"docker.io/library/{image}"}
    holding = [
        n for n in nodes if any(wanted & set(i.get("names") or []) for i in (n.get("status") or {}).get("images") or [])
    ]
    return Check(check="image", ok=True, detail=f"{image}{note}; {len(holding)} of {len(nodes)} nodes hold it")


def _template(api: Api, namespace: str) -> dict[str, Any] | None:
    get = api.custom.get_namespaced_custom_object
    what = f"read WorkflowTemplate {namespace}/{TEMPLATE_NAME}"
    found = api.call(
        what, get, *ARGO, namespace, "workflowtemplates", TEMPLATE_NAME, absent_ok=True, _request_timeout=TIMEOUT
    )
    return dict(found) if found else None


def _missing_crds(api: Api, names: tuple[str, ...]) -> list[str]:
    read = api.extensions.read_custom_resource_definition
    missing = []
    for name in names:
        crd = api.call(f"read CRD {name}", read, name, absent_ok=True, _request_timeout=TIMEOUT)
        conditions = ((crd or {}).get("status") or {}).get("conditions") or []
        if not any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
            missing.append(name)
    return missing


def _plain(err: BaseException) -> str:
    return " ".join(str(err).split()).rstrip(".")
