"""Read when a log line was written, in whatever common format it says so, without being told the format.

`--baseline-window` / `--current-window` cut one log source by time, so every line needs a time: the formats that
services, web servers and the Loghub systems write are recognized by their shape (ISO 8601 and its basic
`yyyyMMddTHHmmss`, syslog, Apache, Tomcat, java.util.logging's 12-hour clock, dotted dates, Spark's `yy/MM/dd`,
HDFS's `yyMMdd HHmmss`, BGL's `yyyy-MM-dd-HH.mm.ss`, epoch seconds or milliseconds, ...). The leftmost time in the
first characters of a line wins; a time without a zone is UTC, a time without a year (syslog) takes the year that puts
it at most a month after `reference`. Times are epoch seconds (float, UTC).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import lru_cache

__all__ = ["PREFIX_CHARS", "TimeReader", "format_time"]

PREFIX_CHARS = 200
"""How far into a line a time is looked for: headers are short; a time deep in a message is not the line's."""

_MONTHS = {name: number for number, name in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}
_MON = "(" + "|".join(_MONTHS) + ")"
_HMS = r"(\d{2}):(\d{2}):(\d{2})"
_FRACTION = r"(?:[.,:](\d{1,9}))?"
_ZONE = r"(Z|[+-]\d{2}(?::?\d{2})?|\s[+-]\d{2}:?\d{2})?(?!\d)"

