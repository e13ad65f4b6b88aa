"""Generated log lines with their ground truth, and how `vcpilot logs parse` fares on them.

A `LogFormat` wraps messages in its raw line layout; its `Event`s are hand-written message templates whose variables
(`${int}`, `${ip}`, `${path}`, `${user}` …: numbers, ids, addresses, paths, hex, words) are drawn anew for every line,
so each generated `Line` carries its true message and template. `score_format` parses a format's raw lines and says
how far the message cut and the grouping are from the truth. The formats themselves are in `logformats.py`.
"""

from __future__ import annotations

import csv
import random
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from components.logs.parse import parse_files
from components.logs.reader import Malformed, SourceLine
from components.logs.records import classify
from components.logs.scoring import score_parsing
from components.logs.timestamps import TimeReader
from components.redact import redact_text

__all__ = ["Event", "FormatScore", "Layout", "Line", "LogFormat", "generate", "hexid", "score_format"]

_SLOT = re.compile(r"\$\{(\w+)\}")
_USERS = ("root", "admin", "alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy")
_HOSTS = ("db-primary", "cache01", "www.example.com", "api.internal", "mail.example.org", "ldap2", "build-agent")
_PACKAGES = ("com.android.phone", "com.tencent.mm", "com.google.android.gms", "com.android.systemui", "com.whatsapp")
_MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()
_DAYS = "Mon Tue Wed Thu Fri Sat Sun".split()


def hexid(rng: random.Random, size: int) -> str:
    """Hex digits with at least one digit and one letter among them, as real ids almost always have."""
    while True:
        text = "".join(rng.choices("0123456789abcdef", k=size))
        if re.search(r"\d", text) and re.search(r"[a-f]", text):
            return text


# What each `${slot}` of a template becomes: drawn anew for every line.
_DRAW: dict[str, Callable[[random.Random], str]] = {
    "int": lambda r: str(r.randint(0, 10 ** r.randint(1, 6))),
    "small": lambda r: str(r.randint(0, 30)),
    "big": lambda r: str(r.randint(10**7, 10**10)),
    "float": lambda r: f"{r.uniform(0, 100):.{r.randint(1, 7)}f}",
    "ip": lambda r: ".".join(str(r.randint(1, 254)) for _ in range(4)),
    "port": lambda r: str(r.randint(1024, 65535)),
    "pid": lambda r: str(r.randint(100, 65000)),
    "hex": lambda r: f"0x{r.getrandbits(32):x}",
    "hexid": lambda r: hexid(r, r.randint(7, 12)),
    "hex32": lambda r: hexid(r, 32),
    "uuid": lambda r: str(uuid.UUID(int=r.getrandbits(128))),
    "path": lambda r: (
        f"/var/lib/{r.choice(['app', 'nova'])}/{r.randint(1, 999)}/{hexid(r, 8)}.{r.choice(['db', 'log'])}"
    ),
    "winpath": lambda r: (
        f"C:\\Windows\\winsxs\\amd64_{hexid(r, 16)}_6.1.{r.randint(7600, 7601)}.{r.randint(10000, 30000)}\\x.dll"
    ),
    "route": lambda r: r.choice(["/health", "/metrics", "/v1/models", f"/api/v1/items/{r.randint(1, 99999)}"]),
    "status": lambda r: r.choice(["200", "200", "201", "404", "500"]),
    "agent": lambda r: r.choice(["curl/8.5.0", "python-httpx/0.27.2", "kube-probe/1.30", "Go-http-client/1.1"]),
    "user": lambda r: r.choice(_USERS),
    "host": lambda r: r.choice(_HOSTS),
    "pkg": lambda r: r.choice(_PACKAGES),
    "dur": lambda r: r.choice([f"{r.randint(1, 999)}ms", f"{r.uniform(0, 60):.1f}s", f"{r.randint(1, 900)}µs"]),
    "size": lambda r: f"{r.randint(1, 9999)}{r.choice(['KB', 'MB', 'GB'])}",
    "ver": lambda r: f"{r.randint(1, 9)}.{r.randint(0, 9)}.{r.randint(1000, 9999)}.{r.randint(10000, 30000)}",
    "ctime": lambda r: (
        f"{r.choice(_DAYS)} {r.choice(_MONTHS)} {r.randint(1, 28):2d} {r.randint(0, 23):02d}:"
        f"{r.randint(0, 59):02d}:{r.randint(0, 59):02d} 2005"
    ),
}


