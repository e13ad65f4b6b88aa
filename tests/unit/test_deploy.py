"""`kubectl apply -k deploy/` installs what the WorkflowTemplate's defaults name, and every object is valid.

`render` builds the kustomization in Python, as `kubectl kustomize` does for the features our kustomizations
use (and refuses any other), so that these checks need no cluster; tests/e2e/test_deploy_install.py applies the
same directory to a real API server and compares its rendering with this one.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
import yaml

from agent.run_bands import run_bands
from pipelines.autopilot import DEFAULT_IMAGE, PARAMETERS, SERVICE_ACCOUNT, TEMPLATE_NAME, build_workflow_template
from pipelines.compile import render_all
from pipelines.lint import lint_document, load_schema

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SCHEDULER = DEPLOY / "volcano" / "scheduler"
KIND = DEPLOY / "kind"
SOURCES = ("workspace", "volcano", "rbac", "mlflow")  # deploy/'s hand-written folders; argo/ is generated
# Kinds that kustomize knows to be cluster-scoped: it gives every other kind the kustomization's namespace,
# a CRD's cluster-scoped kind (Volcano's Queue) included; the API server drops it there.
KUSTOMIZE_CLUSTER_SCOPED = {
    "Namespace",
    "PriorityClass",
    "ClusterRole",
    "ClusterRoleBinding",
    "PersistentVolume",
    "StorageClass",
    "CustomResourceDefinition",
}
BUILTIN_NAMESPACED = {"ServiceAccount", "Role", "RoleBinding", "Service", "Deployment", "PersistentVolumeClaim"}
KUSTOMIZATION_KEYS = {"apiVersion", "kind", "namespace", "resources", "configMapGenerator", "patches"}
Object = dict[str, Any]


# ---- rendering ------------------------------------------------------------------------------------------


class KustomizeError(Exception):
    """The kustomization cannot be built; the message says which file and why."""


def render(directory: Path) -> list[Object]:
    """The objects `kubectl kustomize directory` prints (resources, configMapGenerator, JSON 6902 patches)."""
    directory = directory.resolve()
    path = directory / "kustomization.yaml"
    if not path.is_file():
        raise KustomizeError(f"{directory} has no kustomization.yaml")
    spec = yaml.safe_load(path.read_text()) or {}
    unknown = set(spec) - KUSTOMIZATION_KEYS
    if unknown:
        raise KustomizeError(f"{path} uses {sorted(unknown)}, which render() does not know: teach it first")
    objects: list[Object] = []
    for entry in spec.get("resources", []):
        resource = (directory / entry).resolve()
        if resource.is_dir():
            objects += render(resource)  # a base may lie anywhere; a file must lie inside (kustomize's rule)
        elif resource.is_file() and resource.is_relative_to(directory):
            objects += [doc for doc in yaml.safe_load_all(resource.read_text()) if doc]
        else:
            raise KustomizeError(f"{path} names {entry}, which is not a file inside {directory} nor a directory")
    objects += [_config_map(directory, generator) for generator in spec.get("configMapGenerator", [])]
    if "namespace" in spec:
        for obj in objects:
            if obj["kind"] not in KUSTOMIZE_CLUSTER_SCOPED:
                obj["metadata"]["namespace"] = spec["namespace"]
    for patch in spec.get("patches", []):
        _patch(path, objects, patch)
    ids = [
        (o["apiVersion"].split("/")[0], o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])
        for o in objects
    ]
    twice = {i for i in ids if ids.count(i) > 1}
    if twice:
        raise KustomizeError(f"{path} makes these objects twice: {sorted(twice, key=str)}")
    return objects


def _config_map(directory: Path, generator: dict[str, Any]) -> Object:
    options = generator.get("options", {})
    if options.get("disableNameSuffixHash") is not True:
        raise KustomizeError(f"configMap {generator['name']}: render() only builds it with disableNameSuffixHash")
    data = {}
    for entry in generator.get("files", []):
        key, _, name = entry.rpartition("=")
        file = directory / name
        if not file.is_file():
            raise KustomizeError(f"configMap {generator['name']} names {name}, which is not a file in {directory}")
        data[key or file.name] = file.read_text()
    metadata: dict[str, Any] = {"name": generator["name"]}
    if "labels" in options:
        metadata["labels"] = options["labels"]
    if "namespace" in generator:
        metadata["namespace"] = generator["namespace"]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


def _patch(path: Path, objects: list[Object], patch: dict[str, Any]) -> None:
    if "patch" not in patch:
        raise KustomizeError(f"{path}: render() applies inline patches only (`patch:`), not patch files")
    target, ops = patch["target"], yaml.safe_load(patch["patch"])
    if not isinstance(ops, list):
        raise KustomizeError(f"{path}: render() applies JSON 6902 patches (a list of operations) only")
    matched = [
        o
        for o in objects
        if o["kind"] == target["kind"]
        and o["metadata"]["name"] == target.get("name", o["metadata"]["name"])
        and o["apiVersion"].rpartition("/")[0] == target.get("group", o["apiVersion"].rpartition("/")[0])
    ]
    if not matched:
        raise KustomizeError(f"{path}: the patch of {target} matches no object")
    for obj in matched:
        for op in ops:
            try:
                _apply(obj, op)
            except (KeyError, IndexError, ValueError) as error:
                raise KustomizeError(f"{path}: cannot {op['op']} {op['path']} ({error!r})") from None


def _apply(obj: Object, op: dict[str, Any]) -> None:
    """One JSON 6902 operation: test, replace or add (the ones our patches use)."""
    *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
    node: Any = obj
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if isinstance(node, list) and not (op["op"] == "add" and last == "-"):
        last = int(last)
    if op["op"] == "test":
        if node[last] != op["value"]:
            raise ValueError(f"it is {node[last]!r}, the patch expects {op['value']!r}")
    elif op["op"] == "replace":
        node[last]  # noqa: B018 -- unlike add, replace needs the value to exist
        node[last] = op["value"]
    elif op["op"] == "add" and isinstance(node, list):
        node.insert(len(node) if last == "-" else last, op["value"])
    elif op["op"] == "add":
        node[last] = op["value"]
    else:
        raise ValueError(f"render() knows no {op['op']!r} operation")


@pytest.fixture(scope="module")
def installed() -> list[Object]:
    return render(DEPLOY)


def named(objects: list[Object], kind: str) -> dict[str, Object]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def only(objects: list[Object], kind: str, name: str) -> Object:
    found = named(objects, kind)
    assert name in found, f"deploy/ installs no {kind} {name!r}; it has {sorted(found)}"
    return found[name]


def defaults(template: Object) -> dict[str, str]:
    return {p["name"]: p.get("value", "") for p in template["spec"]["arguments"]["parameters"]}


def manifests() -> list[Path]:
    return [p for d in SOURCES for p in sorted((DEPLOY / d).glob("*.yaml")) if p.name != "kustomization.yaml"]


def test_a_kustomization_that_names_a_missing_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: [queues.yaml]\n")
    with pytest.raises(KustomizeError, match="names queues.yaml, which is not a file"):
        render(tmp_path)


def test_every_manifest_beside_the_kustomizations_is_installed(installed: list[Object]) -> None:
    docs = [d for p in manifests() for d in yaml.safe_load_all(p.read_text())]
    docs += [yaml.safe_load(text) for text in render_all().values()]
    ids = {(o["kind"], o["metadata"]["name"]) for o in installed}
    assert {(d["kind"], d["metadata"]["name"]) for d in docs if d} == ids, "a manifest is left out of deploy/"


# ---- validity -------------------------------------------------------------------------------------------


def crds(shared_dir: Path) -> dict[tuple[str, str], Object]:
    """Volcano's CRDs (shared/schemas) and Argo's (its source's minimal CRDs), by (group, kind)."""
    files = [*(shared_dir / "schemas" / "volcano-v1.15.1").glob("*.yaml")]
    files += (shared_dir / "third_party" / "argo-workflows-v4.1.2" / "manifests" / "base" / "crds" / "minimal").glob(
        "argoproj.io_*.yaml"
    )
    loaded = [yaml.safe_load(f.read_text()) for f in files]
    return {(c["spec"]["group"], c["spec"]["names"]["kind"]): c for c in loaded}


def test_volcano_objects_satisfy_volcanos_crds(installed: list[Object], shared_dir: Path) -> None:
    volcano = [o for o in installed if o["apiVersion"].split("/")[0].endswith("volcano.sh")]
    assert volcano, "deploy/ installs no Volcano object"
    known = crds(shared_dir)
    for obj in volcano:
        group, version = obj["apiVersion"].split("/")
        crd = known[(group, obj["kind"])]
        served = next(v for v in crd["spec"]["versions"] if v["name"] == version and v["served"])
        validator = jsonschema.Draft7Validator(served["schema"]["openAPIV3Schema"])
        errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj)]
        assert not errors, f"{obj['kind']} {obj['metadata']['name']}: {errors}"


