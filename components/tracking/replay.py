"""Sending a spool to MLflow, in order, so that sending it again — after a crash, a retry, twice — adds nothing.

Each spooled record (`components.tracking.spool`) is one of:

- `run` (`key`, `name`, `experiment`, `tags`, `parent`: a key, `workflow`: a parent's name, `time`): `create_run`,
  after looking for the run by its key tag (`vcpilot.key`) — a parent also by its workflow's name, for parents made
  before keys or by a caller that knows only the name;
- `params` (`key`, `params`): `log_batch`; MLflow accepts the same value again;
- `metrics` (`key`, `metrics`: `[name, value, timestamp ms, step]`…): `log_batch`; the timestamp is the spool's,
  and MLflow's SQL store skips a row whose (key, value, timestamp, step) it has;
- `tags` (`key`, `tags`): `log_batch`; a tag is overwritten with the same value;
- `artifact` (`key`, `file`: the spool's copy, `dir`): `log_artifact`, written again at the same path;
- `trace` (`key`, `span`: a `PlannedSpan` tree, `tags`): a trace linked to the run, tagged with the run's key and
  the root span's name, which a replay finds and does not send again (`components.tracking.traces`);
- `end` (`key`, `status`, `time`): `set_terminated`, the same status and end time again.

The cursor moves past a record only once MLflow took it. A record MLflow refuses for good (a param changed value
after a pod's restart, a run deleted meanwhile, an artifact copy gone) is counted as skipped and passed, so one bad
record never holds back the rest; an unreachable or failing server stops the replay where it is.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from components.tracking.adapter import (
    KEY_TAG,
    PARENT_TAG,
    TAG_LIMIT,
    WORKFLOW_TAG,
    TrackingUnavailable,
    bounded_retries,
    client,
    ensure_experiment,
    tracking_errors,
    unreachable,
)
from components.tracking.spool import Cursor, Spool, SpoolBusy, SpooledLine

__all__ = ["ReplayResult", "decode_value", "encode_value", "find_run", "replay", "replay_all"]

_BATCH = 1000  # metrics per log_batch: MLflow's limit
# What MLflow answers when it will never take a record, however often it is sent.
_REFUSALS = {"INVALID_PARAMETER_VALUE", "RESOURCE_ALREADY_EXISTS", "RESOURCE_DOES_NOT_EXIST", "BAD_REQUEST"}


class ReplayResult(BaseModel):
    """What one replay did: lines sent, lines still waiting, lines left out for good, and why it stopped."""

    sent: int = 0
    pending: int = 0
    skipped: int = 0
    reason: str = ""

    def __add__(self, other: ReplayResult) -> ReplayResult:
        return ReplayResult(
            sent=self.sent + other.sent,
            pending=self.pending + other.pending,
            skipped=self.skipped + other.skipped,
            reason=self.reason or other.reason,
        )


def encode_value(value: float) -> float | str:
    """A metric's value as JSON can hold it: NaN and the infinities as MLflow's own spellings."""
    return value if math.isfinite(value) else str(value)


def decode_value(value: float | str) -> float:
    """The inverse of `encode_value`."""
    return float(value)


def replay(spool: Spool, tracking_uri: str, *, wait_s: float = 0.0, timeout_s: float | None = None) -> ReplayResult:
    """Send what `spool` holds beyond its cursor, in order, within `timeout_s` (None: until done or stopped).

    Never raises for MLflow's sake: a server that does not answer, or another replayer holding the spool for longer
    than `wait_s`, leaves the lines pending and says why in `reason`.
    """
    if reason := unreachable(tracking_uri, timeout_s=2.0):
        return ReplayResult(pending=spool.pending(), reason=reason)
    try:
        with spool.locked(wait_s):
            return _Sender(spool, tracking_uri).send(None if timeout_s is None else time.monotonic() + timeout_s)
    except SpoolBusy as err:
        return ReplayResult(pending=spool.pending(), reason=str(err))


def replay_all(
    directory: str | Path, tracking_uri: str, *, timeout_s: float = 60.0, wait_s: float = 5.0
) -> ReplayResult:
    """Replay every spool in `directory` (the exit handler's sweep of a run), oldest first."""
    deadline = time.monotonic() + timeout_s
    total = ReplayResult()
    spools = sorted(Path(directory).glob("*.jsonl"), key=lambda path: path.stat().st_mtime)
    for path in spools:
        left = max(deadline - time.monotonic(), 0.1)
        total += replay(Spool(path), tracking_uri, wait_s=min(wait_s, left), timeout_s=left)
    return total


class _Sender:
    """One replay of one spool, under its lock."""

    def __init__(self, spool: Spool, tracking_uri: str) -> None:
        self.spool = spool
        self.uri = tracking_uri
        self.client: Any = client(tracking_uri)
        self.experiments: dict[str, str] = {}

    def send(self, deadline: float | None) -> ReplayResult:
        cursor = self.spool.cursor()
        lines = list(self.spool.lines_after(cursor.offset))
        sent = done = 0
        with bounded_retries():
            while done < len(lines):
                if deadline is not None and time.monotonic() > deadline:
                    return ReplayResult(sent=sent, pending=len(lines) - done, skipped=cursor.skipped, reason="timeout")
                group = _group(lines, done)
                try:
                    self._apply(group, cursor)
                    sent += len(group)
                except TrackingUnavailable as err:
                    if not _refused(err):
                        self.spool.save_cursor(cursor)
                        return ReplayResult(
                            sent=sent, pending=len(lines) - done, skipped=cursor.skipped, reason=err.reason
                        )
                    cursor.skipped += len(group)
                except _Unreadable:
                    cursor.skipped += len(group)
                cursor.offset = group[-1].end
                done += len(group)
                self.spool.save_cursor(cursor)
        return ReplayResult(sent=sent, skipped=cursor.skipped)

    def _apply(self, group: list[SpooledLine], cursor: Cursor) -> None:
        record = group[0].record
        if record is None or "op" not in record or "key" not in record:
            raise _Unreadable
        op, key = record["op"], str(record["key"])
        with tracking_errors(self.uri, f"send the spooled {op} of {key}"):
            if op == "run":
                cursor.runs[key] = self._run(record, cursor)
                return
            if key not in cursor.runs:
                raise _Unreadable  # a record of a run the spool never started: nothing to send it to
            run_id = cursor.runs[key]
            if op == "metrics":
                self._metrics(run_id, (line.record for line in group if line.record))
            elif op == "params":
                from mlflow.entities import Param

                params = [Param(k, str(v)[:TAG_LIMIT]) for k, v in record["params"].items()]
                self.client.log_batch(run_id, params=params)
            elif op == "tags":
                from mlflow.entities import RunTag

                self.client.log_batch(run_id, tags=[RunTag(k, str(v)[:TAG_LIMIT]) for k, v in record["tags"].items()])
            elif op == "artifact":
                self.client.log_artifact(run_id, record["file"], record.get("dir"))
            elif op == "trace":
                self._trace(run_id, key, record)
            elif op == "end":
                self.client.set_terminated(run_id, status=record["status"], end_time=record.get("time"))
            else:
                raise _Unreadable

    def _metrics(self, run_id: str, records: Iterable[dict[str, Any]]) -> None:
        from mlflow.entities import Metric

        metrics = [
            Metric(name, decode_value(value), int(timestamp), int(step))
            for record in records
            for name, value, timestamp, step in record["metrics"]
        ]
        for start in range(0, len(metrics), _BATCH):
            self.client.log_batch(run_id, metrics=metrics[start : start + _BATCH])

    def _trace(self, run_id: str, key: str, record: dict[str, Any]) -> None:
        from pydantic import ValidationError

        from components.tracking.traces import PlannedSpan, send_trace

        try:
            root = PlannedSpan.model_validate(record["span"])
        except (KeyError, ValidationError):
            raise _Unreadable from None
        tags = {k: str(v)[:TAG_LIMIT] for k, v in (record.get("tags") or {}).items()}
        send_trace(self.client, self.uri, run_id, root, f"{key}/trace/{root.name}", tags)

    def _experiment(self, name: str) -> str:
        if name not in self.experiments:
            self.experiments[name] = ensure_experiment(self.client, name, self.uri)
        return self.experiments[name]

    def _run(self, record: dict[str, Any], cursor: Cursor) -> str:
        """The run of `record["key"]`: found by its key (or, for a parent, its workflow's name), else created."""
        key = str(record["key"])
        if key in cursor.runs:
            return cursor.runs[key]
        experiment = self._experiment(str(record["experiment"]))
        tags = {k: str(v)[:TAG_LIMIT] for k, v in (record.get("tags") or {}).items()}
        tags[KEY_TAG] = key
        found = find_run(self.client, experiment, key, record.get("workflow"))
        if found is not None:
            run_id, own = found
            if own.get(KEY_TAG) != key:  # a parent made before keys, or by a caller with only the name: adopt it
                from mlflow.entities import RunTag

                self.client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])
            return run_id
        if parent := record.get("parent"):
            if parent not in cursor.runs:
                raise _Unreadable
            tags[PARENT_TAG] = cursor.runs[parent]
        run = self.client.create_run(experiment, start_time=record.get("time"), tags=tags, run_name=record["name"])
        return str(run.info.run_id)


