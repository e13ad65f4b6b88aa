"""A step's MLflow writes, kept on disk before anything is sent: so that an MLflow outage loses nothing.

A spool is one JSON-lines file per pod in the workspace (`<workspace>/runs/<workflow>/tracking/<step>-<attempt>.jsonl`,
the directory from `VCPILOT_TRACKING_SPOOL`). Every write of a step is one line, appended with a single `write`
before anything reaches MLflow; `components.tracking.replay` sends the lines in order. Beside the spool:

- `<spool>.cursor`: how far it was sent (the byte offset after the last line MLflow took) and the run ids its keys
  resolved to, written atomically (a temporary file and `os.replace`), so a crash never leaves half a cursor;
- `<spool>.lock`: a `flock` that one replayer holds at a time (the step's flusher, the step's end, the exit
  handler), so two never send the same lines at once;
- `<spool>.files/`: a copy of each artifact taken when it was spooled: the spool holds what the step meant then.

A line without its newline is being written, or was torn by a crash: readers stop before it, and the next writer
ends it with a newline first, so it is skipped as one unreadable line rather than glued to the next record.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from components.files import lock_within, write_json

__all__ = ["Cursor", "Spool", "SpoolBusy", "SpooledLine"]


class SpoolBusy(Exception):
    """Another replayer holds the spool's lock."""


class Cursor(BaseModel):
    """What of a spool MLflow has: the offset after the last line sent, and the run id of each key it resolved."""

    offset: int = 0
    runs: dict[str, str] = Field(default_factory=dict)
    skipped: int = 0  # lines left out: unreadable (torn) or refused by MLflow for good


class SpooledLine(BaseModel):
    """One complete line of a spool: its record (None when it is not JSON) and the offset just after it."""

    end: int
    record: dict[str, Any] | None


class Spool:
    """One spool file and its cursor, lock and artifact copies."""

    def __init__(self, path: str | Path) -> None:
        """`path` is the `.jsonl` file; it and its directory are created on the first append."""
        self.path = Path(path)
        self.cursor_path = self.path.with_name(self.path.name + ".cursor")
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.files = self.path.with_name(self.path.name + ".files")

    def __repr__(self) -> str:
        return f"Spool({str(self.path)!r})"

    # ---- writing ------------------------------------------------------------------------------------------

    def append(self, record: dict[str, Any]) -> None:
        """Add `record` as one line: one `write` of the whole line, so a reader sees all of it or none."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(record, separators=(",", ":"), allow_nan=False).encode() + b"\n"
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if _ends_torn(fd):
                line = b"\n" + line  # end the torn line of a crashed writer: it stays one unreadable line
            os.write(fd, line)
        finally:
            os.close(fd)

    def keep_file(self, path: str | Path) -> Path:
        """A copy of `path` that stays as it is now until the spool is sent (named by its content)."""
        source = Path(path)
        digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
        copy = self.files / digest / source.name
        if not copy.is_file():
            copy.parent.mkdir(parents=True, exist_ok=True)
            tmp = copy.with_name(copy.name + ".tmp")
            shutil.copyfile(source, tmp)
            os.replace(tmp, copy)
        return copy

    # ---- reading ------------------------------------------------------------------------------------------

    def cursor(self) -> Cursor:
        """What was sent so far (nothing, when there is no cursor yet)."""
        try:
            return Cursor.model_validate_json(self.cursor_path.read_text())
        except FileNotFoundError:
            return Cursor()

    def save_cursor(self, cursor: Cursor) -> None:
        """Record progress atomically."""
        write_json(self.cursor_path, cursor.model_dump())

    def lines_after(self, offset: int) -> Iterator[SpooledLine]:
        """The complete lines after byte `offset`, in order; a last line without its newline is not yet one."""
        try:
            with self.path.open("rb") as file:
                file.seek(offset)
                data = file.read()
        except FileNotFoundError:
            return
        position = offset
        for raw in data.split(b"\n")[:-1]:  # what follows the last newline is incomplete
            position += len(raw) + 1
            if not raw.strip():
                continue
            yield SpooledLine(end=position, record=_parse(raw))

    def pending(self) -> int:
        """How many complete lines are not sent yet."""
        return sum(1 for _ in self.lines_after(self.cursor().offset))

    # ---- one replayer at a time -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def locked(self, wait_s: float = 0.0) -> Iterator[None]:
        """Hold the spool's lock, waiting up to `wait_s` for another replayer; SpoolBusy when it does not let go."""
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if not lock_within(fd, wait_s):
                raise SpoolBusy(f"another process is sending {self.path}")
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def _ends_torn(fd: int) -> bool:
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


def _parse(raw: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return record if isinstance(record, dict) else None
