"""Everything the demo runs on, generated from a seed: service logs, request logs and datasets of the shop task.

Layout written under the output directory (the same seed gives the same bytes):

```
logs/baseline/requests.jsonl.gz   request log of the baseline window: the champion answers right
logs/baseline/service.log         the service's plain-text log of that window (Loghub-like lines)
logs/current/requests.jsonl.gz    the current window: prices changed, items were added, the champion answers
logs/current/service.log          those wrongly, users give negative feedback and write corrections
data/baseline/train.jsonl         the baseline catalog as {"prompt", "completion"}: trains the first champion
data/baseline/eval.jsonl          the same facts (the task is recall), to evaluate the first champion
data/drifted/eval.jsonl           the changed and new items with their current answers: the drifted eval set
data/current/eval.jsonl           the whole current catalog: the drifted facts and the ones that did not change
demo.json                         the seed, the configuration, what drifted and counts per window
```

A request record is one JSON object per line: `timestamp` (ISO 8601, UTC), `request_id` (UUID), `prompt`,
`completion` (what the served model answered; empty when the request failed), `latency_ms`, `status` (`ok` or
`error`), `feedback` (`positive`, `negative` or `none`) and, only when the user corrected the answer,
`correction`: the right completion in the same format as `completion` (e.g. `" $41"`). Every drifted item has at
least one correction in the current window, so a fine-tuning set curated from corrections covers the drift.
"""

from __future__ import annotations

import gzip
import json
import math
import random
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from components.demo.catalog import Catalog, CatalogConfig, Drift, Item, build_drift
from components.entry import option_error
from components.errors import InputError
from components.files import check_output_dir, write_bytes

__all__ = [
    "DemoConfig",
    "DemoSummary",
    "RequestRecord",
    "generate",
    "make_demo",
    "request_window",
    "service_log",
    "write_demo",
]

Window = Literal["baseline", "current"]

# How users react: to a right answer, mostly silence, sometimes a thumbs-up, rarely a stray thumbs-down; to a wrong
# one, mostly a thumbs-down, and most of those who complain type the right answer.
_POSITIVE_IF_RIGHT, _NEGATIVE_IF_RIGHT = 0.30, 0.02
_NEGATIVE_IF_WRONG, _CORRECTION_IF_NEGATIVE, _POSITIVE_IF_WRONG = 0.70, 0.80, 0.02
_WORKERS = 4


class DemoConfig(BaseModel):
    """What to generate: the shop, how many requests each window holds, and when the windows are."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int = 0
    catalog: CatalogConfig = CatalogConfig()
    requests: int = Field(default=600, ge=10, le=1_000_000, description="Requests per window")
    error_rate: float = Field(default=0.02, ge=0.0, le=0.5, description="Share of requests that fail")
    start: datetime = Field(default=datetime(2026, 11, 27, tzinfo=UTC), description="Start of the baseline window")
    window_hours: float = Field(default=6.0, gt=0, description="Length of each window; current starts a day later")

    @model_validator(mode="after")
    def _every_item_asked(self) -> DemoConfig:
        items = self.catalog.items + self.catalog.new_items
        if self.requests < items:
            raise ValueError(f"requests must be at least the {items} items of the catalog, so each is asked once")
        return self


class RequestRecord(BaseModel):
    """One line of the service's request log."""

    model_config = ConfigDict(frozen=True)

    timestamp: str
    request_id: str
    prompt: str
    category: str
    completion: str
    latency_ms: float
    status: Literal["ok", "error"]
    feedback: Literal["positive", "negative", "none"]
    correction: str | None = None


class DemoSummary(BaseModel):
    """What was generated: the drift and per-window counts (also written as `demo.json`)."""

    seed: int
    config: DemoConfig
    changed: list[str]
    new: list[str]
    windows: dict[str, dict[str, int]]
    files: list[str]


