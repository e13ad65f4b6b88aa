"""The agent benchmark on a tiny trace: the same seed gives the same figures, and no request goes unaccounted."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]
TINY = 4  # requests: about two simulated hours of arrivals


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    # benchmarks/ is not an installed package; it is imported from the checkout as `make bench` runs it.
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module("benchmarks.agent")


@pytest.fixture(scope="module")
def report(bench: ModuleType) -> dict:
    return bench.run(seed=3, requests=TINY, seeds=1, node_mtbf_h=12.0)  # frequent failures: recovery is exercised


def test_same_seed_same_figures(bench: ModuleType, report: dict) -> None:
    again = bench.run(seed=3, requests=TINY, seeds=1, node_mtbf_h=12.0)
    assert json.dumps(again, sort_keys=True) == json.dumps(report, sort_keys=True)


def test_another_seed_is_another_trace(bench: ModuleType, report: dict) -> None:
    other = bench.run(seed=4, requests=TINY, seeds=1, node_mtbf_h=12.0)
    assert other["strategies"] != report["strategies"]


def test_every_strategy_finishes_or_reports_every_request(report: dict) -> None:
    assert set(report["strategies"]) == {"wait_full", "argo_retry", "rules"}
    for name, figures in report["strategies"].items():
        assert figures["requests"] == TINY, name
        assert figures["finished"] + figures["aborted"] + figures["unfinished"] == TINY, name
        if figures["aborted"]:
            assert sum(figures["abort_reasons"].values()) == figures["aborted"], name
        assert figures["gpu_h_used"] >= figures["gpu_h_lost"] >= 0, name


def test_failures_cost_the_rules_no_more_than_a_checkpoint_interval(report: dict) -> None:
    rules = report["strategies"]["rules"]
    assert rules["failures"] > 0, "the trace should exercise recovery"
    # At most 30 minutes since the last checkpoint, on at most the 8 GPUs asked for, per failure.
    assert rules["gpu_h_lost"] <= rules["failures"] * 8 * 0.5
    assert rules["decisions"]["retry"] + rules["decisions"].get("abort", 0) == rules["failures"]


def test_cli_prints_one_json_document(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    bench.main(["--quick", "--requests", str(TINY), "--seed", "1"])
    document = json.loads(capsys.readouterr().out)
    assert document["seeds"] == [1]
    assert set(document["goals"]) >= {"ttf_goal_met", "lost_goal_met"}
