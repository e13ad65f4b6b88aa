"""detect-logs, the load-test client and evaluate each log a child run under their workflow's MLflow parent run."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from components.evaluate.__main__ import main as evaluate_main
from components.lm.tiny import create_tiny_model
from components.loadtest.cli import step_command
from components.logs.__main__ import main as detect_main
from components.release.register import Lineage, register
from components.release.registry import connect
from components.tracking.runs import WORKFLOW_TAG, workflow_run
from components.tracking.steps import PARENT_TAG, STEP_TAG

pytestmark = pytest.mark.integration

EXPERIMENT = "steps-tracking"


@pytest.fixture(scope="module")
def tracking_uri(tmp_path_factory) -> str:
    """One sqlite store for the module: creating its tables takes seconds."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


@pytest.fixture
def in_workflow(tracking_uri, monkeypatch, request, tmp_path):
    """The environment a step pod gets (JobContext.env), with a workflow of the test's own."""
    workflow = f"wf-{request.node.name.replace('_', '-')[:40]}"
    monkeypatch.setenv("VCPILOT_TRACKING_SPOOL", str(tmp_path / "spool"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_uri)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", EXPERIMENT)
    monkeypatch.setenv("VCPILOT_WORKFLOW", workflow)
    return workflow


def child_run(tracking_uri: str, workflow: str, step: str):
    """The one run of `step` under the workflow's parent, checking that the parent is still the only parent."""
    client = connect(tracking_uri)
    parent = workflow_run(tracking_uri, EXPERIMENT, workflow)
    experiment = client.get_experiment_by_name(EXPERIMENT).experiment_id
    parents = client.search_runs([experiment], filter_string=f"tags.`{WORKFLOW_TAG}` = '{workflow}'")
    assert [run.info.run_id for run in parents] == [parent], "children must not look like the parent"
    children = client.search_runs([experiment], filter_string=f"tags.`{PARENT_TAG}` = '{parent}'")
    assert [run.data.tags[STEP_TAG] for run in children] == [step]
    run = children[0]
    assert run.info.status == "FINISHED" and run.info.run_name == step
    assert WORKFLOW_TAG not in run.data.tags
    return run, sorted(artifact.path for artifact in client.list_artifacts(run.info.run_id))


def write_logs(directory: Path, *, drift: bool) -> None:
    directory.mkdir(parents=True)
    lines = [
        f"2026-11-29 02:00:{i % 60:02d},000 ERROR engine: CUDA out of memory on device {i % 8}"
        if drift and i % 3 == 0
        else f"2026-11-29 02:00:{i % 60:02d},000 INFO http: served request {i} in {20 + i % 9} ms"
        for i in range(200)
    ]
    (directory / "service.log").write_text("\n".join(lines) + "\n")
    requests = []
    for i in range(80):
        wrong = drift and i % 2 == 0
        record = {
            "request_id": f"r{i}",
            "prompt": f"Add {i} and {i + 1}",
            "completion": "0" if wrong else str(2 * i + 1),
        }
        record.update({"latency_ms": 50 + i % 10, "status": 200, "feedback": "negative" if wrong else "positive"})
        if wrong:
            record["correction"] = str(2 * i + 1)
        requests.append(json.dumps(record))
    (directory / "requests.jsonl").write_text("\n".join(requests) + "\n")


def test_detect_logs_logs_its_findings_trigger_and_report(tracking_uri, in_workflow, tmp_path, capsys):
    write_logs(tmp_path / "logs" / "baseline", drift=False)
    write_logs(tmp_path / "logs" / "current", drift=True)
    report = tmp_path / "detect" / "report.json"
    args = ["--source", str(tmp_path / "logs"), "--report", str(report), "--state", str(tmp_path / "state")]
    assert detect_main(args) == 0, capsys.readouterr().err
    written = json.loads(report.read_text())

    run, artifacts = child_run(tracking_uri, in_workflow, "detect-logs")
    metrics, tags = run.data.metrics, run.data.tags
    assert written["trigger"] is True and metrics["trigger"] == 1.0 and tags["trigger"] == "true"
    assert tags["reason"] == written["reason"] and tags["compared_with"] == "baseline"
    assert metrics["findings_count"] == written["findings_count"] > 0
    kinds = {finding["kind"] for finding in written["findings"]}
    assert {f"findings.{kind}" for kind in kinds} <= metrics.keys()
    assert metrics["findings.trigger"] >= 1
    assert metrics["lines"] == written["lines"] and metrics["train_examples"] == written["train_examples"]
    assert run.data.params["alpha"] == "0.01"
    assert artifacts == ["report.json", "report.md"]
    assert "warning" not in capsys.readouterr().err


class FixedServer(BaseHTTPRequestHandler):
    """An OpenAI-compatible stand-in: every completion streams "o", "k" and its usage."""

    protocol_version = "HTTP/1.1"
    STREAM = (
        b"".join(
            f"data: {json.dumps(chunk)}\n\n".encode()
            for chunk in (
                {"choices": [{"index": 0, "text": "o"}]},
                {"choices": [{"index": 0, "text": "k"}]},
                {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}},
            )
        )
        + b"data: [DONE]\n\n"
    )

    def _send(self, body: bytes, kind: str) -> None:
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(b'{"data": [{"id": "fixed"}]}' if self.path == "/v1/models" else b"{}", "application/json")

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self._send(self.STREAM, "text/event-stream")

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server_port():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FixedServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_the_load_test_client_logs_percentiles_goodput_verdict_and_records(
    tracking_uri, in_workflow, server_port, tmp_path, monkeypatch, capsys
):
    monkeypatch.delenv("VC_SERVER_HOSTS", raising=False)
    report = tmp_path / "loadtest" / "report.json"
    step_command(
        report=report, port=server_port, requests=8, concurrency=2, slo_ttft_ms=5000.0, slo_tpot_ms=5000.0, wait_s=10
    )
    written = json.loads(report.read_text())

    run, artifacts = child_run(tracking_uri, in_workflow, "loadtest")
    metrics, tags = run.data.metrics, run.data.tags
    for name in ("ttft", "tpot", "itl", "e2el"):
        for stat in ("mean", "p50", "p90", "p95", "p99"):
            assert metrics[f"{name}_{stat}_ms"] == pytest.approx(written[f"{name}_{stat}_ms"])
    assert metrics["request_throughput_rps"] == pytest.approx(written["request_throughput_rps"])
    assert metrics["goodput_rps"] == pytest.approx(written["goodput_rps"]) and metrics["goodput_rps"] > 0
    assert (metrics["requests"], metrics["completed"], metrics["errors"], metrics["slo_passed"]) == (8, 8, 0, 1)
    assert tags["slo_passed"] == "true" and tags["slo_reason"] == written["slo_reason"]
    assert run.data.params["concurrency"] == "2" and run.data.params["slo_ttft_ms"] == "5000.0"
    assert artifacts == ["records.jsonl", "report.json"]
    assert "warning" not in capsys.readouterr().err


