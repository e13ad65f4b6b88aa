"""The fault matrix of issue 16: every fault the pipeline must survive, the test that drives it, and the table.

Each fault names the test that injects it: a whole `vcpilot run` (test_fault_matrix_pipeline.py,
test_fault_matrix_chaos.py, test_fault_matrix_chaos2.py, test_fault_matrix_disk.py, and an older test that already
does exactly that, so that `make test` does not run it twice). A driving test records
what it measured with `record_fault(record_property, key, ...)`; the record travels on the test's report, so the
table comes out whole under xdist too. At the end of a session that ran any of them, the table is printed: fault,
outcome, steps lost, data lost. A row whose test did not run in this session says so.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import pytest

__all__ = ["FAULTS", "Fault", "pytest_runtest_logreport", "pytest_terminal_summary", "record_fault"]

_MATRIX = "tests/integration/test_fault_matrix.py::"
_PROPERTY = "vcpilot-fault"
# One `vcpilot run` for three rows: 7 of 8 GPUs taken at plan time, MLflow paused for a minute while training, the
# runner killed in that minute.
_CHAOS = (
    "tests/integration/test_fault_matrix_chaos.py::"
    "test_a_runner_killed_while_mlflow_is_down_resumes_with_no_step_rerun_no_job_doubled_and_every_metric_once"
)
# One run for three: a node dies while training, then a node of the retry (the first back Ready, still avoided), and
# the LLM endpoint is late, then not JSON, then hostile.
_NODE_DIES = (
    "tests/integration/test_fault_matrix_pipeline.py::"
    "test_a_node_dying_then_a_node_of_the_retry_is_retried_off_both_on_the_gpu_left_and_the_model_is_released"
)
# One more for five: a rank hangs, the latest checkpoint is truncated, the retry is preempted, the load-test server
# dies, and LocalCluster's controller is SIGKILLed again and again all along.
_CHAOS2 = (
    "tests/integration/test_fault_matrix_chaos2.py::"
    "test_a_hang_a_truncated_checkpoint_a_preemption_and_a_dead_load_test_server_under_a_dying_controller"
)


@dataclass(frozen=True)
class Fault:
    """One row: the fault, what must happen, the test that injects it, and where the real-pods e2e covers it."""

    key: str
    fault: str
    expected: str
    test: str  # the pytest node id of the test that drives it
    level: str  # "pipeline": a whole `vcpilot run`; otherwise why a whole run cannot inject it
    e2e: str = ""  # † rows: the real-pods test that covers it in `make e2e`
    # An older test records no row: what its passing asserts about the steps and the data lost.
    proves: tuple[str, str] = ("", "")


FAULTS: tuple[Fault, ...] = (
    Fault(
        "node-dies",
        "† a GPU node dies during training",
        "retry from the latest complete checkpoint on other nodes; <= one interval lost; released",
        _NODE_DIES,
        "pipeline",
        e2e="tests/e2e/test_real_pods.py::test_a_real_node_dies_mid_training_and_the_retry_resumes_off_it_from_the_latest_checkpoint",
    ),
    Fault(
        "node-dies-again",
        "the same node dies again on the retry",
        "downscale onto healthy GPUs (global batch kept) or stop; never a third blind retry",
        _NODE_DIES,
        "pipeline",
    ),
    Fault(
        "preemption",
        "† preemption of low-priority training",
        "checkpoint on SIGTERM, resume from it, not counted as a code failure",
        _CHAOS2,
        "pipeline",
        e2e="tests/e2e/test_real_pods.py::test_a_preempted_training_checkpoints_on_sigterm_and_resumes_from_that_checkpoint",
    ),
    Fault(
        "code-bug",
        "every rank crashes with the same code error",
        "abort after one confirming attempt; workflow Failed with the reason",
        "tests/integration/pipeline/test_autopilot_local.py::"
        "test_a_deterministic_crash_is_retried_once_then_aborted_and_fails_the_workflow",
        "pipeline",
        proves=("all: nothing to keep", "none: Failed, the reason in the summary"),
    ),
    Fault(
        "rank-hang",
        "a rank hangs (no progress, no exit)",
        "detected within a bounded time, treated as an infrastructure fault",
        _CHAOS2,
        "pipeline",
    ),
    Fault(
        "mlflow-down",
        "MLflow unreachable for a minute mid-run",
        "run completes; every metric present exactly once after replay",
        _CHAOS,
        "pipeline",
    ),
    Fault(
        "runner-killed",
        "the runner is SIGKILLed mid-workflow",
        "`vcpilot resume` finishes; no finished step reruns; no VCJob duplicated",
        _CHAOS,
        "pipeline",
    ),
    Fault(
        "controller-killed",
        "the LocalCluster controller is SIGKILLed mid-transaction, repeatedly",
        "state consistent; no pod lost or doubled",
        _CHAOS2,
        "pipeline",
    ),
    Fault(
        "queue-full",
        "the queue is full at plan time",
        "downscale or wait by the policy; never a partial gang",
        _CHAOS,
        "pipeline",
    ),
    Fault(
        "disk-full",
        "disk full while checkpointing (a small tmpfs)",
        "the partial checkpoint is ignored; resume uses the previous one",
        "tests/integration/test_fault_matrix_disk.py::"
        "test_a_full_checkpoint_volume_stops_the_run_at_once_and_the_named_resume_releases_the_model",
        "pipeline",
    ),
    Fault(
        "corrupt-checkpoint",
        "a corrupted latest checkpoint (truncated file)",
        "detected by its checksum; the previous one is used",
        _CHAOS2,
        "pipeline",
    ),
    Fault(
        "loadtest-server-dies",
        "† the load-test server dies mid-test",
        "errors counted; SLO gate fails; nothing released",
        _CHAOS2,
        "pipeline",
        e2e="tests/e2e/test_real_pods.py::test_the_load_test_server_dying_mid_test_counts_errors_fails_the_gate_and_releases_nothing",
    ),
    Fault(
        "llm-bad",
        "the LLM endpoint is slow, wrong or hostile",
        "bounded total decision time; rules decide; the record says why",
        _NODE_DIES,
        "pipeline",
    ),
)


def record_fault(
    record_property: Callable[[str, object], None], key: str, outcome: str, steps_lost: str, data_lost: str
) -> None:
    """Record what a driving test measured for fault `key` (record_property is pytest's fixture)."""
    if key not in {f.key for f in FAULTS}:
        raise ValueError(f"unknown fault {key!r}; add it to FAULTS in tests/fault_table.py first.")
    record_property(_PROPERTY, json.dumps({"key": key, "outcome": outcome, "steps": steps_lost, "data": data_lost}))


_recorded: dict[tuple[str, str], dict[str, str]] = {}  # (fault key, driving test) -> what it measured
_outcomes: dict[str, str] = {}
_DRIVERS = {f.test for f in FAULTS} | {f.e2e for f in FAULTS if f.e2e}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Keep the rows recorded by driving tests, and each driving test's outcome (a failure in any phase wins)."""
    test = report.nodeid.split("[")[0]  # every parameter of a parametrized driver counts for its row
    if test not in _DRIVERS:
        return
    if report.when == "call" or report.outcome != "passed":
        if _outcomes.get(test) != "failed":
            _outcomes[test] = report.outcome
    for name, value in report.user_properties:
        if name == _PROPERTY:
            row = json.loads(str(value))
            _recorded[(row["key"], test)] = row


def _row(fault: Fault, test: str) -> tuple[str, str, str, str, str]:
    outcome, row = _outcomes.get(test), _recorded.get((fault.key, test))
    level = fault.level if test == fault.test else "real pods"
    if outcome is None:
        return (fault.fault, "not run in this session", "-", "-", level)
    if outcome != "passed":
        return (fault.fault, outcome.upper(), "?", "?", level)
    if row is None:
        return (fault.fault, "passed: " + fault.expected, *fault.proves, level)
    return (fault.fault, row["outcome"], row["steps"], row["data"], level)


def _write(terminalreporter: pytest.TerminalReporter, title: str, rows: list[tuple[str, ...]]) -> None:
    rows = [("fault", "outcome", "steps lost", "data lost", "level"), *rows]
    widths = [min(60, max(len(r[i]) for r in rows)) for i in range(4)]
    terminalreporter.write_sep("=", title)
    for row in rows:
        cells = [cell[:60].ljust(width) for cell, width in zip(row[:4], widths, strict=True)]
        level = "pipeline" if row[4] == "pipeline" else row[4].split(":")[0].split(" (")[0]
        terminalreporter.write_line(" | ".join([*cells, level]))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the fault table when any of its tests ran, and the † rows' table when any real-pods driver ran."""
    marked = [f for f in FAULTS if f.e2e]
    if any(f.test in _outcomes for f in FAULTS):
        _write(terminalreporter, "fault matrix (issue 16, tests/fault_table.py)", [_row(f, f.test) for f in FAULTS])
        terminalreporter.write_line("† also in make e2e: " + "; ".join(f.e2e.split("::")[-1] for f in marked))
    if any(f.e2e in _outcomes for f in marked):
        _write(terminalreporter, "fault matrix, † rows on real pods (make e2e)", [_row(f, f.e2e) for f in marked])
