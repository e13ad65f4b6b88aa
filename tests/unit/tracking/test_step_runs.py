"""Which steps log a child run, what becomes a metric, and MLflow down costing one warning line."""

from __future__ import annotations

import io
import math
import socket
import sys

from components.tracking.steps import StepLog, TrackingTarget, log_step_run, report_metrics, tracking_target

WORKFLOW_ENV = {"MLFLOW_TRACKING_URI": "sqlite:///x.db", "VCPILOT_WORKFLOW": "wf-1"}


def test_a_step_logs_only_inside_a_workflow_with_a_tracking_uri():
    assert tracking_target({}) is None
    assert tracking_target({"MLFLOW_TRACKING_URI": "sqlite:///x.db"}) is None, "a person's run: no parent to join"
    assert tracking_target({"VCPILOT_WORKFLOW": "wf-1"}) is None
    assert tracking_target(WORKFLOW_ENV) == TrackingTarget(
        tracking_uri="sqlite:///x.db", experiment="llm-autopilot", workflow="wf-1"
    )
    named = tracking_target({**WORKFLOW_ENV, "MLFLOW_EXPERIMENT_NAME": "nightly"})
    assert named is not None and named.experiment == "nightly"


def test_outside_a_workflow_nothing_is_logged_and_mlflow_is_not_even_imported(monkeypatch):
    monkeypatch.delitem(sys.modules, "mlflow", raising=False)
    warnings = io.StringIO()
    assert log_step_run(StepLog(step="detect-logs", metrics={"lines": 3.0}), env={}, warn=warnings) is None
    assert warnings.getvalue() == "" and "mlflow" not in sys.modules


def test_report_numbers_become_metrics_and_the_rest_is_left_out():
    report = {
        "errors": 2,
        "ttft_p95_ms": 12.5,
        "slo_passed": True,
        "promote": False,
        "champion_score": None,
        "reason": "text",
        "top_errors": {"HTTP 500": 2},
        "perplexity": math.inf,
    }
    assert report_metrics(report) == {"errors": 2.0, "ttft_p95_ms": 12.5, "slo_passed": 1.0, "promote": 0.0}
    assert report_metrics(report, keys=("errors", "missing", "reason")) == {"errors": 2.0}


def test_an_unreachable_tracking_server_costs_one_warning_line(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{sock.getsockname()[1]}"
    warnings = io.StringIO()
    env = {"MLFLOW_TRACKING_URI": down, "VCPILOT_WORKFLOW": "wf-1", "VCPILOT_TRACKING_SPOOL": str(tmp_path)}
    assert log_step_run(StepLog(step="loadtest"), env=env, warn=warnings, timeout_s=2) is None
    text = warnings.getvalue()
    assert text.startswith(f"warning: MLflow at {down} is unreachable or failing (") and text.count("\n") == 1
    assert f"the loadtest step's 5 tracking records wait in {tmp_path / 'loadtest-1.jsonl'}" in text
