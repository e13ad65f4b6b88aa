"""When requests arrive: a Poisson process (burstiness 1) or a gamma process, vLLM `benchmarks/serve.py` semantics.

Inter-arrival gaps are gamma(shape=burstiness, scale=1/(rate*burstiness)): the mean gap is always 1/rate,
burstiness below 1 clusters arrivals (coefficient of variation 1/sqrt(burstiness)), above 1 evens them out.
The schedule is pure (a seeded RNG); pacing takes an injected clock and sleep so tests run without waiting.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

__all__ = ["arrival_offsets", "paced"]


def arrival_offsets(count: int, rate: float, burstiness: float = 1.0, rng: random.Random | None = None) -> list[float]:
    """Send times in seconds after the start for `count` requests; the first goes at 0, all at 0 for rate=inf."""
    if rate <= 0:
        raise ValueError(f"the request rate must be positive, got {rate}")
    if burstiness <= 0:
        raise ValueError(f"burstiness must be positive, got {burstiness}")
    if math.isinf(rate):
        return [0.0] * count
    rng = rng or random.Random(0)
    scale = 1.0 / (rate * burstiness)
    offsets, now = [], 0.0
    for _ in range(count):
        offsets.append(now)
        now += rng.gammavariate(burstiness, scale)
    return offsets


async def paced(
    offsets: Sequence[float],
    *,
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> AsyncIterator[int]:
    """Yield each request's index once its send time has come (late requests go at once, never skipped)."""
    start = clock()
    for index, offset in enumerate(offsets):
        delay = start + offset - clock()
        if delay > 0:
            await sleep(delay)
        yield index
