"""Where a raw log line's header ends and its message starts, in formats nobody configured.

Template mining must see messages only: a header left in front of them adds tokens that are constant for every
event (which merges events) or vary on their own (a host, a node, a program: which splits them). One rule serves
every format. A header is found only around a date or a time (a line without one is all message, which keeps a
bare message's leading `error:` or `3 more`; an epoch — HPC's, squid's — counts where a header field follows it); it
is read token by token:

- up to three tokens of any kind may come before the first date or time (an access log's client address and user,
  an OpenStack file name, vLLM's `(APIServer pid=7)`), and one more may sit between two times (BGL's node,
  Thunderbird's host);
- then come header fields: times, dates, numbers (pids), levels, `-`, bracketed fields, `key=` time or level
  (logfmt), klog's `I1205` and `file.go:12]`, fields joined by `|` (HealthApp), and padded columns (a level or
  component followed by two spaces or more, as fixed-width formats write them);
- a run of upper-case tokens up to a level (BGL's `RAS KERNEL INFO`), or after a level a dotted logger followed by
  a bracketed context (OpenStack), ends the header;
- otherwise one component may follow: `host prog[pid]:` (syslog), `host prog:` after a syslog time, `logger:` after
  a level, or `name - ` (Python's `%(name)s - `, Proxifier's program) after which fields may come again.

RFC 5424 syslog (`<34>1 TIMESTAMP HOST APP PROCID MSGID SD MSG`) is read by its grammar, and a line without a time
that opens with `LEVEL:` and spaces (uvicorn) loses that prefix. A line that is header to its end keeps its last
field as its message. Every rule names classes of digits, never a digit,
so lines that differ in their digits only have their header end at the same place (`masking.LineTokenizer` relies
on it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["DOTNET_LEVELS", "ERROR_LEVELS", "LETTER_LEVELS", "SYSLOG_LEVELS", "level_of", "split_header"]

_UPPER_LEVELS = "TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|ERR|SEVERE|FATAL|CRITICAL|CRIT|ALERT|EMERG|PANIC"
_LEVELS = _UPPER_LEVELS + "|" + _UPPER_LEVELS.lower()
# Title-case levels are words of a message as often as levels: a header field only where a column pads them.
_TITLE_LEVELS = "Trace|Debug|Info|Notice|Warn|Warning|Error|Severe|Fatal|Critical|Alert|Panic"
ERROR_LEVELS = frozenset({"ERROR", "ERR", "SEVERE", "FATAL", "CRITICAL", "CRIT", "ALERT", "EMERG", "PANIC"})
"""Levels (upper-cased) whose lines count as errors."""
LETTER_LEVELS = {"V": "TRACE", "D": "DEBUG", "I": "INFO", "W": "WARN", "E": "ERROR", "F": "FATAL"}
"""One-letter levels: logcat's, klog's (`E1205`), MongoDB's (`"s": "E"`)."""
SYSLOG_LEVELS = ("EMERG", "ALERT", "CRIT", "ERR", "WARNING", "NOTICE", "INFO", "DEBUG")
"""Syslog's severities by number, 0 to 7: a `<PRI>`'s remainder by 8, journald's PRIORITY, GELF's level."""

