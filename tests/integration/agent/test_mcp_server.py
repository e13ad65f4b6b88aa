"""An MCP client (the SDK's own) lists the agent's tools and calls them; read-only mode refuses at call time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import typer
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult
from typer.testing import CliRunner

from agent.cli_mcp import mcp_command
from agent.guardrails import DEFAULT_IMAGE, Guardrails
from agent.mcp_server import build_server
from agent.tools import TOOLS, ToolContext
from components.entry import new_app
from components.volcano.cluster_local import LocalCluster

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
TRAINING: dict[str, Any] = {
    "name": "ft",
    "image": f"{DEFAULT_IMAGE}:0.1.0",
    "command": ["python", "-m", "components.finetune.train"],
    "total_gpus": 8,
    "gpus_per_pod": 4,
    "micro_batch": 2,
    "grad_accum": 2,
    "global_batch": 32,
}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path / "home")
    yield c
    for job in c.list_jobs():
        c.delete(job.name, job.namespace, missing_ok=True)
    c.close()


def text(result: CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def test_a_client_lists_the_tools_with_their_schemas_and_calls_them(cluster):
    async def session() -> None:
        async with Client(build_server(ToolContext(cluster, Guardrails()))) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert list(listed) == list(TOOLS)
            plan = listed["plan_training_job"]
            assert {"total_gpus", "image", "global_batch"} <= set(plan.input_schema["properties"])
            assert "manifest" in (plan.output_schema or {})["properties"]
            assert plan.annotations is not None and plan.annotations.read_only_hint is True
            submit = listed["submit_training_job"].annotations
            assert submit is not None and submit.read_only_hint is False

            queue = await client.call_tool("get_queue_status", {"queue": "default"})
            assert not queue.is_error
            assert queue.structured_content is not None
            assert (queue.structured_content["name"], queue.structured_content["state"]) == ("default", "Open")

            planned = await client.call_tool("plan_training_job", TRAINING)
            assert not planned.is_error, text(planned)
            assert planned.structured_content is not None
            manifest = planned.structured_content["manifest"]
            assert manifest["kind"] == "Job" and manifest["spec"]["minAvailable"] == 2
            assert '"submitted": false' in text(planned)

            refused = await client.call_tool("plan_training_job", {**TRAINING, "total_gpus": 512, "global_batch": 2048})
            assert refused.is_error
            assert text(refused) == "refused by guardrail max_gpus_per_job: job ft asks 512 GPUs, the cap is 8"

            bad = await client.call_tool("get_job_status", {"name": "ft", "namespac": "ml"})
            assert bad.is_error
            assert text(bad) == "bad arguments for get_job_status: unknown field namespac (did you mean namespace?)"

    anyio.run(session)
    assert cluster.list_jobs() == []


def test_read_only_mode_lists_submit_but_refuses_it_and_submits_nothing(cluster):
    async def session() -> None:
        async with Client(build_server(ToolContext(cluster, Guardrails(read_only=True)))) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            assert "submit_training_job" in names and "cancel_job" in names
            result = await client.call_tool("submit_training_job", TRAINING)
            assert result.is_error
            assert "refused by guardrail read_only" in text(result)
            assert "Error executing tool" not in text(result)
            assert not (await client.call_tool("plan_training_job", TRAINING)).is_error

    anyio.run(session)
    assert cluster.list_jobs() == []


def test_explain_pending_over_mcp_for_a_gang_short_of_gpus(cluster, tmp_path, make_job):
    busy = make_job("busy", "sleep 30", gpus=4)
    cluster.submit(busy)
    cluster.wait("busy", {"Running"}, timeout=10)

    async def session() -> str:
        async with Client(build_server(ToolContext(cluster, Guardrails()))) as client:
            submitted = await client.call_tool("submit_training_job", TRAINING)
            assert not submitted.is_error, text(submitted)
            why = await client.call_tool("explain_pending", {"name": "ft"})
            assert not why.is_error and why.structured_content is not None
            assert (why.structured_content["short_by"], why.structured_content["gpus_free"]) == (4, 4)
            return str(why.structured_content["summary"])

    summary = anyio.run(session)
    assert "the gang is short by 4 GPUs: its 2 pods need 8 GPUs at once and the nodes it may use have 4 free" in summary


def _server_env(tmp_path: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VCPILOT_KUBECONFIG", "VCPILOT_GUARDRAILS", "VCPILOT_WORKSPACE")
    }
    return {**env, "VCPILOT_HOME": str(tmp_path / "home")}


def test_the_command_serves_stdio_and_refuses_a_submit_in_read_only_mode(tmp_path):
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "agent.mcp_server", "--read-only"],
        env=_server_env(tmp_path),
        cwd=str(ROOT),
    )

    errlog = (tmp_path / "stderr").open("w")

    async def session() -> None:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            assert len((await client.list_tools()).tools) == len(TOOLS)
            nodes = await client.call_tool("list_nodes", {})
            assert not nodes.is_error and nodes.structured_content is not None
            assert len(nodes.structured_content["nodes"]) == 2
            refused = await client.call_tool("submit_training_job", TRAINING)
            assert refused.is_error and text(refused).startswith("refused by guardrail read_only:")

    anyio.run(session)
    errlog.close()
    audits = [
        json.loads(line.removeprefix("audit "))
        for line in (tmp_path / "stderr").read_text().splitlines()
        if line.startswith("audit {")
    ]
    assert [(a["caller"], a["tool"], a["verdict"]) for a in audits] == [
        ("local", "list_nodes", "allowed"),
        ("local", "submit_training_job", "refused by guardrail read_only"),
    ]
    home = LocalCluster(tmp_path / "home")
    try:
        assert home.list_jobs() == []
    finally:
        home.close()


def test_hostile_stdio_messages_leave_strict_short_audit_lines_and_no_traceback(tmp_path):
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    messages = [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "prompts/get", "params": {"name": "nope"}}),
        '{"jsonrpc": "2.0", "id": 3, "method": "tools/call", '
        '"params": {"name": "get_queue_status", "arguments": {"queue": NaN}}}',  # Python's parser takes NaN
        json.dumps(
            {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
             "params": {"name": "get_queue_status", "arguments": {"queue": "q" * 200_000}}}
        ),
    ]  # fmt: skip
    errlog = (tmp_path / "stderr").open("w")  # a file: a pipe nobody reads would stall the server
    server = subprocess.Popen(
        [sys.executable, "-m", "agent.mcp_server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errlog,
        text=True,
        env=_server_env(tmp_path),
        cwd=str(ROOT),
    )
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write("\n".join(messages) + "\n")
    server.stdin.flush()
    replies: dict[int, Any] = {}
    while not {2, 3, 4} <= set(replies):  # every request answered before stdin closes
        reply = json.loads(server.stdout.readline() or pytest.fail("the server stopped answering"))
        replies[reply["id"]] = reply
    server.communicate(timeout=60)
    errlog.close()
    assert server.returncode == 0
    stderr = (tmp_path / "stderr").read_text()
    assert "Unknown prompt" in replies[2]["error"]["message"] and replies[3]["result"]["isError"]
    assert len(replies[4]["result"]["content"][0]["text"]) < 1100
    lines = stderr.splitlines()
    audits = [line.removeprefix("audit ") for line in lines if line.startswith("audit ")]
    assert len(audits) == 2 and all(len(line) < 4000 for line in audits)
    for line in audits:
        json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} in an audit line: not JSON"))
    assert "error: handler for 'prompts/get' raised: ValueError: Unknown prompt: nope" in lines
    assert "Traceback" not in stderr and len(lines) == 4  # the banner, the prompt's error, two audits


def _cli() -> typer.Typer:
    app = new_app()  # the contract (components.entry) is in the app, not in the command
    app.command()(mcp_command)
    return app


def test_a_bad_guardrails_file_stops_the_command_with_one_sentence(tmp_path):
    bad = tmp_path / "guardrails.yaml"
    bad.write_text("max_gpu_per_job: 4\n")
    done = CliRunner().invoke(_cli(), ["--guardrails", str(bad)], env=_server_env(tmp_path))
    assert done.exit_code == 1 and done.stdout == ""  # EXIT_INPUT
    assert done.stderr.strip().splitlines() == [
        f"error: the guardrails file {bad}: unknown field max_gpu_per_job (did you mean max_gpus_per_job?)"
    ]


def test_a_kubeconfig_that_cannot_be_served_is_said_in_one_sentence(tmp_path):
    env = {**_server_env(tmp_path), "VCPILOT_KUBECONFIG": str(tmp_path / "missing-config")}
    done = CliRunner().invoke(_cli(), [], env=env)
    assert done.exit_code == 1 and done.stdout == ""  # EXIT_INPUT
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert not (tmp_path / "home").exists(), "no LocalCluster was opened instead"


def test_a_tool_the_server_does_not_have_is_one_sentence_and_an_audit_line(cluster, caplog):
    async def session() -> list[str]:
        async with Client(build_server(ToolContext(cluster, Guardrails(read_only=True)))) as client:
            answers = []
            for name in ("submit_training_jobs", "x" * 100_000, "cancel_job\u202e", "shell"):
                result = await client.call_tool(name, {"cmd": "rm -rf /", "token": "sk-live-0123456789abcdef"})
                assert result.is_error
                answers.append(text(result))
            return answers

    with caplog.at_level("INFO", logger="vcpilot.mcp.audit"):
        answers = anyio.run(session)
    assert answers[0] == "there is no tool 'submit_training_jobs'; did you mean submit_training_job?"
    assert all(len(a) < 1100 and "\u202e" not in a for a in answers)
    audits = [json.loads(r.getMessage()) for r in caplog.records if r.name == "vcpilot.mcp.audit"]
    assert [a["caller"] for a in audits] == ["local"] * 4
    assert all(a["verdict"].startswith("failed: there is no tool") and len(a["tool"]) <= 250 for a in audits)
    assert all(a["arguments"]["token"] == "***" for a in audits)
    assert "sk-live" not in caplog.text and jobs_submitted(cluster) == []


def jobs_submitted(cluster: LocalCluster) -> list[str]:
    return [job.name for job in cluster.list_jobs()]


def test_an_audit_line_stays_short_however_many_keys_the_arguments_have(cluster, caplog):
    wide = {f"k{i}": "v" for i in range(50_000)}  # stdio has no body limit: every key was one more in the line

    async def session() -> None:
        async with Client(build_server(ToolContext(cluster, Guardrails()))) as client:
            assert (await client.call_tool("list_nodes", wide)).is_error

    with caplog.at_level("INFO", logger="vcpilot.mcp.audit"):
        anyio.run(session)
    (line,) = [r.getMessage() for r in caplog.records if r.name == "vcpilot.mcp.audit"]
    assert len(line) < 10_000 and json.loads(line)["arguments"]["…"] == "49900 more"
