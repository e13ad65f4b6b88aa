"""Log parsing benchmark: accuracy on Loghub beside raw Drain3, throughput on 200k lines, peak memory vs size.

Prints one JSON document.

Accuracy: the four Loghub-2.0 metrics (components/logs/scoring.py) on each of the six Loghub 2k datasets in
../shared, fed two ways — the `Content` column alone, one message per line (how Loghub's benchmark feeds a parser),
and the raw lines with their headers — for `vcpilot logs parse` (its one configuration) and for raw Drain3
(default configuration, no masking) in the same run. The honest estimate of accuracy on log formats never seen is
the leave-one-dataset-out (LODO) average: for each dataset, the candidate configuration that does best on the other
five is scored on it; the six held-out scores are averaged.

Throughput: lines come from the six datasets, repeated with every digit re-drawn (so variables vary as in real
logs). It is a ratio measured side by side in one run, rounds interleaved and the best of each kept, in CPU time (a
busy machine stretches wall time, not CPU time) and in wall time. Raw Drain3 is `TemplateMiner.add_log_message`
with its default configuration on each raw line. Peak memory is measured in a fresh process per size and measure
(ru_maxrss; tracemalloc while parsing): flat means 1M lines cost what 100k lines cost.

    PYTHONPATH=. .venv/bin/python benchmarks/logs.py [--accuracy-only | --throughput-only | --unseen DIR] [--rounds N]

`--throughput-only` measures only the 200k-line throughput (a short run, with its figure); `--rounds N` sets its
rounds (default 5). `--unseen DIR` scores the shipped configuration (and raw Drain3) on the Loghub-2k sets under DIR
that ../shared does not hold — e.g. a checkout of github.com/logpai/loghub, kept outside the project: the
estimate of accuracy on formats no choice was made on (docs/components.md).
"""

from __future__ import annotations

import csv
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
from collections.abc import Sequence
from itertools import product
from pathlib import Path

from goals import figure

ROOT = Path(__file__).resolve().parents[1]
LOGHUB = ROOT.parent / "shared" / "datasets" / "loghub"
DATASETS = ("HDFS", "Apache", "OpenSSH", "Zookeeper", "Hadoop", "Spark")
_DIGITS = re.compile(r"\d")
ROUNDS = 5
FEEDS = ("content", "raw")
METRICS = ("grouping_accuracy", "parsing_accuracy", "f1_grouping", "f1_templates")

# Drain's grouping accuracy on Loghub-2k as published with the benchmark (Zhu et al., "Tools and Benchmarks for
# Automated Log Parsing", ICSE-SEIP 2019, table of accuracy), tuned per dataset. Every shared set must stay at or
# above its figure.
DRAIN_PUBLISHED_GA = {
    "HDFS": 0.998,
    "Apache": 1.0,
    "OpenSSH": 0.788,
    "Zookeeper": 0.967,
    "Hadoop": 0.948,
    "Spark": 0.920,
}

# The configurations leave-one-dataset-out chooses among: every generic knob of MinerSettings on a small grid.
# Ties go to the first listed; merging is listed first because the six sets hold few word-valued variables and so
# cannot tell merging apart from not merging, while logs in general hold users, hosts and states as words.
CANDIDATES: dict[str, dict] = {
    f"similarity={sim},depth={depth},merge_min_values={merge}": {
        "similarity": sim,
        "depth": depth,
        "merge_min_values": merge,
    }
    for merge, sim, depth in product((6, 8, 12, None), (0.5, 0.6, 0.7, 0.8, 0.9, 1.0), (4, 5, 6))
}


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


def _structured(name: str, root: Path = LOGHUB) -> list[dict[str, str]]:
    with (root / name / f"{name}_2k.log_structured.csv").open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _inputs(name: str, work: Path, root: Path = LOGHUB) -> tuple[list[str], dict[str, Path]]:
    """The true templates of a dataset and its two feeds: the Content column alone, and the raw log file."""
    rows = _structured(name, root)
    content = work / f"{name}.content.log"
    content.write_text("".join(row["Content"] + "\n" for row in rows), encoding="utf-8")
    return [row["EventTemplate"] for row in rows], {"content": content, "raw": root / name / f"{name}_2k.log"}


def parse_templates(path: Path, out: Path, settings: dict | None = None) -> list[str]:
    """Each line's template as `vcpilot logs parse` writes it (its CSV's EventTemplate column)."""
    from components.logs.parse import parse_files
    from components.logs.templates import MinerSettings

    parse_files([path], out, settings=MinerSettings(**settings) if settings else None)
    with out.open(newline="", encoding="utf-8") as handle:
        return [row["EventTemplate"] for row in csv.DictReader(handle)]