@dataclass(frozen=True)
class Event:
    """One message template of a format, and the header fields that go with it (a component, a level)."""

    template: str
    tags: tuple[str, ...] = ()

    @property
    def truth(self) -> str:
        """The template as the ground truth writes it: every variable `<*>`."""
        return _SLOT.sub("<*>", self.template)

    def draw(self, rng: random.Random) -> str:
        """A message of this template with its variables drawn anew."""
        return _SLOT.sub(lambda slot: _DRAW[slot.group(1)](rng), self.template)


Layout = Callable[[random.Random, datetime, Event, str], str]
"""Builds the raw line of a format from its time, its event (for the tags) and the message."""


@dataclass(frozen=True)
class LogFormat:
    """A log format: how its raw line wraps a message, and the events it writes."""

    name: str
    layout: Layout
    events: tuple[Event, ...]


@dataclass(frozen=True)
class Line:
    """A generated raw line with its ground truth."""

    raw: str
    message: str
    template: str
    time: float  # when it was written, epoch seconds


def generate(fmt: LogFormat, count: int, seed: int = 1) -> list[Line]:
    """`count` lines of `fmt`, its events drawn with skewed frequencies (some common, some rare), time moving on."""
    rng = random.Random(f"{fmt.name}:{seed}")
    weights = [1 / (rank + 1) for rank in range(len(fmt.events))]
    clock = datetime(2026, 12, 5, 8, 49, 42, tzinfo=UTC)
    lines = []
    for _ in range(count):
        clock += timedelta(milliseconds=rng.randint(1, 5000))
        event = rng.choices(fmt.events, weights)[0]
        message = event.draw(rng)
        lines.append(Line(fmt.layout(rng, clock, event, message), message, event.truth, clock.timestamp()))
    return lines


@dataclass(frozen=True)
class FormatScore:
    """How `vcpilot logs parse` did on one format's lines; every share is of all the lines."""

    lines: int
    message_exact: float  # the Content column is the true message
    header_left: float  # the Content column still holds some of the header
    message_eaten: float  # the Content column lost words of the message
    grouping_accuracy: float
    f1_grouping: float
    parsing_accuracy: float
    true_templates: int
    predicted_templates: int
    time_read: float  # lines whose time detect reads right, to the second (its windows need it); none for uvicorn

    def as_dict(self) -> dict[str, float | int]:
        """The figures, rounded for a report."""
        return {key: round(value, 4) if isinstance(value, float) else value for key, value in vars(self).items()}


def score_format(lines: Sequence[Line], work: Path) -> FormatScore:
    """Parse `lines` with `vcpilot logs parse` and compare the Content and EventTemplate columns with the truth.

    The true Content is the message as every output shows it: with what looks like a credential masked.
    """
    source = work / "raw.log"
    source.write_text("".join(line.raw + "\n" for line in lines), encoding="utf-8")
    out = work / "parsed.csv"
    parse_files([source], out)
    with out.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    exact = left = eaten = 0
    for line, row in zip(lines, rows, strict=True):
        ours, truth = " ".join(row["Content"].split()), " ".join(redact_text(line.message).split())
        exact += ours == truth
        left += ours != truth and ours.endswith(truth)
        eaten += ours != truth and truth.endswith(ours)
    scores = score_parsing([line.template for line in lines], [row["EventTemplate"] for row in rows])
    reader, malformed = TimeReader(datetime(2026, 12, 31, tzinfo=UTC)), Malformed()
    timed = 0
    for number, line in enumerate(lines, start=1):
        entry = classify(SourceLine(str(source), number, line.raw), malformed)
        if entry is None:
            continue
        if entry.timestamp is not None:
            seconds = reader.value(entry.timestamp)
        else:
            seconds = None if line.raw.startswith("{") else reader.line(line.raw)
        timed += seconds is not None and abs(seconds - line.time) < 1
    count = len(lines)
    return FormatScore(
        lines=count,
        message_exact=exact / count,
        header_left=left / count,
        message_eaten=eaten / count,
        grouping_accuracy=scores.grouping_accuracy,
        f1_grouping=scores.f1_grouping,
        parsing_accuracy=scores.parsing_accuracy,
        true_templates=scores.true_templates,
        predicted_templates=scores.predicted_templates,
        time_read=timed / count,
    )
