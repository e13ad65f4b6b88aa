"""The MCP server over HTTP on a loopback port: the SDK's client with and without the token, size and rate limits."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
import typer
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult
from net_kit import free_port
from typer.testing import CliRunner

from agent.cli_mcp import mcp_command
from agent.guardrails import DEFAULT_IMAGE, Guardrails
from agent.mcp_http import TOKEN_ENV, Gate, RateLimit, token_identity
from agent.mcp_server import MAX_BODY_BYTES, build_server
from agent.tools import TOOLS, ToolContext
from components.entry import new_app
from components.volcano.cluster_local import LocalCluster

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "t0ken-for-tests-0123456789abcdef"
TRAINING: dict[str, Any] = {
    "name": "ft",
    "image": f"{DEFAULT_IMAGE}:0.1.0",
    "command": ["python", "-m", "components.finetune.train"],
    "total_gpus": 8,
    "gpus_per_pod": 4,
    "micro_batch": 2,
    "grad_accum": 2,
    "global_batch": 32,
    "env": {"HF_TOKEN": "hf_secret_value_that_must_not_be_logged"},
}


def text(result: CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Served:
    url: str
    home: Path
    clock: FakeClock
    refusals: list[str]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """`serve_http`'s app on a loopback port, in a thread that owns its LocalCluster (SQLite stays in one thread)."""
    port, clock, refusals = free_port(), FakeClock(), []
    ready, stop = threading.Event(), threading.Event()
    box: dict[str, uvicorn.Server] = {}

    def serve() -> None:
        cluster = LocalCluster(tmp_path / "home")
        server = build_server(ToolContext(cluster, Guardrails()))
        app = server.streamable_http_app(max_request_body_size=MAX_BODY_BYTES, host="127.0.0.1")
        gate = Gate(app, TOKEN, MAX_BODY_BYTES, RateLimit(per_second=1, burst=30, clock=clock), refusals.append)
        box["server"] = uvicorn.Server(uvicorn.Config(gate, host="127.0.0.1", port=port, log_level="warning"))
        try:
            anyio.run(box["server"].serve)
        finally:
            cluster.close()
            stop.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not ready.is_set() and time.monotonic() < deadline:
        ready.wait(0.05)
        if "server" in box and box["server"].started:
            ready.set()
    assert ready.is_set(), "the server did not start within 10 s"
    yield Served(f"http://127.0.0.1:{port}/mcp", tmp_path / "home", clock, refusals)
    box["server"].should_exit = True
    thread.join(10)


def client(url: str, token: str = "", authorization: str | None = None) -> Client:
    authorization = f"Bearer {token}" if token else authorization
    headers = {"Authorization": authorization} if authorization is not None else {}
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=30)))


def jobs(home: Path) -> list[str]:
    cluster = LocalCluster(home)
    try:
        return [job.name for job in cluster.list_jobs()]
    finally:
        cluster.close()


def test_with_the_token_a_client_calls_tools_over_http(served):
    async def session() -> None:
        async with client(served.url, TOKEN) as c:
            assert [tool.name for tool in (await c.list_tools()).tools] == list(TOOLS)
            nodes = await c.call_tool("list_nodes", {})
            assert not nodes.is_error and nodes.structured_content is not None
            refused = await c.call_tool("plan_training_job", {**TRAINING, "total_gpus": 512, "global_batch": 2048})
            assert text(refused) == "refused by guardrail max_gpus_per_job: job ft asks 512 GPUs, the cap is 8"

    anyio.run(session)
    assert served.refusals == []


BAD_AUTHORIZATION = [
    None,
    "Bearer wrong-token-0123456789abcdef",
    f"Bearer {TOKEN[:-1]}",
    f"Bearer {TOKEN}x",
    f"Basic {TOKEN}",
    TOKEN,
]


@pytest.mark.parametrize("authorization", BAD_AUTHORIZATION)
def test_without_the_right_token_the_answer_is_401_and_nothing_is_done(served, authorization):
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if authorization is not None:
        headers["Authorization"] = authorization
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "submit_training_job", "arguments": TRAINING},
    }
    answer = httpx.post(served.url, json=call, headers=headers, timeout=10)
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"].startswith("Bearer")
    assert answer.json() == {"error": "a valid bearer token is required (Authorization: Bearer TOKEN)"}
    assert jobs(served.home) == []
    assert len(served.refusals) == 1 and json.loads(served.refusals[0])["http_status"] == 401
    assert TOKEN not in served.refusals[0]

    async def sdk_client() -> None:
        async with client(served.url, authorization=authorization) as c:
            await c.list_tools()

    with pytest.raises(ExceptionGroup) as failed:  # the SDK's client gives up at initialize
        anyio.run(sdk_client)
    assert failed.group_contains(MCPError, match="error response", depth=2)
    assert {json.loads(r)["http_status"] for r in served.refusals} == {401}  # its initialize, its DELETE
    assert jobs(served.home) == []


