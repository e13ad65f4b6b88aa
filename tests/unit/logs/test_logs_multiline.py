"""A stack trace's lines belong to the event that logged it: one traceback is one event, in `parse` and `detect` alike.

The logs are generated: lines of a format (`logformat_kit.py`) with Python tracebacks, Java stack traces and Go
panics of random depth, frames and variables put after some of their error lines. Before, every frame was an event
of its own: one new exception was many new templates and many lines of the error count.
"""

from __future__ import annotations

import csv
import random
from collections import Counter
from pathlib import Path

import pytest
from logformat_kit import generate
from logformats import FORMATS

from components.logs.detect import detect
from components.logs.masking import template_pattern
from components.logs.multiline import ALONE, BLANK, EXCEPTION, HEAD, MORE, fold
from components.logs.parse import parse_files
from components.logs.reader import Malformed, SourceLine, read_lines
from components.logs.records import read_entries

_FORMATS = {fmt.name: fmt for fmt in FORMATS}
_MODULES = ("handlers", "engine", "db/pool", "cache", "http/client")
_CLASSES = ("OrderService", "Repository", "HttpClient", "Scheduler", "CacheLoader")
_EXCEPTIONS = {
    "python": ("ValueError", "TimeoutError"),
    "java": ("java.lang.IllegalStateException", "java.lang.NullPointerException"),
}


def _python_trace(rng: random.Random, exception: str) -> list[str]:
    lines = ["Traceback (most recent call last):"]
    for _ in range(rng.randint(1, 5)):
        module = rng.choice(_MODULES)
        lines.append(
            f'  File "/srv/app/{module}.py", line {rng.randint(1, 900)}, in {module.split("/")[-1]}_{rng.randint(1, 9)}'
        )
        lines.append(f"    result = handle(request, retries={rng.randint(0, 5)})")
        if rng.random() < 0.3:
            lines.append("             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^")
    messages = {
        "ValueError": f"invalid literal for int() with base 10: 'x{rng.randint(0, 999)}'",
        "TimeoutError": f"request {rng.randint(1, 99999)} timed out after {rng.randint(1, 60)}s",
    }
    return [*lines, f"{exception}: {messages[exception]}"]


def _java_trace(rng: random.Random, exception: str, *, cause: bool | None = None) -> list[str]:
    def frames() -> list[str]:
        return [
            f"\tat com.example.shop.{name}.run{rng.randint(1, 9)}({name}.java:{rng.randint(10, 900)})"
            for name in rng.choices(_CLASSES, k=rng.randint(2, 6))
        ]

    lines = [f"{exception}: queue {rng.randint(1, 64)} is full", *frames()]
    if cause or (cause is None and rng.random() < 0.7):
        lines += [f"Caused by: java.io.IOException: disk /dev/sd{rng.choice('abc')} full", *frames()]
        lines.append(f"\t... {rng.randint(2, 40)} more")
    return lines


def _go_panic(rng: random.Random) -> list[str]:
    lines = [f"panic: runtime error: index out of range [{rng.randint(3, 9)}] with length {rng.randint(0, 3)}", ""]
    for number in range(1, rng.randint(2, 4)):
        lines.append(f"goroutine {number} [running]:" if number == 1 else f"goroutine {number} [chan receive]:")
        for _ in range(rng.randint(1, 3)):
            lines.append(f"main.(*Server).handle(0xc000{rng.getrandbits(24):06x}, {{0x{rng.getrandbits(20):x}, 0x1}})")
            lines.append(f"\t/src/app/server.go:{rng.randint(10, 400)} +0x{rng.getrandbits(12):x}")
        lines += ["created by main.main in goroutine 1", f"\t/src/app/main.go:{rng.randint(10, 90)} +0x25", ""]
    return lines


