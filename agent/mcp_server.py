"""`vcpilot mcp`: the agent's tools served over MCP, so Claude Desktop or any MCP client can look at the cluster.

Every tool in `agent.tools.TOOLS` is registered with its typed input and output schemas and runs through
`call_tool`, so an MCP client meets exactly the guardrails the agent does. A refusal or a bad argument comes
back as an `is_error` result whose text says what was refused and by which rule — never the SDK's bare "Error
executing tool". In read-only mode the mutating tools stay listed (marked as such) and are refused when called.

Tool calls run one at a time on the server's event loop: the LocalCluster's SQLite connection belongs to the
thread that opened it, and a cluster's answers are quick.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools.base import Tool as MCPTool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ConfigDict

from agent.tools import TOOLS, Tool, ToolContext, call_tool, input_schema

__all__ = ["SERVER_NAME", "build_server"]

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


def build_server(ctx: ToolContext) -> MCPServer:
    """An MCP server offering every tool of `agent.tools` against `ctx` (its cluster, guardrails, checkpoints)."""
    tools = [_register(ctx, tool) for tool in TOOLS.values()]
    return MCPServer(SERVER_NAME, instructions=_INSTRUCTIONS, tools=tools, log_level="WARNING")


def _register(ctx: ToolContext, tool: Tool) -> MCPTool:
    async def handler(arguments: dict[str, Any]) -> CallToolResult:
        result = call_tool(ctx, tool.name, arguments)
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
        context_kwarg=None,
        annotations=ToolAnnotations(
            read_only_hint=not tool.mutating,
            destructive_hint=tool.name == "cancel_job",
            idempotent_hint=not tool.mutating or tool.name == "submit_training_job",
            open_world_hint=False,
        ),
    )


# stdout carries the stdio transport: everything for people goes to stderr (where `reported` writes).


if __name__ == "__main__":  # what MCP clients' configs name: `python -m agent.mcp_server --read-only`
    import sys

    from agent.cli_mcp import main

    sys.exit(main())
