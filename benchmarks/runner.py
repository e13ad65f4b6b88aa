"""Local runner benchmark: a 100-task DAG of trivial script steps beside the same 100 processes in a plain loop.

The DAG is 10 independent chains of depth 10 (fan-out 10 x depth 10). It runs twice through the local runner:
with `parallelism: 1` (so the difference to the plain loop is the runner's own overhead per task) and
unconstrained (where parallelism should beat the loop). Then a 500-task DAG (50 chains of depth 10, issue 16),
unconstrained, beside five times the plain loop's 100. Prints one JSON document with `figures`
(benchmarks/goals.py).

    python benchmarks/runner.py [--quick]   # --quick: the 500-task DAG only at 200 tasks
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from goals import figure

from pipelines.local.runner import run_workflow

SOURCE = "print('ok')"
WIDTH, DEPTH = 10, 10
OVERHEAD_GOAL_MS = 50  # issue 3: the runner's own cost per task


def workflow(parallelism: int | None, width: int = WIDTH) -> dict:
    tasks = []
    for depth in range(DEPTH):
        for lane in range(width):
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


def through_runner(parallelism: int | None, home: Path, width: int = WIDTH) -> float:
    start = time.perf_counter()
    result = run_workflow(workflow(parallelism, width), {}, home=home, name=f"bench-{parallelism or 'all'}-{width}")
    elapsed = time.perf_counter() - start
    if result.phase != "Succeeded":
        raise SystemExit(f"benchmark workflow ended {result.phase}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the large DAG at 200 tasks instead of 500")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="vcpilot-bench-"))
    loop = plain_loop()
    serial = through_runner(1, home)
    parallel = through_runner(None, home)
    tasks = WIDTH * DEPTH
    large_width = 20 if args.quick else 50
    large = through_runner(None, home, large_width)
    large_tasks = large_width * DEPTH
    large_loop = loop * large_tasks / tasks  # the plain loop's time per process, as many times
    overhead_ms = (serial - loop) / tasks * 1000
    figures = [
        figure("runner: overhead per task (parallelism 1)", overhead_ms, "<", OVERHEAD_GOAL_MS, unit="ms"),
        figure(
            "runner: 100-task DAG, parallel", parallel / loop, "<", 1.0, unit="x",
            baseline="the same processes in a loop",
        ),
        figure(
            f"runner: {large_tasks}-task DAG, parallel", large / large_loop, "<", 1.0, unit="x",
            baseline=f"{large_tasks} processes in a loop (100 measured, scaled)",
        ),
    ]  # fmt: skip
    print(
        json.dumps(
            {
                "tasks": tasks,
                "plain_loop_s": round(loop, 3),
                "runner_parallelism_1_s": round(serial, 3),
                "runner_parallel_s": round(parallel, 3),
                "overhead_ms_per_task": round(overhead_ms, 1),
                "parallel_vs_loop": round(parallel / loop, 3),
                "large_dag": {"tasks": large_tasks, "runner_parallel_s": round(large, 3), "succeeded": True},
                "figures": figures,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
