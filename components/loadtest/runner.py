"""Drive a server with a load plan: a fixed number of requests in flight, or arrivals at a rate (optionally capped).

The runner only sends and records; everything it measured is in the returned records, and the figures are
computed afterwards by `metrics.calculate_metrics`. Each request in flight has an HTTP client with one kept-alive
connection of its own, so the connections in use are exactly the requests in flight: for http:// that is our
callback-driven HTTP/1.1 client (`sse.SseClient`); for https:// it is httpx, whose pool would otherwise scan all of its
connections for every request, which with dozens of connections costs more than the request itself.
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
import random
import ssl
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import certifi
import httpx
from pydantic import BaseModel, ConfigDict, Field, model_validator

from components.loadtest.arrivals import arrival_offsets, paced
from components.loadtest.client import HttpClient, Target, encode_request, send_request
from components.loadtest.http1 import Http1Client
from components.loadtest.records import RequestRecord, RequestSpec
from components.loadtest.sse import SseClient

__all__ = ["MAX_REQUESTS", "Connect", "LoadPlan", "LoadResult", "connector", "probe_client", "run_load"]

Client = HttpClient | SseClient
Connect = Callable[[], Client]


MAX_REQUESTS = 1_000_000


# The longest the arrivals of one load test may take: a week-long soak, not a typo's eternity.
MAX_ARRIVALS_S = 7 * 86_400


class LoadPlan(BaseModel):
    """How to send the requests: a fixed number in flight, or arrivals at a rate.

    `concurrency` alone keeps that many in flight (closed loop); `rate` sends by an arrival process (open loop),
    and with `concurrency` too, at most that many are in flight (vLLM's semantics).
    """

    model_config = ConfigDict(frozen=True)

    # Each request is prepared before the clock starts and recorded as it ends, all in memory: a bound that a
    # benchmark never needs to pass, so that a typo (10**30) is refused rather than filling memory.
    requests: int = Field(gt=0, le=MAX_REQUESTS)
    concurrency: int | None = Field(default=None, gt=0)
    rate: float | None = Field(default=None, gt=0)  # requests per second; inf sends all at once
    burstiness: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    seed: int = 0

    @model_validator(mode="after")
    def _one_mode(self) -> LoadPlan:
        if self.concurrency is None and self.rate is None:
            raise ValueError("give --concurrency C (requests in flight) or --rate R (requests per second), or both")
        # 1e-300 arrivals a second waited (practically) for ever after the first request, without a word
        if self.rate is not None and (self.requests - 1) / self.rate > MAX_ARRIVALS_S:
            days = (self.requests - 1) / self.rate / 86_400
            raise ValueError(
                f"--rate {self.rate:g} sends {self.requests} requests over {days:.3g} days, more than a load test "
                f"spans ({MAX_ARRIVALS_S // 86_400} days); give a higher --rate or fewer --requests"
            )
        return self


class LoadResult(BaseModel):
    """What a run produced: one record per request, in send order, and the run's wall time."""

    model_config = ConfigDict(frozen=True)

    records: tuple[RequestRecord, ...]
    duration_s: float


def connector(*, timeout_s: float = 300.0, api_key: str = "", tls: bool = False) -> Connect:
    """A factory of clients with one kept-alive connection each, the request timeout and auth.

    Plain HTTP gets our callback-driven client (`sse.SseClient`); `tls` (an https:// server) gets httpx, which
    speaks TLS.
    """
    headers, connect_timeout_s = _auth(api_key), min(timeout_s, 10.0)
    if not tls:
        return lambda: SseClient(timeout_s=timeout_s, connect_timeout_s=connect_timeout_s, headers=headers)
    return _httpx_connector(timeout_s, connect_timeout_s, headers)


def probe_client(*, timeout_s: float = 300.0, api_key: str = "", tls: bool = False) -> HttpClient:
    """A client for what a run asks before it starts (the server's health, its model): `connector`'s settings."""
    headers, connect_timeout_s = _auth(api_key), min(timeout_s, 10.0)
    if not tls:
        return Http1Client(timeout_s=timeout_s, connect_timeout_s=connect_timeout_s, headers=headers)
    return _httpx_connector(timeout_s, connect_timeout_s, headers)()


def _auth(api_key: str) -> dict[str, str] | None:
    return {"Authorization": f"Bearer {api_key}"} if api_key else None


def _httpx_connector(
    timeout_s: float, connect_timeout_s: float, headers: dict[str, str] | None
) -> Callable[[], HttpClient]:
    if importlib.util.find_spec("sniffio") is None:
        # httpcore tries `import sniffio` on every request; a module that is absent is searched for on disk each
        # time. Recording the absence makes that failed import instant (and changes nothing else).
        sys.modules.setdefault("sniffio", None)  # type: ignore[arg-type]
    # One TLS context for all clients: each client would otherwise load the CA bundle again (tens of ms).
    tls = ssl.create_default_context(cafile=certifi.where())

    def connect() -> httpx.AsyncClient:
        return httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s, pool=None),
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            headers=headers,
            verify=tls,
        )

    return connect


