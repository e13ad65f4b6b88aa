"""A CronWorkflow's own fields as Argo's validate.CronWorkflow reads them (workflow/validate/validate.go, v4.1.2).

Each schedule goes through robfig/cron v3's ParseStandard, the timezone through Go's time.LoadLocation; the
concurrencyPolicy and startingDeadlineSeconds are checked against what the controller knows. The schema holds none
of these, so a schedule such as "61 * * * *" reached the cluster and was refused there.
"""

from __future__ import annotations

import re
import zoneinfo
from typing import Any

from components.durations import DurationError, parse_go_duration

__all__ = ["cron_findings"]

_DESCRIPTORS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# robfig/cron v3's standard fields: (name, min, max, names from min on)
_CRON_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 6, _DAYS),
)
_CONCURRENCY_POLICIES = ("Allow", "Forbid", "Replace")


def cron_findings(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """(path, message) for each part of a CronWorkflow's spec that Argo's validate.CronWorkflow refuses."""
    found: list[tuple[str, str]] = []
    schedules = spec.get("schedules")
    if schedules == []:
        found.append(("spec.schedules", "a CronWorkflow needs at least one schedule"))
    for i, schedule in enumerate(schedules if isinstance(schedules, list) else []):
        problem = _schedule_error(str(schedule))
        if problem:
            found.append((f"spec.schedules[{i}]", f"schedule {schedule!r} is malformed: {problem}"))
    timezone = spec.get("timezone")
    if isinstance(timezone, str) and timezone and not _is_timezone(timezone):
        found.append(("spec.timezone", f"timezone {timezone!r} is not a time zone of the IANA database"))
    policy = spec.get("concurrencyPolicy")
    if policy not in (None, "", *_CONCURRENCY_POLICIES):
        found.append(("spec.concurrencyPolicy", f"{policy!r} is not one of {', '.join(_CONCURRENCY_POLICIES)}"))
    deadline = spec.get("startingDeadlineSeconds")
    if isinstance(deadline, int) and deadline < 0:
        found.append(("spec.startingDeadlineSeconds", "startingDeadlineSeconds must not be negative"))
    return found


def _schedule_error(schedule: str) -> str | None:
    """Why robfig/cron v3's ParseStandard (Argo's CronWorkflow validation) refuses `schedule`, or None.

    Five fields (minute hour day-of-month month day-of-week), each a comma list of `*`, `?`, N, N-M, with `/STEP`
    (N/STEP runs to the field's maximum), months and weekdays also by their three-letter names; or a descriptor
    (`@daily`, `@every 1h30m`); either after an optional `CRON_TZ=Zone ` or `TZ=Zone `.
    """
    zone = re.match(r"(?:CRON_)?TZ=(\S*)\s+", schedule)
    if zone:
        if not _is_timezone(zone.group(1)):
            return f"{zone.group(1)!r} is not a time zone"
        schedule = schedule[zone.end() :].strip()
    if schedule.startswith("@"):
        every = schedule.removeprefix("@every ")
        if every != schedule:
            try:
                parse_go_duration(every)
            except DurationError:
                return f"{every!r} is not a Go duration"
        elif schedule not in _DESCRIPTORS:
            return f"{schedule!r} is not one of {', '.join(_DESCRIPTORS)} or @every DURATION"
        return None
    fields = schedule.split()
    if len(fields) != len(_CRON_FIELDS):
        return f"expected exactly 5 fields, found {len(fields)}"
    for text, (name, low, high, names) in zip(fields, _CRON_FIELDS, strict=True):
        for part in filter(None, text.split(",")):
            problem = _cron_range(part, low, high, names)
            if problem:
                return f"{name} {part!r}: {problem}"
    return None


def _cron_range(expr: str, low: int, high: int, names: tuple[str, ...]) -> str | None:
    """robfig/cron v3's getRange: `*`, `?`, N or N-M, then an optional /STEP, within [low, high]."""

    def number(text: str, names: tuple[str, ...] = ()) -> int | None:  # parseIntOrName, mustParseInt
        if text.lower() in names:
            return names.index(text.lower()) + low
        return int(text) if re.fullmatch(r"[+-]?[0-9]+", text, re.ASCII) and int(text) >= 0 else None

    span, *steps = expr.split("/")
    bounds = span.split("-")
    if len(steps) > 1 or len(bounds) > 2:
        return "too many slashes or hyphens"
    start: int | None = low
    end: int | None = high
    if bounds[0] not in ("*", "?"):
        start, end = number(bounds[0], names), number(bounds[-1], names)
        if steps and len(bounds) == 1:
            end = high
    step = number(steps[0]) if steps else 1
    if start is None or end is None or step is None:
        return "not a number (or a name) that is not negative"
    if start < low or end > high or start > end:
        return f"outside {low}-{high}"
    return "the step must be positive" if step == 0 else None


def _is_timezone(name: str) -> bool:
    """Whether Go's time.LoadLocation knows `name` (the IANA database, plus UTC and Local)."""
    if name in ("", "UTC", "Local"):
        return True
    try:
        zoneinfo.ZoneInfo(name)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        return False
    return True