# (name, pattern): `_convert` reads each pattern's groups. Where two start at the same
# place the first listed wins, so a longer format comes before the format it begins with.
_PATTERNS: tuple[tuple[str, str], ...] = (
    # 2026-11-03T12:00:01.5+01:00, 2015-10-18 18:01:47,978 (Hadoop, Zookeeper, Python logging), 2026-11-03T12:00Z
    ("iso", r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?" + _ZONE),
    # ISO 8601's basic format, its `T` and seconds required (eight digits alone are an id as often as a date):
    # 20261203T120000Z, 20261203T120000.123+0100
    (
        "iso_basic",
        r"(?<![\w.])(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})(?:[.,](\d{1,9}))?(Z|[+-]\d{2}(?:\d{2})?)?(?![\w.:])",
    ),
    # BGL: 2005-06-03-15.42.50.675872
    ("bgl", r"(\d{4})-(\d{2})-(\d{2})-(\d{2})\.(\d{2})\.(\d{2})(?:\.(\d{1,9}))?"),
    # the month first, as transformers and accelerate log (12/05/2026 08:49:42); the day first where it is over 12
    ("mdy_slash", r"(?<![\d/])(\d{1,2})/(\d{1,2})/(\d{4})[ T]" + _HMS + _FRACTION),
    # Go's log package, many others: 2026/11/03 12:00:01
    ("ymd_slash", r"(\d{4})/(\d{2})/(\d{2})[ T]" + _HMS + _FRACTION),
    # Apache error log, asctime: Sun Dec 04 04:47:44 2005
    ("ctime", r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)\s+" + _MON + r"\s+(\d{1,2})\s+" + _HMS + _FRACTION + r"\s+(\d{4})"),
    # Apache/nginx access log: 03/Nov/2026:12:00:01 +0000
    ("clf", r"(\d{2})/" + _MON + r"/(\d{4}):" + _HMS + r"(?:\s([+-]\d{4}))?"),
    # the day, the month by its name and the year joined by dashes: Tomcat's 03-Dec-2026 10:00:00.123, PHP's error log
    ("day_month_year_dashed", r"(?<!\d)(\d{1,2})-" + _MON + r"-(\d{4})[ :]" + _HMS + _FRACTION),
    # java.util.logging's SimpleFormatter: Dec 03, 2026 1:00:00 PM (a 12-hour clock, its hour unpadded)
    ("month_day_year_12h", _MON + r"\s+(\d{1,2}),\s+(\d{4})\s+(\d{1,2}):(\d{2}):(\d{2})(?:\s*([AP]M))?"),
    # dots: 2026.12.03 10:00:00 (year first), 03.12.2026 10:00:00 (day first, as most of Europe writes it)
    ("ymd_dot", r"(?<![\d.])(\d{4})\.(\d{2})\.(\d{2})[ T]" + _HMS + _FRACTION),
    ("dmy_dot", r"(?<![\d.])(\d{1,2})\.(\d{1,2})\.(\d{4})[ T]" + _HMS + _FRACTION),
    # the day first, the month by its name: Redis's 05 Dec 2026 08:49:42.123, RFC 2822's Sat, 05 Dec 2026 08:49:42 +0000
    ("day_month_year", r"(?<!\d)(\d{1,2})\s+" + _MON + r"\s+(\d{4})\s+" + _HMS + _FRACTION + r"(?:\s+([+-]\d{4}))?"),
    # syslog: Nov  3 12:00:01 (no year)
    ("syslog", _MON + r"\s+(\d{1,2})\s+" + _HMS + _FRACTION),
    # HealthApp: 20171223-22:15:29:606, its seconds unpadded too (20171223-22:16:0:159)
    ("compact", r"(\d{4})(\d{2})(\d{2})-(\d{1,2}):(\d{1,2}):(\d{1,2})" + _FRACTION),
    # The next three only open a line: in a message they would read an id or a ratio as a time.
    # Spark (log4j's yy/MM/dd HH:mm:ss): 17/06/09 20:10:40
    ("spark", r"^\s*(\d{2})/(\d{2})/(\d{2})\s" + _HMS),
    # HDFS: 081109 203615
    ("hdfs", r"^\s*(\d{2})(\d{2})(\d{2})\s(\d{2})(\d{2})(\d{2})(?!\d)"),
    # Android logcat: 03-17 16:13:38.811 (no year); Proxifier: [10.30 16:49:06] (no year); vLLM after its level and
    # process: (APIServer pid=7) INFO 03-17 16:13:38
    ("month_day", r"^\s*(?:\([^()]*\)\s+)?(?:[A-Z]+\s+)?\[?(\d{2})[-.](\d{2})\s+" + _HMS + _FRACTION),
    # klog (Kubernetes): I0317 16:13:38.811234 (no year), its level glued to the date
    ("klog", r"^\s*[IWEF](\d{2})(\d{2})\s+" + _HMS + _FRACTION),
)
_EACH = {name: re.compile(pattern) for name, pattern in _PATTERNS}
# The formats that only open a line, tried there first: searched near a time of day further on, `^` would not match.
_OPENING = tuple(_EACH[name] for name in ("hdfs", "month_day", "klog"))
_NAMES = {pattern: name for name, pattern in _EACH.items()}
# Every format but HDFS's holds a time of day: only near one are the formats tried (one search each is slow).
_CLOCK = re.compile(r"\d{2}:\d{2}|\d{2}\.\d{2}\.\d{2}|\dT\d{6}")
_BEFORE_CLOCK = 16  # `Sun Dec 04 04:47:44`: the longest date before its time of day, and a bracket
_AFTER_CLOCK = 24  # `04:47:44.123456 +01:00 2005`: seconds, fraction, zone or year after it
# Epoch seconds (10 digits) or milliseconds (13) as one of a line's first tokens (BGL, Thunderbird, HPC).
_EPOCH_TOKEN = re.compile(r"\d{10}(?:\d{3})?(?:\.\d+)?")
_EPOCH_TOKENS = 5
_EPOCH_RANGE = (946_684_800.0, 4_102_444_800.0)  # 2000-01-01 to 2100-01-01: outside, a number is not a time
_TEXT_RANGE = (0.0, 253_370_764_800.0)  # 1970-01-01 to 9999-01-01: a written time outside is not a log's


def _micro(fraction: str | None) -> int:
    return int((fraction or "0")[:6].ljust(6, "0"))


def _offset(zone: str | None) -> float:
    """A zone (`Z`, `+01:00`, `-0500`, `+01`) as its offset from UTC in seconds; none is UTC."""
    zone = (zone or "").strip()
    if zone in ("", "Z"):
        return 0.0
    digits = zone[1:].replace(":", "")
    offset = int(digits[:2]) * 3600 + int(digits[2:4] or 0) * 60
    return float(offset if zone[0] == "+" else -offset)


@lru_cache(maxsize=4096)
def _midnight(year: int, month: int, day: int) -> float:
    """Epoch seconds of a UTC date's midnight; ValueError for a date that does not exist. Lines share dates: cached."""
    return datetime(year, month, day, tzinfo=UTC).timestamp()


def _full(year: int, month: int, day: int, hms: tuple[str, ...], micro: int, zone: float) -> float:
    """Epoch seconds of a date, its `(hours, minutes[, seconds])` as digits, microseconds and zone offset."""
    h, m, s = (int(part or 0) for part in (*hms, "0")[:3])
    if h > 23 or m > 59 or s > 60:  # 60: a leap second
        raise ValueError(f"{h}:{m}:{s} is not a time of day")
    return _midnight(year, month, day) + h * 3600 + m * 60 + s + micro / 1e6 - zone


def _yearless(month: int, day: int, hms: tuple[str, ...], micro: int, reference: datetime) -> float:
    """The time in the year that puts it at most a month after `reference`: logs are read after they are written."""
    seconds = _full(reference.year, month, day, hms, micro, 0.0)
    if seconds > reference.timestamp() + 31 * 86400:
        return _full(reference.year - 1, month, day, hms, micro, 0.0)
    return seconds


def _convert(name: str, g: tuple[str, ...], reference: datetime) -> float:
    """The time (epoch seconds) the groups of format `name` spell (missing groups are '')."""
    if name in ("iso", "iso_basic", "bgl", "ymd_slash", "ymd_dot", "compact"):
        zone = _offset(g[7]) if name in ("iso", "iso_basic") else 0.0
        return _full(int(g[0]), int(g[1]), int(g[2]), g[3:6], _micro(g[6]), zone)
    if name == "ctime":
        return _full(int(g[6]), _MONTHS[g[0]], int(g[1]), g[2:5], _micro(g[5]), 0.0)
    if name == "mdy_slash":
        first, second = int(g[0]), int(g[1])
        month, day = (first, second) if first <= 12 else (second, first)
        return _full(int(g[2]), month, day, g[3:6], _micro(g[6]), 0.0)
    if name == "day_month_year":
        return _full(int(g[2]), _MONTHS[g[1]], int(g[0]), g[3:6], _micro(g[6]), _offset(g[7]))
    if name == "day_month_year_dashed":
        return _full(int(g[2]), _MONTHS[g[1]], int(g[0]), g[3:6], _micro(g[6]), 0.0)
    if name == "month_day_year_12h":
        hour, half = int(g[3]), g[6]
        if half:  # 12 AM is midnight, 12 PM noon
            if not 1 <= hour <= 12:
                raise ValueError(f"{hour} is no hour of a 12-hour clock")
            hour = hour % 12 + (12 if half == "PM" else 0)
        return _full(int(g[2]), _MONTHS[g[0]], int(g[1]), (str(hour), g[4], g[5]), 0, 0.0)
    if name == "dmy_dot":
        return _full(int(g[2]), int(g[1]), int(g[0]), g[3:6], _micro(g[6]), 0.0)
    if name == "clf":
        return _full(int(g[2]), _MONTHS[g[1]], int(g[0]), g[3:6], 0, _offset(g[6]))
    if name in ("spark", "hdfs"):
        return _full(2000 + int(g[0]), int(g[1]), int(g[2]), g[3:6], 0, 0.0)
    month = _MONTHS[g[0]] if name == "syslog" else int(g[0])  # syslog, month_day, klog
    return _yearless(month, int(g[1]), g[2:5], _micro(g[5]), reference)


def _epoch(number: float) -> float | None:
    """Seconds, milliseconds, microseconds or nanoseconds since 1970, told apart by size; None if out of range."""
    for scale in (1.0, 1e3, 1e6, 1e9):
        seconds = number / scale
        if seconds < _EPOCH_RANGE[1]:
            return seconds if seconds >= _EPOCH_RANGE[0] else None
    return None


class TimeReader:
    """Reads the time of each line of a source; remembers the format that worked last, as a file keeps to one.

    `reference` (UTC) dates the formats without a year: the year that puts a time at most a month after it.
    """

    def __init__(self, reference: datetime) -> None:
        self.reference = reference
        self._last: re.Pattern[str] | None = None  # the format of the previous timed line, tried first

    def line(self, text: str) -> float | None:
        """When the line `text` says it was written (epoch seconds), or None when its first characters hold no time."""
        head = text[:PREFIX_CHARS]
        last = self._last
        if last is not None and (found := last.search(head)) and not _CLOCK.search(head, 0, found.start()):
            seconds = self._seconds(found)
            if seconds is not None:
                return seconds
        for opening in _OPENING:
            if (found := opening.match(head)) and (seconds := self._seconds(found)) is not None:
                return seconds
        for clock in _CLOCK.finditer(head):
            low, high = max(0, clock.start() - _BEFORE_CLOCK), clock.end() + _AFTER_CLOCK
            # Found within the window, read again from where it starts: the window's end may cut its seconds off
            # (an IP address's `72.89.10` is a clock too, and its window can end inside the time after it).
            near = [
                whole
                for p in _EACH.values()
                if (cut := p.search(head, low, high)) is not None and (whole := p.match(head, cut.start())) is not None
            ]
            for found in sorted(near, key=lambda m: m.start()):  # stable: the earlier listed wins a tie
                if (seconds := self._seconds(found)) is not None:
                    return seconds
        for token in head.split(None, _EPOCH_TOKENS)[:_EPOCH_TOKENS]:
            if _EPOCH_TOKEN.fullmatch(token):
                return _epoch(float(token))
        return None

    def value(self, value: str | float) -> float | None:
        """The time a JSON field holds: epoch seconds, ms, µs or ns as a number (or digits), else a text time."""
        if isinstance(value, int | float):
            return _epoch(float(value))
        text = value.strip()
        try:
            return _epoch(float(text))
        except ValueError:
            return self.line(text)

    def _seconds(self, found: re.Match[str]) -> float | None:
        try:
            seconds = _convert(_NAMES[found.re], found.groups(""), self.reference)
        except (ValueError, OverflowError):  # 2026-13-45: the shape of a time, not a time
            return None
        if not _TEXT_RANGE[0] <= seconds < _TEXT_RANGE[1]:
            return None
        self._last = found.re
        return seconds


def format_time(seconds: float) -> str:
    """Epoch seconds as ISO 8601 in UTC, to the second: `2026-11-03T12:00:01Z`."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
