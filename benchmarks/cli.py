"""CLI start-up benchmark: `vcpilot --help`, `cluster status` and `plan --dry-run` beside `import typer, rich`.

Prints one JSON document. Each command runs as a person runs it (the `vcpilot` script beside this Python, in a
fresh process, against a LocalCluster in a temporary VCPILOT_HOME), and so does the baseline, `python -c "import
typer, rich"`: the least any typer CLI costs on this machine. `cluster status` runs twice: on an idle cluster, and
(`cluster_status_jobs`) on one with a running gang and a gang that waits for GPUs, which every read reconciles and
schedules. Rounds are interleaved (baseline, help, status, plan, then again; `--rounds N`) so that a machine busy
for a while slows every command alike; each figure is the median of its rounds, in wall time and in CPU time (user
+ system of the child, which load stretches less). The ratios are command / baseline; the goals are the issue's:
at most 1.5x for `--help` and `cluster status`, 3x for `plan`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from goals import figure

ROUNDS = 9
GOALS = {"help": 1.5, "cluster_status": 1.5, "cluster_status_jobs": 1.5, "plan_dry_run": 3.0}

# For orientation, not a goal: the least a command that answers in pydantic models and prints a rich table can cost
# (typer, two small frozen models, one table). `plan` decides with pydantic models, so this is its floor;
# `cluster status` uses neither pydantic nor rich (docs/benchmarks.md).
PYDANTIC_FLOOR = """
import typer
from pydantic import BaseModel, ConfigDict
from rich.console import Console
from rich.table import Table
class Node(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    gpus: int
class Queue(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
table = Table("node", "GPUs")
for node in [Node(name="node-0", gpus=4)]:
    table.add_row(node.name, str(node.gpus))
Console().print(table, Queue(name="default").name)
"""

# For orientation, not a goal: what typer alone costs to parse `plan`'s options (its very signature, a body that
# does nothing). Typer (0.29) coerces every option that is not a flag through a pydantic TypeAdapter it builds for it,
# so this imports pydantic and builds its schema machinery: most of that is what `plan` pays anyway for its own
# models, and typer's adapters add about 2% to `plan` itself (docs/benchmarks.md).
TYPER_PLAN_FLOOR = """
import functools, typer
from pipelines.cli_plan import plan_command
app = typer.Typer(add_completion=False, rich_markup_mode=None)
app.command()(functools.wraps(plan_command)(lambda **options: None))
app(["--dry-run"])
"""

# The jobs of `cluster_status_jobs`: a gang of two 1-GPU pods that runs until the benchmark deletes it, and one
# that asks more GPUs than a node has, so it stays Pending and every read runs a scheduler session for it.
JOBS = {"running": (2, 1), "waiting": (1, 8)}


def vcpilot() -> list[str]:
    """The installed `vcpilot` script next to this interpreter, else the module (a checkout on PYTHONPATH)."""
    script = Path(sys.executable).with_name("vcpilot")
    return [str(script)] if script.exists() else [sys.executable, "-m", "pipelines.cli"]


def commands(env: dict[str, str], busy: dict[str, str]) -> dict[str, tuple[list[str], dict[str, str]]]:
    """Each measured command with the environment it runs in (`busy`: the cluster with jobs)."""
    cli = vcpilot()
    return {
        "baseline": ([sys.executable, "-c", "import typer, rich"], env),
        "help": ([*cli, "--help"], env),
        "cluster_status": ([*cli, "cluster", "status"], env),
        "cluster_status_jobs": ([*cli, "cluster", "status"], busy),
        "plan_dry_run": ([*cli, "plan", "--dry-run"], env),
        "pydantic_floor": ([sys.executable, "-c", PYDANTIC_FLOOR], env),
        "typer_plan_floor": ([sys.executable, "-c", TYPER_PLAN_FLOOR], env),
    }


def job(name: str, pods: int, gpus: int) -> dict[str, object]:
    """A Volcano Job of `pods` pods asking `gpus` GPUs each, which sleep (for longer than the benchmark runs)."""
    container = {
        "name": "main",
        "image": "busybox",
        "command": ["sleep", "3600"],
        "resources": {"limits": {"nvidia.com/gpu": gpus}},
    }
    task = {"name": "worker", "replicas": pods, "template": {"spec": {"containers": [container]}}}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"schedulerName": "volcano", "minAvailable": pods, "queue": "default", "tasks": [task]},
    }


def cluster_with_jobs(env: dict[str, str]) -> None:
    """Submit `JOBS` to the LocalCluster of `env` with `vcpilot cluster submit` (a JSON file is YAML too)."""
    files = Path(env["VCPILOT_HOME"]).with_name("jobs")
    files.mkdir(exist_ok=True)
    for name, (pods, gpus) in JOBS.items():
        path = files / f"{name}.json"
        path.write_text(json.dumps(job(name, pods, gpus)))
        timed([*vcpilot(), "cluster", "submit", str(path)], env)


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of `argv`; a failing command stops the benchmark."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"interleaved rounds (default {ROUNDS})")
    rounds = parser.parse_args(argv).rounds
    if rounds < 1:
        parser.error("--rounds must be at least 1")
    home = tempfile.mkdtemp(prefix="vcpilot-bench-cli-")
    env = {**os.environ, "VCPILOT_HOME": home, "VCPILOT_WORKSPACE": str(Path(home) / "workspace")}
    # As on a person's machine, Python keeps the byte-compiled modules after the first run (the warm-up's).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    busy = {**env, "VCPILOT_HOME": str(Path(home) / "busy")}
    runs = commands(env, busy)
    wall: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    try:
        cluster_with_jobs(busy)
        for argv, run_env in runs.values():  # warm-up: the clusters' databases, byte-compiled modules, page cache
            timed(argv, run_env)
        for _ in range(rounds):
            for name, (argv, run_env) in runs.items():
                w, c = timed(argv, run_env)
                wall[name].append(w)
                cpu[name].append(c)
    finally:  # the running gang's pods are processes of this machine
        for name in JOBS:
            subprocess.run([*vcpilot(), "cluster", "delete", name], env=busy, capture_output=True, check=False)
    median_wall = {name: statistics.median(values) for name, values in wall.items()}
    median_cpu = {name: statistics.median(values) for name, values in cpu.items()}
    shown = [*GOALS, "pydantic_floor", "typer_plan_floor"]
    ratios = {name: round(median_wall[name] / median_wall["baseline"], 2) for name in shown}
    cpu_ratios = {name: round(median_cpu[name] / median_cpu["baseline"], 2) for name in shown}
    print(
        json.dumps(
            {
                "rounds": rounds,
                "median_wall_ms": {name: round(value * 1000, 1) for name, value in median_wall.items()},
                "median_cpu_ms": {name: round(value * 1000, 1) for name, value in median_cpu.items()},
                "ratio_to_baseline": ratios,
                "cpu_ratio_to_baseline": cpu_ratios,
                "goal": GOALS,
                "met": {name: ratios[name] <= goal for name, goal in GOALS.items()},
                "figures": [
                    figure(f"start-up: {name}", ratios[name], "<=", goal, unit="x", baseline="import typer, rich")
                    for name, goal in GOALS.items()
                ],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
