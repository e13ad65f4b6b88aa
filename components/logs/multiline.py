r"""Which lines continue the event before them: a stack trace's lines belong to the line that logged it.

A Python traceback, a Java stack trace or a Go panic is one event written over many lines. Read line by line, every
frame would be an event of its own — one new exception, many new templates — so, as Fluent Bit's and Vector's
multiline parsers do, a line of a recognised continuation shape is folded into the event that began before it.
The shapes are strict, and none is that of a line with a time or a header of its own:

- a frame: leading whitespace then `at name(`… (Java, Kotlin, C#, Node.js), `File "…", line N` (Python), or a Go
  source line `/path/file.go:12 +0x1d`; `Caused by: …`, `Suppressed: …` and `... 12 more` (`common frames omitted`);
- `Traceback (most recent call last):`; after it any indented line (the code under a `File` line, `^^^^` marks),
  and the first unindented `Name: message` line, the exception that ends the traceback (a level such as `INFO:` is
  not one); after that, Python's `During handling of the above exception …` / `The above exception was the direct
  cause …` lines, the chained traceback following;
- Go's `goroutine N [running]:` and `[signal …]`; after a goroutine header its function lines (`main.main()`,
  `created by …`);
- a bare exception line (`java.lang.IllegalStateException: boom`, `Error: boom`), only when an `at` frame follows it
  on the next line;
- .NET's console logger: after its `fail: Category[EventId]` line (`info:`, `warn:` …) every indented line — the
  message, then the exception and its frames, the first unindented `System.…Exception: …` line naming it;
- java.util.logging's SimpleFormatter (Tomcat's `catalina.out`): after its `Dec 7, 2026 1:24:05 PM Class method`
  line, the `SEVERE: message` line under it, which names the event's level (`told_message`); a Throwable's trace
  after that as any other.

A continuation line needs an event before it in its file (the first line of a file, or the line after a malformed
one or after more than `MAX_BLANKS` blank lines, begins an event of its own whatever its shape). Blank lines inside a
traceback neither end nor join it: they stay lines without an event. Every other line — untimed ones too, as some
formats have no times at all — is an event of its own, as before.

The folded event's message is the exception its trace names, then its first line's (`joined_message`: `ValueError:
bad value | request failed`); the exception comes first because Drain routes a line by its first tokens, so two
different exceptions logged by one line are two templates however long that line (after it, one word of ten may
differ within a template), and the exception's type shows in detect's report. An event that carries a stack trace
counts as an error, whatever level its first line names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from components.logs.header import DOTNET_LEVELS, ERROR_LEVELS
from components.logs.reader import SourceLine

__all__ = [
    "ALONE",
    "BLANK",
    "CONTINUING",
    "EXCEPTION",
    "HEAD",
    "MAX_BLANKS",
    "MORE",
    "SEPARATOR",
    "TEXT",
    "Role",
    "fold",
    "joined_message",
    "runtime_body",
    "told_message",
    "traced_level",
]

Role = int
ALONE: Role = 0
"""A line that is a whole event (or a malformed line)."""
HEAD: Role = 1
"""The first line of an event that continues over the lines after it."""
MORE: Role = 2
"""A line that continues the event before it."""
EXCEPTION: Role = 3
"""A line that continues the event and names its exception (the last one named is the event's)."""
BLANK: Role = 4
"""A blank line: no event, and it does not end one."""
TEXT: Role = 5
"""A line that continues the event's message (.NET writes its message under its first line): no trace, no error."""
CONTINUING = frozenset({MORE, EXCEPTION, TEXT})
"""The roles of a line that continues the event before it."""

MAX_BLANKS = 2
"""Blank lines a traceback may hold between two of its lines (Python's chained tracebacks, Go's goroutines)."""
SEPARATOR = "|"
"""What stands between an event's exception and its first line in the folded message."""

# Continuation shapes anywhere after an event.
_AT_FRAME = re.compile(r"[ \t]+at (?:async |new )?(?:[^\s(]+ ?\(|\S+:\d+)")  # Java, C#, Node.js
_ALWAYS = re.compile(
    r"[ \t]+File \"[^\"]*\", line \d+"  # Python's frame (the code under it follows: see _PYTHON)
    r"|[ \t]+\S+\.go:\d+(?: \+0x[0-9a-fA-F]+)?[ \t]*\Z"  # Go's source line
    r"|[ \t]*(?:Caused by|Suppressed): \S"
    r"|[ \t]*\.\.\. \d+ (?:more|common frames omitted)[ \t]*\Z"
    r"|[ \t]+panic: "  # Go's panic inside a panic
    r"|\[signal [A-Z]+: "  # Go: what signal a panic came from
)
# What a container runtime puts before each line a program wrote: CRI's `2026-…Z stderr F ` (a node's
# /var/log/containers), `kubectl logs --timestamps`' time. A trace's lines each carry it.
_RUNTIME = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2}) (?:(?:stdout|stderr) [PF] )?", re.ASCII
)
_TRACEBACK = re.compile(r"Traceback \(most recent call last\):[ \t]*\Z")
_GOROUTINE = re.compile(r"goroutine \d+ \[[^\]]*\]:[ \t]*\Z")
_GO_FRAME = re.compile(r"\S+\(.*\)[ \t]*\Z|created by \S|\.\.\.additional frames elided\.\.\.")
_CHAINED = re.compile(
    r"(?:During handling of the above exception, another exception occurred"
    r"|The above exception was the direct cause of the following exception):[ \t]*\Z"
)
# The line that ends a Python traceback: `ValueError: bad`, `requests.exceptions.HTTPError: 500`, `KeyboardInterrupt`.
_PYTHON_EXCEPTION = re.compile(r"(?:[A-Za-z_]\w*\.)*(?P<name>[A-Z]\w*)(?::(?:[ \t].*)?)?\Z", re.DOTALL)
# A Java (C#, JavaScript) exception on a line of its own, an `at` frame after it.
_BARE_EXCEPTION = re.compile(r"(?:[A-Za-z_$][\w$]*\.)*[A-Za-z_$][\w$]*(?:Exception|Error|Throwable)(?::[ \t].*)?\Z")

