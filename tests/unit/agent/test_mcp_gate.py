"""The HTTP gate of `vcpilot mcp` as a plain ASGI app: who is let through, who is refused, and what the audit says."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from agent.guardrails import DEFAULT_IMAGE, Guardrails
from agent.mcp_http import CALLER_KEY, HOST_SHARE, Gate, RateLimit, TokenMask, token_identity
from agent.mcp_server import AUDIT, build_server
from agent.tools import ToolContext
from components.volcano.cluster_local import LocalCluster

TOKEN = "0123456789abcdef0123456789abcdef"


def call(gate: Gate, authorization: str | None, **headers: str) -> tuple[int, dict[str, Any]]:
    """Send one POST through `gate`; its status, and the scope the app behind it saw ({} when none)."""
    raw = [(k.replace("_", "-").encode(), v.encode("latin-1")) for k, v in headers.items()]
    if authorization is not None:
        raw.append((b"authorization", authorization.encode("latin-1")))
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": raw, "client": ("127.0.0.1", 5000)}
    sent: list[dict[str, Any]] = []
    seen: dict[str, Any] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.update(scope)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    gate._app = app
    anyio.run(gate, scope, receive, send)
    return sent[0]["status"], seen


def gate(log: list[str], per_second: float = 1000, burst: int = 1000) -> Gate:
    return Gate(
        lambda *a: None, TOKEN, 1024, RateLimit(per_second=per_second, burst=burst, clock=lambda: 0.0), log.append
    )


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        f"Basic {TOKEN}",
        f"Bearer {TOKEN}x",
        f"Bearer {TOKEN[:-1]}",
        f"Bearer {TOKEN} x",
        f"Bearer{TOKEN}",
        f"Bearer {TOKEN.upper()}",
        "Bearer \u00e9" + TOKEN[1:],
    ],
)
def test_no_valid_token_is_401_and_the_audit_line_carries_no_token(authorization):
    log: list[str] = []
    status, seen = call(gate(log), authorization)
    assert status == 401 and seen == {}
    (line,) = log
    assert json.loads(line)["caller"] == "anonymous from 127.0.0.1:5000" and TOKEN[:8] not in line


@pytest.mark.parametrize("authorization", [f"Bearer {TOKEN}", f"bearer {TOKEN}", f"Bearer  {TOKEN}  "])
def test_the_token_passes_with_the_scheme_in_any_case_and_whitespace_around_it(authorization):
    log: list[str] = []
    status, seen = call(gate(log), authorization)
    assert status == 200 and seen[CALLER_KEY] == f"{token_identity(TOKEN)} from 127.0.0.1:5000" and log == []


def test_a_refusal_past_the_token_names_who_was_refused():
    log: list[str] = []
    limited = gate(log, per_second=0.001, burst=1)
    assert call(limited, f"Bearer {TOKEN}", mcp_session_id="s1")[0] == 200
    assert call(limited, f"Bearer {TOKEN}", mcp_session_id="s1")[0] == 429
    assert call(gate(log), f"Bearer {TOKEN}", content_length="4096")[0] == 413
    assert call(gate(log), f"Bearer {TOKEN}", content_length="\u00b2")[0] == 200  # not a length: the SDK's to cut
    who = f"{token_identity(TOKEN)} from 127.0.0.1:5000"
    assert [(json.loads(line)["caller"], json.loads(line)["http_status"]) for line in log] == [(who, 429), (who, 413)]
    assert all(TOKEN not in line for line in log)


KEY = "sk-proj-abcdefghij0123456789abcdef"


def test_an_audit_line_masks_the_secrets_an_error_sentence_quotes(tmp_path: Path, caplog):
    # The arguments were redacted, but the verdict quoted them as the error sentence did, secrets and all.
    training = {
        "name": "ft",
        "image": f"{DEFAULT_IMAGE}:0.1.0",
        "command": ["python"],
        "total_gpus": 1,
        "micro_batch": 1,
        "grad_accum": 1,
        "global_batch": 1,
    }
    calls = [
        ("get_job_status", {"name": KEY}),  # a Kubernetes name shaped like a key
        ("plan_training_job", {**training, "env": {"HF_TOKEN": ["hf_0123456789abcdef"]}}),  # secret by its name
        ("find_latest_checkpoint", {"directory": "/srv/password=hunter2hunter2"}),
        ("list_nodes", {f"Bearer {KEY}": 1}),  # redaction masks values: a key is quoted as "unknown field …"
    ]
    cluster = LocalCluster(tmp_path / "home")

    async def session() -> list[bool]:
        async with Client(build_server(ToolContext(cluster, Guardrails(), tmp_path / "ws"))) as client:
            return [(await client.call_tool(tool, arguments)).is_error for tool, arguments in calls]

    try:
        with caplog.at_level("INFO", logger=AUDIT.name):
            assert anyio.run(session) == [True] * len(calls)
    finally:
        cluster.close()
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == AUDIT.name]
    assert [line["verdict"].split(":")[0] for line in lines] == ["failed"] * len(calls)
    assert lines[0]["verdict"] == "failed: job default/*** does not exist."
    for secret in (KEY, "hf_0123456789abcdef", "hunter2hunter2"):
        assert secret not in caplog.text


def test_the_servers_own_token_is_masked_in_whatever_line_carries_it():
    # A bare `openssl rand -hex 32` has no shape redaction knows: a client that sent it as an argument had it logged.
    lines: list[str] = []

    class Lines(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Lines()
    handler.addFilter(TokenMask(TOKEN))
    log = logging.getLogger("test.mcp.mask")
    log.addHandler(handler)
    try:
        log.warning("audit %s", json.dumps({"arguments": {"x": TOKEN, TOKEN: 1}}))
        log.warning("nothing secret in %s", "this one")
    finally:
        log.removeHandler(handler)
    assert lines == ['audit {"arguments": {"x": "***", "***": 1}}', "nothing secret in this one"]


def test_new_sessions_from_one_address_share_its_ceiling():
    # Each new (or invented) MCP session id had an allowance of its own: a client holding the token was not paced.
    log: list[str] = []
    limited = gate(log, per_second=1, burst=2)
    statuses = [call(limited, f"Bearer {TOKEN}", mcp_session_id=f"s-{i}")[0] for i in range(2 * HOST_SHARE + 3)]
    assert statuses == [200] * (2 * HOST_SHARE) + [429] * 3
    assert all('"http_status": 429' in line for line in log)
    one = gate([], per_second=1, burst=2)  # within it, each session still has its own bucket
    assert [call(one, f"Bearer {TOKEN}", mcp_session_id="s")[0] for _ in range(3)] == [200, 200, 429]
