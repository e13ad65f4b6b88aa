"""Installs vcpilot into the running e2e cluster as docs/deploy.md installs it anywhere: `kubectl apply -k deploy/`.

    .venv/bin/python deploy/e2e/install.py            (after deploy/e2e/up.sh; `make cluster` runs both)

What only this cluster needs is added around the kustomization, never changed in it: volumes for the two claims
(hostPath directories under the run directory: both real nodes are this machine, so a hostPath is what an RWX file
system is on a real cluster), the step image the nodes hold (there is no registry), the template's defaults for the
demo (its data and first champion are seeded into the workspace by `vcpilot demo seed` in a pod) and pods sized for
nodes of two CPUs. Every install starts from empty volumes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pipelines.autopilot_run import demo_parameters  # noqa: E402

NAMESPACE = "vcpilot"
WORKSPACE = PurePosixPath("/workspace")
MLFLOW_URI = "http://vcpilot-mlflow:5000"
# Each real node has the machine's two CPUs: a training rank, the load-test server or client, MLflow and Argo's
# own pods must fit beside each other.
SIZING = {"cpu-per-gpu": "800m", "memory-per-gpu": "3Gi"}
SERVICES_NODE = "real-node-0"
POD_USER = 1000  # the step image's user, who writes the volumes


def e2e_env() -> dict[str, str]:
    """The paths lib.sh defines (one definition, read through bash)."""
    script = f'source {ROOT}/deploy/e2e/lib.sh; printf "%s\\n" "$E2E_BIN" "$E2E_RUN" "$E2E_MLFLOW_IP"'
    out = subprocess.run(["bash", "-c", script], check=True, capture_output=True, text=True).stdout.split()
    return {"bin": out[0], "run": out[1], "mlflow_ip": out[2]}


class Kubectl:
    """The cluster's kubectl; a failed call ends the install with kubectl's own words."""

    def __init__(self, binary: str, kubeconfig: str) -> None:
        self.base = [binary, "--kubeconfig", kubeconfig]

    def __call__(self, *args: str, stdin: str | None = None) -> str:
        """Run kubectl ARGS (stdin: what it reads for `-f -`); its output."""
        done = subprocess.run([*self.base, *args], input=stdin, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"install: kubectl {' '.join(args[:3])} failed: {done.stderr.strip()}")
        return done.stdout


def volumes(run: Path) -> list[dict[str, Any]]:
    """PersistentVolumes bound to the kustomization's claims, on fresh directories of this machine."""
    objects = []
    for claim, size in (("vcpilot-workspace", "100Gi"), ("vcpilot-mlflow", "20Gi")):
        path = run / "volumes" / claim
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        os.chown(path, POD_USER, POD_USER)
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": f"e2e-{claim}", "labels": {"app.kubernetes.io/part-of": "vcpilot-e2e"}},
                "spec": {
                    "capacity": {"storage": size},
                    "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "hostPath": {"path": str(path), "type": "Directory"},
                    "claimRef": {"namespace": NAMESPACE, "name": claim},
                },
            }
        )
    return objects


def adapt(objects: list[dict[str, Any]], image: str, mlflow_ip: str) -> list[dict[str, Any]]:
    """The kustomization's objects with this cluster's image and the demo's defaults in the WorkflowTemplate.

    MLflow's Service gets a fixed ClusterIP that this machine routes into the cluster, and the server accepts
    that address as a Host, so that people and tests here read it (`MLFLOW_TRACKING_URI`, up.sh --print-env).
    """
    defaults = {**demo_parameters(WORKSPACE), **SIZING, "image": image}
    for obj in objects:
        if obj["kind"] == "Service" and obj["metadata"]["name"] == "vcpilot-mlflow":
            obj["spec"]["clusterIP"] = mlflow_ip
        if obj["kind"] == "Deployment":
            # The cluster's services stay on the first node, so that a test can kill the other mid-training (a
            # real cluster keeps them off its GPU nodes in the same way).
            obj["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": SERVICES_NODE}
            for container in obj["spec"]["template"]["spec"]["containers"]:
                container["image"] = image
                port = obj["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"]
                container["args"] = [
                    f"{a},{mlflow_ip}:{port}" if a.startswith("--allowed-hosts=") else a for a in container["args"]
                ]
        if obj["kind"] == "WorkflowTemplate":
            parameters = obj["spec"]["arguments"]["parameters"]
            names = {p["name"] for p in parameters}
            missing = set(defaults) - names
            if missing:
                raise SystemExit(f"install: the WorkflowTemplate has no parameter {', '.join(sorted(missing))}")
            for parameter in parameters:
                parameter["value"] = defaults.get(parameter["name"], parameter.get("value"))
    return objects