def test_evaluate_logs_both_scores_perplexities_and_the_decision(tracking_uri, in_workflow, tmp_path, capsys):
    register(connect(tracking_uri), "steps-shop", create_tiny_model(tmp_path / "champion", hidden=32), Lineage())
    candidate = create_tiny_model(tmp_path / "candidate", hidden=32, seed=1)
    eval_set = tmp_path / "eval.jsonl"
    eval_set.write_text('{"prompt": "Q: price of red mug?\\nA:", "completion": " $12"}\n')
    loadtest = tmp_path / "loadtest.json"
    loadtest.write_text(json.dumps({"ttft_p95_ms": 50.0, "tpot_p95_ms": 5.0, "errors": 0}))
    report = tmp_path / "evaluate" / "report.json"
    args = ["--candidate", str(candidate), "--registered-model", "steps-shop", "--eval-set", str(eval_set)]
    args += ["--report", str(report), "--loadtest-report", str(loadtest), "--slo-ttft-ms", "100", "--slo-tpot-ms", "10"]
    assert evaluate_main(args) == 0, capsys.readouterr().err
    written = json.loads(report.read_text())

    run, artifacts = child_run(tracking_uri, in_workflow, "evaluate")
    metrics, tags = run.data.metrics, run.data.tags
    assert metrics["candidate_score"] == written["candidate_score"]
    assert metrics["champion_score"] == written["champion_score"]
    assert metrics["candidate_perplexity"] == pytest.approx(written["candidate_perplexity"])
    assert metrics["champion_perplexity"] == pytest.approx(written["champion_perplexity"])
    assert metrics["promote"] == float(written["promote"]) and tags["promote"] == str(written["promote"]).lower()
    assert tags["reason"] == written["reason"] and tags["champion_version"] == "1"
    assert run.data.params["registered_model"] == "steps-shop"
    assert artifacts == ["report.json"]


def test_mlflow_down_costs_one_warning_line_not_the_step(monkeypatch, tmp_path, capsys):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{sock.getsockname()[1]}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", down)
    monkeypatch.setenv("VCPILOT_WORKFLOW", "wf-down")
    monkeypatch.setenv("VCPILOT_TRACKING_SPOOL", str(tmp_path / "spool"))
    write_logs(tmp_path / "logs" / "baseline", drift=False)
    write_logs(tmp_path / "logs" / "current", drift=True)
    report = tmp_path / "detect" / "report.json"
    args = ["--source", str(tmp_path / "logs"), "--report", str(report), "--state", str(tmp_path / "state")]
    assert detect_main(args) == 0
    assert json.loads(report.read_text())["trigger"] is True
    err = capsys.readouterr().err
    assert err.startswith(f"warning: MLflow at {down} is unreachable") and err.count("\n") == 1, err
    assert f"wait in {tmp_path / 'spool' / 'detect-logs-1.jsonl'}" in err, "kept for the exit handler, not lost"