def test_argo_objects_pass_the_projects_lint(installed: list[Object], shared_dir: Path) -> None:
    schema = load_schema(shared_dir / "schemas" / "argo-v4.1.2" / "schema.json")
    argo = [o for o in installed if o["apiVersion"].startswith("argoproj.io/")]
    assert sorted(o["kind"] for o in argo) == ["CronWorkflow", "WorkflowTemplate"]
    for obj in argo:
        problems = lint_document(obj, schema=schema, file=f"{obj['kind']} {obj['metadata']['name']}")
        assert not problems, [str(p) for p in problems]


def test_every_namespaced_object_is_in_the_kustomizations_namespace(installed: list[Object], shared_dir: Path):
    namespace = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["namespace"]
    assert list(named(installed, "Namespace")) == [namespace]
    scopes = {kind: crd["spec"]["scope"] for (_, kind), crd in crds(shared_dir).items()}
    scopes |= dict.fromkeys(BUILTIN_NAMESPACED, "Namespaced") | dict.fromkeys(KUSTOMIZE_CLUSTER_SCOPED, "Cluster")
    for obj in installed:
        assert obj["kind"] in scopes, f"which scope has {obj['kind']}? Add it to the tables above"
        if scopes[obj["kind"]] == "Namespaced":
            assert obj["metadata"].get("namespace") == namespace, f"{obj['kind']} {obj['metadata']['name']}"
    # kustomize would move an object silently: none of the files may say another namespace, bindings included.
    sources = [d for p in manifests() for d in yaml.safe_load_all(p.read_text()) if d]
    declared = {d["metadata"]["namespace"] for d in sources if "namespace" in d.get("metadata", {})}
    subjects = {s["namespace"] for o in installed for s in o.get("subjects", []) if s["kind"] == "ServiceAccount"}
    assert declared <= {namespace} and subjects == {namespace}


