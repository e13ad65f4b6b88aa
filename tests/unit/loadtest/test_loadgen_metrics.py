"""The figures of a load test and its SLO gate, checked against values computed by hand."""

from __future__ import annotations

import random

import numpy as np
import pytest

from components.loadtest.gate import check_slo
from components.loadtest.metrics import Slo, calculate_metrics, percentile, report_fields
from components.loadtest.records import RequestRecord


def rec(index, ttft, latency, tokens, itl=(), error=None):
    return RequestRecord(
        index=index, start_s=index * 0.1, ttft_ms=ttft, latency_ms=latency, output_tokens=tokens, itl_ms=itl,
        prompt_tokens=7, error=error,
    )  # fmt: skip


RECORDS = [
    rec(0, 10, 50, 5, (10,) * 4),  # TPOT (50-10)/4 = 10
    rec(1, 20, 20, 1),  # one token: no TPOT, counts as 0 for goodput
    rec(2, 30, 230, 11, (20,) * 10),  # TPOT 200/10 = 20
    rec(3, 40, 100, 3, (30,) * 2),  # TPOT 60/2 = 30
    RequestRecord(index=4, start_s=0.4, error="HTTP 500: boom"),
]


def test_percentiles_match_hand_computed_values():
    m = calculate_metrics(RECORDS, duration_s=2.0)
    # TTFT of the 4 completed requests [10, 20, 30, 40]: rank = (n-1)q/100, linear between neighbours.
    assert (m.ttft_ms.mean, m.ttft_ms.p50, m.ttft_ms.p90, m.ttft_ms.p95, m.ttft_ms.p99) == pytest.approx(
        (25, 25, 37, 38.5, 39.7)
    )
    # TPOT over requests with more than one token: [10, 20, 30].
    assert m.tpot_ms.count == 3
    assert (m.tpot_ms.mean, m.tpot_ms.p50, m.tpot_ms.p90, m.tpot_ms.p95, m.tpot_ms.p99) == pytest.approx(
        (20, 20, 28, 29, 29.8)
    )
    # ITL: every gap, 4x10 + 10x20 + 2x30.
    assert m.itl_ms.count == 16
    assert (m.itl_ms.mean, m.itl_ms.p50, m.itl_ms.p90, m.itl_ms.p95) == pytest.approx((18.75, 20, 25, 30))
    # End-to-end latency [20, 50, 100, 230].
    assert (m.e2el_ms.mean, m.e2el_ms.p50, m.e2el_ms.p90, m.e2el_ms.p95, m.e2el_ms.p99) == pytest.approx(
        (100, 75, 191, 210.5, 226.1)
    )


def test_throughput_counts_completed_requests_and_errors_apart():
    m = calculate_metrics(RECORDS, duration_s=2.0)
    assert (m.requests, m.completed, m.errors) == (5, 4, 1)
    assert m.request_throughput_rps == pytest.approx(2.0)
    assert m.total_output_tokens == 20 and m.output_throughput_tps == pytest.approx(10.0)
    assert m.total_token_throughput_tps == pytest.approx((20 + 4 * 7) / 2)
    assert m.top_errors == {"HTTP 500: boom": 1}
    assert m.goodput_rps is None, "no SLO, no goodput"


def test_goodput_counts_requests_meeting_every_slo():
    assert calculate_metrics(RECORDS, 2.0, Slo(ttft_ms=35, tpot_ms=25)).goodput_rps == pytest.approx(3 / 2)
    # The one-token request has TPOT 0 and stays good; request 2 (TPOT 20) no longer is.
    assert calculate_metrics(RECORDS, 2.0, Slo(ttft_ms=35, tpot_ms=15)).goodput_rps == pytest.approx(2 / 2)
    assert calculate_metrics(RECORDS, 2.0, Slo(e2el_ms=60)).goodput_rps == pytest.approx(2 / 2)


def test_percentile_agrees_with_numpy():
    rng = random.Random(7)
    for size in (1, 2, 5, 101):
        values = [rng.expovariate(0.1) for _ in range(size)]
        for q in (0, 50, 90, 95, 99, 100):
            assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))
    assert percentile([], 95) == 0.0


def test_report_is_flat_and_keeps_the_pipeline_fields():
    fields = report_fields(calculate_metrics(RECORDS, 2.0, Slo(ttft_ms=35)))
    assert fields["ttft_p95_ms"] == pytest.approx(38.5)
    assert fields["tpot_p95_ms"] == pytest.approx(29)
    assert fields["errors"] == 1
    assert {"e2el_p50_ms", "itl_p99_ms", "tpot_mean_ms", "goodput_rps", "request_throughput_rps"} <= fields.keys()
    assert not any(isinstance(v, dict) and k != "top_errors" for k, v in fields.items())


def test_nothing_completed_gives_zeros_not_a_crash():
    failed = [RequestRecord(index=i, start_s=0, error="ConnectError") for i in range(3)]
    m = calculate_metrics(failed, 1.0, Slo(ttft_ms=100))
    assert (m.completed, m.errors, m.ttft_ms.p95, m.goodput_rps) == (0, 3, 0.0, 0.0)
    verdict = check_slo(m, Slo(ttft_ms=100))
    assert not verdict.passed and "no request completed" in verdict.reason and "ConnectError" in verdict.reason


def test_gate_says_which_slo_failed_and_why():
    m = calculate_metrics(RECORDS, 2.0)
    verdict = check_slo(m, Slo(ttft_ms=35, tpot_ms=50))
    assert not verdict.passed
    assert "p95 TTFT is 38.5 ms, above the 35 ms SLO" in verdict.reason
    assert "1 of 5 requests failed" in verdict.reason and "HTTP 500: boom" in verdict.reason
    assert "TPOT" not in verdict.reason, "only what failed is named"
    assert "\n" not in verdict.reason


def test_gate_passes_within_the_slos_and_the_error_allowance():
    m = calculate_metrics(RECORDS, 2.0)
    verdict = check_slo(m, Slo(ttft_ms=40, tpot_ms=30, max_errors=1))
    assert verdict.passed, verdict.reason
    assert "p95 TTFT 38.5 ms <= 40 ms" in verdict.reason
    p50 = check_slo(m, Slo(ttft_ms=30, percentile=50, max_errors=1))
    assert p50.passed and "p50 TTFT 25.0 ms" in p50.reason
    assert check_slo(calculate_metrics(RECORDS[:4], 2.0), Slo()).passed


def test_slo_percentile_must_be_one_that_is_computed():
    with pytest.raises(ValueError, match="50, 90, 95, 99"):
        Slo(ttft_ms=10, percentile=75)
