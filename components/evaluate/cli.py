"""`vcpilot evaluate` and `python -m components.evaluate`: one command for people and for the evaluate VCJob.

It scores a model directory, and the registered model's `champion`, on an evaluation set; with
`--loadtest-report` it adds the promote verdict, and with `--report` (what the pod passes) it writes the report
the release step reads and records the step in MLflow (components/evaluate/step.py). Exit codes are every step
program's (components/errors.py): 1 a bad input, 3 MLflow could not be reached.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from components.entry import JsonOption, new_app
from components.errors import InputError

__all__ = ["app", "evaluate_command"]


def evaluate_command(
    model: Annotated[
        Path, typer.Option("--model", "--candidate", help="The model directory to score (a Hugging Face causal LM).")
    ],
    eval_set: Annotated[
        Path | None, typer.Option("--eval-set", help="JSONL with one prompt/completion object a line.")
    ] = None,
    dataset_dir: Annotated[
        Path | None, typer.Option("--dataset-dir", help="A directory holding eval.jsonl (instead of --eval-set).")
    ] = None,
    registered_model: Annotated[
        str, typer.Option("--registered-model", help="Also score this registered model's champion on the same set.")
    ] = "",
    base_model: Annotated[
        str, typer.Option("--base-model", help="The model the candidate was fine-tuned from (recorded).")
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
    report: Annotated[
        Path | None, typer.Option("--report", help="Write the JSON report here (the pipeline's step does).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Exact match and perplexity of a model on an evaluation set, beside the current champion's."""
    # Imported here so that `vcpilot --help` does not wait for torch and MLflow.
    from pydantic import ValidationError

    from components.entry import option_error
    from components.evaluate.model import quiet_progress
    from components.evaluate.step import eval_set_of, run_step
    from components.files import check_output, refuse_overwriting
    from components.release.verdict import Bars
    from components.tracking.adapter import configured_uri

    if eval_set is not None and dataset_dir is not None:
        raise InputError("--eval-set and --dataset-dir both name the evaluation set; give one of them")
    try:  # before a model loads: an SLO or a margin that is no finite number judges nothing
        Bars(slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms, margin=margin)
    except ValidationError as err:
        raise option_error(err) from None
    if report is not None:
        check_output(report, "--report")
        read = eval_set or (dataset_dir / "eval.jsonl" if dataset_dir is not None else None)
        inputs = [(model, "the model"), (read, "the evaluation set"), (loadtest_report, "the load-test report")]
        refuse_overwriting([(path, what) for path, what in inputs if path is not None], [(report, "--report")])
    configured_uri(tracking_uri)  # a URI MLflow cannot use, refused before a model loads
    quiet_progress()  # a pod's log is not a terminal, and a person wants the figures, not progress bars
    examples = eval_set_of(eval_set, dataset_dir)
    result = run_step(
        model,
        examples,
        registered_model=registered_model,
        tracking_uri=tracking_uri,
        base_model=base_model,
        margin=margin,
        loadtest_report=loadtest_report,
        slo_ttft_ms=slo_ttft_ms,
        slo_tpot_ms=slo_tpot_ms,
        report=report,
    )
    if as_json:
        typer.echo(json.dumps(result.model_dump(), indent=2))
        return
    typer.echo(
        f"{model}: exact match {result.candidate_score:.3f}, perplexity {result.candidate_perplexity:.3f} "
        f"on {result.examples} examples of {examples}"
    )
    if result.champion_score is not None:
        typer.echo(
            f"champion (version {result.champion_version} of {registered_model}): exact match "
            f"{result.champion_score:.3f}, perplexity {result.champion_perplexity:.3f}"
        )
    elif registered_model:
        typer.echo(f"{registered_model} has no champion yet")
    if result.reason is not None:
        typer.echo(f"{'promote' if result.promote else 'do not promote'}: {result.reason}")
    if report is not None:
        typer.echo(f"report: {report}")


app = new_app()
app.command()(evaluate_command)
