"""The evaluate step: score the candidate beside the champion, decide with the load test, write the report.

What `vcpilot evaluate` and the pipeline's evaluate VCJob (`python -m components.evaluate`) both run. MLflow is
found from MLFLOW_TRACKING_URI (set in the pod) unless `tracking_uri` says otherwise.
"""

from __future__ import annotations

from pathlib import Path

from components.evaluate.evaluation import EvaluationReport, evaluate, read_slo_outcome
from components.evaluate.scoring import EvalSetError
from components.files import write_json
from components.tracking.steps import StepLog, log_step_run, report_metrics

__all__ = ["eval_set_of", "run_step", "step_log"]


def eval_set_of(eval_set: Path | None, dataset_dir: Path | None) -> Path:
    """The evaluation set: `eval_set`, else `<dataset_dir>/eval.jsonl`; EvalSetError when neither is given."""
    if eval_set is not None:
        return eval_set
    if dataset_dir is not None:
        return dataset_dir / "eval.jsonl"
    raise EvalSetError("no evaluation set: pass --eval-set FILE or --dataset-dir DIR holding eval.jsonl")


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
        metrics={
            **report_metrics(report.model_dump(), keys=(*figures, "examples")),
            **{f"candidate_score.{name}": value for name, value in report.candidate_by_category.items()},
            **{f"champion_score.{name}": value for name, value in (report.champion_by_category or {}).items()},
        },
        params={
            "registered_model": report.registered_model,
            "eval_set": report.eval_set,
            "base_model": report.base_model,
        },
        tags=tags,
        artifacts=(path,),
    )


def run_step(
    candidate: Path,
    eval_set: Path,
    *,
    registered_model: str = "",
    tracking_uri: str = "",
    base_model: str = "",
    margin: float = 0.0,
    loadtest_report: Path | None = None,
    slo_ttft_ms: float | None = None,
    slo_tpot_ms: float | None = None,
    report: Path | None = None,
) -> EvaluationReport:
    """Evaluate `candidate` (and the champion); with `report`, write it and record the step in MLflow.

    With a load-test report the result carries the promote verdict. Raises a VcpilotError (the eval set, a model
    directory, the load-test report, the registry) with one sentence; nothing is written then.
    """
    slo = None
    if loadtest_report is not None:
        slo = read_slo_outcome(loadtest_report, slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms)
    result = evaluate(
        candidate,
        eval_set,
        registered_model=registered_model,
        tracking_uri=tracking_uri,
        base_model=base_model,
        margin=margin,
        slo=slo,
    )
    if report is not None:
        write_json(report, result.model_dump())
        log_step_run(step_log(result, report))  # in a workflow: a child run of its MLflow run; else nothing
    return result