def seed_pod(image: str) -> dict[str, Any]:
    """A pod that writes the demo's data into the workspace and registers its first champion in MLflow."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "vcpilot-demo-seed", "namespace": NAMESPACE},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "securityContext": {"runAsUser": POD_USER, "runAsGroup": POD_USER},
            "containers": [
                {
                    "name": "seed",
                    "image": image,
                    "command": ["vcpilot", "demo", "seed", "--home", str(WORKSPACE)],
                    "args": ["--mlflow-tracking-uri", MLFLOW_URI],
                    "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
                    "volumeMounts": [{"name": "workspace", "mountPath": str(WORKSPACE)}],
                }
            ],
            "volumes": [{"name": "workspace", "persistentVolumeClaim": {"claimName": "vcpilot-workspace"}}],
        },
    }


def built_image() -> str:
    """The step image deploy/e2e/image.sh built for the code as it is now (its last line)."""
    printed = subprocess.run([f"{ROOT}/deploy/e2e/image.sh", "--print"], check=True, capture_output=True, text=True)
    return printed.stdout.split()[-1]


def main(argv: list[str] | None = None) -> int:
    """Install, wait for MLflow, seed the demo; exit with one sentence on the first failure."""
    env = e2e_env()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", default=f"{env['run']}/kubeconfig")
    parser.add_argument("--image", help="the step image (default: the one deploy/e2e/image.sh built)")
    parser.add_argument(
        "--again", action="store_true", help="first remove a previous install (its namespace, runs, data)"
    )
    args = parser.parse_args(argv)
    kubectl = Kubectl(f"{env['bin']}/kubectl", args.kubeconfig)
    image = args.image or built_image()
    held = json.loads(kubectl("get", "nodes", "-l", "type=real", "-o", "json"))["items"]
    # A node lists an image it holds by no name (untagged, e.g. what a re-import left) with `names: null`.
    names = [{n for i in node["status"].get("images") or [] for n in i.get("names") or []} for node in held]
    if not held or not all(image in held_names for held_names in names):
        raise SystemExit(
            f"install: the real nodes do not hold {image}: restart the cluster (deploy/e2e/up.sh) to import the "
            "image deploy/e2e/image.sh built, or name one they hold with --image"
        )

    if args.again:
        print(f"install: removing namespace {NAMESPACE} and its volumes", flush=True)
        kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait")
        kubectl("delete", "pv", "-l", "app.kubernetes.io/part-of=vcpilot-e2e", "--wait")
    objects = [o for o in yaml.safe_load_all(kubectl("kustomize", str(ROOT / "deploy"))) if o]
    objects = volumes(Path(env["run"])) + adapt(objects, image, env["mlflow_ip"])
    print(f"install: kubectl apply -k deploy/ ({len(objects) - 2} objects) with the image {image}", flush=True)
    listing = {"apiVersion": "v1", "kind": "List", "items": objects}
    kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(listing))
    kubectl("rollout", "status", "deployment/vcpilot-mlflow", "-n", NAMESPACE, "--timeout", "300s")
    print("install: MLflow is up; seeding the demo (data and a first champion) into the workspace", flush=True)
    kubectl("delete", "pod", "vcpilot-demo-seed", "-n", NAMESPACE, "--ignore-not-found", "--wait")
    kubectl("apply", "-f", "-", stdin=json.dumps(seed_pod(image)))
    done = subprocess.run(
        [*kubectl.base, "wait", "pod/vcpilot-demo-seed", "-n", NAMESPACE, "--timeout", "900s",
         "--for", "jsonpath={.status.phase}=Succeeded"],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode:
        logs = [*kubectl.base, "logs", "vcpilot-demo-seed", "-n", NAMESPACE]
        log = subprocess.run(logs, capture_output=True, text=True)
        tail = "\n".join((log.stdout + log.stderr).strip().splitlines()[-5:])
        raise SystemExit(f"install: seeding the demo failed or timed out:\n{tail}")
    print("install: done; the WorkflowTemplate's defaults run the demo", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
