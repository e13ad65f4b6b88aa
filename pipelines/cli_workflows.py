"""`vcpilot compile` and `vcpilot submit`: the Hera-defined pipeline as committed YAML, and runs on an Argo Server."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from components.entry import JsonOption, print_json
from pipelines.argo_address import SERVER_HELP
from pipelines.local.cli import ParamFileOption, ParamOption, workflow_params

__all__ = ["compile_command", "submit_command"]

JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document and nothing else.")]
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "deploy" / "argo"


def compile_command(
    out: Annotated[Path, typer.Option(help="Directory for llm-autopilot.yaml and llm-autopilot-nightly.yaml.")] = (
        DEFAULT_OUT
    ),
    as_json: JsonOption = False,
) -> None:
    """Compile the WorkflowTemplate and CronWorkflow from their Hera definitions."""
    from components.files import check_output_dir
    from pipelines.compile import compile_all

    check_output_dir(out, "--out")
    written = compile_all(out)
    if as_json:
        print_json({"wrote": [str(path) for path in written]})
        return
    for path in written:
        typer.echo(f"wrote {path}")


def submit_command(
    param: ParamOption = None,
    parameter_file: ParamFileOption = None,
    server: Annotated[
        str | None,
        typer.Option(
            "--argo-server",
            "--server",
            help=SERVER_HELP,
        ),
    ] = None,
    namespace: Annotated[str | None, typer.Option(help="Namespace (env ARGO_NAMESPACE, default argo).")] = None,
    token: Annotated[str | None, typer.Option(help="Bearer token (env ARGO_TOKEN).", show_default=False)] = None,
    as_json: JsonOption = False,
) -> None:
    """Submit a run of the llm-autopilot WorkflowTemplate to an Argo Server; print its name and UI link."""
    from components.errors import InputError
    from components.names import check_namespace
    from pipelines.compile import SubmitError, submit
    from pipelines.parameters import check_parameters

    url = server or os.environ.get("ARGO_SERVER")
    if not url:
        raise SubmitError("no Argo Server: pass --argo-server host:port or set ARGO_SERVER.")
    ns = check_namespace(namespace or os.environ.get("ARGO_NAMESPACE") or "argo", "--namespace (or ARGO_NAMESPACE)")
    params = workflow_params(param, parameter_file)
    try:  # the values as the template's rules check them, before the server is asked (as `vcpilot run` does)
        check_parameters(params)
    except ValueError as err:
        raise InputError(str(err)) from None
    name, link = submit(url, ns, token or os.environ.get("ARGO_TOKEN"), params, os.environ)  # SubmitError: reported
    if as_json:
        print_json({"name": name, "namespace": ns, "url": link})
        return
    typer.echo(name)
    typer.echo(link)
