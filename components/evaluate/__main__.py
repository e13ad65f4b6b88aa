"""`python -m components.evaluate --candidate DIR --report FILE …`: what the pipeline's evaluate VCJob runs.

It scores the candidate and the registered model's `champion` on the evaluation set (`--eval-set`, by default
`<dataset-dir>/eval.jsonl`), writes the report the release step reads, and prints it as one JSON line. MLflow
is found from MLFLOW_TRACKING_URI (set in the pod) unless `--tracking-uri` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from components.evaluate.evaluation import EvaluationReport, evaluate, read_slo_outcome
from components.evaluate.model import quiet_progress
from components.release.registry import RegistryError
from components.tracking.steps import StepLog, log_step_run, report_metrics

__all__ = ["main", "step_log"]


def step_log(report: EvaluationReport, path: Path) -> StepLog:
    """What evaluate records in its MLflow child run: both scores and perplexities, the decision, the report."""
    figures = ("candidate_score", "champion_score", "candidate_perplexity", "champion_perplexity", "promote")
    tags = {"metric": report.metric, "candidate": report.candidate}
    if report.promote is not None:
        tags["promote"] = str(report.promote).lower()
    optional = {"reason": report.reason, "champion_version": report.champion_version}
    tags.update({key: value for key, value in optional.items() if value})
    return StepLog(
        step="evaluate",
        metrics=report_metrics(report.model_dump(), keys=(*figures, "examples")),
        params={
            "registered_model": report.registered_model,
            "eval_set": report.eval_set,
            "base_model": report.base_model,
        },
        tags=tags,
        artifacts=(path,),
    )


def _write(path: Path, report: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; the exit code says whether it worked."""
    parser = argparse.ArgumentParser(prog="python -m components.evaluate", description=__doc__.splitlines()[0])
    parser.add_argument("--candidate", type=Path, required=True, help="the candidate's model directory")
    parser.add_argument("--base-model", default="", help="the model the candidate was fine-tuned from (recorded)")
    parser.add_argument("--registered-model", default="", help="MLflow registered model whose champion to beat")
    parser.add_argument("--report", type=Path, required=True, help="where to write the JSON report")
    parser.add_argument("--eval-set", type=Path, help="JSONL of prompt/completion (default <dataset-dir>/eval.jsonl)")
    parser.add_argument("--dataset-dir", type=Path, help="directory holding eval.jsonl")
    parser.add_argument("--tracking-uri", default="", help="MLflow tracking URI (default $MLFLOW_TRACKING_URI)")
    parser.add_argument("--margin", type=float, default=0.0, help="how much the candidate must beat the champion by")
    parser.add_argument("--loadtest-report", type=Path, help="the load test's report, to decide promotion")
    parser.add_argument("--slo-ttft-ms", type=float)
    parser.add_argument("--slo-tpot-ms", type=float)
    args = parser.parse_args(argv)
    quiet_progress()  # a pod's log is not a terminal
    try:
        eval_set = args.eval_set or (args.dataset_dir / "eval.jsonl" if args.dataset_dir else None)
        if eval_set is None:
            raise ValueError("no evaluation set: pass --eval-set FILE or --dataset-dir DIR holding eval.jsonl")
        slo = None
        if args.loadtest_report:
            slo = read_slo_outcome(args.loadtest_report, slo_ttft_ms=args.slo_ttft_ms, slo_tpot_ms=args.slo_tpot_ms)
        report = evaluate(
            args.candidate,
            eval_set,
            registered_model=args.registered_model,
            tracking_uri=args.tracking_uri,
            base_model=args.base_model,
            margin=args.margin,
            slo=slo,
        )
    except (ValueError, RegistryError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    _write(args.report, report.model_dump())
    print(json.dumps(report.model_dump()))
    log_step_run(step_log(report, args.report))  # in a workflow: a child run of its MLflow run; else nothing
    return 0


if __name__ == "__main__":
    sys.exit(main())
