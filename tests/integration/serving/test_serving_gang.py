"""The pipeline's load-test VCJob on LocalCluster: our server and the load client as one gang, on a tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from net_kit import free_port

from components.lm.tiny import create_tiny_model
from components.volcano.cluster_local import LocalCluster
from pipelines.rules import LoadtestReport
from pipelines.vcjobs import LOADTEST_PORT, JobContext, build_loadtest_job

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def test_the_loadtest_gang_serves_the_model_and_writes_the_report(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # pods run `python -m components…` from the submitter's directory
    model = create_tiny_model(tmp_path / "model")
    context = JobContext(workflow="gang", workspace=str(tmp_path / "ws"), image="local")
    job = build_loadtest_job(context, model_uri=str(model), slo_ttft_ms=60000, slo_tpot_ms=10000)
    manifest = json.loads(job.model_dump_json(by_alias=True, exclude_none=True))
    # Another test (the whole pipeline) may hold the fixed port: move both tasks to a free one.
    port = str(free_port())
    for task in manifest["spec"]["tasks"]:
        container = task["template"]["spec"]["containers"][0]
        container["args"] = [port if a == str(LOADTEST_PORT) else a for a in container["args"]]
    cluster = LocalCluster(tmp_path / "home")
    try:
        info = cluster.submit(manifest)
        done = cluster.wait(info.name, timeout=300)
        logs = {p.name: p.read_text()[-2000:] for p in (tmp_path / "home" / "logs").rglob("*.log")}
        assert done.phase == "Completed", logs
    finally:
        for j in cluster.list_jobs():
            cluster.delete(j.name, j.namespace, missing_ok=True)
        cluster.close()
    report_path = Path(context.paths.loadtest_report)
    report = LoadtestReport.model_validate_json(report_path.read_text())
    assert report.errors == 0 and report.ttft_p95_ms > 0 and report.tpot_p95_ms > 0
    data = json.loads(report_path.read_text())
    assert data["slo_passed"] is True and data["completed"] == data["requests"] == 20
    assert len((report_path.parent / "records.jsonl").read_text().splitlines()) == 20
