"""Turn a raw log line into what template mining compares: its message without the header, variables masked.

One generic configuration serves every log format we read: a header is a leading run of fields that look like
timestamps, levels, bracketed fields, process ids or a `component:` tag, and a variable is a token holding a
number, hex value, IP address, UUID, path or timestamp. Masking whole tokens (not just the digits inside them)
and collapsing repeated lists (`blk_1 blk_2 blk_3`) is what lets Drain group lines of one event together without
per-dataset regular expressions.
"""

from __future__ import annotations

import re

__all__ = [
    "ERROR_LEVELS",
    "MASK",
    "VARIABLE_PATTERNS",
    "level_of",
    "mask_variables",
    "message_tokens",
    "shown_tokens",
    "split_header",
    "template_pattern",
]

MASK = "<*>"
"""What a variable becomes; Drain3 treats exactly this token as a wildcard."""

_LEVELS = (
    "TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|ERR|SEVERE|FATAL|CRITICAL|CRIT|ALERT|EMERG|PANIC|"
    "trace|debug|info|notice|warn|warning|error|err|severe|fatal|critical|crit|alert|emerg|panic"
)
ERROR_LEVELS = frozenset({"ERROR", "ERR", "SEVERE", "FATAL", "CRITICAL", "CRIT", "ALERT", "EMERG", "PANIC"})
"""Levels (upper-cased) whose lines count as errors."""

_BRACKETED = r"\[(?:[^\[\]]++|\[[^\[\]]*+\])*+\]"  # [main], [Sun Dec 04 04:47:44 2005], [QuorumPeer[myid=1]/0:...]
_FIELD = (
    r"(?:"
    + _BRACKETED
    + r"|\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)?"  # ISO date / timestamp
    r"|\d{1,4}/\d{1,2}/\d{1,4}"  # 17/06/09
    r"|\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?"  # 20:10:40,978
    r"|\d+"  # 081109, a pid
    r"|(?:" + _LEVELS + r")"
    r"|(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*"
    r"|(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*"
    r"|-)"
)
_HEADER = re.compile(r"\s*(?:" + _FIELD + r"(?:\s+|$))+")
# `dfs.DataNode$PacketResponder:`, `org.apache.Foo:`, or syslog's `host prog[pid]:` right after the header fields.
_COMPONENT = re.compile(r"(?:[\w.\-]+\s+)?[\w.$\-/]+(?:\[\d+\])?:(?:\s+|$)")
# What makes a leading run of fields a header: a date or a time of day in it. A line that opens without one (the
# Loghub benchmark's Content column, a bare message) is all message: `error: ...`, `3 more ...` stay in it.
_STAMP = re.compile(r"\d{1,2}:\d{2}|\d{4}-\d{2}-\d{2}|\d{1,4}/\d{1,2}/\d{1,4}|^\s*\d{6,}\s+\d{6}\b")
_LEVEL = re.compile(r"\b(" + _LEVELS + r")\b")
_MESSAGE_LEVEL = re.compile(r"\b(ERROR|FATAL|CRITICAL|Exception|Traceback)\b")

VARIABLE_PATTERNS: tuple[tuple[str, str], ...] = (
    ("uuid", r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
    ("timestamp", r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"),
    ("ip", r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w.])"),  # a port is a number of its own: `<*>:<*>`
    ("path", r"(?<![\w/.:])/[\w.\-]+(?:/[\w.\-]*)+"),
    ("hex", r"\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{4,}\b"),
    ("number", r"(?<![A-Za-z0-9.])[-+]?\d+(?:\.\d+)?(?![\w.])"),
)
"""The variables we mask, in the order they are tried: (name, regular expression)."""

_VARIABLES = re.compile("|".join(f"(?:{pattern})" for _, pattern in VARIABLE_PATTERNS))
_MAYBE_VARIABLE = re.compile(r"[0-9/]")


def split_header(line: str) -> tuple[str, str]:
    """Split a raw log line into (header, message): leading timestamps, levels, bracketed fields, component.

    Only a run of fields with a date or a time in it is a header; any other line is all message.
    """
    match = _HEADER.match(line)
    end = match.end() if match else 0
    header = line[:end]
    if not _STAMP.search(header):
        return "", line
    # After a ` - ` separator (Zookeeper, Python logging) the message starts; `word:` there is part of it.
    if not header.rstrip().endswith("-") or not header.strip():
        component = _COMPONENT.match(line, end)
        if component and component.end() < len(line.rstrip()):
            end = component.end()
    return line[:end], line[end:]


def level_of(header: str, message: str) -> str | None:
    """The line's level, upper-cased: from its header, or (if the header has none) an error word in the message.

    A line without a header (no date or time up front) may still open with its level: `WARN disk 91% full`.
    """
    found = _LEVEL.search(header) if header else _LEVEL.match(message.lstrip())
    if found:
        return found.group(1).upper()
    spotted = _MESSAGE_LEVEL.search(message)
    return "ERROR" if spotted else None


def mask_variables(text: str) -> str:
    """Replace every variable in `text` by `<*>`, leaving the surrounding characters in place."""
    return _VARIABLES.sub(MASK, text)


def message_tokens(message: str, max_tokens: int = 100) -> list[str]:
    """The tokens Drain compares: a token holding a variable becomes `<*>`, a repeated list collapses to one.

    `blk_1 blk_2 blk_3` and `blk_4` become the same single `<*>`: a variable-length list is one variable.
    Lines longer than `max_tokens` are cut, which bounds the cost of matching one line.
    """
    return shown_tokens(message, max_tokens)[0]


def shown_tokens(message: str, max_tokens: int = 100) -> tuple[list[str], list[str]]:
    """`message_tokens` and, position by position, how each token reads in a template (`blk_<*>`, `/<*>:<*>`).

    Mining compares whole tokens (a token with a variable in it is `<*>`), which groups best; a template shows
    what is constant inside a token too, as Loghub's ground truth does.
    """
    search, sub = _MAYBE_VARIABLE.search, _VARIABLES.sub  # local names: this runs for every token of every line
    tokens: list[str] = []
    shown: list[str] = []
    previous = ""
    # Every variable holds a digit or a slash: most tokens are settled without running the masks. Lists that
    # collapse can shrink a line, so a few more words than `max_tokens` are looked at before the final cut.
    for token in message.split()[: 4 * max_tokens]:
        masked = sub(MASK, token) if search(token) else token
        if masked == token:
            previous = token
            tokens.append(token)
            shown.append(token)
        elif masked != previous:
            previous = masked
            tokens.append(MASK)
            shown.append(masked)
    return tokens[:max_tokens], shown[:max_tokens]


def template_pattern(template: str) -> re.Pattern[str]:
    """A pattern that takes a message's variables out of it: each `<*>` of `template` is one group.

    Tokens are matched across any whitespace, and text after the template's last token is allowed (a line that
    was cut at `max_tokens`).
    """
    body = r"\s+".join(
        "(.*?)".join(re.escape(piece) for piece in token.split(MASK)) for token in template.split(" ") if token
    )
    return re.compile(rf"\s*{body}(?:\s.*)?\Z" if body else r"\Z", re.DOTALL)
