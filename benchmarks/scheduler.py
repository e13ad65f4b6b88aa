"""Scheduler benchmark: one session over 1,000 pending gangs on 100 nodes, and submit-to-Running latency.

Also a whole LocalCluster reconcile (SQLite, controller, session) with 1,000 queued jobs on 100 nodes, checked
for correctness: every gang wholly placed or wholly pending, no node over its GPUs. Prints one JSON document with
`figures` (benchmarks/goals.py). The latency is a ratio against starting the same command directly, measured side
by side in this process, so a noisy machine moves both numbers together; beside it, `pod_cpu_ms`, the CPU a pod
costs all the processes involved.

    python benchmarks/scheduler.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from components.volcano import localpods
from components.volcano.cluster_local import LocalCluster
from components.volcano.localconfig import LocalClusterConfig
from components.volcano.resources import GPU
from components.volcano.scheduler import Gang, NodeState, PodRequest, QueueState, schedule

# The jobs come from the tests' factory, so a manifest change is one edit for both; tests/ is not installed.
sys.path.append(str(Path(__file__).resolve().parents[1] / "tests"))
from goals import figure  # noqa: E402
from vcjob_factory import vcjob, vcjob_task  # noqa: E402

SESSION_GOAL_S = 1.0  # issues 2 and 16: a session over 1,000 gangs on 100 nodes well under a second
LATENCY_GOAL = 1.5  # issue 2: submit-to-Running at most 1.5x starting the command directly


def session_inputs(gangs: int = 1000, nodes: int = 100, seed: int = 7):
    """A cluster of `nodes` x 8 GPUs, 4 queues, and `gangs` Pending gangs of 1-4 pods x 1-2 GPUs."""
    rng = random.Random(seed)
    node_states = [
        NodeState(
            name=f"node-{i:03d}",
            ready=True,
            allocatable={GPU: 8, "cpu": 64, "memory": 512 * 2**30},
            used={},
            labels={"kubernetes.io/hostname": f"node-{i:03d}"},
        )
        for i in range(nodes)
    ]
    queues = [QueueState(name=f"q{i}", weight=i + 1) for i in range(4)]
    out = []
    for g in range(gangs):
        pods, gpus = rng.randint(1, 4), rng.randint(1, 2)
        res = {GPU: float(gpus), "cpu": 4.0, "memory": 16.0 * 2**30}
        out.append(
            Gang(
                key=f"default/job-{g}",
                queue=f"q{g % 4}",
                phase="Pending",
                min_member=pods,
                min_resources={k: v * pods for k, v in res.items()},
                pods=tuple(PodRequest(name=f"default/job-{g}-{p}", resources=res) for p in range(pods)),
                priority=rng.choice([0, 0, 100]),
                order=g,
            )
        )
    return node_states, queues, out


def time_session(repeats: int = 5) -> dict:
    nodes, queues, gangs = session_inputs()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = schedule(nodes, queues, gangs)
        times.append(time.perf_counter() - start)
    return {
        "gangs": len(gangs),
        "nodes": len(nodes),
        "session_s_median": statistics.median(times),
        "session_s_best": min(times),
        "admitted": len(result.enqueued),
        "pods_bound": len(result.bindings),
    }


def wait_for(path: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(path)
        time.sleep(0.0005)


def time_latency(repeats: int = 10) -> dict:
    """Submit-to-Running of a one-pod job vs Popen of the same command, alternating, medians."""
    work = Path(tempfile.mkdtemp(prefix="vcpilot-bench-"))
    cluster = LocalCluster(work / "home", LocalClusterConfig(), hook=False)
    direct, via_cluster = [], []
    for i in range(repeats):
        marker = work / f"direct-{i}"
        command = [sys.executable, "-c", "import sys, pathlib; pathlib.Path(sys.argv[1]).touch()", str(marker)]
        start = time.perf_counter()
        proc = subprocess.Popen(command)
        wait_for(marker)
        direct.append(time.perf_counter() - start)
        proc.wait()

        marker = work / f"cluster-{i}"
        touch = ["python", "-c", "import sys, pathlib; pathlib.Path(sys.argv[1]).touch()", str(marker)]
        job = vcjob(f"lat-{i}", tasks=[vcjob_task(command=touch)])  # no shell in between: as Popen above
        start = time.perf_counter()
        cluster.submit(job)
        wait_for(marker)
        via_cluster.append(time.perf_counter() - start)
        cluster.wait(f"lat-{i}", timeout=30)
        cluster.delete(f"lat-{i}")
    d, c = statistics.median(direct), statistics.median(via_cluster)
    return {"direct_start_s_median": d, "submit_to_running_s_median": c, "ratio": c / d, "repeats": repeats}


def pod_cpu_ms(repeats: int = 30) -> float:
    """CPU milliseconds per pod of `true`, from its start to its end, of every process: this one, the wrapper, the log
    filter. Unlike the latency, it hardly depends on how busy the machine is (figures in docs/benchmarks.md)."""
    work = Path(tempfile.mkdtemp(prefix="vcpilot-bench-"))

    def cpu_s() -> float:  # an ended process's CPU counts once its parent has collected it
        usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
        return sum(u.ru_utime + u.ru_stime for u in usage)

    for i in range(repeats + 1):  # a start collects the filters that have ended: from the second on, each counts one
        if i == 1:
            before = cpu_s()
        pid, token = localpods.start(["true"], {"PATH": os.environ["PATH"]}, str(work), work / "log",
                                     work / f"exit-{i}", None)  # fmt: skip
        while localpods.is_alive(pid, token):
            time.sleep(0.001)
    return (cpu_s() - before) / repeats * 1e3


def time_reconcile(jobs: int = 1000) -> dict:
    """A whole LocalCluster reconcile (SQLite, controller, session) with `jobs` 2 x 8-GPU jobs on 100 nodes.

    Correct: 50 gangs fill the 800 GPUs, each with both its pods on nodes, the rest wholly pending.
    """
    work = Path(tempfile.mkdtemp(prefix="vcpilot-bench-"))
    config = LocalClusterConfig.model_validate({"nodes": [{"name": "node", "count": 100, "gpus": 8}]})
    cluster = LocalCluster(work / "home", config, hook=False)
    for i in range(jobs):
        cluster.submit(vcjob(f"job-{i}", tasks=[vcjob_task(replicas=2, gpus=8, command=["sleep", "600"])]))
    times = []
    for _ in range(5):
        start = time.perf_counter()
        cluster.reconcile()
        times.append(time.perf_counter() - start)
    queue = cluster.queue("default")
    listed = cluster.list_jobs()
    partial = [j.name for j in listed if 0 < sum(1 for p in j.pods if p.node) < len(j.pods)]
    overcommitted = [n.name for n in cluster.nodes() if n.gpu_allocated > n.gpu_capacity]
    cluster.reset()
    return {
        "jobs": jobs,
        "nodes": 100,
        "reconcile_s_median": statistics.median(times),
        "running": queue.running,
        "pending": queue.pending,
        "correct": not partial and not overcommitted and queue.running == min(jobs, 50),
        "partial_gangs": partial[:5],
        "overcommitted_nodes": overcommitted[:5],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats of the latency")
    args = parser.parse_args()
    session, latency, local = time_session(), time_latency(3 if args.quick else 10), time_reconcile()
    latency["pod_cpu_ms"] = round(pod_cpu_ms(), 2)
    figures = [
        figure(
            "scheduler: one session, 1,000 pending gangs on 100 nodes", session["session_s_median"], "<",
            SESSION_GOAL_S, unit="s",
        ),
        figure(
            "LocalCluster: submit to Running", latency["ratio"], "<=", LATENCY_GOAL, unit="x",
            baseline="Popen of the same command",
        ),
        figure(
            "LocalCluster: reconcile with 1,000 queued jobs on 100 nodes", local["reconcile_s_median"], "<",
            SESSION_GOAL_S, unit="s",
        ),
        figure("LocalCluster: 1,000 queued jobs placed correctly", float(local["correct"]), "==", 1, unit="bool"),
    ]  # fmt: skip
    report = {"session": session, "latency": latency, "local_cluster": local, "figures": figures}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
