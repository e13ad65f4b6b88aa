"""Local runner benchmark: a 100-task DAG of trivial script steps beside the same 100 processes in a plain loop.

The DAG is 10 independent chains of depth 10 (fan-out 10 x depth 10). It runs twice through the local runner:
with `parallelism: 1` (so the difference to the plain loop is the runner's own overhead per task) and
unconstrained (where parallelism should beat the loop). Prints one JSON document.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pipelines.local.runner import run_workflow

SOURCE = "print('ok')"
WIDTH, DEPTH = 10, 10


def workflow(parallelism: int | None) -> dict:
    tasks = []
    for depth in range(DEPTH):
        for lane in range(WIDTH):
            task = {"name": f"t-{depth}-{lane}", "template": "noop"}
            if depth:
                task["depends"] = f"t-{depth - 1}-{lane}"
            tasks.append(task)
    spec: dict = {
        "entrypoint": "main",
        "templates": [
            {"name": "main", "dag": {"tasks": tasks}},
            {"name": "noop", "script": {"image": "python:3.11", "command": ["python"], "source": SOURCE}},
        ],
    }
    if parallelism:
        spec["parallelism"] = parallelism
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "metadata": {"name": "bench"}, "spec": spec}


def plain_loop() -> float:
    start = time.perf_counter()
    for _ in range(WIDTH * DEPTH):
        subprocess.run([sys.executable, "-c", SOURCE], check=True, capture_output=True)
    return time.perf_counter() - start


def through_runner(parallelism: int | None, home: Path) -> float:
    start = time.perf_counter()
    result = run_workflow(workflow(parallelism), {}, home=home, name=f"bench-{parallelism or 'all'}")
    elapsed = time.perf_counter() - start
    if result.phase != "Succeeded":
        raise SystemExit(f"benchmark workflow ended {result.phase}")
    return elapsed


def main() -> None:
    home = Path(tempfile.mkdtemp(prefix="vcpilot-bench-"))
    loop = plain_loop()
    serial = through_runner(1, home)
    parallel = through_runner(None, home)
    tasks = WIDTH * DEPTH
    print(
        json.dumps(
            {
                "tasks": tasks,
                "plain_loop_s": round(loop, 3),
                "runner_parallelism_1_s": round(serial, 3),
                "runner_parallel_s": round(parallel, 3),
                "overhead_ms_per_task": round((serial - loop) / tasks * 1000, 1),
                "parallel_vs_loop": round(parallel / loop, 3),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