def test_a_body_over_the_limit_is_413_and_a_flood_is_429(served):
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    big = httpx.post(served.url, content=b"x" * (MAX_BODY_BYTES + 1), headers=headers, timeout=10)
    assert big.status_code == 413

    guessing = [
        httpx.get(served.url, headers={"Authorization": "Bearer nope"}, timeout=10).status_code for _ in range(35)
    ]
    assert guessing == [401] * 30 + [429] * 5  # token guesses: 30 at once from one address, then slowed down
    one_session = {**headers, "mcp-session-id": "s-1"}
    flood = [httpx.get(served.url, headers=one_session, timeout=10).status_code for _ in range(35)]
    assert 429 not in flood[:30] and flood[30:] == [429] * 5  # one client's session, likewise
    assert httpx.get(served.url, headers={**headers, "mcp-session-id": "s-2"}, timeout=10).status_code != 429
    served.clock.now += 5  # five seconds later each bucket has five requests again
    assert httpx.get(served.url, headers={"Authorization": "Bearer nope"}, timeout=10).status_code == 401
    assert httpx.get(served.url, headers=one_session, timeout=10).status_code != 429


def test_the_rate_limit_is_a_bucket_per_client():
    clock = FakeClock()
    rate = RateLimit(per_second=2, burst=3, clock=clock)
    assert [rate.allow("a") for _ in range(4)] == [True, True, True, False]
    assert rate.allow("b")
    clock.now += 0.5
    assert rate.allow("a") and not rate.allow("a")


def _server_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VCPILOT_KUBECONFIG", "VCPILOT_GUARDRAILS", "VCPILOT_WORKSPACE", TOKEN_ENV)
    }
    return {**env, "VCPILOT_HOME": str(tmp_path / "home"), **extra}


def _cli() -> typer.Typer:
    app = new_app()
    app.command()(mcp_command)
    return app


@pytest.mark.parametrize(
    ("args", "says"),
    [
        # each was ignored without a word: a server on stdio that the user thought listened on a port
        (["--port", "9000"], "--port is for --transport http"),
        (["--host", "0.0.0.0"], "--host is for --transport http"),
        (["--token-file", "/nonexistent"], "--token-file is for --transport http"),
        (["--rate-limit", "5"], "--rate-limit is for --transport http"),
        (["--context", "prod"], "--context picks a context of a kubeconfig; add --kubeconfig"),
    ],
)
def test_an_option_the_chosen_transport_does_not_use_is_refused(tmp_path, args, says):
    done = CliRunner().invoke(_cli(), args, env=_server_env(tmp_path))
    assert done.exit_code == 1 and done.stdout == ""
    assert done.stderr.startswith(f"error: {says}")
    assert done.stderr.count("\n") == 1 and not (tmp_path / "home").exists()


def test_the_command_refuses_http_without_a_token_in_one_sentence(tmp_path):
    done = CliRunner().invoke(_cli(), ["--transport", "http", "--port", "1"], env=_server_env(tmp_path))
    assert done.exit_code == 1 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "error: the MCP server over HTTP needs a bearer token: pass --token-file FILE or set "
        f"{TOKEN_ENV} (e.g. {TOKEN_ENV}=$(openssl rand -hex 32))"
    ]
    assert not (tmp_path / "home").exists(), "nothing was opened"


@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_an_empty_token_file_is_named_with_what_to_write_in_it(tmp_path, content):
    token_file = tmp_path / "token"
    token_file.write_text(content)
    args = ["--transport", "http", "--port", "1", "--token-file", str(token_file)]
    done = CliRunner().invoke(_cli(), args, env=_server_env(tmp_path))
    assert done.exit_code == 1 and done.stdout == ""
    sentence = done.stderr.strip()
    assert sentence.count("\n") == 0 and sentence.startswith(f"error: --token-file {token_file} is empty; write")
    assert "pass --token-file" not in sentence and not (tmp_path / "home").exists()


def test_a_token_file_that_never_ends_is_refused_not_read_forever(tmp_path):
    args = ["--transport", "http", "--port", "1", "--token-file", "/dev/zero"]
    done = CliRunner().invoke(_cli(), args, env=_server_env(tmp_path))
    assert done.exit_code == 1 and done.stdout == ""
    sentence = done.stderr.strip()
    assert sentence.count("\n") == 0 and sentence.startswith("error: --token-file /dev/zero holds more than 4096 bytes")
    assert not (tmp_path / "home").exists()


