"""Our server on a real (tiny) model, and the load generator against it and against a server that fails."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from net_kit import free_port
from typer.testing import CliRunner

from components.errors import EXIT_FAILED
from components.lm.tiny import create_tiny_model
from components.loadtest.cli import app
from pipelines.rules import LoadtestReport

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`python -m components.serving` on a freshly created tiny model, as the load-test VCJob runs it."""
    model = create_tiny_model(tmp_path_factory.mktemp("serving") / "tiny")
    port = free_port()
    log = tmp_path_factory.mktemp("log") / "server.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "components.serving", "--model", str(model), "--port", str(port),
             "--host", "127.0.0.1", "--served-model-name", "tiny"],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "the server did not start in 180 s"
        time.sleep(0.2)
    yield url, port
    process.terminate()
    process.wait(timeout=30)


def sse_events(response: httpx.Response) -> list[dict]:
    events = [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


@pytest.mark.parametrize(
    ("path", "request_body"),
    [
        ("/v1/completions", {"prompt": "The drift is", "max_tokens": 24, "temperature": 0}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 20}),
    ],
)
def test_streamed_chunks_concatenate_to_the_non_streamed_text(server, path, request_body):
    url, _ = server
    whole = httpx.post(url + path, json={**request_body, "temperature": 0}, timeout=60).json()
    with httpx.stream(
        "POST", url + path, json={**request_body, "temperature": 0, "stream": True,
                                   "stream_options": {"include_usage": True}}, timeout=60
    ) as response:  # fmt: skip
        chunks = sse_events(response)
    chat = "chat" in path
    choice = whole["choices"][0]
    text = choice["message"]["content"] if chat else choice["text"]
    pieces = [(c["choices"][0]["delta"].get("content", "") if chat else c["choices"][0]["text"]) for c in chunks[:-1]]
    assert "".join(pieces) == text and text
    assert chunks[-1]["usage"] == whole["usage"]
    assert whole["usage"]["completion_tokens"] == sum(1 for p in pieces if p), "a char model: one chunk per token"


def test_a_client_that_hangs_up_mid_stream_does_not_wedge_the_server(server):
    url, _ = server
    body = {"prompt": "x", "max_tokens": 100, "temperature": 0, "stream": True}
    with httpx.stream("POST", f"{url}/v1/completions", json=body) as response:
        lines = response.iter_lines()
        next(line for line in lines if '"text":"' in line and '"text":""' not in line)
    answer = httpx.post(f"{url}/v1/completions", json={"prompt": "y", "max_tokens": 4, "temperature": 0}, timeout=30)
    assert answer.status_code == 200 and answer.json()["usage"]["completion_tokens"] == 4


def test_the_pipeline_client_writes_the_report_the_release_step_reads(server, tmp_path):
    _, port = server
    report = tmp_path / "loadtest" / "report.json"
    dataset = tmp_path / "eval.jsonl"
    dataset.write_text("".join(json.dumps({"prompt": f"q{i}: ", "completion": str(i)}) + "\n" for i in range(3)))
    done = subprocess.run(
        [sys.executable, "-m", "components.loadtest", "--port", str(port), "--requests", "8",
         "--slo-ttft-ms", "60000", "--slo-tpot-ms", "10000", "--dataset", str(dataset), "--report", str(report)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "VC_SERVER_HOSTS": "127.0.0.1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads(report.read_text())
    parsed = LoadtestReport.model_validate(data)
    assert parsed.errors == 0 and parsed.ttft_p95_ms > 0 and parsed.tpot_p95_ms > 0
    assert data["slo_passed"] is True and data["completed"] == 8 and data["model"] == "tiny"
    records = [json.loads(line) for line in (report.parent / "records.jsonl").read_text().splitlines()]
    assert len(records) == 8 and all(r["error"] is None and 0 < r["output_tokens"] <= 16 for r in records)
    assert sum(r["output_tokens"] for r in records) == data["total_output_tokens"]


def test_vcpilot_loadtest_prints_a_json_summary_and_gates_on_the_slo(server, tmp_path):
    url, _ = server
    records = tmp_path / "records.jsonl"
    args = ["--url", url, "--rate", "50", "--burstiness", "0.5", "--requests", "6", "--max-tokens", "4", "--json"]
    result = CliRunner().invoke(app, [*args, "--records", str(records), "--slo-ttft-ms", "60000"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["completed"] == 6 and 6 <= summary["total_output_tokens"] <= 24 and summary["slo_passed"]
    assert summary["goodput_rps"] == pytest.approx(summary["request_throughput_rps"])
    assert len(records.read_text().splitlines()) == 6
    missed = CliRunner().invoke(app, [*args, "--slo-tpot-ms", "0.0001"])
    assert missed.exit_code == EXIT_FAILED
    assert json.loads(missed.stdout)["slo_reason"].startswith("p95 TPOT is ")


def flaky_app() -> FastAPI:
    """Every third request fails with a 500 and every fifth breaks off mid-stream; the rest stream 'ok'."""
    api = FastAPI()
    count = {"n": 0}

    @api.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [{"id": "flaky"}]}

    @api.post("/v1/completions", response_model=None)
    async def completions(request: Request) -> JSONResponse | StreamingResponse:
        await request.body()
        count["n"] += 1
        n = count["n"]
        if n % 3 == 0:
            return JSONResponse({"error": {"message": "overloaded", "type": "server_error"}}, status_code=500)

        async def stream():
            yield b'data: {"choices":[{"text":"o"}]}\n\n'
            await asyncio.sleep(0.001)
            if n % 5 == 0:
                yield b'data: {"error":{"message":"lost the GPU"}}\n\n'
                return
            yield b'data: {"choices":[{"text":"k"}]}\n\n'
            yield b"data: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    return api


@pytest.fixture
def flaky_server():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # so that asyncio sets TCP_NODELAY
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(flaky_app(), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


def test_a_server_that_fails_some_requests_gives_error_counts_not_a_crash(flaky_server):
    result = CliRunner().invoke(app, ["--url", flaky_server, "--concurrency", "3", "--requests", "30", "--json"])
    assert result.exit_code == EXIT_FAILED, result.output
    summary = json.loads(result.stdout)
    # requests 3, 6, … fail with 500 (10 of them); 5, 10, 20, 25 break off mid-stream (15 and 30 already failed)
    assert (summary["requests"], summary["errors"], summary["completed"]) == (30, 14, 16)
    assert summary["top_errors"] == {"HTTP 500: overloaded": 10, "error event: lost the GPU": 4}
    assert summary["total_output_tokens"] == 32 and summary["model"] == "flaky"
    assert "14 of 30 requests failed" in summary["slo_reason"] and not summary["slo_passed"]