class _Clients:
    """Clients handed to requests in flight and taken back afterwards; new ones are made when all are busy."""

    def __init__(self, connect: Connect):
        self._connect = connect
        self._idle: list[Client] = []
        self._made: list[Client] = []

    def take(self) -> Client:
        if self._idle:
            return self._idle.pop()
        client = self._connect()
        self._made.append(client)
        return client

    def give(self, client: Client) -> None:
        self._idle.append(client)

    async def aclose(self) -> None:
        await asyncio.gather(*(client.aclose() for client in self._made))


async def run_load(
    plan: LoadPlan,
    specs: Sequence[RequestSpec],
    target: Target,
    connect: Connect,
    *,
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    on_done: Callable[[int], None] | None = None,
) -> LoadResult:
    """Send `plan.requests` requests (cycling through `specs`) to `target` and record each one.

    `on_done(n)` is told after each request how many have ended (a progress bar).
    """
    if not specs:
        raise ValueError("there are no requests to send")
    records: list[RequestRecord | None] = [None] * plan.requests
    # Encoded before the clock starts, as wrk prepares its requests: the run measures sending, not JSON encoding.
    specs = specs[: plan.requests]
    bodies = [encode_request(target, spec) for spec in specs]
    clients = _Clients(connect)
    t0 = clock()
    ended = 0

    async def one(index: int) -> None:
        nonlocal ended
        client = clients.take()
        try:
            at = index % len(specs)
            if isinstance(client, SseClient):
                record = await client.send(target, specs[at], index=index, t0=t0, clock=clock, body=bodies[at])
            else:
                record = await send_request(client, target, specs[at], index=index, t0=t0, clock=clock, body=bodies[at])
            records[index] = record
        finally:
            clients.give(client)
        ended += 1
        if on_done is not None:
            on_done(ended)

    try:
        if plan.rate is None:
            await _closed_loop(plan.requests, plan.concurrency or 1, one)
        else:
            await _open_loop(plan, one, clock, sleep)
        duration = clock() - t0
    finally:
        await clients.aclose()
    return LoadResult(records=tuple(r for r in records if r is not None), duration_s=duration)


async def _closed_loop(count: int, concurrency: int, one: Callable[[int], Awaitable[None]]) -> None:
    """`concurrency` workers, each sending its next request as soon as its last one finished."""
    upcoming = iter(range(count))

    async def worker() -> None:
        for index in upcoming:  # a shared iterator: each index goes to exactly one worker
            await one(index)

    await asyncio.gather(*(worker() for _ in range(min(concurrency, count))))


async def _open_loop(
    plan: LoadPlan,
    one: Callable[[int], Coroutine[Any, Any, None]],
    clock: Callable[[], float],
    sleep: Callable[[float], Awaitable[object]],
) -> None:
    """Requests start at their arrival times whether or not earlier ones finished (up to the concurrency cap).

    Uncapped, each request is a task of its own. Capped at C, C workers take the requests in arrival order as
    they become due, each as soon as it is free: a task, a semaphore and a gather over every request cost more
    than the request itself at thousands a second.
    """
    rate = plan.rate if plan.rate is not None else math.inf
    arrivals = paced(
        arrival_offsets(plan.requests, rate, plan.burstiness, random.Random(plan.seed)), clock=clock, sleep=sleep
    )
    if plan.concurrency is None:
        await asyncio.gather(*[asyncio.create_task(one(index)) async for index in arrivals])
        return
    due: asyncio.Queue[int | None] = asyncio.Queue()

    async def worker() -> None:
        while (index := await due.get()) is not None:
            await one(index)

    workers = [asyncio.create_task(worker()) for _ in range(min(plan.concurrency, plan.requests))]
    try:
        async for index in arrivals:
            due.put_nowait(index)
        for _ in workers:
            due.put_nowait(None)  # no more: each worker ends after the requests it took
        await asyncio.gather(*workers)
    finally:
        for task in workers:
            task.cancel()