# .NET's Microsoft.Extensions.Logging console: `fail: Category[EventId]`, a time before it where one is configured.
_DOTNET_HEAD = re.compile(rf"(?:\S.*[ \t])?(?:{'|'.join(DOTNET_LEVELS)}): \S+\[\d+\][ \t]*\Z")

# java.util.logging's SimpleFormatter: the time and the caller (`Dec 7, 2026 1:24:05 PM com.shop.Orders place`),
# then its level and message on the next line.
_JUL_HEAD = re.compile(r"[A-Z][a-z]{2} \d{1,2}, \d{4} \d{1,2}:\d{2}:\d{2} [AP]M [\w$.<>-]+(?: [\w$<>-]+)?[ \t]*\Z")
_JUL_LEVEL = re.compile(r"(SEVERE|WARNING|INFO|CONFIG|FINE|FINER|FINEST): ")
_JUL_OPENINGS = frozenset("SWICF")

_NONE, _PYTHON, _PYTHON_ENDED, _GO, _DOTNET, _JUL = 0, 1, 2, 3, 4, 5  # what the lines before say the next may be
_INDENT = frozenset(" \t")
# How a line of a continuation shape may open: any other line, after a line that set no mode, begins an event unless
# the next line is an `at` frame (its bare exception line). Most lines are settled by these two set lookups.
_OPENINGS = frozenset(" \tTgCS[.")
_LEVEL_WORDS = frozenset(
    "TRACE DEBUG INFO NOTICE WARN WARNING ERROR ERR SEVERE FATAL CRITICAL CRIT ALERT EMERG PANIC LOG".split()
)


def joined_message(message: str, exception: str | None, told: str | None = None) -> str:
    """The message of a folded event: the exception its trace names, its first `TEXT` line, its first line's message.

    Those it has; the `TEXT` line is what .NET writes under its first line.
    """
    parts = (part.strip() for part in (exception, told, message) if part)
    return f" {SEPARATOR} ".join(part for part in parts if part)


def runtime_body(text: str) -> str:
    """`text` without the time (and stream) a container runtime put before it, what the program itself wrote."""
    if text[10:11] == "T" and (prefix := _RUNTIME.match(text)):
        return text[prefix.end() :]
    return text


def told_message(text: str) -> tuple[str, str | None]:
    """What a `TEXT` line tells: its message, and the level it names (java.util.logging's `SEVERE: …`).

    .NET's indented message names none.
    """
    body = runtime_body(text)
    if found := _JUL_LEVEL.match(body):
        return body[found.end() :], found.group(1)
    return body, None


def traced_level(level: str | None) -> str:
    """The level of an event that carries a stack trace: an error, or the worse level its first line names."""
    return level if level in ERROR_LEVELS else "ERROR"


