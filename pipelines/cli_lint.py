"""`vcpilot lint FILE…`: Argo's schema and the controller's own rules, one line per problem."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated

import typer

from pipelines.lint import find_schema, lint_files

__all__ = ["lint"]


def lint(
    files: Annotated[list[Path], typer.Argument(help="Workflow, WorkflowTemplate or CronWorkflow YAML files.")],
    schema: Annotated[
        Path | None, typer.Option(help="Argo's JSON schema (default: ../shared/schemas/argo-v4.1.2/schema.json).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document and nothing else.")] = False,
) -> None:
    """Validate Argo workflow files; exit 1 when any problem is found."""
    schema_path = schema or find_schema()
    problems = lint_files(files, schema_path=schema_path)
    if as_json:
        document = {
            "ok": not problems,
            "files": [str(f) for f in files],
            "schema": str(schema_path) if schema_path else None,
            "problems": [dataclasses.asdict(p) for p in problems],
        }
        print(json.dumps(document, indent=2))
        if problems:
            raise typer.Exit(1)
        return
    for problem in problems:
        print(problem)
    if schema_path is None:
        typer.echo("note: Argo's JSON schema was not found; only the controller's rules were checked.", err=True)
    if problems:
        raise typer.Exit(1)
    typer.echo(f"{len(files)} file(s) OK", err=True)
