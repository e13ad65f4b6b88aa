"""`vcpilot lint FILE…`: Argo's schema and the controller's own rules, one line per problem."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from components.entry import JsonOption, print_json
from components.errors import InputError

__all__ = ["lint"]


def lint(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="Workflow, WorkflowTemplate or CronWorkflow files (.yaml, .yml, .json), directories of them "
            "(walked), or - for standard input, as argo lint reads them."
        ),
    ],
    schema: Annotated[
        Path | None, typer.Option(help="Argo's JSON schema (default: ../shared/schemas/argo-v4.1.2/schema.json).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Validate Argo workflow files; exit 1 when any problem is found."""
    from pipelines.lint import find_schema, lint_files, load_schema, manifest_files

    if schema is not None:  # given on purpose: refused whole, not reported as one more problem of each file
        try:
            load_schema(schema, "--schema")
        except InputError:  # it cannot be read (missing, too big, not text): the sentence names --schema already
            raise
        except (OSError, ValueError) as err:
            reason = "it is empty" if schema.is_file() and schema.stat().st_size == 0 else None
            reason = reason or getattr(err, "strerror", None) or str(err)
            raise InputError(
                f"--schema {schema} is not Argo's JSON schema ({reason}); give Argo v4.1.2's schema.json"
            ) from None
    schema_path = schema or find_schema()
    linted, passed = manifest_files(files)
    # As argo lint: what it does not read is passed over, and a run that found nothing to lint fails for it.
    problems = lint_files(linted, schema_path=schema_path) if linted else passed
    if as_json:  # {files, schema, problems: [{file, path, message}]}; exit 1 when there are problems, as without
        print_json(
            {
                "ok": not problems,
                "files": [str(f) for f in linted],
                "schema": str(schema_path) if schema_path else None,
                "problems": [{"file": p.file, "path": p.path, "message": p.message} for p in problems],
            }
        )
        raise typer.Exit(1 if problems else 0)
    for problem in problems:
        print(problem)
    if schema_path is None:
        typer.echo("note: Argo's JSON schema was not found; only the controller's rules were checked.", err=True)
    if problems:
        raise typer.Exit(1)
    typer.echo(f"{len(linted)} file(s) OK", err=True)
