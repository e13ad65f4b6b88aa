"""`vcpilot release register | rollback | show` and `python -m components.release`: the registry's champion.

The pod's spelling, `python -m components.release --model DIR --registered-model NAME --report FILE`, is
`register` (the command that runs when none is named): it registers the model with its lineage (the workflow from
VCPILOT_WORKFLOW, MLflow from MLFLOW_TRACKING_URI and MLFLOW_EXPERIMENT_NAME), promotes it unless `--no-promote`,
and writes what it did to the report. The work is in components/release/register.py and registry.py; exit codes
are every step program's (components/errors.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from components.entry import reported

__all__ = ["app", "register_command", "rollback_command", "show_command"]

app = typer.Typer(
    help="Model versions in the MLflow registry: register with lineage, roll back, show.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

Name = Annotated[str, typer.Option("--registered-model", help="The MLflow registered model.")]
TrackingUri = Annotated[
    str, typer.Option("--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else local).")
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document and nothing else.")]


@app.command("register")
@reported
def register_command(
    model: Annotated[Path, typer.Option("--model", help="The model directory to register (its files are logged).")],
    name: Name,
    dataset: Annotated[
        Path | None, typer.Option("--dataset", help="The training set (file, or directory with train.jsonl).")
    ] = None,
    base_model: Annotated[str, typer.Option("--base-model", help="The model it was fine-tuned from.")] = "",
    checkpoint: Annotated[str, typer.Option("--checkpoint", help="The checkpoint it was exported from.")] = "",
    metrics: Annotated[
        Path | None, typer.Option("--metrics", help="A JSON report whose numbers become metrics (evaluate's).")
    ] = None,
    workflow: Annotated[str, typer.Option("--workflow", help="The workflow run (default: $VCPILOT_WORKFLOW).")] = "",
    experiment: Annotated[
        str, typer.Option("--experiment", help="MLflow experiment (default: $MLFLOW_EXPERIMENT_NAME or llm-autopilot).")
    ] = "",
    promote: Annotated[bool, typer.Option("--promote/--no-promote", help="Move `champion` to the new version.")] = True,
    tracking_uri: TrackingUri = "",
    report: Annotated[
        Path | None, typer.Option("--report", help="Write what was registered here, as JSON (the pipeline does).")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Register a model directory as a new version with its lineage, and make it the champion."""
    from components.files import write_json
    from components.release.register import register_model

    done = register_model(
        model,
        name,
        dataset=dataset,
        base_model=base_model,
        checkpoint=checkpoint,
        metrics=metrics,
        workflow=workflow,
        experiment=experiment,
        promote=promote,
        tracking_uri=tracking_uri,
    )
    if report is not None:
        write_json(report, done.model_dump(mode="json"))
    if as_json:
        typer.echo(done.model_dump_json(indent=2))
        return
    moved = f"champion is now {done.champion}" + (f", previous {done.previous}" if done.previous else "")
    typer.echo(f"registered {model} as version {done.version} of {name}; {moved if done.promoted else 'not promoted'}")


@app.command("rollback")
@reported
def rollback_command(name: Name, tracking_uri: TrackingUri = "", as_json: JsonFlag = False) -> None:
    """Make `previous` the champion again (and `previous` the version that one had replaced, if any)."""
    from components.release.registry import connect, rollback
    from components.tracking.adapter import quiet, resolve_uri

    quiet()
    done = rollback(connect(resolve_uri(tracking_uri)), name)
    if as_json:
        typer.echo(done.model_dump_json(indent=2))
        return
    previous = f"previous is {done.previous}" if done.previous else "there is no previous version now"
    typer.echo(f"{name}: champion is version {done.champion} again (was {done.rolled_back}); {previous}")


@app.command("show")
@reported
def show_command(name: Name, tracking_uri: TrackingUri = "", as_json: JsonFlag = False) -> None:
    """Show where the aliases point and every version with its lineage."""
    from rich.console import Console
    from rich.table import Table

    from components.release.registry import connect, view
    from components.tracking.adapter import quiet, resolve_uri

    quiet()
    shown = view(connect(resolve_uri(tracking_uri)), name)
    if as_json:
        typer.echo(json.dumps(shown.model_dump(), indent=2))
        return
    aliases = ", ".join(f"{alias} → {version}" for alias, version in sorted(shown.aliases.items())) or "none"
    table = Table("version", "aliases", "workflow", "dataset", "metrics", title=f"{name} (aliases: {aliases})")
    for v in shown.versions:
        metric_tags = {
            k.removeprefix("vcpilot.metric."): t for k, t in v.tags.items() if k.startswith("vcpilot.metric.")
        }
        table.add_row(
            v.version,
            ", ".join(v.aliases) or "-",
            v.tags.get("vcpilot.workflow", "-"),
            v.tags.get("vcpilot.dataset_digest", "-")[:19],
            ", ".join(f"{k}={t}" for k, t in sorted(metric_tags.items())) or "-",
        )
    Console().print(table)
