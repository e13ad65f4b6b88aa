"""One evaluation: the candidate and the registry's champion scored on the same set, and the report about it.

The report keeps the fields the pipeline reads (`candidate_score`, `champion_score`, `metric`: exact match,
higher wins) and adds the perplexities, the champion's version and — when the load test's outcome is given —
the evaluator's verdict.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from components.errors import InputError
from components.evaluate.decision import decide, slo_outcome
from components.evaluate.model import CausalLM, ModelDirError
from components.evaluate.scoring import Example, LanguageModel, Scores, read_eval_set, score
from components.release.registry import CHAMPION, connect, download, find_alias
from components.tracking.adapter import resolve_uri
from components.untrusted import loads_json

__all__ = ["METRIC", "EvaluationReport", "ModelLoader", "champion_scores", "evaluate", "read_slo_outcome"]

METRIC = "exact_match"

ModelLoader = Callable[[Path], LanguageModel]


class EvaluationReport(BaseModel):
    """What `components.evaluate` writes (the pipeline reads candidate_score, champion_score and metric)."""

    candidate_score: float
    champion_score: float | None
    metric: str = METRIC
    candidate_perplexity: float
    champion_perplexity: float | None = None
    champion_version: str | None = None
    registered_model: str = ""
    examples: int
    eval_set: str
    candidate: str
    base_model: str = ""
    promote: bool | None = None
    reason: str | None = None
    candidate_by_category: dict[str, float] = Field(default_factory=dict)  # exact match per category, if any
    champion_by_category: dict[str, float] | None = None


def _load(path: Path) -> LanguageModel:
    return CausalLM.load(path)


def champion_scores(
    registered_model: str, examples: list[Example], *, tracking_uri: str, load: ModelLoader = _load
) -> tuple[Scores, str] | None:
    """The champion's scores and version, or None when `registered_model` has no champion (or does not exist).

    An empty `tracking_uri` means MLFLOW_TRACKING_URI, else the local store under VCPILOT_HOME. RegistryError
    when MLflow refuses; RegistryUnavailable (also a TrackingUnavailable) when it cannot be reached.
    """
    client = connect(resolve_uri(tracking_uri))
    version = find_alias(client, registered_model, CHAMPION)
    if version is None:
        return None
    with tempfile.TemporaryDirectory(prefix="vcpilot-champion-") as tmp:
        path = download(client, version, tmp)
        try:
            model = load(path)
        except ModelDirError as err:
            raise ModelDirError(
                f"the champion, version {version.version} of {registered_model}, cannot be loaded ({err})"
            ) from None
        return score(model, examples), version.version


def evaluate(
    candidate: str | Path,
    eval_set: str | Path,
    *,
    registered_model: str = "",
    tracking_uri: str = "",
    base_model: str = "",
    margin: float = 0.0,
    slo: tuple[bool, str] | None = None,
    load: ModelLoader = _load,
) -> EvaluationReport:
    """Score `candidate` and the champion of `registered_model` (if any) on `eval_set`.

    `slo` is the load test's outcome (passed, why); with it the report carries the verdict of `decide`. Errors
    are ValueError (the eval set, a model directory) or RegistryError (MLflow), each one sentence.
    """
    examples = read_eval_set(eval_set)
    candidate_scores = score(load(Path(candidate)), examples)
    champion = (
        champion_scores(registered_model, examples, tracking_uri=tracking_uri, load=load) if registered_model else None
    )
    champion_value = champion[0].exact_match if champion else None
    report = EvaluationReport(
        candidate_score=candidate_scores.exact_match,
        champion_score=champion_value,
        candidate_perplexity=candidate_scores.perplexity,
        champion_perplexity=champion[0].perplexity if champion else None,
        champion_version=champion[1] if champion else None,
        registered_model=registered_model,
        examples=candidate_scores.examples,
        eval_set=str(eval_set),
        candidate=str(candidate),
        base_model=base_model,
        candidate_by_category=candidate_scores.by_category,
        champion_by_category=champion[0].by_category if champion else None,
    )
    if slo is not None:
        decision = decide(report.candidate_score, champion_value, margin, slo[0], metric=METRIC, slo_reason=slo[1])
        report = report.model_copy(update=decision.model_dump())
    return report


def read_slo_outcome(path: str | Path, *, slo_ttft_ms: float | None, slo_tpot_ms: float | None) -> tuple[bool, str]:
    """Whether the load-test report at `path` met the SLOs; ValueError (one sentence) when it cannot say."""
    if slo_ttft_ms is None or slo_tpot_ms is None:
        raise InputError("a load-test report needs both --slo-ttft-ms and --slo-tpot-ms to be judged")
    file = Path(path)
    if not file.is_file():
        raise InputError(f"the load-test report {file} {'is not a file' if file.exists() else 'does not exist'}")
    try:
        data = loads_json(file.read_text())
    except ValueError:  # not UTF-8, not JSON, or nested too deeply to read
        raise InputError(f"the load-test report {file} is not JSON") from None
    if not isinstance(data, dict):
        raise InputError(f"the load-test report {file} is not a JSON object")
    try:
        return slo_outcome(data, slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms)
    except ValueError as err:
        raise InputError(f"{err} ({file})") from None
