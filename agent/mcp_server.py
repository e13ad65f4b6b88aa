"""`vcpilot mcp`: the agent's tools served over MCP, so Claude Desktop or any MCP client can look at the cluster.

Every tool in `agent.tools.TOOLS` is registered with its typed input and output schemas and runs through
`call_tool`, so an MCP client meets exactly the guardrails the agent does. A refusal or a bad argument comes
back as an `is_error` result whose text says what was refused and by which rule — never the SDK's bare "Error
executing tool". In read-only mode the mutating tools stay listed (marked as such) and are refused when called.

Tool calls run one at a time on the server's event loop: the LocalCluster's SQLite connection belongs to the
thread that opened it, and a cluster's answers are quick.
"""

from __future__ import annotations

import ipaddress
import json
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools.base import Tool as MCPTool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ConfigDict

from agent.guardrails import ENV_VAR, Guardrails
from agent.tools import TOOLS, Tool, ToolContext, call_tool, input_schema
from components.entry import reported
from components.volcano.cluster import Cluster
from components.volcano.cluster_local import LocalCluster
from components.volcano.connect import connect

__all__ = ["SERVER_NAME", "Transport", "build_server", "mcp_command"]

SERVER_NAME = "vcpilot"
_INSTRUCTIONS = (
    "Tools over a Volcano cluster: read queues, nodes and jobs, explain why a job is Pending, find the latest "
    "checkpoint, plan a training job without submitting it, submit and cancel jobs. Every call is checked against "
    "the server's guardrails (namespaces, queues, images, priority classes, a GPU cap, read-only); a refused call "
    "says which rule refused it."
)


class Transport(StrEnum):
    """How a client reaches the server."""

    STDIO = "stdio"
    HTTP = "http"


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
        fn_metadata=FuncMetadata(
            arg_model=_RawArguments, output_schema=tool.output_model.model_json_schema(mode="serialization")
        ),
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
@reported
def mcp_command(
    read_only: Annotated[
        bool, typer.Option("--read-only", help="Refuse every tool that changes the cluster (submit, cancel).")
    ] = False,
    transport: Annotated[
        Transport,
        typer.Option(help="stdio for a client that starts the server (Claude Desktop); http: streamable HTTP at /mcp."),
    ] = Transport.STDIO,
    host: Annotated[str, typer.Option(help="Address to listen on with --transport http.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on with --transport http.")] = 8765,
    kubeconfig: Annotated[
        str | None,
        typer.Option(
            envvar="VCPILOT_KUBECONFIG", help="Serve the Kubernetes cluster of this kubeconfig (KubeCluster)."
        ),
    ] = None,
    context: Annotated[
        str | None, typer.Option(help="The kubeconfig context to use (default: its current one).")
    ] = None,
    guardrails: Annotated[
        Path | None, typer.Option(envvar=ENV_VAR, help="Guardrails file (YAML or JSON); defaults apply without one.")
    ] = None,
    checkpoints_root: Annotated[
        Path | None,
        typer.Option(
            envvar="VCPILOT_WORKSPACE",
            help="find_latest_checkpoint looks only under this directory (default: $VCPILOT_HOME/workspace).",
        ),
    ] = None,
) -> None:
    """Serve the agent's tools over MCP against the LocalCluster (VCPILOT_HOME) or a kubeconfig's cluster."""
    rules = Guardrails.from_file(guardrails) if guardrails else Guardrails()
    if read_only:
        rules = rules.model_copy(update={"read_only": True})
    cluster = connect(kubeconfig or None, context)
    root = checkpoints_root or Path(os.environ.get("VCPILOT_HOME") or ".vcpilot") / "workspace"
    server = build_server(ToolContext(cluster=cluster, guardrails=rules, checkpoints_root=root.resolve()))
    where = _describe(cluster)
    mode = "read-only" if rules.read_only else "read-write"
    if transport == "stdio":
        print(f"vcpilot MCP server ({mode}) on stdio, serving {where}", file=sys.stderr)
        server.run("stdio")
        return
    if not _loopback(host):
        print(
            f"warning: listening on {host}: anyone who can reach {host}:{port} can call these tools; "
            "put an authenticating proxy in front or use --read-only",
            file=sys.stderr,
        )
    print(f"vcpilot MCP server ({mode}) at http://{host}:{port}/mcp, serving {where}", file=sys.stderr)
    server.run("streamable-http", host=host, port=port)


def _describe(cluster: Cluster) -> str:
    if isinstance(cluster, LocalCluster):
        return f"the LocalCluster in {cluster.home}"
    return f"the Kubernetes cluster at {getattr(cluster, 'host', 'the kubeconfig')}"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


if __name__ == "__main__":
    typer.run(mcp_command)