@pytest.mark.parametrize("content", ["\ufeff" + "a" * 32 + "\n", "é" * 20, "a" * 16 + "\x00" + "a" * 16])
def test_a_token_no_client_could_send_in_a_header_is_refused_in_one_sentence(tmp_path, content):
    token_file = tmp_path / "token"
    token_file.write_text(content)  # a BOM from a Windows editor, non-ASCII, a control character
    with socket.socket() as taken:  # were the token taken, the command would stop at the port, not serve
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        args = ["--transport", "http", "--port", str(taken.getsockname()[1]), "--token-file", str(token_file)]
        done = CliRunner().invoke(_cli(), args, env=_server_env(tmp_path))
    assert done.exit_code == 1 and done.stdout == ""
    sentence = done.stderr.strip()
    assert sentence.count("\n") == 0 and "must be at least 16 visible ASCII characters" in sentence
    assert content.strip() not in sentence and not (tmp_path / "home").exists()


def test_the_command_refuses_a_port_it_cannot_listen_on_in_one_sentence_before_opening_anything(tmp_path):
    env = _server_env(tmp_path, **{TOKEN_ENV: "a" * 32})
    outside = CliRunner().invoke(_cli(), ["--transport", "http", "--port", "99999"], env=env)
    assert outside.exit_code == 2 and outside.stderr.strip().count("\n") == 0, outside.stderr
    assert "--port should be a whole number from 1 to 65535" in outside.stderr
    with socket.socket() as taken:  # something already listens there: uvicorn's log and a traceback before
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = CliRunner().invoke(_cli(), ["--transport", "http", "--port", str(port)], env=env)
    assert done.exit_code == 1 and done.stderr.strip().splitlines() == [
        f"error: port {port} on 127.0.0.1 is taken (Address already in use); choose another with --port"
    ]
    # an address of no interface here (TEST-NET-1: numeric, so no name is looked up; binding sends nothing)
    foreign = CliRunner().invoke(_cli(), ["--transport", "http", "--host", "192.0.2.1"], env=env)
    assert foreign.exit_code == 1 and foreign.stderr.strip().splitlines() == [
        "error: --host 192.0.2.1 is not an address of this machine; give one with --host"
    ]
    assert not (tmp_path / "home").exists(), "nothing was opened"


def test_the_command_serves_http_read_only_with_a_token_file_and_audits_every_call(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    port = free_port()
    stderr = tmp_path / "stderr"
    with stderr.open("w") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agent.mcp_server",
                "--transport",
                "http",
                "--port",
                str(port),
                "--read-only",
                "--token-file",
                str(token_file),
            ],
            cwd=ROOT,
            env=_server_env(tmp_path),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                assert proc.poll() is None, stderr.read_text()
                time.sleep(0.1)

        async def session() -> None:
            async with client(url, TOKEN) as c:
                refused = await c.call_tool("submit_training_job", TRAINING)
                assert refused.is_error and text(refused).startswith("refused by guardrail read_only:")
                assert not (await c.call_tool("get_queue_status", {})).is_error

        anyio.run(session)
    finally:
        proc.terminate()
        proc.wait(10)
    log = stderr.read_text()
    audits = [json.loads(line.removeprefix("audit ")) for line in log.splitlines() if line.startswith("audit {")]
    calls = [a for a in audits if "tool" in a]
    assert [(a["tool"], a["verdict"]) for a in calls] == [
        ("submit_training_job", "refused by guardrail read_only"),
        ("get_queue_status", "allowed"),
    ]
    assert all(a["caller"].startswith(f"{token_identity(TOKEN)} from 127.0.0.1:") for a in calls)
    assert calls[0]["arguments"]["env"] == {"HF_TOKEN": "***"}
    assert TOKEN not in log and "hf_secret_value" not in log
    assert jobs(tmp_path / "home") == []


@pytest.mark.parametrize("rate", ["inf", "1e308", "nan", "0"])
def test_a_rate_limit_no_bucket_can_count_is_a_usage_error(tmp_path, rate):
    args = ["--transport", "http", "--port", "1", "--rate-limit", rate]
    done = CliRunner().invoke(_cli(), args, env=_server_env(tmp_path, **{TOKEN_ENV: "0123456789abcdef" * 2}))
    assert done.exit_code == 2 and done.stdout == ""
    assert (
        done.stderr.strip().count("\n") == 0 and "--rate-limit" in done.stderr and "internal error" not in done.stderr
    )
    assert not (tmp_path / "home").exists(), "nothing was opened"
