"""`vcpilot evaluate`: score a model directory, and the registry's champion, on an evaluation set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["evaluate_command"]


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def evaluate_command(
    model: Annotated[Path, typer.Option("--model", help="The model directory to score (a Hugging Face causal LM).")],
    eval_set: Annotated[Path, typer.Option("--eval-set", help="JSONL with one prompt/completion object a line.")],
    registered_model: Annotated[
        str, typer.Option("--registered-model", help="Also score this registered model's champion on the same set.")
    ] = "",
    tracking_uri: Annotated[
        str, typer.Option("--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else local).")
    ] = "",
    margin: Annotated[float, typer.Option(help="How much the model must beat the champion by to be promoted.")] = 0.0,
    loadtest_report: Annotated[
        Path | None, typer.Option("--loadtest-report", help="The load test's report: adds a promote verdict.")
    ] = None,
    slo_ttft_ms: Annotated[
        float | None, typer.Option("--slo-ttft-ms", help="p95 TTFT SLO, with --loadtest-report.")
    ] = None,
    slo_tpot_ms: Annotated[
        float | None, typer.Option("--slo-tpot-ms", help="p95 TPOT SLO, with --loadtest-report.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON and nothing else.")] = False,
) -> None:
    """Exact match and perplexity of a model on an evaluation set, beside the current champion's."""
    # Imported here so that `vcpilot --help` does not wait for torch and MLflow.
    from components.evaluate.evaluation import evaluate, read_slo_outcome
    from components.evaluate.model import quiet_progress
    from components.release.registry import RegistryError

    quiet_progress()
    try:
        slo = None
        if loadtest_report is not None:
            slo = read_slo_outcome(loadtest_report, slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms)
        report = evaluate(
            model, eval_set, registered_model=registered_model, tracking_uri=tracking_uri, margin=margin, slo=slo
        )
    except (ValueError, RegistryError) as err:
        _fail(str(err))
        return
    if as_json:
        typer.echo(json.dumps(report.model_dump(), indent=2))
        return
    typer.echo(
        f"{model}: exact match {report.candidate_score:.3f}, perplexity {report.candidate_perplexity:.3f} "
        f"on {report.examples} examples of {eval_set}"
    )
    if report.champion_score is not None:
        typer.echo(
            f"champion (version {report.champion_version} of {registered_model}): exact match "
            f"{report.champion_score:.3f}, perplexity {report.champion_perplexity:.3f}"
        )
    elif registered_model:
        typer.echo(f"{registered_model} has no champion yet")
    if report.reason is not None:
        typer.echo(f"{'promote' if report.promote else 'do not promote'}: {report.reason}")