_BRACKETED = r"\[(?:[^\[\]]++|\[[^\[\]]*+\])*+\]"  # [main], [Sun Dec 04 04:47:44 2005], [QuorumPeer[myid=1]/0:...]
_TIME = r"\d{1,2}:\d{1,2}:\d{1,2}(?:[.,:]\d+)?"  # 20:10:40,978; HealthApp's 22:15:29:606 and 22:16:0:159
_ZONE = r"(?:Z|[+-]\d{2}(?::?\d{2})?)"  # ISO 8601 writes an hour's offset alone too: +05
# Epoch seconds (or milliseconds), HPC's and squid's only time: a time in a header only where a field follows it.
_EPOCH = r"\d{10}(?:\d{3}|\.\d+)?"
# A token that dates the line: a time of day, a date, or both.
_STAMP = (
    r'(?:\w+=)?"?(?:'
    r"\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?" + _ZONE + r"?)?"  # ISO 8601, or its date alone
    r"|\d{4}-\d{2}-\d{2}-\d{2}\.\d{2}\.\d{2}(?:\.\d+)?"  # BGL: 2005-06-03-15.42.50.675872
    r"|\d{8}T\d{6}(?:[.,]\d+)?" + _ZONE + r"?"  # ISO 8601's basic format: 20261203T120000Z
    r"|\d{8}-" + _TIME + r"|\d{4}\.\d{2}\.\d{2}"  # HealthApp: 20171223-22:15:29:606; BGL: 2005.06.03
    r"|\d{1,4}/\d{1,2}/\d{1,4}"  # 17/06/09, 2026/12/05
    r"|" + _TIME + _ZONE + r"?"
    r"|" + _EPOCH + r"(?!\S)"
    r')"?,?'
)
# Where a line was logged, by a source file's extension and a line number (`worker.py:1234`, `main.go:12:`, logfmt's
# `caller=main.go:12`); a host and port (`proxy.example.com:5070`) is not one.
_SOURCE_FILE = (
    r"(?:\w+=)?[{(]?[\w.\-/]+\.(?:py|go|java|kt|scala|js|ts|c|cc|cpp|cxx|h|hpp|rs|rb|cs|php|swift|ex|exs|erl|lua|pl):\d+"
    r"(?::[\w<>.]+)?[})]?:?"
)
# A token that belongs in a header but does not date the line by itself.
_FIELD = (
    # `---`, a pid or a signed flag (HPC's `-1`), a zone, Android's 03-17
    r"(?:" + _BRACKETED + r"|-{1,3}|-?\d+|[+-]\d{2}:?\d{2}|\d{2}-\d{2}"
    r"|(?:" + _LEVELS + r")|[VDIWEFP]|[IWEF]\d{4}"  # levels, logcat's one letter, klog's I1205
    r"|stdout|stderr"  # a container runtime's stream (CRI: `stdout F`, F for a full line, P for a partial one)
    # a month or a day, short or long, and no other word that begins as one (`Marking`, `Monitoring`)
    r"|Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?"
    r"|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?"
    r"|(?:Mon|Tues?|Wed(?:nes)?|Thu(?:rs)?|Fri|Sat(?:ur)?|Sun)(?:day)?"
    r'|\w+="?(?:' + _LEVELS + r')"?'  # logfmt's level=info
    r"|[\w.\-/]+:\d+\]"  # klog's source location: controller.go:123]
    r"|"
    + _SOURCE_FILE  # a source file and line: `CassandraDaemon.java:123`, Airflow's `{taskinstance.py:12}`
    + r"|(?:"
    + _UPPER_LEVELS
    + r"|LOG):"  # a level with its colon: PostgreSQL's `LOG:  `, `ERROR:  `
    r"|UTC|GMT|[ECMP][SD]T|CES?T|BST|IST|JST|KST|AE[SD]T|EES?T|WES?T|MSK|HKT|SGT"  # a zone by its name
    r"|AM|PM"  # a 12-hour clock's half (java.util.logging's `Dec 03, 2026 1:00:00 PM`)
    r"|\d+#\d+:|\*\d+"  # nginx's pid#thread: and *connection
    r"|[*#.]"  # Redis's level, one character (`_LEVEL_MARKS`)
    r"),?"
)
_SEPARATOR = r"([ \t]*\|[ \t]*|\s+|$)"
# What dates a line, wherever it is: every time token holds one, and so does a bracketed field that dates the line.
_DATED = re.compile(r"\d{1,2}:\d{1,2}:\d{1,2}|\d{4}[-./]\d{2}[-./]\d{2}|\d{1,4}/\d{1,2}/\d{1,4}|\d{8}T\d{6}")
# More than `_DATED` (an IP address too) but cheaper to look for: a line without it near its start has no header.
_MAYBE_DATED = re.compile(
    r"\d{1,4}(?::\d{1,2}:\d{1,2}|[-./]\d{1,2}[-./]\d{1,4}|\d{4}T\d{6})|^\s*\d{6,}\s+\d{6}\b"
    r"|(?<!\S)" + _EPOCH + r"(?!\S)"
)
_DATED_WITHIN = 200  # characters: a header is short
# A line's first tokens when each is a time or a field, in one match; the last token and its separator are kept.
_RUN = re.compile(r"(?:(" + _STAMP + "|" + _FIELD + ")" + _SEPARATOR + ")+")
# A header's tokens one at a time: a bracketed field (spaces and all), a `key="quoted value"`, or anything up to a
# space or `|`; each with the separator after it.
_TOKEN = re.compile(r"(" + _BRACKETED + r'|\w++="[^"]*+"|[^\s|]++)' + _SEPARATOR)
# What kind a token is: a time (group 1), a field (group 2), or neither.
_KIND = re.compile(r"(" + _STAMP + r")|(" + _FIELD + r")")
_KINDS_KEPT = 4096  # tokens whose kind is remembered: words, hosts and levels repeat from line to line
_TOKENS_READ = 16  # a header is short: this many tokens are the most a header can take
_BEFORE_STAMP = 3  # tokens of any kind before the first time: `10.0.0.1 - alice [05/Dec/2026:08:49:45 +0000]`
_TITLE_LEVEL = re.compile(_TITLE_LEVELS)
_UPPER_LEVEL = re.compile(_UPPER_LEVELS)
_MONTH = re.compile(r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)")
_LOWER = re.compile(r"[a-z]")
_DOTTED_NAME = re.compile(r"[A-Za-z_][\w$\-]*(?:\.[\w$\-]+)+")
# where the line was logged: `controller.go:123]`, `[engine.py:310]`, `worker.py:1234`
_SOURCE = re.compile(r"\[?[\w.\-/]+:\d+(?::[\w<>.]+)?\]|" + _SOURCE_FILE)  # and DeepSpeed's `[engine.py:12:step]`

