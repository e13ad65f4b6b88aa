"""What the tests of the installed deployment share: the cluster `make cluster` makes, Argo's CLI and REST API."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
E2E = ROOT / "deploy" / "e2e"
ENDED = {"Succeeded", "Failed", "Error"}
WORKFLOW_LABEL = "workflows.argoproj.io/workflow"


def e2e_env() -> dict[str, str]:
    """What `deploy/e2e/up.sh --print-env` exports (KUBECONFIG, PATH, ARGO_*, VCPILOT_NAMESPACE, MLFLOW_…)."""
    printed = subprocess.run([E2E / "up.sh", "--print-env"], check=True, capture_output=True, text=True).stdout
    env: dict[str, str] = {}
    for line in printed.splitlines():
        for assignment in line.removeprefix("export ").split():
            key, _, value = assignment.partition("=")
            env[key] = value.replace("$PATH", os.environ.get("PATH", ""))
    return env


@dataclass
class Deployment:
    """vcpilot installed in the e2e cluster (deploy/e2e/install.py): where it is and how to reach it."""

    kubeconfig: Path
    namespace: str
    argo_server: str
    argo_env: dict[str, str]
    admin: Any
    mlflow_uri: str
    step_image: str
    workspace: Path  # the host directory behind the workspace volume
    bin: Path = field(default_factory=Path)

    def argo(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """The real `argo` CLI, through the Argo Server, in the deployment's namespace."""
        env = {**os.environ, **self.argo_env, "KUBECONFIG": str(self.kubeconfig)}
        done = subprocess.run(
            [str(self.bin / "argo"), "-n", self.namespace, *args],
            env=env, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        if check and done.returncode:
            raise AssertionError(f"argo {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
        return done

    def rest(self, method: str, path: str, body: Any = None) -> httpx.Response:
        """The Argo Server's REST API, as the UI calls it (the server's certificate is self-signed)."""
        with httpx.Client(base_url=f"https://{self.argo_server}", verify=False, timeout=30) as http:
            return http.request(method, path, json=body)

    def custom(self) -> Any:
        from kubernetes import client

        return client.CustomObjectsApi(self.admin)

    def workflow(self, name: str) -> dict[str, Any]:
        return self.custom().get_namespaced_custom_object("argoproj.io", "v1alpha1", self.namespace, "workflows", name)

    def workflows(self, selector: str = "") -> list[dict[str, Any]]:
        found = self.custom().list_namespaced_custom_object(
            "argoproj.io", "v1alpha1", self.namespace, "workflows", label_selector=selector
        )
        return list(found["items"])

    def wait(self, name: str, timeout: float = 900, until: set[str] | None = None) -> dict[str, Any]:
        """The workflow once its phase is in `until` (an ended phase by default)."""
        until = until or ENDED
        deadline = time.monotonic() + timeout
        while True:
            wf = self.workflow(name)
            if wf.get("status", {}).get("phase") in until:
                return wf
            if time.monotonic() > deadline:
                raise AssertionError(f"workflow {name} is still {wf.get('status', {}).get('phase')} after {timeout}s")
            time.sleep(1)

    def volcano_leftovers(self, workflow: str) -> list[str]:
        """The VCJobs, PodGroups and pods of `workflow` still in the namespace (pods that are Argo's excepted)."""
        from kubernetes import client

        custom, core = self.custom(), client.CoreV1Api(self.admin)
        selector = f"{WORKFLOW_LABEL}={workflow}"
        jobs = custom.list_namespaced_custom_object("batch.volcano.sh", "v1alpha1", self.namespace, "jobs",
                                                    label_selector=selector)["items"]  # fmt: skip
        groups = custom.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", self.namespace, "podgroups")
        job_names = {j["metadata"]["name"] for j in jobs}
        owned = [
            g["metadata"]["name"]
            for g in groups["items"]
            if any(ref.get("name", "").startswith(workflow) for ref in g["metadata"].get("ownerReferences", []))
        ]
        pods = [
            p.metadata.name
            for p in core.list_namespaced_pod(self.namespace).items
            if (p.metadata.annotations or {}).get("volcano.sh/job-name", "").startswith(workflow)
        ]
        return [
            *(f"vcjob/{n}" for n in sorted(job_names)),
            *(f"podgroup/{n}" for n in owned),
            *(f"pod/{n}" for n in pods),
        ]


def leaf_nodes(wf: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The workflow's Pod nodes by their path of display names below the root (`finetune.plan`, `gate`, …)."""
    nodes = wf.get("status", {}).get("nodes", {})
    root = wf["metadata"]["name"]
    return {
        n["name"].removeprefix(root).lstrip("."): n
        for n in nodes.values()
        if n.get("type") == "Pod" and not n["name"].startswith(f"{root}.onExit")
    }


def outputs(node: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: str(p.get("value", "")) for p in (node.get("outputs") or {}).get("parameters", [])}


class GangWatcher:
    """Records, while a workflow runs, each of its Volcano jobs' PodGroup and pods, as Volcano scheduled them."""

    def __init__(self, deployment: Deployment, workflow: str) -> None:
        self.deployment, self.workflow = deployment, workflow
        self.groups: dict[str, int] = {}  # VCJob name -> PodGroup minMember
        self.pods: dict[str, dict[str, Any]] = {}  # pod name -> what was seen of it running
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> GangWatcher:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _watch(self) -> None:
        from kubernetes import client

        core = client.CoreV1Api(self.deployment.admin)
        custom = self.deployment.custom()
        ns = self.deployment.namespace
        while not self._stop.wait(0.5):
            try:
                for group in custom.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", ns, "podgroups")[
                    "items"
                ]:
                    for ref in group["metadata"].get("ownerReferences", []):
                        if ref.get("kind") == "Job" and ref["name"].startswith(self.workflow):
                            self.groups[ref["name"]] = int(group["spec"].get("minMember", 0))
                for pod in core.list_namespaced_pod(ns).items:
                    job = (pod.metadata.annotations or {}).get("volcano.sh/job-name", "")
                    if job.startswith(self.workflow) and pod.spec.node_name:
                        seen = self.pods.setdefault(pod.metadata.name, {"job": job})
                        seen.update(node=pod.spec.node_name, scheduler=pod.spec.scheduler_name)
                        if pod.status.phase in ("Running", "Succeeded"):
                            seen["ran"] = True
            except Exception:  # noqa: BLE001 — an API hiccup must not end the watch; the asserts judge what it saw
                continue

    def jobs(self) -> dict[str, list[dict[str, Any]]]:
        by_job: dict[str, list[dict[str, Any]]] = {}
        for pod in self.pods.values():
            by_job.setdefault(pod["job"], []).append(pod)
        return by_job


def broken_model(workspace: Path) -> str:
    """A model directory every rank fails to load the same way (a bug in what the run was given), in the workspace."""
    path = workspace / "broken-model"
    path.mkdir(exist_ok=True)
    (path / "config.json").write_text("{ this is not json")
    os.chown(path, 1000, 1000)
    return "/workspace/broken-model"


def submit_from_template(deployment: Deployment, params: dict[str, str], **spec: Any) -> str:
    """Create a Workflow that references the template, with `params` and extra `spec` fields; its name."""
    body = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"generateName": "llm-autopilot-"},
        "spec": {
            "workflowTemplateRef": {"name": "llm-autopilot"},
            "arguments": {"parameters": [{"name": k, "value": v} for k, v in params.items()]},
            **spec,
        },
    }
    made = deployment.custom().create_namespaced_custom_object(
        "argoproj.io", "v1alpha1", deployment.namespace, "workflows", body
    )
    return str(made["metadata"]["name"])


def dump(wf: dict[str, Any]) -> str:
    """A failed assertion's context: each node's phase and message."""
    return json.dumps(
        {k: (n.get("phase"), n.get("message")) for k, n in leaf_nodes(wf).items()}, indent=1, sort_keys=True
    )