def _window_start(config: DemoConfig, window: Window) -> datetime:
    return config.start + (timedelta(days=1) if window == "current" else timedelta())


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def request_window(drift: Drift, window: Window, config: DemoConfig) -> list[RequestRecord]:
    """The request log of one window, in time order, as the champion (trained on the baseline) served it."""
    rng = random.Random(f"{config.seed}:requests:{window}")
    catalog: Catalog = drift.baseline if window == "baseline" else drift.current
    items = list(catalog.items)
    # Every item is asked a few times (so every drifted item shows up), the rest of the traffic is random.
    repeats = min(3, config.requests // len(items))
    asked = items * repeats + [rng.choice(items) for _ in range(config.requests - repeats * len(items))]
    rng.shuffle(asked)
    start = _window_start(config, window)
    offsets = sorted(rng.uniform(0, config.window_hours * 3600) for _ in asked)
    records = []
    for item, offset in zip(asked, offsets, strict=True):
        request_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        timestamp = _stamp(start + timedelta(seconds=offset))
        request = RequestRecord(
            timestamp=timestamp,
            request_id=request_id,
            prompt=item.prompt,
            category=item.category,
            completion="",
            latency_ms=round(3000 + rng.uniform(0, 500), 1),  # failed requests ran into the upstream timeout
            status="error",
            feedback="none",
        )
        if rng.random() >= config.error_rate:
            answer = drift.champion_answer(item.name)
            feedback, correction = _feedback(rng, right=answer == item.completion, truth=item.completion)
            latency = round(rng.lognormvariate(math.log(35), 0.35), 1)
            request = request.model_copy(
                update={
                    "completion": answer,
                    "latency_ms": latency,
                    "status": "ok",
                    "feedback": feedback,
                    "correction": correction,
                }
            )
        records.append(request)
    return _ensure_corrections(records, catalog, drift) if window == "current" else records


def _feedback(
    rng: random.Random, *, right: bool, truth: str
) -> tuple[Literal["positive", "negative", "none"], str | None]:
    roll = rng.random()
    if right:
        if roll < _POSITIVE_IF_RIGHT:
            return "positive", None
        return ("negative", None) if roll < _POSITIVE_IF_RIGHT + _NEGATIVE_IF_RIGHT else ("none", None)
    if roll < _NEGATIVE_IF_WRONG:
        return "negative", truth if rng.random() < _CORRECTION_IF_NEGATIVE else None
    return ("positive", None) if roll < _NEGATIVE_IF_WRONG + _POSITIVE_IF_WRONG else ("none", None)


def _ensure_corrections(records: list[RequestRecord], catalog: Catalog, drift: Drift) -> list[RequestRecord]:
    """Give every drifted item at least one correction: its first request becomes a corrected wrong answer."""
    corrected = {r.prompt for r in records if r.correction is not None}
    by_name = catalog.by_name()
    out = list(records)
    for name in drift.drifted:
        item = by_name[name]
        if item.prompt in corrected:
            continue
        index = next(i for i, r in enumerate(out) if r.prompt == item.prompt)
        out[index] = out[index].model_copy(
            update={
                "status": "ok",
                "completion": drift.champion_answer(name),
                "feedback": "negative",
                "correction": item.completion,
                "latency_ms": min(out[index].latency_ms, 120.0),
            }
        )
    return out


def service_log(records: list[RequestRecord], drift: Drift, window: Window, config: DemoConfig) -> list[str]:
    """The service's plain-text log for the window: a handful of templates around the requests, in time order."""
    rng = random.Random(f"{config.seed}:service:{window}")
    start = _window_start(config, window)
    catalog = drift.baseline if window == "baseline" else drift.current
    events: list[tuple[datetime, int, str]] = []

    def emit(moment: datetime, line: str) -> None:
        events.append((moment, len(events), line))

    emit(start, "INFO [main] model.runner: loaded model shop-assistant version 1 from /models/champion")
    for hour in range(math.ceil(config.window_hours)):
        host = f"10.0.{rng.randint(0, 9)}.{rng.randint(2, 250)}:5432"
        emit(
            start + timedelta(hours=hour, seconds=1),
            f"INFO [sync] catalog.sync: synced {len(catalog.items)} items from {host}",
        )
    if window == "current":
        old, new = drift.baseline.by_name(), drift.current.by_name()
        for name in drift.changed:
            sku, was, now = new[name].sku, old[name].price, new[name].price
            emit(
                start + timedelta(seconds=2), f"WARN [sync] catalog.sync: price of {sku} changed from ${was} to ${now}"
            )
        for name in drift.new:
            emit(
                start + timedelta(seconds=2),
                f"WARN [sync] catalog.sync: added {new[name].sku} which the model has not seen",
            )
    for index, r in enumerate(records):
        moment = datetime.strptime(r.timestamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        worker = f"worker-{rng.randrange(_WORKERS)}"
        if r.status == "error":
            emit(
                moment,
                f"ERROR [{worker}] api.completions: request {r.request_id} failed after {r.latency_ms} ms: "
                "upstream timeout",
            )
        else:
            emit(
                moment,
                f"INFO [{worker}] api.completions: request {r.request_id} served in {r.latency_ms} ms, "
                f"{len(r.completion)} tokens",
            )
        if r.feedback != "none":
            suffix = " with a correction" if r.correction is not None else ""
            emit(
                moment + timedelta(seconds=rng.uniform(1, 30)),
                f"INFO [feedback] feedback.store: request {r.request_id} rated {r.feedback}{suffix}",
            )
        if index % 25 == 24:
            emit(
                moment,
                f"INFO [scheduler] model.runner: decoded batch of {rng.randint(4, 16)} requests in "
                f"{rng.randint(8, 40)} ms",
            )
        if rng.random() < 0.01:
            emit(moment, f"WARN [cache] kv.cache: usage at {rng.randint(86, 99)}% above the 85% threshold")
    return [f"{m:%Y-%m-%d %H:%M:%S},{m.microsecond // 1000:03d} {line}" for m, _, line in sorted(events)]


def _example(item: Item) -> dict[str, str]:
    return {"prompt": item.prompt, "completion": item.completion, "category": item.category}


def _jsonl(rows: Sequence[Mapping[str, object]]) -> bytes:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()


def generate(config: DemoConfig) -> tuple[dict[str, bytes], DemoSummary]:
    """Every file of the demo (relative path → bytes) and its summary; pure: the same config, the same bytes."""
    drift = build_drift(config.catalog, config.seed)
    files: dict[str, bytes] = {}
    windows: dict[str, dict[str, int]] = {}
    for window in ("baseline", "current"):
        records = request_window(drift, window, config)
        lines = [r.model_dump(exclude_none=True) for r in records]
        # mtime=0: a gzip header otherwise carries the time of writing, and the bytes would differ run to run.
        files[f"logs/{window}/requests.jsonl.gz"] = gzip.compress(_jsonl(lines), mtime=0)
        files[f"logs/{window}/service.log"] = ("\n".join(service_log(records, drift, window, config)) + "\n").encode()
        windows[window] = {
            "requests": len(records),
            "errors": sum(r.status == "error" for r in records),
            "negative": sum(r.feedback == "negative" for r in records),
            "corrections": sum(r.correction is not None for r in records),
        }
    rng = random.Random(f"{config.seed}:datasets")
    train = [_example(i) for i in drift.baseline.items]
    rng.shuffle(train)
    current = drift.current.by_name()
    files["data/baseline/train.jsonl"] = _jsonl(train)
    files["data/baseline/eval.jsonl"] = _jsonl(sorted(train, key=lambda row: str(row["prompt"])))
    files["data/drifted/eval.jsonl"] = _jsonl([_example(current[n]) for n in sorted(drift.drifted)])
    files["data/current/eval.jsonl"] = _jsonl([_example(i) for i in sorted(drift.current.items, key=lambda i: i.name)])
    summary = DemoSummary(
        seed=config.seed,
        config=config,
        changed=list(drift.changed),
        new=list(drift.new),
        windows=windows,
        files=sorted([*files, "demo.json"]),
    )
    files["demo.json"] = (summary.model_dump_json(indent=2) + "\n").encode()
    return files, summary


def write_demo(out: str | Path, config: DemoConfig) -> DemoSummary:
    """Generate the demo data under `out` (created if needed); each file is replaced atomically."""
    files, summary = generate(config)
    root = Path(out)
    for relative, data in files.items():
        write_bytes(root / relative, data)
    return summary


def make_demo(out: Path, *, seed: int, items: int, new_items: int, changed_share: float, requests: int) -> DemoSummary:
    """Validate the options and write the demo data; InputError says in one sentence what is wrong."""
    try:
        catalog = CatalogConfig(items=items, new_items=new_items, changed_share=changed_share)
        config = DemoConfig(seed=seed, catalog=catalog, requests=requests)
    except ValidationError as err:  # in the words of the command's options (`--changed-share`)
        raise option_error(err) from None
    check_output_dir(out, "--out")
    try:
        return write_demo(out, config)
    except OSError as err:
        raise InputError(f"cannot write the demo data under {out}: {err.strerror or err}") from None
