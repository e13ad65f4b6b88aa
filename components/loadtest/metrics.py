"""The figures of a load test, computed purely from its request records (vLLM `benchmarks/serve.py` definitions).

- TTFT: time to the first text chunk. TPOT: (latency - TTFT) / (output tokens - 1), over requests with more
  than one output token. ITL: every gap between consecutive text chunks. E2EL: end-to-end latency.
- Throughput: completed requests and output tokens per second of the run's wall time.
- Goodput: completed requests per second that met every given SLO (TPOT counts as 0 for a one-token answer).
Failed requests count only as errors. Percentiles interpolate linearly between order statistics (numpy's default).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from components.loadtest.records import RequestRecord

__all__ = ["PERCENTILES", "Distribution", "LoadMetrics", "Slo", "calculate_metrics", "percentile", "report_fields"]

PERCENTILES = (50, 90, 95, 99)


class Slo(BaseModel):
    """Service-level objectives in milliseconds (None: not constrained) and how the gate applies them."""

    model_config = ConfigDict(frozen=True, allow_inf_nan=False)  # an SLO of inf ms holds nothing; leave it out

    ttft_ms: float | None = Field(default=None, gt=0)
    tpot_ms: float | None = Field(default=None, gt=0)
    e2el_ms: float | None = Field(default=None, gt=0)
    percentile: int = Field(default=95, description="the percentile the gate compares with each SLO")
    max_errors: int = Field(default=0, ge=0)

    @field_validator("percentile")
    @classmethod
    def _computed(cls, q: int) -> int:
        if q not in PERCENTILES:
            raise ValueError(f"the SLO percentile must be one of {', '.join(map(str, PERCENTILES))}")
        return q

    @property
    def limits(self) -> dict[str, float]:
        """The constrained metrics and their limits, e.g. {"ttft": 500.0}."""
        given = {"ttft": self.ttft_ms, "tpot": self.tpot_ms, "e2el": self.e2el_ms}
        return {name: limit for name, limit in given.items() if limit is not None}

    def met_by(self, record: RequestRecord) -> bool:
        """Whether one completed request met every SLO (what goodput counts)."""
        observed = {"ttft": record.ttft_ms, "tpot": record.tpot_ms, "e2el": record.latency_ms}
        return record.ok and all(observed[name] <= limit for name, limit in self.limits.items())


class Distribution(BaseModel):
    """Mean and percentiles of one latency metric, in milliseconds (all 0 when nothing was measured)."""

    model_config = ConfigDict(frozen=True)

    count: int = 0
    mean: float = 0.0
    p50: float = 0.0
    p90: float = 0.0
    p95: float = 0.0
    p99: float = 0.0

    def at(self, q: int) -> float:
        """The q-th percentile, for q in PERCENTILES."""
        if q not in PERCENTILES:
            raise ValueError(f"percentile {q} is not computed; use one of {PERCENTILES}")
        return float(getattr(self, f"p{q}"))


class LoadMetrics(BaseModel):
    """Everything a load test measured."""

    model_config = ConfigDict(frozen=True)

    requests: int
    completed: int
    errors: int
    duration_s: float
    request_throughput_rps: float
    output_throughput_tps: float
    total_token_throughput_tps: float
    total_prompt_tokens: int
    total_output_tokens: int
    goodput_rps: float | None  # None when no SLO was given
    ttft_ms: Distribution
    tpot_ms: Distribution
    itl_ms: Distribution
    e2el_ms: Distribution
    top_errors: dict[str, int] = Field(default_factory=dict)  # the most frequent error messages and their counts


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation between order statistics; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _distribution(values: Sequence[float]) -> Distribution:
    if not values:
        return Distribution()
    stats = {f"p{q}": percentile(values, q) for q in PERCENTILES}
    return Distribution(count=len(values), mean=math.fsum(values) / len(values), **stats)


def calculate_metrics(records: Sequence[RequestRecord], duration_s: float, slo: Slo | None = None) -> LoadMetrics:
    """The figures of a run from its records and wall time; goodput only when `slo` constrains something."""
    done = [r for r in records if r.ok]
    failed = Counter(r.error for r in records if r.error is not None)
    output_tokens = sum(r.output_tokens for r in done)
    prompt_tokens = sum(r.prompt_tokens for r in done)
    per_second = 1.0 / duration_s if duration_s > 0 else 0.0
    goodput = None
    if slo is not None and slo.limits:
        goodput = sum(1 for r in done if slo.met_by(r)) * per_second
    return LoadMetrics(
        requests=len(records),
        completed=len(done),
        errors=len(records) - len(done),
        duration_s=duration_s,
        request_throughput_rps=len(done) * per_second,
        output_throughput_tps=output_tokens * per_second,
        total_token_throughput_tps=(output_tokens + prompt_tokens) * per_second,
        total_prompt_tokens=prompt_tokens,
        total_output_tokens=output_tokens,
        goodput_rps=goodput,
        ttft_ms=_distribution([r.ttft_ms for r in done]),
        tpot_ms=_distribution([r.tpot_ms for r in done if r.output_tokens > 1]),
        itl_ms=_distribution([gap for r in done for gap in r.itl_ms]),
        e2el_ms=_distribution([r.latency_ms for r in done]),
        top_errors=dict(failed.most_common(3)),
    )


def report_fields(metrics: LoadMetrics) -> dict[str, Any]:
    """The metrics as one flat JSON object: scalars as they are, distributions as `ttft_p95_ms` and so on."""
    flat: dict[str, Any] = {}
    for name, value in metrics:
        if isinstance(value, Distribution):
            metric = name.removesuffix("_ms")
            flat.update({f"{metric}_{stat}_ms": figure for stat, figure in value if stat != "count"})
        else:
            flat[name] = value
    return flat