def drain3_templates(path: Path) -> list[str]:
    """Each line's final template under raw Drain3: default configuration, no masking, the whole line."""
    from drain3 import TemplateMiner
    from drain3.template_miner_config import TemplateMinerConfig

    miner = TemplateMiner(config=TemplateMinerConfig())
    with path.open(encoding="utf-8") as handle:
        clusters = [miner.add_log_message(line.rstrip("\n"))["cluster_id"] for line in handle]
    templates = {cluster.cluster_id: cluster.get_template() for cluster in miner.drain.clusters}
    return [templates[cluster] for cluster in clusters]


def _scores(truth: Sequence[str], predicted: Sequence[str]) -> dict[str, float]:
    from components.logs.scoring import score_parsing

    scores = score_parsing(truth, predicted)
    return {metric: round(getattr(scores, metric), 4) for metric in METRICS}


def _mean(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    return {metric: round(sum(row[metric] for row in rows) / len(rows), 4) for metric in METRICS}


def leave_one_out(table: dict[str, dict[str, dict[str, dict[str, float]]]]) -> dict:
    """Choose a candidate on five datasets (mean GA over both feeds), score it on the sixth; rotate, average.

    `table[candidate][dataset][feed]` holds the metrics. Returns the held-out scores per dataset (with the
    candidate chosen for it) and their averages per feed.
    """

    def fit(candidate: str, names: Sequence[str]) -> float:
        return sum(table[candidate][n][feed]["grouping_accuracy"] for n in names for feed in FEEDS)

    held_out = {}
    for name in DATASETS:
        others = [n for n in DATASETS if n != name]
        chosen = max(table, key=lambda candidate: fit(candidate, others))  # ties: the first listed
        held_out[name] = {"chosen": chosen} | {feed: table[chosen][name][feed] for feed in FEEDS}
    average = {feed: _mean([held_out[n][feed] for n in DATASETS]) for feed in FEEDS}
    return {"per_dataset": held_out, "average": average}


def accuracy(work: Path, candidates: dict[str, dict] = CANDIDATES) -> dict:
    """The four metrics per dataset and feed: the shipped configuration, raw Drain3, and the LODO estimate."""
    shipped: dict[str, dict] = {}
    drain3: dict[str, dict] = {}
    table: dict[str, dict[str, dict[str, dict[str, float]]]] = {c: {} for c in candidates}
    for name in DATASETS:
        truth, feeds = _inputs(name, work)
        out = work / f"{name}.csv"
        shipped[name] = {feed: _scores(truth, parse_templates(path, out)) for feed, path in feeds.items()}
        shipped[name]["drain_published_ga"] = DRAIN_PUBLISHED_GA[name]
        drain3[name] = {feed: _scores(truth, drain3_templates(path)) for feed, path in feeds.items()}
        for candidate, settings in candidates.items():
            table[candidate][name] = {f: _scores(truth, parse_templates(p, out, settings)) for f, p in feeds.items()}
    return {
        "logs_parse": shipped,
        "logs_parse_average": {feed: _mean([shipped[n][feed] for n in DATASETS]) for feed in FEEDS},
        "at_or_above_drain_published": all(
            shipped[n][feed]["grouping_accuracy"] >= DRAIN_PUBLISHED_GA[n] for n in DATASETS for feed in FEEDS
        ),
        "raw_drain3": drain3,
        "raw_drain3_average": {feed: _mean([drain3[n][feed] for n in DATASETS]) for feed in FEEDS},
        "leave_one_dataset_out": leave_one_out(table),
        "candidates": len(candidates),
    }


def unseen(root: Path, work: Path) -> dict:
    """Grouping accuracy of the shipped configuration and raw Drain3 on Loghub-2k sets under `root` that are not in
    ../shared (every `NAME/NAME_2k.log` with its `_structured.csv`): sets nothing here was chosen on."""
    names = sorted(
        path.parent.name
        for path in root.glob("*/*_2k.log_structured.csv")
        if path.parent.name not in DATASETS and path.name == f"{path.parent.name}_2k.log_structured.csv"
    )
    if not names:
        sys.exit(f"error: {root} holds no Loghub-2k set (NAME/NAME_2k.log and NAME/NAME_2k.log_structured.csv)")
    sets = {}
    for name in names:
        truth, feeds = _inputs(name, work, root)
        out = work / f"{name}.csv"
        sets[name] = {
            feed: _scores(truth, parse_templates(path, out))["grouping_accuracy"] for feed, path in feeds.items()
        } | {
            "raw_drain3": {
                feed: _scores(truth, drain3_templates(path))["grouping_accuracy"] for feed, path in feeds.items()
            }
        }
    average = {feed: round(sum(sets[n][feed] for n in names) / len(names), 4) for feed in FEEDS}
    return {"sets": sets, "average": average}


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
    # benchmarks/ on the path too: this module imports `goals` as its neighbour, as when run as a script.
    code = "import sys; sys.path.insert(0, 'benchmarks'); from logs import _memory_child; _memory_child(*sys.argv[1:])"
    result: dict = {}
    for mode in ("rss", "tracemalloc"):
        command = [sys.executable, "-c", code, str(path), str(out), mode]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
        result |= json.loads(done.stdout.strip().splitlines()[-1])
    return result


def throughput(work: Path, rounds: int = ROUNDS) -> dict:
    """Lines per second of `logs parse` and of raw Drain3 on the same 200k lines, and their ratio."""
    lines_200k = write_lines(work / "200k.log", 200_000)
    measure = {"raw": lambda: time_raw_drain3(lines_200k), "ours": lambda: time_parse(lines_200k, work / "200k.csv")}
    runs: dict[str, list[tuple[float, float]]] = {"raw": [], "ours": []}
    # Interleaved, best of each: a busy neighbour slows both, not one. Who goes first alternates, so neither always
    # runs right after the other (its garbage, the CPU's caches). Each `logs parse` starts with a cold shape cache.
    for round_ in range(rounds):
        for name in ("raw", "ours") if round_ % 2 == 0 else ("ours", "raw"):
            runs[name].append(measure[name]())
    raw_cpu, raw_wall = (min(run[i] for run in runs["raw"]) for i in (0, 1))
    our_cpu, our_wall = (min(run[i] for run in runs["ours"]) for i in (0, 1))
    return {
        "lines": 200_000,
        "rounds": rounds,
        "raw_drain3_lines_per_cpu_s": round(200_000 / raw_cpu),
        "logs_parse_lines_per_cpu_s": round(200_000 / our_cpu),
        "ratio_cpu": round(raw_cpu / our_cpu, 3),
        "ratio_cpu_per_round": [
            round(raw[0] / ours[0], 3) for raw, ours in zip(runs["raw"], runs["ours"], strict=True)
        ],
        "raw_drain3_lines_per_wall_s": round(200_000 / raw_wall),
        "logs_parse_lines_per_wall_s": round(200_000 / our_wall),
        "ratio_wall": round(raw_wall / our_wall, 3),
        "goal_ratio": 0.7,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def goal_figures(scores: dict | None, throughput: dict | None = None, memory: dict | None = None) -> list[dict]:
    """The goals of issues 4 and 15: leave-one-out grouping accuracy >= 0.90 per feed, each shared set at or above
    Drain's published figure, >= 0.7x raw Drain3, memory flat."""
    out = []
    if scores:
        held_out = scores["leave_one_dataset_out"]["average"]
        out += [
            figure(f"logs: leave-one-out grouping accuracy ({feed})", held_out[feed]["grouping_accuracy"], ">=", 0.9)
            for feed in FEEDS
        ]
        # Issue 15: every shared set at or above Drain's published figure, with the weaker of its two feeds.
        shipped = scores["logs_parse"]
        out += [
            figure(
                f"logs: {name} grouping accuracy, weaker feed",
                min(shipped[name][feed]["grouping_accuracy"] for feed in FEEDS),
                ">=",
                DRAIN_PUBLISHED_GA[name],
                baseline="Drain as published",
            )
            for name in DATASETS
        ]
    if throughput:
        out.append(
            figure("logs: lines per CPU second", throughput["ratio_cpu"], ">=", 0.7, unit="x", baseline="raw Drain3")
        )
    if memory:
        out.append(
            figure(
                "logs: peak RSS, 1M vs 100k lines",
                memory["ratio_1M_to_100k_peak_rss"],
                "<=",
                1.2,
                unit="x",
                baseline="100k lines",
            )
        )
    return out


def main() -> None:
    if not LOGHUB.is_dir():
        sys.exit(f"error: {LOGHUB} is missing: the benchmark needs the Loghub datasets in ../shared")
    args = sys.argv[1:]
    rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else ROUNDS
    with tempfile.TemporaryDirectory(prefix="vcpilot-bench-logs-") as tmp:
        work = Path(tmp)
        if "--unseen" in args:
            print(json.dumps({"unseen": unseen(Path(args[args.index("--unseen") + 1]), work)}, indent=2))
            return
        if "--throughput-only" in args:
            speed = throughput(work, rounds)
            print(json.dumps({"throughput": speed, "figures": goal_figures(None, speed)}, indent=2))
            return
        scores = accuracy(work)
        if "--accuracy-only" in args:
            print(json.dumps({"accuracy": scores, "figures": goal_figures(scores)}, indent=2))
            return
        speed = throughput(work, rounds)
        memory = {}
        for label, count in (("100k", 100_000), ("1M", 1_000_000)):
            path = write_lines(work / f"{label}.log", count)
            memory[label] = peak_memory(path, work / f"{label}.csv")
            path.unlink()
        memory["ratio_1M_to_100k_peak_rss"] = round(memory["1M"]["peak_rss_mib"] / memory["100k"]["peak_rss_mib"], 3)
        memory["ratio_1M_to_100k_tracemalloc"] = round(
            memory["1M"]["tracemalloc_peak_mib"] / memory["100k"]["tracemalloc_peak_mib"], 3
        )
    figures = goal_figures(scores, speed, memory)
    print(json.dumps({"accuracy": scores, "throughput": speed, "memory": memory, "figures": figures}, indent=2))


if __name__ == "__main__":
    main()
