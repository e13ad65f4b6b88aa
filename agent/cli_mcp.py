"""`vcpilot mcp`: the command that serves the agent's tools over MCP (the server itself is `agent.mcp_server`).

Apart from the server so that the `vcpilot` command does not import the MCP SDK, uvicorn and starlette until
`vcpilot mcp` runs.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from components.entry import given_options, new_app, run
from components.errors import InputError

if TYPE_CHECKING:
    from components.volcano.cluster import Cluster

__all__ = ["GUARDRAILS_ENV", "Transport", "main", "mcp_command"]

GUARDRAILS_ENV = "VCPILOT_GUARDRAILS"  # agent.guardrails.ENV_VAR, without importing pydantic to say it


class Transport(StrEnum):
    """How a client reaches the server."""

    STDIO = "stdio"
    HTTP = "http"


def mcp_command(
    read_only: Annotated[
        bool, typer.Option("--read-only", help="Refuse every tool that changes the cluster (submit, cancel).")
    ] = False,
    transport: Annotated[
        Transport,
        typer.Option(help="stdio for a client that starts the server (Claude Desktop); http: streamable HTTP at /mcp."),
    ] = Transport.STDIO,
    host: Annotated[str, typer.Option(help="Address to listen on with --transport http.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on with --transport http.")] = 8765,
    token_file: Annotated[
        Path | None,
        typer.Option(help="With --transport http: the bearer token clients must send (else $VCPILOT_MCP_TOKEN)."),
    ] = None,
    rate_limit: Annotated[
        float,
        # Bounded above too: `inf` (or 1e308) would be a burst no bucket can count.
        typer.Option(
            min=0.1, max=100_000, help="With --transport http: requests per second per MCP session (burst 2x)."
        ),
    ] = 20.0,
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
        Path | None,
        typer.Option(envvar=GUARDRAILS_ENV, help="Guardrails file (YAML or JSON); defaults apply without one."),
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
    from agent.guardrails import Guardrails
    from agent.mcp_http import RateLimit, load_token
    from agent.mcp_server import AUDIT, build_server, serve_http
    from agent.tools import ToolContext
    from components.ports import check_port_free
    from components.volcano.connect import connect

    if transport == Transport.STDIO and (given := given_options("host", "port", "token_file", "rate_limit")):
        raise InputError(f"{given[0]} is for --transport http; leave it out, or add --transport http")
    if context is not None and not kubeconfig:
        raise InputError("--context picks a context of a kubeconfig; add --kubeconfig (or VCPILOT_KUBECONFIG)")
    token = load_token(token_file) if transport == Transport.HTTP else ""  # before anything is opened
    if checkpoints_root is not None and checkpoints_root.exists() and not checkpoints_root.is_dir():
        raise InputError(f"--checkpoints-root {checkpoints_root} is a file; give the directory checkpoints are under")
    root = checkpoints_root or Path(os.environ.get("VCPILOT_HOME") or ".vcpilot") / "workspace"
    try:
        root = root.resolve()
    except (OSError, RuntimeError) as err:  # a symlink loop: RuntimeError before Python 3.13, OSError after
        raise InputError(
            f"--checkpoints-root {root} cannot be a directory ({err}); give the directory checkpoints are under"
        ) from None
    if transport == Transport.HTTP:  # a taken port or a foreign address: one sentence, not uvicorn's log
        check_port_free(host, port)
    rules = Guardrails.from_file(guardrails) if guardrails else Guardrails()
    if read_only:
        rules = rules.model_copy(update={"read_only": True})
    cluster = connect(kubeconfig or None, context)
    _sdk_logs_to_stderr(token)  # before build_server, whose SDK would otherwise log tracebacks through rich
    server = build_server(ToolContext(cluster=cluster, guardrails=rules, checkpoints_root=root))
    where = _describe(cluster)
    mode = "read-only" if rules.read_only else "read-write"
    _audit_to_stderr(AUDIT, token)
    if transport == "stdio":
        print(f"vcpilot MCP server ({mode}) on stdio, serving {where}", file=sys.stderr)
        server.run("stdio")
        return
    if not _loopback(host):
        print(
            f"warning: listening on {host}: anyone who can reach {host}:{port} and holds the token can call "
            "these tools, over plain HTTP; put a TLS proxy in front or use --read-only",
            file=sys.stderr,
        )
    print(f"vcpilot MCP server ({mode}) at http://{host}:{port}/mcp, serving {where}", file=sys.stderr)
    serve_http(server, token, host, port, rate=RateLimit(per_second=rate_limit, burst=max(1, int(2 * rate_limit))))


def _audit_to_stderr(audit: logging.Logger, token: str) -> None:
    """One JSON line per tool call (and per request the HTTP gate refuses) on stderr, never on stdout."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("audit %(message)s"))
    _mask(handler, token)
    audit.addHandler(handler)
    audit.setLevel(logging.INFO)
    audit.propagate = False


class _OneLine(logging.Formatter):
    """A log record as one redacted line, without the traceback of a client's bad request or dropped connection."""

    def format(self, record: logging.LogRecord) -> str:
        from components.redact import redact_text

        message = record.getMessage()
        err = record.exc_info[1] if record.exc_info else None
        if err is not None:
            message += f": {type(err).__name__}" + (f": {err}" if str(err) else "")
        return redact_text(" ".join(f"{record.levelname.lower()}: {message}".split()))


def _sdk_logs_to_stderr(token: str) -> None:
    """The SDK's warnings and errors on stderr, one line each; stdout belongs to the stdio transport."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine())
    _mask(handler, token)
    logging.basicConfig(level=logging.WARNING, handlers=[handler])  # MCPServer's own basicConfig is then a no-op


def _mask(handler: logging.Handler, token: str) -> None:
    """Over HTTP, the server's own token never reaches stderr, whatever a client put it in."""
    from agent.mcp_http import TokenMask

    if token:
        handler.addFilter(TokenMask(token))


def _describe(cluster: Cluster) -> str:
    from components.volcano.cluster_local import LocalCluster

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


def main(argv: list[str] | None = None) -> int:
    """`python -m agent.mcp_server [OPTIONS]`: `vcpilot mcp` for an MCP client's config; its exit code."""
    app = new_app()
    app.command()(mcp_command)
    return run(app, argv, "python -m agent.mcp_server")