# Components, tried where the header fields end.
# `host prog[pid]:`, a program name with spaces (`Google Chrome Helper[73]:`) and launchd's `(service)` after it.
_TAGGED = re.compile(r"(?:[^\s\[\]]+[ \t]+){0,3}?[^\s\[\]:]+\[\d+\](?:[ \t]+\([^()\s]*\))?:(?:\s+|$)")
_TAGGED_WITHIN = 160  # characters: where a `[pid]` must be for `_TAGGED` to be tried at all
_HOST_PROGRAM = re.compile(r"[\w.\-/@]+[ \t]+[A-Za-z_][\w.$\-/()]*:(?:\s+|$)")  # syslog without a pid
# After a level: `spark.SecurityManager:`, and a dotted logger before ` - ` (logback) or a padded ` : ` (Spring Boot).
_LOGGER = re.compile(r"(?:[A-Za-z_][\w.$\-/()@]*:|[A-Za-z_][\w$]*(?:\.[\w$\-]+)+[ \t]+[-:])(?:\s+|$)")
_SOURCE_WITHIN = re.compile(r":\d+(?::[\w<>.]+)?[\]})]")  # what a bracketed source location ends with
_LEVEL_MARKS = ("*", "#", ".")
_AFTER_SOURCE = re.compile(r"-{1,3}|\[?(?:" + _UPPER_LEVELS + r")\]?|\w+=\"?(?:" + _LEVELS + r')"?')
_DASHED_NAME = re.compile(r"(?=[\w.$]*[a-z_])[A-Za-z_][\w.$]*[ \t]+-[ \t]+")  # a logger's name, not `FOLLOWING - `
_DASHED = re.compile(r"(?:[\w.\-]+[ \t]+)?[\w.$\-/*]+[ \t]+-[ \t]+")  # `name - `, `chrome.exe *64 - `
# RFC 5424: <PRI>VERSION TIMESTAMP HOSTNAME APP-NAME PROCID MSGID STRUCTURED-DATA (`-` or bracketed elements) MSG.
_RFC5424 = re.compile(r"\s*<\d{1,3}>\d{1,2}[ \t]+(?:\S+[ \t]+){5}(?:-|(?:" + _BRACKETED + r")+)(?:\s+|$)")
_START = re.compile(r"\s*(?:<\d{1,3}>)?")  # and a syslog priority glued to the first field: `<34>Oct 11 22:14:15`
# A line without a time: uvicorn's `INFO:     message`, behind vLLM's `(APIServer pid=7)` or not.
_LEVEL_PREFIX = re.compile(r"\s*(?:\([^()]*\)[ \t]+)?(?:" + _UPPER_LEVELS + r"):[ \t]+")
# Tried only where a field starts, and without giving back what it took: a search that began at every character of a
# long field and ran to its end was quadratic (a 1 MiB bracketed field took hours).
_LAST_FIELD = re.compile(r"(?<![^\s|])[^\s|]++[\s|]*+\Z")
_EPOCH_ONLY = re.compile(_EPOCH + ",?")
_HDFS_STAMP = re.compile(r"\s*\d{6,}\s+\d{6}\b")  # HDFS: 081109 203615

