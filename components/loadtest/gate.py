"""The SLO gate: did the load test pass, and why (or why not) in one sentence a release note can quote."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from components.loadtest.metrics import LoadMetrics, Slo

__all__ = ["SloVerdict", "check_slo"]

_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "e2el": "end-to-end latency"}


class SloVerdict(BaseModel):
    """Whether the run met its SLOs, and the reason."""

    model_config = ConfigDict(frozen=True)

    passed: bool
    reason: str


def check_slo(metrics: LoadMetrics, slo: Slo) -> SloVerdict:
    """Pass when no more than `slo.max_errors` requests failed and each given SLO holds at `slo.percentile`."""
    if metrics.completed == 0:
        first = next(iter(metrics.top_errors), "no request was sent")
        return SloVerdict(passed=False, reason=f"no request completed ({metrics.errors} failed; first error: {first})")
    problems, fine = [], []
    if metrics.errors > slo.max_errors:
        common = next(iter(metrics.top_errors))
        allowed = f"more than the {slo.max_errors} allowed" if slo.max_errors else "none are allowed"
        problems.append(f"{metrics.errors} of {metrics.requests} requests failed ({allowed}; most often: {common})")
    for name, limit in slo.limits.items():
        observed = getattr(metrics, f"{name}_ms").at(slo.percentile)
        label = f"p{slo.percentile} {_NAMES[name]}"
        if observed > limit:
            problems.append(f"{label} is {observed:.1f} ms, above the {limit:g} ms SLO")
        else:
            fine.append(f"{label} {observed:.1f} ms <= {limit:g} ms")
    if problems:
        return SloVerdict(passed=False, reason="; ".join(problems))
    errors = f"{metrics.errors} errors (at most {slo.max_errors} allowed)" if metrics.errors else "no errors"
    met = ", ".join(fine) if fine else "no latency SLO given"
    return SloVerdict(passed=True, reason=f"{met}; {errors}")