class _Shapes:
    """The continuation rules of one file, with what the lines before say the next may be."""

    __slots__ = ("mode", "open")

    def __init__(self) -> None:
        self.mode = _NONE
        self.open = False  # an event to continue: a line read, and no malformed line or long blank run since

    def reset(self) -> None:
        self.mode, self.open = _NONE, False

    def role(self, text: str, following: str | None) -> Role:
        """`text`'s role (`MORE`, `EXCEPTION`, or `ALONE` when it begins an event); `following` is the next line."""
        mode, first = self.mode, text[:1]
        if mode == _PYTHON:
            if first in (" ", "\t"):
                return MORE
            found = _PYTHON_EXCEPTION.match(text)
            if found is not None and found.group("name").upper() not in _LEVEL_WORDS:
                self.mode = _PYTHON_ENDED
                return EXCEPTION
        elif mode == _PYTHON_ENDED:
            if _CHAINED.match(text):
                return MORE
        elif mode == _GO and (_GO_FRAME.match(text) or (first in (" ", "\t") and _ALWAYS.match(text))):
            return MORE
        elif mode == _DOTNET and first in _INDENT:
            if _AT_FRAME.match(text):
                return MORE
            return EXCEPTION if _BARE_EXCEPTION.match(text.lstrip()) else TEXT
        elif mode == _JUL and _JUL_LEVEL.match(text):
            self.mode = _NONE
            return TEXT
        self.mode = _NONE
        role = ALONE
        if first in (" ", "\t"):
            if _AT_FRAME.match(text):
                role = MORE
            elif _ALWAYS.match(text):
                role = MORE
                if text.lstrip().startswith("File "):
                    self.mode = _PYTHON
        elif first in ("T", "g", "C", "S", "["):
            if _TRACEBACK.match(text):
                role, self.mode = MORE, _PYTHON
            elif _GOROUTINE.match(text) and following is not None and _GO_FRAME.match(following):
                role, self.mode = MORE, _GO  # a goroutine's header, its first frame under it
            elif _ALWAYS.match(text):
                role = MORE
        elif first == "." and _ALWAYS.match(text):
            role = MORE
        if role == ALONE and following is not None and following[:1] in (" ", "\t") and _AT_FRAME.match(following):
            if ("Exception" in text or "Error" in text or "Throwable" in text) and _BARE_EXCEPTION.match(text):
                role = EXCEPTION
        if role == ALONE and following is not None and following[:1] in _INDENT and _DOTNET_HEAD.match(text):
            self.mode = _DOTNET  # the indented lines after it are its message and its exception
        elif role == ALONE and _jul_level_follows(following) and _JUL_HEAD.match(text):
            self.mode = _JUL  # the next line is its level and message
        if not self.open:
            return ALONE  # nothing to continue: the line begins an event (its shape still sets the mode)
        return role


def _jul_level_follows(following: str | None) -> bool:
    return following is not None and following[:1] in _JUL_OPENINGS and _JUL_LEVEL.match(following) is not None


def fold(lines: Iterable[SourceLine]) -> Iterator[tuple[SourceLine, Role]]:
    """Each line of `lines`, in order, with its role: `ALONE`, `HEAD`, `MORE`, `EXCEPTION`, `TEXT` or `BLANK`.

    An event's lines are `HEAD` then `CONTINUING` lines (`BLANK` ones among them); a malformed line is `ALONE`.
    A line's role may wait on the next few (a first line on the line after it, blank lines on the next non-blank
    one): at most `MAX_BLANKS` + 2 lines are held.
    """
    shapes = _Shapes()
    held: SourceLine | None = None  # a line that begins an event: `HEAD` if the next non-blank line continues it
    blanks: list[SourceLine] = []  # blank lines after the last line, held for the same reason
    source = None

    def end_event() -> Iterator[tuple[SourceLine, Role]]:
        """End the event being read: the held line begins none, the held blank lines are blank, the shapes reset."""
        nonlocal held
        if held is not None:
            yield held, ALONE
            held = None
        yield from ((blank, BLANK) for blank in blanks)
        blanks.clear()
        shapes.reset()

    iterator = iter(lines)
    following = next(iterator, None)
    after = runtime_body(following.text) if following is not None else ""  # the shapes are the program's lines'
    while following is not None:
        line, text, following = following, after, next(iterator, None)
        after = runtime_body(following.text) if following is not None else ""
        if line.source != source:
            yield from end_event()
            source = line.source
        if line.problem is None and (not text or text.isspace()):
            blanks.append(line)
            if len(blanks) > MAX_BLANKS:  # a long blank run ends any event
                yield from end_event()
            continue
        if line.problem is not None:
            role: Role = ALONE
            shapes.reset()
        elif (
            shapes.mode == _NONE
            and text[:1] not in _OPENINGS
            and after[:1] not in _INDENT
            and not (after[:1] in _JUL_OPENINGS and _JUL_LEVEL.match(after))  # inline: the hot loop
        ):
            role = ALONE  # the common case, settled without the rules
            shapes.open = True
        else:
            role = shapes.role(text, after if following is not None and following.source == line.source else None)
            shapes.open = True
        if role == ALONE:
            if held is not None:
                yield held, ALONE
            if blanks:
                yield from ((blank, BLANK) for blank in blanks)
                blanks.clear()
            held = line if line.problem is None else None
            if held is None:
                yield line, ALONE
                shapes.open = False
            continue
        if held is not None:
            yield held, HEAD
            held = None
        if blanks:
            yield from ((blank, BLANK) for blank in blanks)
            blanks.clear()
        yield line, role
    yield from end_event()