_HEADER_LEVELS = frozenset(f"{_LEVELS}|{_TITLE_LEVELS}".split("|"))
_WORD = re.compile(r"\w+")  # a level is a whole word: `[error]`, `level=info`, but not `INFO_X`
_BARE_LEVEL = re.compile(r"\b(" + _LEVELS + r")\b")
_LETTER = re.compile(r"[VDIWEF](?:\d{4})?")  # logcat's `E`, klog's `E1205`
_MESSAGE_LEVEL = re.compile(r"\b(ERROR|FATAL|CRITICAL|Exception|Traceback)\b")
# logfmt's level wherever the line has it (`level=error msg=…` has no time; go-kit's `caller=` may come first), and
# log15's (Grafana's) spelling of two levels.
_KEYED_LEVEL = re.compile(r"(?<!\w)(?:level|lvl|severity)=[\"']?(" + _LEVELS + r"|eror|dbug)\b")
_LOG15_LEVELS = {"EROR": "ERROR", "DBUG": "DEBUG"}
# An HTTP server's access line: the request line and its status (nginx, Apache, Envoy, Traefik, uvicorn, gunicorn:
# `"POST /v1/completions HTTP/1.1" 503`; OpenStack's `… HTTP/1.1" status: 503`), or logfmt's `status=503`. A 5xx
# is the server failing a request: an error, whatever level the line was written at.
_SERVER_ERROR = re.compile(
    r'HTTP/[\d.]+"\s+(?:status:\s*)?5\d\d(?![\w.])|(?<![\w.])(?:status|status_code)="?5\d\d(?![\w.])'
    r"|(?<!\S)-?\d+/-?\d+/-?\d+/-?\d+/\+?\d+\s+5\d\d(?!\S)"  # HAProxy: its timers Tq/Tw/Tc/Tr/Tt, then the status
)
DOTNET_LEVELS = {"trce": "TRACE", "dbug": "DEBUG", "info": "INFO", "warn": "WARN", "fail": "ERROR", "crit": "CRITICAL"}
"""Microsoft.Extensions.Logging's console (.NET) writes its level as one of these words: `fail: Category[EventId]`."""
_DOTNET_LEVEL = re.compile(f"({'|'.join(DOTNET_LEVELS)}): ")
_PRIORITY = re.compile(r"\s*<(\d{1,3})>")  # a syslog line's `<PRI>`: facility × 8 + severity

_STAMPED, _FIELDED, _OTHER = 0, 1, 2


@dataclass(slots=True)
class _Token:
    text: str
    kind: int
    end: int  # where the token and its separator end
    padded: bool  # two spaces or more after it: a fixed-width column
    piped: bool  # a `|` after it


_KINDS: dict[str, int] = {}


def _kind(text: str) -> int:
    """A token's kind, remembered (in `_KINDS`) for the tokens seen lately."""
    found = _KIND.fullmatch(text)
    if found is None:
        kind = _OTHER
    elif found.group(1) is not None or (text[0] == "[" and _DATED.search(text)):
        kind = _STAMPED
    else:
        kind = _FIELDED
    if len(_KINDS) >= _KINDS_KEPT:
        _KINDS.clear()
    _KINDS[text] = kind
    return kind


class _Tokens:
    """A line's tokens from `start`, read as they are asked for: most headers end within a few.

    With a `seed`, token 0 is that token (the last of a run already read) and reading goes on after it.
    """

    __slots__ = ("_line", "_position", "read")

    def __init__(self, line: str, start: int, seed: _Token | None = None) -> None:
        self._line, self._position = line, start if seed is None else seed.end
        self.read: list[_Token] = [] if seed is None else [seed]

    def at(self, index: int) -> _Token | None:
        """Token `index`, or None past the line's end or the most a header can take."""
        read = self.read
        while len(read) <= index:
            found = _TOKEN.match(self._line, self._position) if len(read) < _TOKENS_READ else None
            if found is None or found.end() == self._position:
                return None
            text, separator = found.group(1, 2)
            kind = _KINDS.get(text)
            if kind is None:
                kind = _kind(text)
            self._position = end = found.end()
            read.append(_Token(text, kind, end, "  " in separator or "\t" in separator, "|" in separator))
        return read[index]