def find_run(
    mlflow: Any, experiment_id: str, key: str, workflow: str | None = None
) -> tuple[str, dict[str, str]] | None:
    """The run (id and tags) that carries `key`; else, when `workflow` is given, its parent run made before keys."""
    runs = mlflow.search_runs([experiment_id], filter_string=f"tags.`{KEY_TAG}` = '{_quoted(key)}'", max_results=1)
    if runs:
        return str(runs[0].info.run_id), dict(runs[0].data.tags)
    if workflow:
        named = mlflow.search_runs([experiment_id], filter_string=f"tags.`{WORKFLOW_TAG}` = '{_quoted(workflow)}'")
        for run in named:
            if KEY_TAG not in run.data.tags:
                return str(run.info.run_id), dict(run.data.tags)
    return None


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


class _Unreadable(Exception):
    """A line that is not a record this module knows (torn, or of a run never started): skipped, not retried."""


def _group(lines: list[SpooledLine], start: int) -> list[SpooledLine]:
    """Consecutive metrics of one run travel in one request; everything else alone."""
    first = lines[start].record
    if not first or first.get("op") != "metrics":
        return [lines[start]]
    group, count = [lines[start]], len(first.get("metrics") or [])
    for line in lines[start + 1 :]:
        record = line.record
        if not record or record.get("op") != "metrics" or record.get("key") != first.get("key"):
            break
        count += len(record.get("metrics") or [])
        if count > _BATCH:
            break
        group.append(line)
    return group


def _refused(err: TrackingUnavailable) -> bool:
    """Whether MLflow will never take what was sent (as opposed to being down or failing for now)."""
    cause = err.__cause__
    if isinstance(cause, FileNotFoundError):
        return True
    return getattr(cause, "error_code", None) in _REFUSALS
