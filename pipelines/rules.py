"""The rules of the pipeline's own deciding steps: pure functions of typed inputs.

gate (train or not) and release (promote or not) each call one function here; the workspace reports they read
are modelled here too, as the contract with the step programs in `components/` that write them. How to train and
what a failed attempt calls for are the agent's decisions (`agent/`, called by `pipelines.steps_training`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = [
    "DetectReport",
    "EvaluationReport",
    "GateDecision",
    "LoadtestReport",
    "ReleaseDecision",
    "decide_gate",
    "decide_release",
]


class _Report(BaseModel):
    model_config = ConfigDict(extra="allow")


class DetectReport(_Report):
    """What `components.logs` writes: whether the service drifted, and why."""

    drift: bool
    reason: str = ""


class LoadtestReport(_Report):
    """What the loadtest client writes: latency percentiles against the candidate's server."""

    ttft_p95_ms: float
    tpot_p95_ms: float
    errors: int = 0


class EvaluationReport(_Report):
    """What `components.evaluate` writes: candidate and champion scores (None: no champion yet); higher wins."""

    candidate_score: float
    champion_score: float | None = None
    metric: str = "score"


class _Decision(BaseModel):
    model_config = ConfigDict(frozen=True)


class GateDecision(_Decision):
    """Whether this run fine-tunes, and why."""

    trigger: bool
    reason: str


class ReleaseDecision(_Decision):
    """Whether the candidate becomes the champion, and why."""

    released: bool
    reason: str


def decide_gate(mode: str, report: DetectReport | None) -> GateDecision:
    """Mode force always trains; dry-run never does, after saying what auto would do; auto follows the drift."""
    if mode == "force":
        return GateDecision(trigger=True, reason="mode is force: fine-tuning whatever the logs say")
    if report is None:
        raise ValueError(f"mode {mode} needs the detect report, and there is none")
    finding = (
        f"the logs show drift ({report.reason or 'no reason given'})" if report.drift else "the logs show no drift"
    )
    if mode == "dry-run":
        action = "fine-tune" if report.drift else "do nothing"
        return GateDecision(trigger=False, reason=f"dry-run: {finding}, so auto mode would {action}")
    return GateDecision(trigger=report.drift, reason=finding)


def decide_release(
    loadtest: LoadtestReport, evaluation: EvaluationReport, *, slo_ttft_ms: float, slo_tpot_ms: float, margin: float
) -> ReleaseDecision:
    """Promote only a candidate that meets both latency SLOs and beats the champion by at least `margin`."""
    if loadtest.errors:
        return ReleaseDecision(released=False, reason=f"{loadtest.errors} load-test requests failed")
    for name, measured, slo in (
        ("TTFT", loadtest.ttft_p95_ms, slo_ttft_ms),
        ("TPOT", loadtest.tpot_p95_ms, slo_tpot_ms),
    ):
        if measured > slo:
            return ReleaseDecision(released=False, reason=f"p95 {name} {measured:g} ms is over its SLO of {slo:g} ms")
    metric, candidate, champion = evaluation.metric, evaluation.candidate_score, evaluation.champion_score
    if champion is None:
        return ReleaseDecision(released=True, reason=f"no champion yet; the candidate's {metric} is {candidate:g}")
    if candidate < champion + margin:
        return ReleaseDecision(
            released=False, reason=f"the candidate's {metric} {candidate:g} does not beat {champion:g} by {margin:g}"
        )
    return ReleaseDecision(released=True, reason=f"the candidate's {metric} {candidate:g} beats {champion:g}")