def _first_stamp(tokens: _Tokens, line: str, start: int) -> int | None:
    """The index of the token that first dates the line, if only a few tokens of other kinds come before it."""
    if _HDFS_STAMP.match(line, start):
        return 1
    others, index = 0, 0
    while (token := tokens.at(index)) is not None:
        if token.kind == _STAMPED and not (_EPOCH_ONLY.fullmatch(token.text) and _followed_by_other(tokens, index)):
            return index
        if token.kind == _OTHER:
            others += 1
            if others > _BEFORE_STAMP or token.text.endswith(":"):
                return None
        index += 1
    return None


def _followed_by_other(tokens: _Tokens, index: int) -> bool:
    following = tokens.at(index + 1)
    return following is None or following.kind == _OTHER


def _fields(tokens: _Tokens, last: int, *, skip_one: bool) -> int:
    """The index of the last header field of the run after token `last`.

    With `skip_one`, one token of another kind may sit between two times (a node, a host) when fields and a time
    follow it.
    """
    index = last + 1
    while (token := tokens.at(index)) is not None:
        previous = tokens.read[index - 1]
        field = token.kind != _OTHER
        field = field or (previous.piped and token.piped)  # `time|component|pid|message`
        field = field or (token.padded and _TITLE_LEVEL.fullmatch(token.text) is not None)  # `Info      CBS    `
        field = field or (token.padded and previous.padded and index - 1 == last)  # the column after a padded one
        if field and _SOURCE.fullmatch(previous.text) and not _AFTER_SOURCE.fullmatch(token.text):
            break  # where the line was logged ends a header, bar a dash or level after it: `[engine.py:12:f] [Torch]`
        if field and previous.text in _LEVEL_MARKS:
            break  # so does a level written as one character: Redis's `* 261 changes in 75 seconds`
        if field:
            last = index
        elif skip_one and not token.text.endswith(":"):
            skip_one = False
            after = index + 1
            while after <= index + 3 and (following := tokens.at(after)) is not None and following.kind == _FIELDED:
                after += 1
            following = tokens.at(after) if after <= index + 3 else None
            if following is None or following.kind != _STAMPED:
                break
            last = index = after
        else:
            break
        index += 1
    return last


def _upper_run_to_level(tokens: _Tokens, last: int) -> int | None:
    """BGL's `NODE RAS KERNEL INFO`: upper-case tokens after the fields up to a level, which ends the header."""
    for index in range(last + 1, last + 7):
        token = tokens.at(index)
        if token is None or _LOWER.search(token.text):
            return None
        if _UPPER_LEVEL.fullmatch(token.text):
            return index
    return None


def _stamped(line: str) -> tuple[_Tokens, int] | None:
    """The line's tokens and the index of the token that dates it, or None when nothing near its start dates it."""
    start = _START.match(line).end()  # type: ignore[union-attr]  # it matches the empty string too
    run = _RUN.match(line, start)
    if (
        run
        and (_DATED.search(line, start, run.end()) or _HDFS_STAMP.match(line, start))
        and not _SOURCE_WITHIN.search(line, start, run.end())  # read token by token: a source location ends it
    ):
        # The common case, in one match: the line opens with times and fields; the walk goes on after them.
        text, separator = run.group(1, 2)
        seed = _Token(text, _FIELDED, run.end(), "  " in separator or "\t" in separator, "|" in separator)
        return _Tokens(line, start, seed), 0
    if not _MAYBE_DATED.search(line, 0, _DATED_WITHIN):
        return None
    tokens = _Tokens(line, start)
    first = _first_stamp(tokens, line, start)
    return None if first is None else (tokens, first)


def split_header(line: str) -> tuple[str, str]:
    """Split a raw log line into (header, message): leading timestamps, levels, fields and a component.

    Only a line with a date or a time near its start has a header (or one opening with `LEVEL:` and spaces); any
    other line is all message. A line that is fields to its end (HPC's `… 1077804742 1 warning`) keeps its last
    one as its message: an empty message would make every such line one event.
    """
    header, message = _split_header(line)
    if header and not message.strip() and (last := _LAST_FIELD.search(header)) and last.start() > 0:
        return header[: last.start()], header[last.start() :]
    return header, message


