"""`make demo` (until the pipeline lands): Volcano's semantics on this machine, shown step by step.

1. Gang scheduling: a 4-pod x 2-GPU job waits, with no pod started, while 2 of the 8 GPUs are busy; it starts
   whole once they free up.
2. A real 2-rank torch DDP job (gloo) built by `build_training_job` runs with the `pytorch` plugin's env.
3. A dead node: its pods are evicted, `PodEvicted -> RestartJob` restarts the job on the healthy node.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

from components.volcano.builder import TrainingRequest, build_training_job
from components.volcano.cluster_local import LocalCluster

HERE = Path(__file__).resolve().parent
console = Console()


def shell_job(name: str, script: str, pods: int, gpus: int) -> dict:
    """A Volcano Job whose pods run a shell script, restarted when a pod fails or is evicted."""
    container = {
        "name": "main",
        "image": "busybox",
        "command": ["sh", "-c", script],
        "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}},
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": "volcano",
            "queue": "default",
            "minAvailable": pods,
            "maxRetry": 3,
            "policies": [
                {"event": "PodEvicted", "action": "RestartJob"},
                {"event": "PodFailed", "action": "RestartJob"},
            ],
            "tasks": [
                {
                    "name": "main",
                    "replicas": pods,
                    "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
                }
            ],
        },
    }


def pods_line(cluster: LocalCluster, name: str) -> str:
    info = cluster.get(name)
    pods = ", ".join(f"{p.name}={p.phase}" + (f"@{p.node}" if p.node else "") for p in info.pods) or "no pods"
    return f"[bold]{name}[/bold] {info.phase} (retries {info.retry_count}): {pods}"


def main() -> int:
    cluster = LocalCluster()
    cluster.reset()
    work = Path(tempfile.mkdtemp(prefix="vcpilot-demo-"))
    console.rule("1. gang scheduling")
    release = work / "release"
    cluster.submit(shell_job("busy", f'while [ ! -f "{release}" ]; do sleep 0.05; done', pods=1, gpus=2))
    cluster.wait("busy", {"Running"}, timeout=30)
    cluster.submit(shell_job("gang", "sleep 0.5", pods=4, gpus=2))
    time.sleep(0.5)
    console.print(pods_line(cluster, "busy"))
    console.print(pods_line(cluster, "gang"))
    console.print(f"  why: {cluster.get('gang').message}", highlight=False)
    console.print("releasing the busy job ...")
    release.touch()
    cluster.wait("gang", timeout=30)
    console.print(pods_line(cluster, "gang"))

    console.rule("2. torch DDP through the pytorch plugin")
    out = work / "ddp.json"
    job = build_training_job(
        TrainingRequest(
            name="ddp",
            image="python:3.11",
            command=["python", str(HERE / "ddp_allreduce.py"), str(out)],
            total_gpus=2,
            gpus_per_pod=1,
            micro_batch=4,
            grad_accum=2,
            global_batch=16,
            cpu_per_pod="1",
            memory_per_pod="1Gi",
        )
    )
    cluster.submit(job)
    done = cluster.wait("ddp", timeout=300)
    console.print(pods_line(cluster, "ddp"))
    if done.phase != "Completed":
        console.print("[red]the DDP job failed[/red]; its logs:")
        for name, text in cluster.logs("ddp"):
            console.print(f"--- {name}\n{text}", highlight=False, markup=False)
        return 1
    console.print(f"  rank 0 says: {json.loads(out.read_text())}")

    console.rule("3. a dead node")
    hold = work / "hold"
    cluster.submit(shell_job("train", f'while [ ! -f "{hold}" ]; do sleep 0.05; done', pods=2, gpus=2))
    first = cluster.wait("train", {"Running"}, timeout=30)
    bad = first.pods[0].node or ""
    console.print(pods_line(cluster, "train"))
    console.print(f"failing {bad} ... evicted: {cluster.fail_node(bad)}")
    cluster.wait("train", {"Running"}, timeout=30)
    console.print(pods_line(cluster, "train"))
    hold.touch()
    cluster.wait("train", timeout=30)
    console.print(pods_line(cluster, "train"))
    cluster.recover_node(bad)
    for event in cluster.events("train")[-6:]:
        console.print(f"  event {event.object} {event.reason}: {event.message}", highlight=False)
    console.rule("done — inspect with `vcpilot cluster status`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
