"""Secrets out of what we record: one place that says what looks like a token or key, for logs, records and params.

Two passes, both cheap and idempotent. `redact_text` replaces what *looks* like a credential wherever it appears in
free text (a bearer header, an `sk-…` key, `password=…` in a URL or a log line, a JWT). `redact` walks JSON-like
data and also blanks every value whose *name* says it is secret (`api_key`, `MLFLOW_TRACKING_PASSWORD`,
`{"name": "ARGO_TOKEN", "value": …}` in an env list), whatever the value looks like. Logs go through `redact_text`
a line at a time, as they are written: `LogRedactor` in-process, `pump` from a pipe to a log file (LocalCluster's pods
print through it, in a process forked from the one that starts them), or this file as a filter between any process and
its log (`python -I -S components/redact.py`, stdlib only).
"""

from __future__ import annotations

import functools
import os
import re
import signal

# Not even `typing` when run as a script: a filter starts beside its writer, and each import is milliseconds of that.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import logging
    from typing import Any

__all__ = [
    "MASK",
    "MAX_LINE",
    "LogRedactor",
    "RedactingFilter",
    "pump",
    "redact",
    "redact_bytes",
    "redact_text",
    "secret_name",
]

MASK = "***"
# A log line longer than this is masked in pieces of this size: a filter keeps no more than one in memory.
MAX_LINE = 65536

# A name that says its value is secret: API_KEY, mlflow_tracking_password, Authorization, client-secret, ARGO_TOKEN.
# Whole words only, so max_tokens or tokens_per_s stay visible.
_SECRET_NAME = (
    r"(?:^|[_.-])(?:pass(?:word|wd)?|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|authorization"
    r"|credentials?|auth)(?:$|[_.-])"
)


# Compiled on first use, not at import: most commands redact nothing, and compiling these is about a tenth of what
# `vcpilot --help` costs beyond `import typer` (benchmarks/cli.py).
@functools.cache
def _secret_text() -> list[tuple[re.Pattern[str], str]]:
    return [
        # Authorization: Bearer abc… / Basic abc…; in lower case only before a credential with more than lower-case
        # letters in it, so that prose ("as basic optimizer") stays readable
        (
            re.compile(
                r"\b(Bearer|Basic|BEARER|BASIC|(?i:bearer|basic)(?=\s+[A-Za-z0-9._~+/=-]*[A-Z0-9._~+/=-]))"
                r"\s+[A-Za-z0-9._~+/=-]{8,}"
            ),
            rf"\1 {MASK}",
        ),
        # key=value / key: value, where the key's name says secret (quotes optional); a value of 8 characters or more
        # that is no placeholder ($VAR, <token>, {…}), so prose ("a token: pass it with …") stays readable
        (
            re.compile(
                r"""(?P<k>["']?(?<![A-Za-z0-9_.-])[A-Za-z0-9_.-]{0,40}?(?:pass(?:word|wd)?|secret|token|api[_-]?key|access[_-]?key)["']?\s*[=:]\s*["']?)"""
                r"""(?P<v>(?![$<{(])[^\s"',;&}]{8,})""",
                re.I,
            ),
            rf"\g<k>{MASK}",
        ),
        # user:password@host in a URL
        (
            re.compile(r"(?P<s>(?<![a-z0-9+.-])[a-z][a-z0-9+.-]{0,20}://[^/\s:@]{1,200}:)[^@\s/]{1,200}@", re.I),
            rf"\g<s>{MASK}@",
        ),
        # provider key shapes: OpenAI sk-…, GitHub ghp_…, Slack xox?-…, AWS AKIA…
        (
            re.compile(
                r"\b(sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})\b"
            ),
            MASK,
        ),
        # a JWT: three base64url parts, the first a JSON header
        (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\b"), MASK),
    ]


def secret_name(name: str) -> bool:
    """Whether a field or variable named `name` holds a secret (MLFLOW_TRACKING_TOKEN, api_key, password)."""
    return bool(re.search(_SECRET_NAME, re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()))


def redact_text(text: str) -> str:
    """`text` with everything that looks like a credential replaced by `***`."""
    for pattern, replacement in _secret_text():
        text = pattern.sub(replacement, text)
    return text


def _named(key: object) -> bool:
    return isinstance(key, str) and secret_name(key)


def redact(value: Any) -> Any:
    """A copy of JSON-like `value` with secret-named string fields blanked and credential-looking strings masked.

    Only strings change, so a redacted model still validates (a number under a secret-looking name stays).
    """
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        # an env entry {"name": "ARGO_TOKEN", "value": "…"}: the name is in one field, the secret in the other
        env_secret = isinstance(value.get("name"), str) and secret_name(value["name"]) and "value" in value
        return {
            key: _masked(item) if env_secret and key == "value" or _named(key) else redact(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    return value


def _masked(value: Any) -> Any:
    """Every non-empty string inside a secret-named field blanked, whatever its shape (`{"TOKEN": ["…"]}` too)."""
    if isinstance(value, str):
        return MASK if value else value
    if isinstance(value, dict):
        return {key: _masked(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_masked(item) for item in value]
    return value


class RedactingFilter:
    """A logging filter (any object with `filter` is one) that masks credentials in each record before it is written."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record's message, redacted; never drops a record."""
        message = record.getMessage()
        masked = redact_text(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


def redact_bytes(data: bytes) -> bytes:
    """`redact_text` for the bytes of a log, line by line; bytes that are not UTF-8 pass through unchanged."""
    lines = data.decode("utf-8", "surrogateescape").splitlines(keepends=True)
    return "".join(redact_text(line) for line in lines).encode("utf-8", "surrogateescape")


class LogRedactor:
    """A log stream's chunks in, its whole lines out redacted; the unfinished line waits for the next chunk."""

    def __init__(self) -> None:
        self._partial = b""

    def feed(self, chunk: bytes) -> bytes:
        """The lines `chunk` completes, redacted (a line past MAX_LINE is cut there)."""
        data = self._partial + chunk
        cut = data.rfind(b"\n") + 1 or (len(data) if len(data) >= MAX_LINE else 0)
        self._partial = data[cut:]
        return redact_bytes(data[:cut])

    def close(self) -> bytes:
        """The last, unfinished line, redacted."""
        rest, self._partial = self._partial, b""
        return redact_bytes(rest)


def pump(source: int, sink: int) -> None:
    """Copy file descriptor `source` to `sink` redacted, a line at a time, until every writer of `source` has closed it.

    A line without its newline waits for the rest (a secret split across two writes is masked whole); at the end,
    the unfinished line goes out as it stands, masked.
    """
    lines = LogRedactor()
    while chunk := os.read(source, MAX_LINE):
        _write_all(sink, lines.feed(chunk))
    _write_all(sink, lines.close())


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


def main() -> None:
    """Copy standard input to standard output redacted, a line at a time, until the writer closes it.

    A stop signal does not end it before the writer does: a process stopping gracefully still prints on its way out.
    """
    for stop in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop, signal.SIG_IGN)
    pump(0, 1)


if __name__ == "__main__":
    main()
