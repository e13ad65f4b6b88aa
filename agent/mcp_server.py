"""`vcpilot mcp`: the agent's tools served over MCP, so Claude Desktop or any MCP client can look at the cluster.

Every tool in `agent.tools.TOOLS` is registered with its typed input and output schemas and runs through
`call_tool`, so an MCP client meets exactly the guardrails the agent does. A refusal or a bad argument comes
back as an `is_error` result whose text says what was refused and by which rule — never the SDK's bare "Error
executing tool". In read-only mode the mutating tools stay listed (marked as such) and are refused when called.

Tool calls run one at a time on the server's event loop: the LocalCluster's SQLite connection belongs to the
thread that opened it, and a cluster's answers are quick. Each call leaves one JSON line on the `vcpilot.mcp.audit`
logger — who called (the token's identity and the peer over HTTP, "local" on stdio), the tool, its arguments with
secrets redacted, and the verdict — whatever the transport. `serve_http` puts `agent.mcp_http.Gate` in front.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
from collections.abc import Iterator
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools.base import Tool as MCPTool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ConfigDict

from agent.mcp_http import CALLER_KEY, Gate, RateLimit
from agent.tools import TOOLS, Tool, ToolContext, ToolResult, call_tool, input_schema
from components.redact import MASK, redact, redact_text
from components.untrusted import printable

__all__ = ["AUDIT", "MAX_BODY_BYTES", "SERVER_NAME", "build_server", "serve_http"]

AUDIT = logging.getLogger("vcpilot.mcp.audit")
MAX_BODY_BYTES = 256 * 1024  # a training request is a few KiB; the SDK's default is 4 MiB
_MAX_ITEMS = 100  # of one list or object in an audit line

SERVER_NAME = "vcpilot"
_INSTRUCTIONS = (
    "Tools over a Volcano cluster: read queues, nodes and jobs, explain why a job is Pending, find the latest "
    "checkpoint, plan a training job without submitting it, submit and cancel jobs. Every call is checked against "
    "the server's guardrails (namespaces, queues, images, priority classes, a GPU cap, read-only); a refused call "
    "says which rule refused it."
)


class _RawArguments(ArgModelBase):
    """Hands the client's arguments to `call_tool` untouched: its validation gives one-sentence errors."""

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

    def model_dump_one_level(self) -> dict[str, Any]:
        """The arguments as the client sent them, under the handler's one parameter."""
        return {"arguments": dict(self.model_extra or {})}


class _Server(MCPServer):
    """The SDK's server, except that a call of a tool it does not have is answered and audited as a refusal."""

    def __init__(self, ctx: ToolContext) -> None:
        tools = [_register(ctx, tool) for tool in TOOLS.values()]
        super().__init__(SERVER_NAME, instructions=_INSTRUCTIONS, tools=tools, log_level="WARNING")
        self._ctx = ctx

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None) -> Any:
        """Run a tool; an unknown name gets call_tool's sentence ("did you mean …?") and an audit line."""
        if name in TOOLS or context is None:
            return await super().call_tool(name, arguments, context)
        result = call_tool(self._ctx, name, arguments)
        _audit(context, printable(name, 200), arguments, result)
        return CallToolResult(content=[TextContent(type="text", text=result.error)], is_error=True)


def build_server(ctx: ToolContext) -> MCPServer:
    """An MCP server offering every tool of `agent.tools` against `ctx` (its cluster, guardrails, checkpoints)."""
    return _Server(ctx)


def _register(ctx: ToolContext, tool: Tool) -> MCPTool:
    async def handler(arguments: dict[str, Any], mcp_ctx: Context) -> CallToolResult:
        result = call_tool(ctx, tool.name, arguments)
        _audit(mcp_ctx, tool.name, arguments, result)
        if not result.ok:
            return CallToolResult(content=[TextContent(type="text", text=result.error)], is_error=True)
        text = json.dumps(result.data, indent=2, sort_keys=True)
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=result.data)

    handler.__name__ = tool.name
    return MCPTool(
        fn=handler,
        name=tool.name,
        title=None,
        description=tool.description,
        parameters=input_schema(tool),
        # A published schema without an output model is advertised to clients, not re-validated by the SDK.
        fn_metadata=FuncMetadata(arg_model=_RawArguments, output_schema=tool.output_schema()),
        is_async=True,
        context_kwarg="mcp_ctx",
        annotations=ToolAnnotations(
            read_only_hint=not tool.mutating,
            destructive_hint=tool.name == "cancel_job",
            idempotent_hint=not tool.mutating or tool.name == "submit_training_job",
            open_world_hint=False,
        ),
    )


def _audit(mcp_ctx: Context, tool: str, arguments: dict[str, Any], result: ToolResult) -> None:
    request = mcp_ctx.request_context.request  # a Starlette request over HTTP, None on stdio and in memory
    caller = getattr(request, "scope", {}).get(CALLER_KEY, "local")
    redacted = redact(arguments)
    if result.ok:
        verdict = "allowed"
    elif result.rule:
        verdict = f"refused by guardrail {result.rule}"
    else:
        verdict = "failed: " + _unquoted(result.error, arguments, redacted)
    line = {"caller": caller, "tool": tool, "arguments": _loggable(redacted), "verdict": verdict}
    AUDIT.info(json.dumps(line, allow_nan=False))


def _unquoted(error: str, arguments: Any, redacted: Any) -> str:
    """`error` without what redaction masked in the arguments: the sentence quotes what the caller sent.

    A value under a secret-looking name (`{"HF_TOKEN": ["…"]}`) has no shape `redact_text` would know again.
    """
    masked = set(_strings(arguments)) - set(_strings(redacted))
    for secret in sorted((s for s in masked if len(s) >= 4), key=len, reverse=True):
        error = error.replace(secret, MASK)
    return redact_text(error)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _loggable(value: Any) -> Any:
    """A client's arguments as strict JSON of bounded size: NaN and Infinity as text, long strings cut."""
    if isinstance(value, dict):  # as many entries as a list keeps: a million keys are not a million in the log
        # `redact` masks values, never keys: a key shaped like a credential is masked here.
        kept = {
            redact_text(printable(str(key), 200)): _loggable(item)
            for key, item in itertools.islice(value.items(), _MAX_ITEMS)
        }
        return kept | ({"…": f"{len(value) - _MAX_ITEMS} more"} if len(value) > _MAX_ITEMS else {})
    if isinstance(value, list):
        return [_loggable(item) for item in value[:_MAX_ITEMS]] + (["…"] if len(value) > _MAX_ITEMS else [])
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str):
        return printable(value, 1000)
    return value


def serve_http(server: MCPServer, token: str, host: str, port: int, *, rate: RateLimit | None = None) -> None:
    """Serve streamable HTTP at http://HOST:PORT/mcp behind the token, size and rate checks of `Gate`."""
    import anyio
    import uvicorn

    app = server.streamable_http_app(max_request_body_size=MAX_BODY_BYTES, host=host)
    gate = Gate(app, token, MAX_BODY_BYTES, rate or RateLimit(per_second=20, burst=40), AUDIT.warning)
    config = uvicorn.Config(gate, host=host, port=port, log_level="warning")
    anyio.run(uvicorn.Server(config).serve)


# stdout carries the stdio transport: everything for people goes to stderr (where `reported` writes).


if __name__ == "__main__":  # what MCP clients' configs name: `python -m agent.mcp_server --read-only`
    import sys

    from agent.cli_mcp import main

    sys.exit(main())
