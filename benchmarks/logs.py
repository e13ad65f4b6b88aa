"""Log parsing benchmark: `vcpilot logs parse` beside raw Drain3 on the same 200k lines, and peak memory vs size.

Prints one JSON document. Lines come from the six Loghub 2k datasets in ../shared, repeated with every digit
re-drawn (so variables vary as in real logs). Throughput is a ratio measured side by side in one run, rounds
interleaved and the best of each kept, in CPU time (a busy machine stretches wall time, not CPU time) and in wall
time. Raw Drain3 is `TemplateMiner.add_log_message` with its default configuration on each raw line. Peak memory
is measured in a fresh process per size and measure (ru_maxrss; tracemalloc while parsing): flat means 1M lines
cost what 100k lines cost.
"""

from __future__ import annotations

import json
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOGHUB = ROOT.parent / "shared" / "datasets" / "loghub"
DATASETS = ("HDFS", "Apache", "OpenSSH", "Zookeeper", "Hadoop", "Spark")
_DIGITS = re.compile(r"\d")
ROUNDS = 5


def write_lines(path: Path, count: int, seed: int = 11) -> Path:
    """`count` lines cycling over the Loghub datasets' lines, each digit replaced by a random one."""
    base = []
    for name in DATASETS:
        base += (LOGHUB / name / f"{name}_2k.log").read_text(encoding="utf-8").splitlines()
    rng = random.Random(seed)
    digits = "0123456789"
    with path.open("w", encoding="utf-8") as out:
        for i in range(count):
            line = base[i % len(base)]
            out.write(_DIGITS.sub(lambda _: rng.choice(digits), line) + "\n")
    return path


def time_raw_drain3(path: Path) -> tuple[float, float]:
    """(CPU, wall) seconds for raw Drain3 (default configuration, no persistence) to mine every line of `path`."""
    from drain3 import TemplateMiner
    from drain3.template_miner_config import TemplateMinerConfig

    miner = TemplateMiner(config=TemplateMinerConfig())
    cpu, wall = time.process_time(), time.perf_counter()
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            miner.add_log_message(line.rstrip("\n"))
    return time.process_time() - cpu, time.perf_counter() - wall


def time_parse(path: Path, out: Path) -> tuple[float, float]:
    """(CPU, wall) seconds for `vcpilot logs parse` in process: reading, masking, mining, writing the CSV."""
    from components.logs.parse import parse_files

    cpu, wall = time.process_time(), time.perf_counter()
    parse_files([path], out)
    return time.process_time() - cpu, time.perf_counter() - wall


def _memory_child(path: str, out: str, mode: str) -> None:
    """Run in a fresh process: the peak memory of parsing `path`, in MiB, printed as JSON.

    `rss`: the process's peak resident set (ru_maxrss) after parsing, and how much parsing added to it.
    `tracemalloc`: the peak of Python allocations made while parsing (slower, but blind to the interpreter).
    """
    from components.logs.parse import parse_files

    if mode == "tracemalloc":
        tracemalloc.start()
        summary = parse_files([Path(path)], Path(out))
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        print(json.dumps({"lines": summary.lines, "tracemalloc_peak_mib": round(peak, 2)}))
        return
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    summary = parse_files([Path(path)], Path(out))
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"lines": summary.lines, "peak_rss_mib": round(after, 2), "rss_growth_mib": after - before}))


def peak_memory(path: Path, out: Path) -> dict:
    """Peak memory of parsing `path`, each measure in a fresh interpreter."""
    code = "import sys; from benchmarks.logs import _memory_child; _memory_child(*sys.argv[1:])"
    result: dict = {}
    for mode in ("rss", "tracemalloc"):
        command = [sys.executable, "-c", code, str(path), str(out), mode]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
        result |= json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    if not LOGHUB.is_dir():
        sys.exit(f"error: {LOGHUB} is missing: the benchmark needs the Loghub datasets in ../shared")
    with tempfile.TemporaryDirectory(prefix="vcpilot-bench-logs-") as tmp:
        work = Path(tmp)
        lines_200k = write_lines(work / "200k.log", 200_000)
        raw_runs, our_runs = [], []
        for _ in range(ROUNDS):  # interleaved, best of each: a busy neighbour slows both, not one
            raw_runs.append(time_raw_drain3(lines_200k))
            our_runs.append(time_parse(lines_200k, work / "200k.csv"))
        raw_cpu, raw_wall = (min(run[i] for run in raw_runs) for i in (0, 1))
        our_cpu, our_wall = (min(run[i] for run in our_runs) for i in (0, 1))
        throughput = {
            "lines": 200_000,
            "rounds": ROUNDS,
            "raw_drain3_lines_per_cpu_s": round(200_000 / raw_cpu),
            "logs_parse_lines_per_cpu_s": round(200_000 / our_cpu),
            "ratio_cpu": round(raw_cpu / our_cpu, 3),
            "raw_drain3_lines_per_wall_s": round(200_000 / raw_wall),
            "logs_parse_lines_per_wall_s": round(200_000 / our_wall),
            "ratio_wall": round(raw_wall / our_wall, 3),
            "goal_ratio": 0.7,
            "load_average_1m": round(os.getloadavg()[0], 2),
        }
        memory = {}
        for label, count in (("100k", 100_000), ("1M", 1_000_000)):
            path = write_lines(work / f"{label}.log", count)
            memory[label] = peak_memory(path, work / f"{label}.csv")
            path.unlink()
        memory["ratio_1M_to_100k_peak_rss"] = round(memory["1M"]["peak_rss_mib"] / memory["100k"]["peak_rss_mib"], 3)
        memory["ratio_1M_to_100k_tracemalloc"] = round(
            memory["1M"]["tracemalloc_peak_mib"] / memory["100k"]["tracemalloc_peak_mib"], 3
        )
    print(json.dumps({"throughput": throughput, "memory": memory}, indent=2))


if __name__ == "__main__":
    main()
