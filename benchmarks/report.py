"""`make bench`: run every benchmark, collect each one's figures with their goals, write the results beside them.

Each benchmark prints one JSON document whose `figures` list holds its figures beside their goals
(benchmarks/goals.py): the goals are defined once, in the benchmark that measures them. This runs them one after
another (never two at once: they time the same cores), keeps each document whole in
`benchmarks/results/latest.json`, and writes the table of every figure to `benchmarks/results/latest.md`.

    python benchmarks/report.py [--quick] [--only scheduler,runner]

`--quick` passes each benchmark its short options (a smoke run: the figures are noisier, the table the same).
`--only` runs some and keeps the others' last documents in the results.
A benchmark that fails or prints no figures is a row that says so, and the exit code is 1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


@dataclass(frozen=True)
class Benchmark:
    """A benchmark script, the arguments of a full run and of a quick one."""

    name: str
    full: tuple[str, ...] = ()
    quick: tuple[str, ...] = ()


BENCHMARKS = (
    Benchmark("scheduler", quick=("--quick",)),
    Benchmark("runner", quick=("--quick",)),
    Benchmark("mcp_load", quick=("--calls", "1")),
    Benchmark("cli"),
    Benchmark("logs", quick=("--accuracy-only",)),
    Benchmark("train", quick=("--steps", "15", "--rounds", "2", "--sizes", "tiny")),
    Benchmark("agent", quick=("--quick",)),
    Benchmark("loadgen", quick=("--seconds", "1", "--rounds", "1")),
    Benchmark("robustness", quick=("--quick",)),
)


def run(benchmark: Benchmark, quick: bool) -> dict[str, object]:
    """Run one benchmark; its JSON document with the seconds it took, or the error it ended with."""
    command = [sys.executable, str(HERE / f"{benchmark.name}.py"), *(benchmark.quick if quick else benchmark.full)]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    took = round(time.perf_counter() - start, 1)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exited with code {done.returncode}: {last}", "seconds": took}
    try:
        document = json.loads(done.stdout)
    except ValueError:
        return {"error": "did not print one JSON document", "seconds": took}
    return {**document, "seconds": took}


def _shown(value: float | None, unit: str) -> str:
    if value is None:
        return "not measured"
    if unit == "bool":
        return "yes" if value else "no"
    number = f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return f"{number}×" if unit == "x" else f"{number} {unit}".strip()


def table(results: dict[str, dict], mode: str, kept: Sequence[str] = ()) -> str:
    """The Markdown table of every figure: benchmark, figure, value, goal, baseline, met.

    `kept`: the benchmarks whose documents an `--only` run kept from an earlier run, which the heading names.
    """
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    earlier = f"; {', '.join(kept)} kept from an earlier run (its `measured_at` in the JSON)" if kept else ""
    lines = [
        "# Benchmark results",
        "",
        f"`make bench` ({mode} run, {when}{earlier}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}). Each goal is defined in the benchmark "
        "that measures it; `benchmarks/results/latest.json` has every document whole.",
        "",
        "| benchmark | figure | value | goal | baseline | met |",
        "|---|---|---|---|---|---|",
    ]
    for name, document in results.items():
        figures = document.get("figures")
        if "error" in document or not figures:
            why = document.get("error", "printed no figures")
            lines.append(f"| {name} | — | — | — | — | **no**: {why} |")
            continue
        for f in figures:
            value = _shown(f["value"], f["unit"])
            lines.append(
                f"| {name} | {f['name']} | {value} | {f['goal']} | {f['baseline'] or '—'} | "
                f"{'yes' if f['met'] else '**no**'} |"
            )
    seconds = sum(float(d.get("seconds", 0)) for d in results.values())
    lines += ["", f"The benchmarks took {seconds:.0f} s, each as last measured."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="each benchmark's short options")
    parser.add_argument("--only", default="", help="comma-separated benchmarks to run (default: all)")
    args = parser.parse_args()
    known = {b.name: b for b in BENCHMARKS}
    chosen = [name for name in args.only.split(",") if name] or list(known)
    unknown = [name for name in chosen if name not in known]
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(known)}")
    # With --only, the other benchmarks keep what the last run measured (each document says how it was run).
    last = RESULTS / "latest.json"
    kept = json.loads(last.read_text()).get("benchmarks", {}) if args.only and last.is_file() else {}
    fresh: dict[str, dict] = {}
    for name in chosen:
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        fresh[name] = {**run(known[name], args.quick), "mode": "quick" if args.quick else "full", "measured_at": when}
        print(f"bench: {name} took {fresh[name]['seconds']} s", file=sys.stderr, flush=True)
    results = {name: fresh.get(name) or kept[name] for name in known if name in fresh or name in kept}
    RESULTS.mkdir(exist_ok=True)
    modes = {str(d.get("mode", "quick")) for d in results.values()}
    mode = modes.pop() if len(modes) == 1 else "mixed (full and quick)"
    figures = [{"benchmark": name, **f} for name, document in results.items() for f in document.get("figures") or []]
    summary = {"mode": mode, "figures": figures, "benchmarks": results}
    (RESULTS / "latest.json").write_text(json.dumps(summary, indent=2) + "\n")
    markdown = table(results, mode, [name for name in results if name not in fresh])
    (RESULTS / "latest.md").write_text(markdown)
    print(markdown)
    failed = [name for name, d in fresh.items() if "error" in d or not d.get("figures")]
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
