"""What the tests on real nodes share: how a pod gets onto them, and the in-cluster MLflow."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
REAL_NODE_LABEL = ("type", "real")


def on_real_nodes(pod_spec: dict[str, Any], nodes: list[Any]) -> dict[str, Any]:
    """A pod spec that selects the real nodes and tolerates their taints (read from the nodes themselves)."""
    key, value = REAL_NODE_LABEL
    taints = {(t.key, t.effect) for n in nodes for t in n.spec.taints or []}
    pod_spec["nodeSelector"] = {**pod_spec.get("nodeSelector", {}), key: value}
    pod_spec["tolerations"] = [
        *pod_spec.get("tolerations", []),
        *({"key": k, "operator": "Exists", "effect": e} for k, e in sorted(taints)),
    ]
    for container in pod_spec["containers"]:
        container["imagePullPolicy"] = "Never"  # no registry: the nodes hold the image
    return pod_spec


def kill_container_process(pod_uid: str, needle: str) -> int:
    """SIGKILL the process of a real pod whose command line holds `needle`, as a crash or an OOM kill does.

    The real nodes' containers are processes of this machine: the one in the pod's cgroup (kubelet names it after
    the pod's UID) that runs `needle`. Returns its pid.
    """
    marks = (f"pod{pod_uid}", f"pod{pod_uid.replace('-', '_')}")
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cgroups = (proc / "cgroup").read_text()
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # it ended meanwhile
            continue
        if needle in command and any(mark in cgroups for mark in marks):
            os.kill(int(proc.name), signal.SIGKILL)
            return int(proc.name)
    raise AssertionError(f"no process of pod {pod_uid} runs {needle!r}")


class InClusterMlflow:
    """An MLflow tracking server running as a pod on a real node, and how to read it from here."""

    def __init__(self, cluster_uri: str, host_uri: str) -> None:
        self.cluster_uri = cluster_uri  # what pods use: the Service's DNS name
        self.host_uri = host_uri  # what this test uses: the Service's cluster IP, routed into the cluster's netns

    def metric_history(self, workflow: str, metric: str) -> list[float]:
        """`metric` of the one run of `workflow` that logged it, in step order."""
        from mlflow.tracking import MlflowClient

        client = MlflowClient(self.host_uri)
        runs = [
            run
            for experiment in client.search_experiments()
            for run in client.search_runs([experiment.experiment_id])
            if metric in run.data.metrics
        ]
        assert len(runs) == 1, f"{len(runs)} runs logged {metric}"
        history = client.get_metric_history(runs[0].info.run_id, metric)
        return [m.value for m in sorted(history, key=lambda m: m.step)]


def mlflow_objects(namespace: str, image: str, also_allow: str) -> list[dict[str, Any]]:
    """deploy/mlflow's Deployment and Service, for one test: its namespace, the step image, the store in the pod.

    The manifests are the ones `kubectl apply -k deploy/` installs (one definition); only what a throwaway test
    server must not share changes: no PVC (an emptyDir instead), the image the real nodes hold, and the Host
    headers it accepts (the test's namespace instead of `vcpilot`, and `also_allow`, how this test reaches it).
    """
    objects = [
        obj
        for path in sorted((ROOT / "deploy" / "mlflow").glob("*.yaml"))
        if path.name != "kustomization.yaml"
        for obj in yaml.safe_load_all(path.read_text())
        if obj and obj.get("kind") in {"Deployment", "Service"}
    ]
    assert {o["kind"] for o in objects} == {"Deployment", "Service"}, "deploy/mlflow has a Deployment and a Service"
    for obj in objects:
        obj["metadata"]["namespace"] = namespace
        if obj["kind"] != "Deployment":
            continue
        pod = obj["spec"]["template"]["spec"]
        for container in pod["containers"]:
            container["image"] = image
            args = [a.replace(".vcpilot", f".{namespace}") for a in container.get("args", [])]
            container["args"] = [f"{a},{also_allow}" if a.startswith("--allowed-hosts=") else a for a in args]
        for volume in pod.get("volumes", []):
            if "persistentVolumeClaim" in volume:
                del volume["persistentVolumeClaim"]
                volume["emptyDir"] = {}
    return objects