def _split_header(line: str) -> tuple[str, str]:
    if rfc5424 := _RFC5424.match(line):
        return line[: rfc5424.end()], line[rfc5424.end() :]
    stamped = _stamped(line)
    if stamped is None:
        prefix = _LEVEL_PREFIX.match(line)
        return (line[: prefix.end()], line[prefix.end() :]) if prefix and prefix.end() < len(line) else ("", line)
    tokens, first = stamped
    last = _fields(tokens, first, skip_one=True)
    header_end = tokens.read[last]
    end = header_end.end
    if header_end.kind == _OTHER or _SOURCE.fullmatch(header_end.text):
        return line[:end], line[end:]  # a padded column, `time|tag|pid|`, klog's `file.go:12]`: no component after
    has_level = _header_level(line[:end]) is not None
    if not has_level and (level := _upper_run_to_level(tokens, last)) is not None:
        return line[: tokens.read[level].end], line[tokens.read[level].end :]
    if has_level and (logger := tokens.at(last + 1)) is not None and _DOTTED_NAME.fullmatch(logger.text):
        context = tokens.at(last + 2)
        if context is not None and context.text[0] == "[" and context.kind != _OTHER:
            return line[: context.end], line[context.end :]  # OpenStack: `INFO nova.compute.manager [req-…]`
    end = _component(line, end, tokens, has_level=has_level)
    return line[:end], line[end:]


def _component(line: str, end: int, tokens: _Tokens, *, has_level: bool) -> int:
    """Where the header ends once the component after its fields (if any) is taken too."""
    stop = len(line.rstrip())
    if "[" in line[end : end + _TAGGED_WITHIN] and (found := _TAGGED.match(line, end)) and found.end() < stop:
        return found.end()
    if _MONTH.search(line, 0, end) and (found := _HOST_PROGRAM.match(line, end)) and found.end() < stop:
        return found.end()  # syslog's `host prog:`
    after_dash = line[:end].rstrip().endswith("-")  # after Zookeeper's ` - ` the message starts
    if has_level and not after_dash and (found := _LOGGER.match(line, end)) and found.end() < stop:
        return found.end()
    if has_level and after_dash and (found := _DASHED_NAME.match(line, end)) and found.end() < stop:
        return found.end()  # unless one name and ` - ` follow: `%(asctime)s - %(levelname)s - %(name)s - `
    dashed = _DASHED.match(line, end) if not has_level else None
    if dashed is None or dashed.end() >= stop:
        return end
    # `2026-12-05 08:49:42,123 - app.worker - INFO - message`: more fields may follow the name.
    index = 0
    while (token := tokens.at(index)) is not None and token.end < dashed.end():
        index += 1
    if token is None or token.end != dashed.end():
        return dashed.end()
    last = tokens.read[_fields(tokens, index, skip_one=False)]
    return last.end if last.end < stop else dashed.end()


def _header_level(header: str) -> str | None:
    """The level a header names (upper-cased): a level word, or logcat's and klog's letter; CRI's `stdout F` is none."""
    for word in _WORD.findall(header):
        if word in _HEADER_LEVELS:
            return word.upper()
    previous = ""
    for token in header.split():
        if _LETTER.fullmatch(token) and previous not in ("stdout", "stderr"):
            return LETTER_LEVELS[token[0]]
        previous = token
    return None


def level_of(header: str, message: str) -> str | None:
    """The line's level, upper-cased: from its header, or (if the header has none) an error word in the message.

    A line without a header (no date or time up front) may still open with its level: `WARN disk 91% full`; a
    logfmt line says it as `level=…` wherever. An access line's 5xx status is an error at any level.
    """
    if ("HTTP/" in message or "status" in message) and _SERVER_ERROR.search(message):
        return "ERROR"
    if header:
        level = _header_level(header)
        if level is not None:
            return level
    if dotnet := _DOTNET_LEVEL.match(message):
        return DOTNET_LEVELS[dotnet.group(1)]
    if not header and (found := _BARE_LEVEL.match(message.lstrip())):
        return found.group(1).upper()
    for text in (header, message):
        if "=" in text and (keyed := _KEYED_LEVEL.search(text)):
            level = keyed.group(1).upper()
            return _LOG15_LEVELS.get(level, level)
    if _MESSAGE_LEVEL.search(message):
        return "ERROR"
    # Last, a syslog priority's severity (`<11>1 …` is an error): many programs log every line at one priority.
    priority = _PRIORITY.match(header)
    return SYSLOG_LEVELS[int(priority.group(1)) % 8] if priority and int(priority.group(1)) <= 191 else None
