"""`vcpilot compile` and `vcpilot submit`: the Hera-defined pipeline as committed YAML, and runs on an Argo Server."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from components.entry import reported
from pipelines.compile import SubmitError, compile_all, submit
from pipelines.local.cli import parse_params

__all__ = ["compile_command", "submit_command"]

JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document and nothing else.")]
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "deploy" / "argo"


def compile_command(
    out: Annotated[Path, typer.Option(help="Directory for llm-autopilot.yaml and llm-autopilot-nightly.yaml.")] = (
        DEFAULT_OUT
    ),
    as_json: JsonFlag = False,
) -> None:
    """Compile the WorkflowTemplate and CronWorkflow from their Hera definitions."""
    paths = compile_all(out)
    if as_json:
        print(json.dumps({"wrote": [str(p) for p in paths]}, indent=2))
        return
    for path in paths:
        typer.echo(f"wrote {path}")


@reported
def submit_command(
    param: Annotated[list[str] | None, typer.Option("-p", "--param", help="Template parameter name=value.")] = None,
    server: Annotated[str | None, typer.Option(help="Argo Server URL (env ARGO_SERVER).")] = None,
    namespace: Annotated[str | None, typer.Option(help="Namespace (env ARGO_NAMESPACE, default argo).")] = None,
    token: Annotated[str | None, typer.Option(help="Bearer token (env ARGO_TOKEN).", show_default=False)] = None,
    as_json: JsonFlag = False,
) -> None:
    """Submit a run of the llm-autopilot WorkflowTemplate to an Argo Server; print its name and UI link."""
    url = server or os.environ.get("ARGO_SERVER")
    if not url:
        raise SubmitError("no Argo Server: pass --server or set ARGO_SERVER.")
    ns = namespace or os.environ.get("ARGO_NAMESPACE") or "argo"
    name, link = submit(url, ns, token or os.environ.get("ARGO_TOKEN"), parse_params(param))  # SubmitError: reported
    if as_json:
        print(json.dumps({"name": name, "namespace": ns, "link": link}, indent=2))
        return
    typer.echo(name)
    typer.echo(link)
