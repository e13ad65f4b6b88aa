"""Closed- and open-loop runs against an in-process fake server (httpx.MockTransport)."""

from __future__ import annotations

import asyncio
import json
import random

import httpx
import pytest
from pydantic import ValidationError

from components.loadtest.arrivals import arrival_offsets
from components.loadtest.client import parse_target
from components.loadtest.dataset import synthetic_requests
from components.loadtest.metrics import calculate_metrics
from components.loadtest.runner import LoadPlan, run_load

TARGET = parse_target("http://fake:8000")
OK = b'data: {"choices":[{"text":"ok"}]}\n\ndata: [DONE]\n\n'


class FlakyServer:
    """Every third request fails with a 500; tracks how many requests were in flight at once."""

    def __init__(self):
        self.in_flight = self.peak = self.seen = 0

    async def __call__(self, request):
        self.seen += 1
        number = int(json.loads(request.content)["prompt"].split()[0])
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(0)  # let the other requests in
        await asyncio.sleep(0)
        self.in_flight -= 1
        if number % 3 == 2:
            return httpx.Response(500, json={"error": {"message": f"request {number} failed"}})
        return httpx.Response(200, content=OK)


def specs(n):
    return [s.model_copy(update={"prompt": f"{i} {s.prompt}"}) for i, s in enumerate(synthetic_requests(n))]


def run(plan, server, **kwargs):
    def connect():
        return httpx.AsyncClient(transport=httpx.MockTransport(server))

    return asyncio.run(run_load(plan, specs(plan.requests), TARGET, connect, **kwargs))


def test_a_server_that_fails_some_requests_yields_error_counts_not_a_crash():
    server = FlakyServer()
    result = run(LoadPlan(requests=30, concurrency=4), server)
    assert len(result.records) == 30 and server.seen == 30
    assert [r.index for r in result.records] == list(range(30))
    failed = [r for r in result.records if not r.ok]
    assert len(failed) == 10 and all(r.error.startswith("HTTP 500: request ") for r in failed)
    metrics = calculate_metrics(result.records, result.duration_s)
    assert (metrics.completed, metrics.errors) == (20, 10)
    assert metrics.total_output_tokens == 20


def test_closed_loop_keeps_exactly_the_concurrency_in_flight():
    server = FlakyServer()
    run(LoadPlan(requests=40, concurrency=5), server)
    assert server.peak == 5


def test_open_loop_sends_on_the_arrival_schedule_of_its_seed():
    now = [0.0]

    async def sleep(seconds):
        await asyncio.sleep(0)  # as a real sleep does, let the requests released so far start first
        now[0] += seconds

    plan = LoadPlan(requests=50, rate=20.0, burstiness=0.5, seed=9)
    result = run(plan, FlakyServer(), clock=lambda: now[0], sleep=sleep)
    expected = arrival_offsets(50, 20.0, 0.5, random.Random(9))
    assert [r.start_s for r in result.records] == pytest.approx(expected)
    assert result.duration_s == pytest.approx(expected[-1])


def test_a_rate_with_a_concurrency_cap_never_exceeds_the_cap():
    server = FlakyServer()
    run(LoadPlan(requests=30, rate=float("inf"), concurrency=3), server)
    assert server.peak == 3
    uncapped = FlakyServer()
    run(LoadPlan(requests=30, rate=float("inf")), uncapped)
    assert uncapped.peak > 3


def test_a_plan_needs_a_concurrency_or_a_rate():
    with pytest.raises(ValidationError, match="--concurrency C"):
        LoadPlan(requests=3)
    with pytest.raises(ValidationError):
        LoadPlan(requests=0, concurrency=1)
