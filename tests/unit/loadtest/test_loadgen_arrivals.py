"""Arrival processes: Poisson/gamma statistics from a seeded RNG, and pacing on an injected clock."""

from __future__ import annotations

import asyncio
import math
import random
import statistics

import pytest

from components.loadtest.arrivals import arrival_offsets, paced


def gaps(offsets):
    return [b - a for a, b in zip(offsets, offsets[1:], strict=False)]


def test_poisson_arrivals_have_the_requested_mean_rate_and_exponential_spread():
    offsets = arrival_offsets(20_000, rate=25.0, burstiness=1.0, rng=random.Random(1))
    assert offsets[0] == 0.0
    rate = (len(offsets) - 1) / offsets[-1]
    assert rate == pytest.approx(25.0, rel=0.03)
    g = gaps(offsets)
    assert statistics.pstdev(g) / statistics.fmean(g) == pytest.approx(1.0, rel=0.05)  # exponential: CV = 1


@pytest.mark.parametrize("burstiness", [0.25, 4.0])
def test_gamma_arrivals_keep_the_rate_and_change_the_burstiness(burstiness):
    g = gaps(arrival_offsets(20_000, rate=10.0, burstiness=burstiness, rng=random.Random(2)))
    assert statistics.fmean(g) == pytest.approx(0.1, rel=0.05)
    assert statistics.pstdev(g) / statistics.fmean(g) == pytest.approx(1 / math.sqrt(burstiness), rel=0.07)


def test_same_seed_same_schedule_and_infinite_rate_sends_at_once():
    assert arrival_offsets(50, 3.0, rng=random.Random(5)) == arrival_offsets(50, 3.0, rng=random.Random(5))
    assert arrival_offsets(4, math.inf) == [0.0] * 4
    with pytest.raises(ValueError, match="rate must be positive"):
        arrival_offsets(4, 0.0)
    with pytest.raises(ValueError, match="burstiness"):
        arrival_offsets(4, 1.0, burstiness=0)


class FakeClock:
    """Time that only moves when someone sleeps (or does work that we say took time)."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now

    async def sleep(self, seconds):
        self.now += seconds


def test_pacing_releases_each_request_at_its_offset_without_waiting_for_real():
    offsets = arrival_offsets(2_000, rate=50.0, rng=random.Random(3))
    clock = FakeClock()

    async def run():
        return [(i, clock.now - 100.0) async for i in paced(offsets, clock=clock, sleep=clock.sleep)]

    sent = asyncio.run(run())
    assert [i for i, _ in sent] == list(range(2_000))
    assert [t for _, t in sent] == pytest.approx(offsets)
    assert (len(sent) - 1) / sent[-1][1] == pytest.approx(50.0, rel=0.05)


def test_late_requests_go_at_once_and_are_never_dropped():
    clock = FakeClock()

    async def run():
        out = []
        async for i in paced([0.0, 1.0, 2.0, 3.0], clock=clock, sleep=clock.sleep):
            out.append((i, clock.now - 100.0))
            if i == 0:
                clock.now += 2.5  # the caller was busy past the next two send times
        return out

    assert asyncio.run(run()) == [(0, 0.0), (1, 2.5), (2, 2.5), (3, 3.0)]