# ---- what the workflow names is there -------------------------------------------------------------------


def test_the_workflow_templates_defaults_name_what_deploy_installs(installed: list[Object]) -> None:
    template = only(installed, "WorkflowTemplate", TEMPLATE_NAME)
    values = defaults(template)
    python = {p.name: p.value for p in PARAMETERS}
    queues, classes = named(installed, "Queue"), named(installed, "PriorityClass")
    assert values["queue"] in queues and values["fallback-queue"] in queues
    assert values["queue"] != values["fallback-queue"], "the fallback queue must be another queue"
    # No class: plan gives each run the run band its training fits in (agent/run_bands.py), which deploy installs.
    assert values["priority-class"] == "" and len(run_bands(classes)) >= 8
    assert values["workspace-pvc"] == python["workspace-pvc"]
    assert only(installed, "PersistentVolumeClaim", values["workspace-pvc"])["spec"]["accessModes"] == ["ReadWriteMany"]
    claims = named(installed, "PersistentVolumeClaim").values()
    assert not [c for c in claims if "storageClassName" in c["spec"]], "the cluster's default class provisions them"
    assert template["spec"]["serviceAccountName"] == SERVICE_ACCOUNT
    only(installed, "ServiceAccount", SERVICE_ACCOUNT)
    bound = {s["name"] for o in installed if o["kind"].endswith("RoleBinding") for s in o["subjects"]}
    assert bound == {SERVICE_ACCOUNT, values["job-service-account"]}
    only(installed, "ServiceAccount", values["job-service-account"])
    assert values["image"] == python["image"] == DEFAULT_IMAGE
    cron = only(installed, "CronWorkflow", f"{TEMPLATE_NAME}-nightly")
    assert cron["spec"]["workflowSpec"]["workflowTemplateRef"]["name"] == TEMPLATE_NAME