def _with_traces(fmt: str, count: int, seed: int, trace: str) -> tuple[list[str], int]:
    """`count` lines of `fmt`, a trace of kind `trace` after every tenth; and how many events that is."""
    rng = random.Random(seed)
    out: list[str] = []
    for number, line in enumerate(generate(_FORMATS[fmt], count, seed=seed)):
        out.append(line.raw)
        if number % 10 == 3:
            if trace == "python":
                out += _python_trace(rng, rng.choice(_EXCEPTIONS["python"]))
            elif trace == "java":
                out += _java_trace(rng, rng.choice(_EXCEPTIONS["java"]))
            elif trace == "go":
                out += _go_panic(rng)
    events = count + (count // 10 if trace == "go" else 0)  # a panic is an event of its own: nothing logged it
    return out, events


def _parse(tmp_path: Path, lines: list[str], name: str = "app") -> list[dict[str, str]]:
    source = tmp_path / f"{name}.log"
    source.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    out = tmp_path / f"{name}.csv"
    parse_files([source], out)
    with out.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize(("fmt", "trace"), [("Python", "python"), ("logback", "java"), ("Go-log", "go")])
def test_a_trace_is_one_event_in_parse_and_in_detect_alike(tmp_path: Path, fmt: str, trace: str) -> None:
    lines, events = _with_traces(fmt, 200, seed=4, trace=trace)
    rows = _parse(tmp_path, lines)
    assert len(rows) == len(lines)  # every line keeps its row
    plain, _ = _with_traces(fmt, 200, seed=4, trace="none")
    plain_rows = _parse(tmp_path, plain, "plain")
    traced = {row["EventTemplate"] for row in rows} - {row["EventTemplate"] for row in plain_rows} - {""}
    # The traces add a template per logged line and exception (Go: its panic), never one per frame.
    known = {row["EventTemplate"] for row in plain_rows}
    if trace == "go":
        assert traced == {"panic: runtime error: index out of range [<*>] with length <*>"}
    for template in traced - {"panic: runtime error: index out of range [<*>] with length <*>"}:
        exception, _, first = template.partition(" | ")
        assert any(template_pattern(t).match(first) for t in known), template
        assert exception.split(":")[0] in _EXCEPTIONS[trace], template
    # Every line of a trace carries the event of the line that began it.
    starts = [number for number, line in enumerate(lines) if line in plain or line.startswith("panic: ")]
    for begin, end in zip(starts, [*starts[1:], len(lines)], strict=True):
        assert {rows[n]["EventId"] for n in range(begin, end) if lines[n].strip()} == {rows[begin]["EventId"]}

    malformed = Malformed()
    entries = list(read_entries([tmp_path / "app.log"], malformed))
    assert len(entries) == events and malformed.total == 0
    # parse and detect agree on every event's message
    assert [getattr(entry, "message", "") for _, entry in entries] == [
        rows[line.number - 1]["Content"] for line, _ in entries
    ]


@pytest.mark.parametrize("runtime", ["{time} stderr F ", "{time} "])  # a node's CRI file, kubectl logs --timestamps
@pytest.mark.parametrize(("fmt", "trace"), [("Python", "python"), ("logback", "java"), ("Go-log", "go")])
def test_a_trace_whose_every_line_a_container_runtime_timed_is_one_event(
    tmp_path: Path, runtime: str, fmt: str, trace: str
) -> None:
    # Read from a node or with `--timestamps`, each line of a trace carries the runtime's time: every frame was an
    # event of its own (`File "…"` a template), the exception never named, the error counted once per line.
    lines, events = _with_traces(fmt, 100, seed=5, trace=trace)
    timed = [runtime.format(time=f"2026-12-05T08:49:{n // 10:02d}.{n:09d}Z") + line for n, line in enumerate(lines)]
    rows = _parse(tmp_path, timed)
    plain_rows = _parse(tmp_path, lines, "plain")
    assert [row["EventId"] == rows[0]["EventId"] for row in rows] == [
        row["EventId"] == plain_rows[0]["EventId"] for row in plain_rows
    ]  # the same lines go together as without the runtime's time
    entries = list(read_entries([tmp_path / "app.log"], Malformed()))
    assert len(entries) == events
    named = [entry.message for _, entry in entries if " | " in getattr(entry, "message", "")]
    if trace != "go":  # a panic is an event of its own, no line logged it
        assert named and all(message.split(":")[0] in _EXCEPTIONS[trace] for message in named)
    assert not any(row["EventTemplate"].startswith(("<*> stderr F", "File", "at ")) for row in rows)


def test_a_goroutine_header_without_a_frame_under_it_is_an_event_of_its_own(tmp_path: Path) -> None:
    lines = ["2026-12-05 08:49:42 INFO app: ready", "goroutine 12 [running]:", "2026-12-05 08:49:43 INFO app: ready"]
    assert [role for _, role in fold(SourceLine("a", n, line) for n, line in enumerate(lines))] == [ALONE] * 3


def test_a_python_traceback_names_its_exception_and_counts_as_an_error(tmp_path: Path) -> None:
    lines = [
        "2026-12-05 08:49:42,001 WARNING app.worker: retrying job 7",
        *_python_trace(random.Random(1), "TimeoutError"),
        "2026-12-05 08:49:43,002 INFO app.worker: job 7 done",
    ]
    source = tmp_path / "app.log"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    entries = [entry for _, entry in read_entries([source], Malformed())]
    assert len(entries) == 2
    assert entries[0].message.startswith("TimeoutError: request ")  # type: ignore[union-attr]
    assert entries[0].message.endswith("s | retrying job 7")  # type: ignore[union-attr]
    assert entries[0].failed and not entries[1].failed
    rows = _parse(tmp_path, lines)
    assert rows[0]["EventTemplate"] == "TimeoutError: request <*> timed out after <*>s | retrying job <*>"


def test_a_dotnet_console_event_is_one_event_named_by_its_message(tmp_path: Path) -> None:
    # .NET writes `level: Category[EventId]` and its message on the indented line under it: each line was an event,
    # so every event counted twice and all of a category's events were one template (`Lifetime[<*>]`).
    lines = [
        "info: Microsoft.Hosting.Lifetime[14]",
        "      Now listening on: http://localhost:5000",
        "fail: Microsoft.AspNetCore.Server.Kestrel[13]",
        '      Connection id "0HMV", Request id "0HMV:00000001": An unhandled exception was thrown by the application.',
        "      System.InvalidOperationException: boom",
        "         at Program.<>c.<<Main>$>b__0_0() in /src/Program.cs:line 12",
        "info: Microsoft.Hosting.Lifetime[0]",
        "      Application is shutting down...",
        "warn: Microsoft.AspNetCore.DataProtection.Repositories.EphemeralXmlRepository[50]",
        "      Using an in-memory repository. Keys will not be persisted to storage.",
    ]
    source = tmp_path / "app.log"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    entries = [entry for _, entry in read_entries([source], Malformed())]
    assert [(entry.message.split(" | ")[0], entry.level) for entry in entries] == [  # type: ignore[union-attr]
        ("Now listening on: http://localhost:5000", "INFO"),
        ("System.InvalidOperationException: boom", "ERROR"),
        ("Application is shutting down...", "INFO"),
        ("Using an in-memory repository. Keys will not be persisted to storage.", "WARN"),
    ]
    rows = _parse(tmp_path, lines)
    assert len(rows) == len(lines)
    assert len({row["EventId"] for row in rows}) == 4  # four events, four templates
    assert [row["EventId"] for row in rows] == [rows[0]["EventId"]] * 2 + [rows[2]["EventId"]] * 4 + [
        rows[6]["EventId"]
    ] * 2 + [rows[8]["EventId"]] * 2


def test_a_java_util_logging_record_is_one_event_with_the_level_and_message_of_its_second_line(tmp_path: Path) -> None:
    # SimpleFormatter (Tomcat's catalina.out) writes the time and the caller, then `LEVEL: message` under it: each
    # line was an event, the caller lines a template of their own and the level lines untimed, so a SEVERE record
    # was half an error of the window's lines.
    lines = [
        "Dec 07, 2026 1:23:45 PM org.apache.catalina.startup.Catalina start",
        "INFO: Server startup in 1234 ms",
        "Dec 07, 2026 1:24:01 PM com.shop.api.OrderService place",
        "WARNING: order 8812 took 2301 ms",
        "Dec 07, 2026 1:24:02 PM com.shop.api.OrderService place",
        "WARNING: order 8813 took 2511 ms",
        "Dec 7, 2026 12:24:05 AM com.shop.api.OrderService place",
        "SEVERE: order 8814 failed",
        "java.lang.IllegalStateException: stock missing",
        "\tat com.shop.api.OrderService.place(OrderService.java:88)",
        "\tat com.shop.api.OrderController.post(OrderController.java:41)",
        "Dec 07, 2026 1:24:06 PM com.shop.api.OrderService place",
        "SEVERE: order 8815 failed",
        "INFO: a line of its own (no record's first line above it)",
    ]
    source = tmp_path / "catalina.out"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    entries = [entry for _, entry in read_entries([source], Malformed())]
    assert [(entry.message, entry.level) for entry in entries] == [  # type: ignore[union-attr]
        ("Server startup in 1234 ms | org.apache.catalina.startup.Catalina start", "INFO"),
        ("order 8812 took 2301 ms | com.shop.api.OrderService place", "WARNING"),
        ("order 8813 took 2511 ms | com.shop.api.OrderService place", "WARNING"),
        (
            "java.lang.IllegalStateException: stock missing | order 8814 failed | com.shop.api.OrderService place",
            "SEVERE",
        ),
        ("order 8815 failed | com.shop.api.OrderService place", "SEVERE"),
        ("a line of its own (no record's first line above it)", "INFO"),
    ]
    rows = _parse(tmp_path, lines)
    assert len(rows) == len(lines)
    events = [row["EventId"] for row in rows]
    assert events[2:6] == [events[2]] * 4, "two records of one template"
    assert events[6:11] == [events[6]] * 5 and len(set(events)) == 5
    assert rows[2]["EventTemplate"] == "order <*> took <*> ms | com.shop.api.OrderService place"


def test_a_chained_python_traceback_is_one_event_named_by_its_last_exception(tmp_path: Path) -> None:
    rng = random.Random(2)
    lines = [
        "2026-12-05 08:49:42,001 ERROR app: request failed",
        *_python_trace(rng, "ValueError"),
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        *_python_trace(rng, "TimeoutError"),
        "2026-12-05 08:49:43,002 INFO app: next",
    ]
    rows = _parse(tmp_path, lines)
    assert len({row["EventId"] for row in rows if row["EventId"]}) == 2
    assert rows[0]["EventTemplate"].startswith("TimeoutError: ")
    assert [row["EventId"] for row in rows if not row["Content"]] == ["", ""]  # blank lines stay without an event


def test_a_java_trace_with_its_cause_is_one_event_of_its_outer_exception(tmp_path: Path) -> None:
    lines = ["2026-12-05 08:49:42.200 [main] ERROR c.e.shop.Orders - order 12 failed"]
    lines += _java_trace(random.Random(3), "java.lang.IllegalStateException", cause=True)
    lines.append("2026-12-05 08:49:42.300 [main] INFO  c.e.shop.Orders - order 13 placed")
    assert any(line.startswith("Caused by: ") for line in lines) and lines[-2].startswith("\t... ")
    rows = _parse(tmp_path, lines)
    assert {row["EventId"] for row in rows[:-1]} == {rows[0]["EventId"]} != {rows[-1]["EventId"]}
    assert rows[0]["EventTemplate"] == "java.lang.IllegalStateException: queue <*> is full | order <*> failed"


def test_a_go_panic_with_its_goroutines_is_one_event(tmp_path: Path) -> None:
    lines = ["2026/12/05 08:49:42 serving on :8080", *_go_panic(random.Random(5)), "2026/12/05 08:49:50 restarted"]
    rows = _parse(tmp_path, lines)
    panic = rows[1]["EventId"]
    assert [row["EventId"] for row in rows] == [
        "E1",
        *(panic if line else "" for line in lines[1:-1]),
        rows[-1]["EventId"],
    ]
    assert rows[1]["EventTemplate"] == "panic: runtime error: index out of range [<*>] with length <*>"
    assert len({row["EventId"] for row in rows}) == 4  # three events and the blank lines' none


def test_two_different_exceptions_are_two_templates_and_a_new_one_is_one_finding(tmp_path: Path) -> None:
    rng = random.Random(6)

    def window(exception: str, day: int) -> list[str]:
        out = []
        for minute in range(40):
            out.append(f"2026-11-0{day} 10:{minute:02d}:00,000 INFO app: served request {rng.randint(1, 999)}")
            if minute % 4 == 0:
                out.append(f"2026-11-0{day} 10:{minute:02d}:01,000 ERROR app: request failed")
                out += _python_trace(rng, exception)
        return out

    for name, exception, day in (("baseline", "ValueError", 1), ("current", "TimeoutError", 2)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "app.log").write_text("\n".join(window(exception, day)) + "\n", encoding="utf-8")
    rows = _parse(tmp_path, window("ValueError", 1) + window("TimeoutError", 1))
    failed = {row["EventTemplate"] for row in rows if row["EventTemplate"].endswith("| request failed")}
    assert len(failed) == 2, failed
    # The same message of two exception types, logged by one long line: one word of twelve differs, which Drain
    # (similarity 0.9) would join were the exception not the first token of the event.
    long = (
        "2026-12-05 08:49:42.200 [main] ERROR c.e.shop.Payments - payment for the order could not be sent to the bank"
    )
    lines = []
    for exception in ("java.lang.IllegalStateException", "java.lang.UnsupportedOperationException") * 5:
        lines += [long, *_java_trace(rng, exception, cause=False)]
    templates = {row["EventTemplate"] for row in _parse(tmp_path, lines, "java")}
    assert {t.split(":")[0] for t in templates} == {
        "java.lang.IllegalStateException",
        "java.lang.UnsupportedOperationException",
    }
    report = detect([tmp_path / "current"], tmp_path / "out" / "report.json", baseline=[tmp_path / "baseline"])
    assert report.current.log_lines == 50 and report.current.log_errors == 10
    new = [f for f in report.findings if f.kind == "new_template"]
    assert len(new) == 1 and (new[0].template or "").startswith("TimeoutError: request <*> timed out after ")
    assert (new[0].template or "").endswith(" | request failed")


@pytest.mark.parametrize(
    "line",
    [
        "starting service v1.2",  # a format without times
        "  config: /etc/service.yaml",  # indented, of no trace's shape
        "ValueError: not in a traceback",  # an exception's shape with no traceback before it
        "java.lang.IllegalStateException: no frame follows",
        "main.main()",  # a Go frame's shape outside a goroutine
        "at least 3 workers are idle",
        "INFO:     127.0.0.1:5000 - GET / 200",  # uvicorn, untimed
    ],
)
def test_an_untimed_line_of_no_continuation_shape_stays_an_event_of_its_own(tmp_path: Path, line: str) -> None:
    lines = ["2026-12-05 08:49:42 INFO app: ready", line, "2026-12-05 08:49:43 INFO app: ready"]
    rows = _parse(tmp_path, lines)
    assert rows[0]["EventId"] == rows[2]["EventId"] != rows[1]["EventId"]
    assert len(list(read_entries([tmp_path / "app.log"], Malformed()))) == 3


def test_a_trace_after_a_python_traceback_ends_or_a_malformed_line_begins_its_own_event(tmp_path: Path) -> None:
    lines = [
        "\tat com.example.Orphan.run(Orphan.java:3)",  # the file's first line: nothing to continue
        "\tat com.example.Orphan.main(Orphan.java:9)",
        "2026-12-05 08:49:42 INFO app: ready",
        *_python_trace(random.Random(7), "ValueError"),
        "ValueError: a second exception line is no longer the traceback's",
    ]
    source = tmp_path / "app.log"
    source.write_bytes("\n".join(lines).encode() + b"\n\x00\x01binary\n\tat com.example.After.run(After.java:1)\n")
    roles = [role for _, role in fold(read_lines([source], Malformed()))]
    assert roles[:3] == [HEAD, MORE, HEAD] and roles[-4:] == [EXCEPTION, ALONE, ALONE, ALONE]


def test_fold_keeps_every_line_in_order_whatever_the_shapes() -> None:
    rng = random.Random(8)
    shapes = [
        "2026-12-05 08:49:42 INFO a",
        "",
        "   ",
        "\tat a.B.c(B.java:1)",
        "Caused by: x.Y: z",
        "\t... 3 more",
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in f',
        "    x()",
        "KeyError: 'k'",
        "goroutine 7 [running]:",
        "main.f()",
        "\t/a/b.go:3 +0x1",
        "java.lang.Error: e",
        "During handling of the above exception, another exception occurred:",
        "plain",
    ]
    for _ in range(200):
        lines = [
            SourceLine(rng.choice(["a", "b"]), number, rng.choice(shapes), rng.choice([None] * 9 + ["binary"]))
            for number in range(rng.randint(0, 30))
        ]
        folded = list(fold(lines))
        assert [line for line, _ in folded] == lines
        for index, (line, role) in enumerate(folded):
            if role in (MORE, EXCEPTION):  # a continuation has its event's first line before it, in its file
                before = [r for other, r in folded[:index] if r != BLANK and other.source == line.source]
                assert before and before[-1] in (HEAD, MORE, EXCEPTION)
            if role == BLANK:
                assert line.problem is None and not line.text.strip()
    assert Counter(role for _, role in fold([])) == Counter()
