"""`vcpilot release register | rollback | show` and `python -m components.release`: the registry's champion.

The pod's spelling, `python -m components.release --model DIR --registered-model NAME --report FILE`, is
`register` (the command that runs when none is named): it registers the model with its lineage (the workflow from
VCPILOT_WORKFLOW, MLflow from MLFLOW_TRACKING_URI and MLFLOW_EXPERIMENT_NAME), promotes it unless `--no-promote`,
and writes what it did to the report. The work is in components/release/register.py, verdict.py and
registry.py; exit codes are every step program's (components/errors.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from components.entry import JsonOption, new_app

if TYPE_CHECKING:
    from components.release.registry import RegistryView

__all__ = ["app", "register_command", "render_view", "rollback_command", "show_command"]

app = new_app(help="Model versions in the MLflow registry: register with lineage, roll back, show.")


def _model_name(name: str) -> str:
    """MLflow refuses an empty registered model name; say so before anything talks to it."""
    if not name.strip():
        raise typer.BadParameter("is empty; give the registered model's name", param_hint="--registered-model")
    return name


Name = Annotated[str, typer.Option("--registered-model", help="The MLflow registered model.", callback=_model_name)]
TrackingUri = Annotated[
    str, typer.Option("--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else local).")
]
JsonFlag = JsonOption


@app.command("register")
def register_command(
    model: Annotated[Path, typer.Option("--model", help="The model directory to register (its files are logged).")],
    name: Name,
    dataset: Annotated[
        Path | None, typer.Option("--dataset", help="The training set (file, or directory with train.jsonl).")
    ] = None,
    base_model: Annotated[str, typer.Option("--base-model", help="The model it was fine-tuned from.")] = "",
    checkpoint: Annotated[str, typer.Option("--checkpoint", help="The checkpoint it was exported from.")] = "",
    training_run: Annotated[
        str, typer.Option("--training-run", help="The MLflow run that trained it (default: the workflow's last).")
    ] = "",
    evaluation: Annotated[
        Path | None,
        typer.Option("--evaluation", "--metrics", help="The evaluate report: scores and perplexities."),
    ] = None,
    loadtest: Annotated[
        Path | None, typer.Option("--loadtest", help="The load-test report: p95 TTFT/TPOT, goodput, errors.")
    ] = None,
    slo_ttft_ms: Annotated[float | None, typer.Option("--slo-ttft-ms", help="The TTFT SLO it was held to.")] = None,
    slo_tpot_ms: Annotated[float | None, typer.Option("--slo-tpot-ms", help="The TPOT SLO it was held to.")] = None,
    margin: Annotated[float | None, typer.Option("--margin", help="The margin it had to beat the champion by.")] = None,
    reason: Annotated[str, typer.Option("--reason", help="Why it is (not) promoted, in a sentence.")] = "",
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
    """Register a model directory as a new version with its lineage and scores, and make it the champion."""
    from pydantic import ValidationError

    from components.entry import option_error
    from components.errors import InputError
    from components.files import check_output, refuse_overwriting, write_json
    from components.names import run_name_problem
    from components.release.register import register_model
    from components.release.verdict import Bars, Verdict, read_scores

    try:
        bars = Bars(slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms, margin=margin)
    except ValidationError as err:
        raise option_error(err) from None
    if workflow and (problem := run_name_problem(workflow)):  # the one rule for run names (components.names)
        raise InputError(f"--workflow {problem}")
    if report is not None:
        check_output(report, "--report")
        inputs = [(model, "the model"), (dataset, "the data set"), (evaluation, "the evaluation report")]
        inputs.append((loadtest, "the load-test report"))
        refuse_overwriting([(path, what) for path, what in inputs if path is not None], [(report, "--report")])
    verdict = Verdict(promoted=promote, reason=reason, scores=read_scores(evaluation, loadtest), bars=bars)
    done = register_model(
        model,
        name,
        dataset=dataset,
        base_model=base_model,
        checkpoint=checkpoint,
        training_run=training_run,
        verdict=verdict,
        workflow=workflow,
        experiment=experiment,
        tracking_uri=tracking_uri,
    )
    if report is not None:
        write_json(report, done.model_dump(mode="json"))
    if as_json:
        typer.echo(done.model_dump_json(indent=2))
        return
    moved = f"champion is now {done.champion}" + (f", previous {done.previous}" if done.previous else "")
    typer.echo(f"registered {model} as version {done.version} of {name}; {moved if done.promoted else 'no alias'}")
    typer.echo(done.description)


@app.command("rollback")
def rollback_command(name: Name, tracking_uri: TrackingUri = "", as_json: JsonFlag = False) -> None:
    """Make `previous` the champion again (and `previous` the version that one had replaced, if any)."""
    from components.release.registry import connect, rollback
    from components.tracking.adapter import quiet, resolve_uri

    quiet()
    done = rollback(connect(resolve_uri(tracking_uri), create=False), name)
    if as_json:
        typer.echo(done.model_dump_json(indent=2))
        return
    previous = f"previous is {done.previous}" if done.previous else "there is no previous version now"
    typer.echo(f"{name}: champion is version {done.champion} again (was {done.rolled_back}); {previous}")


@app.command("show")
def show_command(name: Name, tracking_uri: TrackingUri = "", as_json: JsonFlag = False) -> None:
    """Show what the model is, where the aliases point, and every version with its lineage, scores and verdict."""
    from components.release.registry import connect, view
    from components.tracking.adapter import quiet, resolve_uri

    quiet()
    shown = view(connect(resolve_uri(tracking_uri), create=False), name)
    if as_json:
        typer.echo(json.dumps(shown.model_dump(), indent=2))
        return
    typer.echo(render_view(shown))


_LINEAGE = {  # tag → how `show` names it, in the order it prints them
    "vcpilot.workflow": "workflow",
    "vcpilot.parent_run": "workflow run",
    "vcpilot.training_run": "training run",
    "vcpilot.dataset_digest": "dataset",
    "vcpilot.base_model": "base",
    "vcpilot.checkpoint": "checkpoint",
    "vcpilot.replaced": "replaced",
}


def render_view(shown: RegistryView) -> str:
    """`release show` as text: the model's description and aliases, then each version in a few lines."""
    from components.release.verdict import BAR_PREFIX, METRIC_PREFIX

    aliases = ", ".join(f"{alias} → {version}" for alias, version in sorted(shown.aliases.items())) or "none"
    lines = [shown.name] + ([f"  {shown.description}"] if shown.description else []) + [f"  aliases: {aliases}"]
    for v in shown.versions:
        status = f" ({v.status})" if v.status != "READY" else ""
        lines += ["", f"version {v.version}" + (f" [{', '.join(v.aliases)}]" if v.aliases else "") + status]
        runs = [f"release run {v.run_id}"] if v.run_id else []
        where = runs + [f"{label} {v.tags[tag]}" for tag, label in _LINEAGE.items() if v.tags.get(tag)]
        if where:
            lines.append("  " + "; ".join(where))
        numbers = [
            f"{k.removeprefix(METRIC_PREFIX)}={t}" for k, t in sorted(v.tags.items()) if k.startswith(METRIC_PREFIX)
        ]
        bars = [f"{k.removeprefix(BAR_PREFIX)}={t}" for k, t in sorted(v.tags.items()) if k.startswith(BAR_PREFIX)]
        if numbers:
            lines.append("  scores: " + ", ".join(numbers))
        if bars:
            lines.append("  bars: " + ", ".join(bars))
        if v.description:
            lines.append(f"  {v.description}")
    return "\n".join(lines)