def test_the_workflow_tracks_to_the_mlflow_server_that_deploy_runs(installed: list[Object]) -> None:
    uri = urlsplit(defaults(only(installed, "WorkflowTemplate", TEMPLATE_NAME))["mlflow-tracking-uri"])
    service = only(installed, "Service", uri.hostname or "")
    port = next(p for p in service["spec"]["ports"] if p["port"] == uri.port)
    (deployment,) = [
        d for d in named(installed, "Deployment").values() if d["metadata"]["name"] == service["metadata"]["name"]
    ]
    pod = deployment["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (container,) = pod["spec"]["containers"]
    assert port["targetPort"] in {p["name"] for p in container["ports"]}
    args = dict(a.removeprefix("--").split("=", 1) for a in container["args"] if "=" in a)
    assert f"{uri.hostname}:{uri.port}" in args["allowed-hosts"].split(","), "MLflow would refuse the steps"
    assert args["backend-store-uri"].startswith("sqlite:////") and args["port"] == str(uri.port)
    assert container["image"] == DEFAULT_IMAGE
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    claims = {
        v["name"]: v["persistentVolumeClaim"]["claimName"]
        for v in pod["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    }
    (store,) = [mounts[v] for v, claim in claims.items() if claim in named(installed, "PersistentVolumeClaim")]
    assert args["backend-store-uri"].removeprefix("sqlite:///").startswith(store + "/")
    assert args["artifacts-destination"].startswith(store + "/")
    assert deployment["spec"]["strategy"]["type"] == "Recreate", "two servers must never share the SQLite file"
    security = pod["spec"]["securityContext"]
    assert security["runAsNonRoot"] and security["fsGroup"], "a non-root server that can write its volume"
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])


def test_the_patch_changes_only_the_defaults_of_the_parameters_it_tests(installed: list[Object]) -> None:
    patch = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["patches"][0]
    tests = {int(op["path"].split("/")[4]): op["value"] for op in yaml.safe_load(patch["patch"]) if op["op"] == "test"}
    names = [p.name for p in PARAMETERS]
    for index, name in tests.items():
        assert names[index] == name, f"{name!r} is now parameter {names.index(name)}: fix deploy/kustomization.yaml"
    rendered = only(installed, "WorkflowTemplate", TEMPLATE_NAME)
    expected = build_workflow_template().to_dict()
    parameters, patched = expected["spec"]["arguments"]["parameters"], rendered["spec"]["arguments"]["parameters"]
    for index in tests:
        parameters[index]["value"] = patched[index]["value"]
    expected["metadata"]["namespace"] = rendered["metadata"]["namespace"]
    assert rendered == expected


def test_the_fallback_queue_lends_and_the_workflow_yields(installed: list[Object]) -> None:
    values = defaults(only(installed, "WorkflowTemplate", TEMPLATE_NAME))
    queues, classes = named(installed, "Queue"), named(installed, "PriorityClass")
    target, fallback = queues[values["queue"]]["spec"], queues[values["fallback-queue"]]["spec"]
    assert fallback["reclaimable"] is True, "reclaim takes resources back only from a reclaimable queue"
    assert fallback["weight"] < target["weight"] and fallback["priority"] < target["priority"]
    assert not any(q["spec"]["reclaimable"] for name, q in queues.items() if name != values["fallback-queue"])
    assert values["priority-class"] == ""
    ours = max(classes[band]["value"] for band in run_bands(classes))  # or 0, past the longest band
    preempting = [c for c in classes.values() if c.get("preemptionPolicy", "PreemptLowerPriority") != "Never"]
    assert any(c["value"] > ours for c in preempting), "nothing could preempt the workflow's jobs"
    assert not any(c.get("globalDefault") for c in classes.values())


# ---- the scheduler configuration ------------------------------------------------------------------------


def test_the_scheduler_configuration_preempts_and_reclaims() -> None:
    conf = yaml.safe_load((SCHEDULER / "volcano-scheduler.conf").read_text())
    assert [a.strip() for a in conf["actions"].split(",")] == ["enqueue", "allocate", "preempt", "reclaim", "backfill"]
    tiers = [{p["name"]: p for p in tier["plugins"]} for tier in conf["tiers"]]
    assert [list(t) for t in tiers] == [
        ["priority", "gang", "conformance"],
        ["drf", "predicates", "proportion", "nodeorder", "binpack"],
    ]
    # Only priority decides whom preempt evicts: gang and drf would veto or preempt by share.
    assert tiers[0]["gang"]["enablePreemptable"] is False and tiers[1]["drf"]["enablePreemptable"] is False
    binpack = tiers[1]["binpack"]["arguments"]
    assert binpack["binpack.resources"] == "nvidia.com/gpu" and binpack["binpack.resources.nvidia.com/gpu"] > 1


def test_the_scheduler_configmap_is_the_file_and_stays_out_of_deploy(installed: list[Object]) -> None:
    (config_map,) = render(SCHEDULER)
    assert (config_map["kind"], config_map["metadata"]["name"]) == ("ConfigMap", "volcano-scheduler-configmap")
    assert config_map["metadata"]["namespace"] == "volcano-system"
    assert config_map["data"] == {"volcano-scheduler.conf": (SCHEDULER / "volcano-scheduler.conf").read_text()}
    assert not [o for o in installed if o["metadata"].get("namespace") == "volcano-system" or o["kind"] == "ConfigMap"]


def test_the_e2e_cluster_schedules_with_this_configuration() -> None:
    up = (DEPLOY / "e2e" / "up.sh").read_text()
    assert '--scheduler-conf "$here/../volcano/scheduler/volcano-scheduler.conf"' in up


# ---- no secrets -----------------------------------------------------------------------------------------

SECRET_LOOKING = re.compile(
    r"(sk-[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{20,}|-----BEGIN [A-Z ]*PRIVATE KEY-----"
    r"|[A-Za-z0-9+/]{40,}={0,2})"
)
SECRET_NAME = re.compile(r"(PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|CREDENTIAL)", re.IGNORECASE)


def strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return [value] if isinstance(value, str) else []


def test_no_secret_is_part_of_what_is_installed(installed: list[Object]) -> None:
    kind_files = [d for d in yaml.safe_load_all((KIND / "workspace.yaml").read_text()) if d]
    everything = [*installed, *render(SCHEDULER), *kind_files]
    assert not [o for o in everything if o["kind"] == "Secret"]
    assert not [s for s in strings(everything) if SECRET_LOOKING.search(s)]
    envs = [env for obj in everything for container in _containers(obj) for env in container.get("env", [])]
    assert envs, "the check must see the containers' environments"
    assert not [e["name"] for e in envs if SECRET_NAME.search(e["name"]) and "value" in e], "use a secretKeyRef"


def _containers(obj: Object) -> list[Object]:
    template = obj.get("spec", {}).get("template", {})
    return template.get("spec", {}).get("containers", []) if isinstance(template, dict) else []


# ---- kind -----------------------------------------------------------------------------------------------


def test_kind_installs_the_pinned_versions_and_the_workflows_image(shared_dir: Path) -> None:
    script = (KIND / "install.sh").read_text()
    assert "\nset -euo pipefail\n" in script
    settings = dict(re.findall(r"^([A-Za-z_]+)=(\S+)", script, re.MULTILINE))
    e2e = dict(re.findall(r"^([A-Z_]+)=(\S+)", (DEPLOY / "e2e" / "versions.env").read_text(), re.MULTILINE))
    assert settings["VOLCANO_VERSION"] == e2e["VOLCANO_VERSION"]
    (argo,) = (p.name.removeprefix("argo-") for p in (shared_dir / "schemas").glob("argo-v*"))
    assert settings["ARGO_VERSION"] == argo
    assert settings["image"] == DEFAULT_IMAGE
    assert subprocess.run(["bash", "-n", str(KIND / "install.sh")]).returncode == 0
    if shutil.which("shellcheck"):
        linted = subprocess.run(["shellcheck", str(KIND / "install.sh")], capture_output=True, text=True)
        assert linted.returncode == 0, linted.stdout


def test_kind_shares_one_workspace_across_its_gpu_less_workers(installed: list[Object]) -> None:
    config = yaml.safe_load((KIND / "kind-config.yaml").read_text())
    script = (KIND / "install.sh").read_text()
    roles = [n["role"] for n in config["nodes"]]
    assert roles == ["control-plane", "worker", "worker"]
    workers = [n for n in config["nodes"] if n["role"] == "worker"]
    (selector,) = re.findall(r"get nodes -l (\S+)", script)
    label, value = selector.split("=")
    assert all(w["labels"][label] == value for w in workers), "install.sh would give no worker its fake GPUs"
    mounts = {(m["hostPath"], m["containerPath"]) for w in workers for m in w["extraMounts"]}
    assert len(mounts) == 1, "every worker must mount the same directory"
    ((host, node_path),) = mounts
    assert f"workspace_dir={host}" in script
    volume, claim = (d for d in yaml.safe_load_all((KIND / "workspace.yaml").read_text()) if d)
    assert volume["spec"]["hostPath"]["path"] == node_path and claim["spec"]["volumeName"] == volume["metadata"]["name"]
    ours = only(installed, "PersistentVolumeClaim", claim["metadata"]["name"])
    assert claim["metadata"]["namespace"] == ours["metadata"]["namespace"]
    # `kubectl apply -k deploy/` then leaves the claim as it is: the fields it sets agree.
    assert {k: claim["spec"][k] for k in ours["spec"]} == ours["spec"]
    assert volume["spec"]["claimRef"] == {"name": ours["metadata"]["name"], "namespace": ours["metadata"]["namespace"]}


def test_down_stops_a_process_whose_program_is_named_otherwise_than_its_pid_file(tmp_path: Path) -> None:
    # up.sh starts `argo-server` running the `argo` binary; down.sh matched a pid file's name against the binary,
    # so it removed argo-server.pid and left the Argo server running after every `make e2e`. lib.sh's start now
    # writes NAME.exe, the program the pid runs, and down.sh's `ours` reads it.
    down = (ROOT / "deploy" / "e2e" / "down.sh").read_text()
    functions = re.search(r"^ours\(\) \{.*?^\}\n\nstop\(\) \{.*?^\}\n", down, re.S | re.M)
    assert functions, "down.sh defines ours() and then stop()"
    program = tmp_path / "bin" / "argo"
    program.parent.mkdir()
    shutil.copy(shutil.which("sleep") or "/bin/sleep", program)
    server = subprocess.Popen([str(program), "300"], start_new_session=True)
    pids = tmp_path / "run" / "pids"
    pids.mkdir(parents=True)
    (pids / "argo-server.pid").write_text(f"{server.pid}\n")
    (pids / "argo-server.exe").write_text("argo\n")
    try:
        script = f'log() {{ echo "$*"; }}\nrun={tmp_path / "run"}\n{functions.group(0)}\nstop argo-server\n'
        done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30, check=True)
        assert server.wait(timeout=15) is not None and f"stopped argo-server ({server.pid})" in done.stdout
        assert list(pids.iterdir()) == []
    finally:
        server.kill()
        server.wait()
