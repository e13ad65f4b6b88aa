"""A whole load test as the CLI and the pipeline run it: requests, server checks, the run, its figures, the verdict.

The steps are named in `run_loadtest`; everything a person may get wrong (the URL, the dataset, the plan) is
checked before the first request and raises `LoadtestError` with one sentence.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvloop
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from components.errors import Unavailable, VcpilotError
from components.files import write_text
from components.loadtest.client import Unreachable, discover_model, parse_target, wait_healthy
from components.loadtest.dataset import DatasetError, load_requests, synthetic_requests
from components.loadtest.gate import SloVerdict, check_slo
from components.loadtest.metrics import LoadMetrics, Slo, calculate_metrics, report_fields
from components.loadtest.records import RequestRecord
from components.loadtest.runner import LoadPlan, connector, probe_client, run_load

__all__ = [
    "LoadtestConfig",
    "LoadtestError",
    "Outcome",
    "ServerUnreachable",
    "build_config",
    "run_loadtest",
    "run_loadtest_sync",
    "write_records",
]


class LoadtestError(VcpilotError):
    """The load test could not run: a bad option, URL or dataset; one sentence."""


class ServerUnreachable(LoadtestError, Unavailable):
    """The server could not be reached, or never became healthy."""


class LoadtestConfig(BaseModel):
    """Everything a load test needs to know."""

    model_config = ConfigDict(frozen=True)

    url: str
    plan: LoadPlan
    slo: Slo = Slo()
    dataset: Path | None = None
    max_tokens: int = 16
    chat: bool = False
    model: str | None = None  # None: the first model the server lists
    timeout_s: float = Field(default=300.0, gt=0, allow_inf_nan=False)  # of one request
    wait_healthy_s: float = 0.0  # > 0: poll /health this long before starting (the pipeline's server is loading)
    api_key: str = ""

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        parse_target(url)  # raises ValueError with the reason
        return url

    @field_validator("api_key")
    @classmethod
    def _header_value(cls, api_key: str) -> str:
        # It goes into every request's head as written: a line break (a key file's CRLF) split the head in two.
        if any(ord(char) < 0x20 or ord(char) == 0x7F for char in api_key):
            raise ValueError("the token holds a line break or another control character; give the token alone")
        return api_key


class Outcome(BaseModel):
    """What a load test found."""

    model_config = ConfigDict(frozen=True)

    config: LoadtestConfig
    model: str | None
    endpoint: str
    records: tuple[RequestRecord, ...]
    metrics: LoadMetrics
    verdict: SloVerdict

    def summary(self) -> dict[str, Any]:
        """One flat JSON object: where, how, every figure (`ttft_p95_ms`…), the SLOs and the verdict."""
        plan, slo = self.config.plan, self.config.slo
        rate = None if plan.rate is None else ("inf" if math.isinf(plan.rate) else plan.rate)
        return {
            "endpoint": self.endpoint,
            "model": self.model,
            "concurrency": plan.concurrency,
            "rate": rate,
            "burstiness": plan.burstiness,
            **report_fields(self.metrics),
            "slo_ttft_ms": slo.ttft_ms,
            "slo_tpot_ms": slo.tpot_ms,
            "slo_e2el_ms": slo.e2el_ms,
            "slo_percentile": slo.percentile,
            "slo_passed": self.verdict.passed,
            "slo_reason": self.verdict.reason,
        }


def run_loadtest_sync(config: LoadtestConfig, on_done: Callable[[int], None] | None = None) -> Outcome:
    """`run_loadtest` in an event loop of its own, for callers outside one (the CLI, the step, the benchmark).

    The loop is uvloop's (uvicorn's too): its callbacks and socket calls are C, where asyncio's are Python, and
    they are most of a load generator's CPU. The outcome leaves through a list rather than as the loop's main task
    result: on its way out `uvloop.run` (`asyncio.Runner`) looks up its SIGINT handler, which holds the main task,
    and formats its repr into an error message it then discards (`signal.getsignal` in CPython 3.11), twice: a repr
    of every request record, 20 us per request each time.
    """
    out: list[Outcome] = []

    async def main() -> None:
        out.append(await run_loadtest(config, on_done))

    uvloop.run(main())
    return out[0]


async def run_loadtest(config: LoadtestConfig, on_done: Callable[[int], None] | None = None) -> Outcome:
    """Check the inputs, find the server (and its model), send the load, compute the figures, judge the SLOs.

    `on_done(n)` hears after each request how many have ended.
    """
    try:
        target = parse_target(config.url, chat=config.chat)
    except ValueError as err:
        raise LoadtestError(str(err)) from None
    try:
        if config.dataset is not None:
            specs = load_requests(config.dataset, config.plan.requests, max_tokens=config.max_tokens)
        else:
            specs = synthetic_requests(config.plan.requests, max_tokens=config.max_tokens, seed=config.plan.seed)
    except DatasetError as err:
        raise LoadtestError(str(err)) from None
    timeout_s, api_key, tls = config.timeout_s, config.api_key, target.origin.startswith("https:")
    client = probe_client(timeout_s=timeout_s, api_key=api_key, tls=tls)
    try:
        if config.wait_healthy_s > 0:
            await wait_healthy(client, target.origin, config.wait_healthy_s)
        model = config.model or await discover_model(client, target)
    except Unreachable as err:
        raise ServerUnreachable(str(err)) from None
    finally:
        await client.aclose()
    target = target.model_copy(update={"model": model})
    result = await run_load(
        config.plan, specs, target, connector(timeout_s=timeout_s, api_key=api_key, tls=tls), on_done=on_done
    )
    metrics = calculate_metrics(result.records, result.duration_s, config.slo)
    return Outcome(
        config=config,
        model=model,
        endpoint=target.endpoint,
        records=result.records,
        metrics=metrics,
        verdict=check_slo(metrics, config.slo),
    )


# Config fields as the command line spells them, for error messages.
_FLAGS = {
    "ttft_ms": "--slo-ttft-ms",
    "tpot_ms": "--slo-tpot-ms",
    "e2el_ms": "--slo-e2el-ms",
    "percentile": "--slo-percentile",
}


def build_config(**fields: Any) -> LoadtestConfig:
    """A config from the command line's values, or LoadtestError naming the first bad option in one sentence."""
    try:
        plan = LoadPlan.model_validate({k: fields.pop(k) for k in list(fields) if k in LoadPlan.model_fields})
        slo = Slo.model_validate({k: fields.pop(k) for k in list(fields) if k in Slo.model_fields})
        return LoadtestConfig.model_validate({"plan": plan, "slo": slo, **fields})
    except ValidationError as err:
        first = err.errors()[0]
        message = first["msg"].removeprefix("Value error, ")
        message = message[0].lower() + message[1:]
        if not first["loc"]:
            raise LoadtestError(message) from None
        name = str(first["loc"][-1])
        flag = _FLAGS.get(name, "--" + name.replace("_", "-"))
        if message.startswith("input should"):  # "--rate should be greater than 0": the option, then what it needs
            raise LoadtestError(f"{flag} {message.removeprefix('input ')}, got {first.get('input')!r}") from None
        raise LoadtestError(f"{flag} is invalid ({message})") from None


def write_records(path: Path, records: tuple[RequestRecord, ...]) -> None:
    """One JSON line per request, in send order (written atomically, as every report is)."""
    write_text(path, "".join(json.dumps(record.model_dump(mode="json")) + "\n" for record in records))
