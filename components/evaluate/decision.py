"""Whether a candidate should replace the champion: a pure function of the scores and the load test's outcome.

The pipeline's release step applies the same rule (`pipelines.rules.decide_release`) to the reports; this is
the evaluator's own verdict, written into its report when the load test's outcome is known.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from components.errors import InputError

__all__ = ["Decision", "decide", "slo_outcome"]


class Decision(BaseModel):
    """Promote or not, and why in one sentence."""

    model_config = ConfigDict(frozen=True)

    promote: bool
    reason: str


def decide(
    candidate: float,
    champion: float | None,
    margin: float,
    slo_passed: bool,
    *,
    metric: str = "exact_match",
    slo_reason: str = "the load test did not meet its SLOs",
) -> Decision:
    """Promote only a candidate that met the load test's SLOs and beats the champion by at least `margin`.

    Without a champion, meeting the SLOs is enough. A score that is not a number never wins.
    """
    if not slo_passed:
        return Decision(promote=False, reason=slo_reason)
    if math.isnan(candidate):
        return Decision(promote=False, reason=f"the candidate's {metric} is not a number")
    if champion is None:
        return Decision(promote=True, reason=f"no champion yet, and the candidate's {metric} is {candidate:g}")
    if candidate < champion + margin:
        return Decision(
            promote=False,
            reason=f"the candidate's {metric} {candidate:g} does not beat the champion's {champion:g} by {margin:g}",
        )
    return Decision(
        promote=True, reason=f"the candidate's {metric} {candidate:g} beats the champion's {champion:g} by {margin:g}"
    )


def slo_outcome(loadtest: Mapping[str, Any], *, slo_ttft_ms: float, slo_tpot_ms: float) -> tuple[bool, str]:
    """Whether a load-test report (`ttft_p95_ms`, `tpot_p95_ms`, `errors`) met the SLOs, and why not if not."""
    missing = [key for key in ("ttft_p95_ms", "tpot_p95_ms") if not isinstance(loadtest.get(key), int | float)]
    if missing:
        raise InputError(f"the load-test report has no number for {', '.join(missing)}")
    errors = loadtest.get("errors", 0)
    if errors:
        return False, f"{errors} load-test requests failed"
    for name, measured, slo in (
        ("TTFT", float(loadtest["ttft_p95_ms"]), slo_ttft_ms),
        ("TPOT", float(loadtest["tpot_p95_ms"]), slo_tpot_ms),
    ):
        if measured > slo:
            return False, f"p95 {name} {measured:g} ms is over its SLO of {slo:g} ms"
    return True, "the load test met its SLOs"
