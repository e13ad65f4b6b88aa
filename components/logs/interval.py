"""A time window as a person writes it on the command line: an ISO 8601 interval, or one relative to now.

`2026-11-01T00:00/2026-11-02T00:00`, `2026-11-01/P1D` (a start and a duration), `PT6H/2026-11-02T00:00` (a
duration and an end), `now-48h/now-24h`, or a bare duration, `24h`, for the last 24 hours. A time without a zone is
UTC, as in the logs (`timestamps.py`). A window holds the lines from its start up to, not including, its end.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel, ConfigDict

from components.errors import InputError
from components.logs.timestamps import format_time

__all__ = ["WINDOW_HELP", "TimeWindow", "parse_window"]

WINDOW_HELP = (
    "START/END in ISO 8601 (2026-11-01T00:00/2026-11-02T00:00), START/P1D, now-48h/now-24h, or 24h (the last 24 h)"
)

_ISO_DURATION = re.compile(
    r"P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", re.IGNORECASE | re.ASCII
)
_SHORT_DURATION = re.compile(
    r"(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?", re.IGNORECASE | re.ASCII
)
_RELATIVE = re.compile(r"now(?:\s*-\s*(.+))?", re.IGNORECASE)


class TimeWindow(BaseModel):
    """[start, end) in epoch seconds, and how it reads (ISO 8601, UTC)."""

    model_config = ConfigDict(frozen=True)

    start: float
    end: float

    def overlaps(self, other: TimeWindow) -> bool:
        """The two windows share some time."""
        return self.start < other.end and other.start < self.end

    def __str__(self) -> str:
        return f"{format_time(self.start)}/{format_time(self.end)}"


def _duration(text: str) -> timedelta | None:
    """`P1DT6H`, `PT30M`, `P1W` (ISO 8601) or `24h`, `90m`, `1d12h` (short), else None."""
    for pattern in (_ISO_DURATION, _SHORT_DURATION):
        found = pattern.fullmatch(text.strip())
        if found and any(found.groups()) and text.strip().upper() not in ("P", "PT"):
            weeks, days, hours, minutes, seconds = (float(g or 0) for g in found.groups())
            return timedelta(weeks=weeks, days=days, hours=hours, minutes=minutes, seconds=seconds)
    return None


def _instant(text: str, now: datetime) -> datetime | None:
    """`now`, `now-24h`, or an ISO 8601 date or time (UTC when it has no zone), else None."""
    relative = _RELATIVE.fullmatch(text.strip())
    if relative:
        back = _duration(relative.group(1)) if relative.group(1) else timedelta(0)
        return None if back is None else now - back
    try:
        stamp = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    return stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp


def parse_window(text: str, now: datetime, *, option: str = "the window") -> TimeWindow:
    """The window `text` names; InputError, one sentence naming `option`, when it names none or an empty one."""
    first, slash, second = text.partition("/")
    if not slash:  # a bare duration: the last `text` up to now
        first, second = text, "now"
    try:
        start, end = _instant(first, now), _instant(second, now)
        if start is None and end is not None and (length := _duration(first)) is not None:
            start = end - length
        elif end is None and start is not None and (length := _duration(second)) is not None:
            end = start + length
    except OverflowError:  # 9999-12-31/P2D, now-99999999d
        start = end = None
    if start is None or end is None:
        raise InputError(f"{option} {text!r} is not a time window: write {WINDOW_HELP}")
    if start >= end:
        says = "is empty: it ends when it starts" if start == end else "ends before it starts"
        raise InputError(f"{option} {text!r} {says} ({start.isoformat()} to {end.isoformat()})")
    return TimeWindow(start=start.timestamp(), end=end.timestamp())
