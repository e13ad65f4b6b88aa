"""The workflow's release step against a real MLflow server: every candidate registered, the winner promoted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.release.registry import connect, view
from pipelines import steps
from pipelines.workspace import RunPaths

pytestmark = pytest.mark.integration


def release_run(mlflow_server, workspace, workflow, model_dir, *, candidate, champion, ttft_ms):
    """Write the two reports a workflow's release step reads, and run the step as its pod would."""
    paths = RunPaths(workspace=str(workspace), workflow=workflow)
    for path, report in (
        (paths.evaluate_report, {"candidate_score": candidate, "champion_score": champion, "metric": "exact_match"}),
        (paths.loadtest_report, {"ttft_p95_ms": ttft_ms, "tpot_p95_ms": 10.0, "errors": 0, "requests": 20}),
    ):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(report))
    inputs = steps.ReleaseInput(
        workflow_name=workflow,
        workspace=str(workspace),
        model_uri=str(model_dir),
        loadtest_report=paths.loadtest_report,
        evaluate_report=paths.evaluate_report,
        slo_ttft_ms=500,
        slo_tpot_ms=50,
        eval_margin=0.0,
        registered_model="shop-step",
        base_model="tiny",
        mlflow_tracking_uri=mlflow_server,
        mlflow_experiment="release-step-tests",
    )
    return steps.release(inputs), json.loads(Path(paths.release_record).read_text())


def test_the_release_step_registers_every_candidate_and_promotes_only_the_winners(mlflow_server, model_dir, tmp_path):
    first, _ = release_run(mlflow_server, tmp_path, "wf-a", model_dir, candidate=0.6, champion=None, ttft_ms=100)
    assert first.released and "version 1 (champion)" in first.reason
    slow, record = release_run(mlflow_server, tmp_path, "wf-b", model_dir, candidate=0.9, champion=0.6, ttft_ms=800)
    assert not slow.released
    assert slow.reason == (
        "p95 TTFT 800 ms is over its SLO of 500 ms; registered as shop-step version 2, without an alias"
    )
    assert record["version"]["version"] == "2" and record["version"]["promoted"] is False
    better, _ = release_run(mlflow_server, tmp_path, "wf-c", model_dir, candidate=0.8, champion=0.6, ttft_ms=200)
    assert better.released

    shown = view(connect(mlflow_server), "shop-step")
    assert shown.aliases == {"champion": "3", "previous": "1"}
    assert shown.description.endswith("Version 3 is champion, made so by workflow wf-c.")
    v3, v2, v1 = shown.versions
    assert v3.description.startswith("Promoted: exact match 0.8 vs champion 0.6 (+0.20 ≥ margin 0.00); p95 TTFT 200")
    assert v2.aliases == [] and v2.tags["vcpilot.reason"] == "p95 TTFT 800 ms is over its SLO of 500 ms"
    assert v2.description.startswith("Not promoted: p95 TTFT 800 ms > SLO 500 ms; exact match 0.9 vs champion 0.6")
    assert (v2.tags["vcpilot.workflow"], v3.tags["vcpilot.workflow"]) == ("wf-b", "wf-c")
    assert v3.tags["vcpilot.replaced"] == "1" and v3.tags["vcpilot.metric.ttft_p95_ms"] == "200"


def test_a_losing_candidate_does_not_fail_the_step_when_the_registry_is_down(model_dir, tmp_path, closed_url):
    lost, record = release_run(closed_url, tmp_path, "wf-down", model_dir, candidate=0.1, champion=0.6, ttft_ms=100)
    assert not lost.released and "does not beat 0.6" in lost.reason
    assert record["version"]["registered"] is False and "unreachable" in record["version"]["error"]
