r"""Stream the lines of log sources — files, directories, globs, `.gz` — in bounded memory, never failing on a bad line.

A production log directory holds whatever the service and its neighbours wrote: binary blobs, a truncated
gzip, half-written JSON, a line of one megabyte. Each of those is counted by kind (with a few places to look)
and skipped; only a source that does not exist or holds nothing stops the run, with one sentence.

Every line leaves here as text that is safe to mine and to show: a line ends at `\n`, `\r\n` or a lone `\r`
(what a terminal shows; old Mac files, progress bars), a UTF-16 or UTF-32 file with its byte-order mark (PowerShell's
`>`) or without one (Windows tools; told by its NUL bytes) is read as text, terminal colours are taken out, and what
looks like a credential is masked (`components.redact`) — so no template, CSV row, state file or example line holds
one.
"""

from __future__ import annotations

import glob
import gzip
import io
import os
import re
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal, TextIO, cast

from pydantic import BaseModel, Field

from components.errors import InputError, VcpilotError
from components.files import open_binary, overwrite_problem
from components.redact import redact_text

__all__ = [
    "MAX_LINE_BYTES",
    "LogSourceError",
    "Malformed",
    "MalformedKind",
    "SourceLine",
    "clean_text",
    "expand_sources",
    "read_lines",
]

MAX_LINE_BYTES = 1 << 20
"""A line of this many characters (bytes, in ASCII) or more (1 Mi) is not a log line we mine; it is `too_long`."""
STDIN = Path("/dev/stdin")  # the source `-`

MalformedKind = Literal[
    "binary", "invalid_utf8", "too_long", "invalid_json", "invalid_record", "unreadable_file", "truncated_gzip"
]
_EXAMPLES_PER_KIND = 3
# Control characters that never appear in text logs (tab, newline, carriage return and ESC for colours do).
_BINARY = re.compile("[\x00-\x08\x0e-\x1a\x1c-\x1f]")
# The same, or a byte that is not UTF-8 (decoded as a lone surrogate, `surrogateescape`): one search for both.
_UNREADABLE = re.compile("[\x00-\x08\x0e-\x1a\x1c-\x1f\udc80-\udcff]")
# A UTF-32 or UTF-16 file: its byte-order mark, then an ASCII character (a log's first; random bytes rarely are both).
_WIDE_TEXT = re.compile(
    rb"(?P<utf_32>\xff\xfe\x00\x00[\x01-\x7f]\x00\x00\x00|\x00\x00\xfe\xff\x00\x00\x00[\x01-\x7f])"
    rb"|(?P<utf_16>\xff\xfe[\x01-\x7f]\x00|\xfe\xff\x00[\x01-\x7f])"
)
# The same without a byte-order mark (Windows tools write it so): printable ASCII characters, each with the NUL
# bytes that UTF-16 or UTF-32 put beside it. Text in UTF-8 never holds a NUL, and binary data seldom opens so.
_BOMLESS_WIDE = re.compile(
    rb"(?P<utf_32_le>(?:[\t\x20-\x7e]\x00\x00\x00){4})|(?P<utf_32_be>(?:\x00\x00\x00[\t\x20-\x7e]){4})"
    rb"|(?P<utf_16_le>(?:[\t\x20-\x7e]\x00){8})|(?P<utf_16_be>(?:\x00[\t\x20-\x7e]){8})"
)
_WIDE_SAMPLE = 512  # bytes: the opening of a file a wide encoding without a byte-order mark is told by
# A terminal's escape sequences: colours and cursor moves (CSI), titles and links (OSC), and the two-byte ones.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
# Every credential `redact_text` masks holds one of these words (lower-cased) and, around it, `_SECRET_SHAPE`: most
# lines are let through on a few substring tests (`redact_text` itself costs twice what mining a line does).
_SECRET_WORDS = ("pass", "secret", "token", "key", "bearer", "basic", "://", "sk-", "xox", "akia", "eyj", "gh")
# A line a container runtime split (CRI, a node's /var/log/containers: kubelet cuts a line at 16 KiB): its time and
# stream, `P`, then a part of the line; the parts that follow on the same stream end with an `F` line.
_CRI_PART = re.compile(r"(?P<head>\d{4}-\d{2}-\d{2}T\S+ (?P<stream>stdout|stderr) )(?P<tag>[PF]) ", re.ASCII)
_SECRET_SHAPE = re.compile(
    r"""(?:pass(?:word|wd)?|secret|token|key)["']?\s*[=:]|(?:bearer|basic)\s|://\S*@|sk-|gh[pousr]_|xox|akia|eyj"""
)


# A ValueError too: the parsers that meet an unusable source raise and catch it as a bad value.
class LogSourceError(VcpilotError, ValueError):
    """A log source cannot be used at all: it does not exist, matches nothing, or holds no log lines."""


class Malformed(BaseModel):
    """What could not be read, by kind: how many lines (or files), and a few places to look."""

    counts: dict[str, int] = Field(default_factory=dict)
    examples: dict[str, list[str]] = Field(default_factory=dict)

    @property
    def total(self) -> int:
        """How many lines and files were skipped, all kinds together."""
        return sum(self.counts.values())

    def describe(self) -> str:
        """How many of each kind, as `26 binary, 3 invalid_utf8`."""
        return ", ".join(f"{count} {kind}" for kind, count in sorted(self.counts.items()))

    def remedy(self, otherwise: str) -> str:
        """What to do when nothing was readable: convert text that is not UTF-8 (not binary), else say why.

        Why no file could be read where none could (a named pipe no program writes to, a permission), else
        `otherwise`.
        """
        if self.counts.get("invalid_utf8") and not self.counts.get("binary"):
            return "convert the logs to UTF-8 (e.g. `iconv -f LATIN1 -t UTF-8`), or give other logs"
        if set(self.counts) == {"unreadable_file"}:
            return f"cannot read {self.examples['unreadable_file'][0]}"
        return otherwise

    def add(self, kind: MalformedKind, where: str, detail: str = "") -> None:
        """Count one bad line or file at `where` (`file:line`), keeping the first few as examples."""
        self.counts[kind] = self.counts.get(kind, 0) + 1
        examples = self.examples.setdefault(kind, [])
        if len(examples) < _EXAMPLES_PER_KIND:
            examples.append(f"{where}: {detail}" if detail else where)


@dataclass(slots=True)  # not frozen: a frozen dataclass costs 1 µs more per line
class SourceLine:
    """One line of a log file and where it came from (1-based line number); a malformed one has a `problem`."""

    source: str
    number: int
    text: str
    problem: MalformedKind | None = None

    @property
    def where(self) -> str:
        """`file:line`, for messages and examples."""
        return f"{self.source}:{self.number}"


def clean_text(text: str) -> str:
    """`text` as it is mined and shown: without a terminal's colour codes, what looks like a credential masked."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    lower = text.lower()
    for word in _SECRET_WORDS:
        if word in lower:
            return redact_text(text) if _SECRET_SHAPE.search(lower) else text
    return text


def expand_sources(sources: Iterable[Path | str]) -> list[Path]:
    """The files behind `sources` (files, directories searched recursively, or glob patterns), in a stable order.

    `-` is standard input (`kubectl logs POD | vcpilot logs parse -`), read once as it comes. A file reached twice
    (named twice, or through a link: a node's /var/log/containers/*.log point into /var/log/pods) is read once, and
    neither a directory nor `**` follows a link to a directory (a link to `..` would never end). Raises
    LogSourceError when a source does not exist or a pattern matches no file.
    """
    files: list[Path] = []
    for source in sources:
        path = Path(source)
        if str(source) == "-":
            files.append(STDIN)
        elif path.is_dir():
            files.extend(sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")))
        elif path.is_char_device() or path.is_block_device() or path.is_socket():
            # /dev/zero is one endless line: the reader would skip it chunk by chunk forever (a pipe may end)
            raise LogSourceError(
                f"the log source {source} is a device, not a log file: give a file, a directory or a glob"
            )
        elif path.exists():
            files.append(path)
        elif path.is_symlink():  # a loop, or a link whose target is gone: "does not exist" would send one looking
            raise LogSourceError(
                f"the log source {source} is a symbolic link to nothing (a loop, or a missing target): give a file, "
                "a directory or a glob"
            )
        elif glob.has_magic(str(source)):
            matches = _glob(str(source))
            if not matches:
                raise LogSourceError(f"the pattern {source} matches no file: check the path")
            files.extend(matches)
        else:
            raise LogSourceError(f"the log source {source} does not exist: give a file, a directory or a glob")
    seen: set[str] = set()
    unique = []
    for file in files:
        real = str(file) if file == STDIN else os.path.realpath(file)
        if real not in seen:
            seen.add(real)
            unique.append(file)
    return unique


def refuse_overwriting(files: Iterable[Path], outputs: Iterable[tuple[Path, str]]) -> None:
    """Raise LogSourceError when an output (path, the option that names it) is one of the log `files` being read.

    Writing there would replace a log with what was mined from it (`logs parse app.log --out app.log`, or a glob that
    takes in the report of a previous run); links and a second name of the same file count (`components.files`).
    """
    problem = overwrite_problem([(file, "one of the logs") for file in files if file != STDIN], outputs)
    if problem is not None:
        raise LogSourceError(problem)


def unwritable(err: OSError, out: Path) -> InputError:
    """The sentence for an output that could not be written, naming it as the user gave it.

    Not the work file beside it that failed first (`.parsed.csv.ids` for `--out parsed.csv`).
    """
    failed = Path(err.filename) if err.filename else out
    return InputError(f"cannot write {out if failed.parent == out.parent else failed}: {err.strerror or err}")


def _glob(pattern: str) -> list[Path]:
    """The files `pattern` matches, hidden ones only where it names them; `**` takes no link to a directory.

    `glob.glob` follows such links, so a directory holding a link to itself made `**` run until paths grew too long
    (two such links: for ever). pathlib's `**` does not, but takes relative patterns only: it is given the part
    after the last directory without wildcards.
    """
    parts = Path(pattern).parts
    first = next(index for index, part in enumerate(parts) if glob.has_magic(part))
    rest = Path(*parts[first:])
    try:
        found = Path(*parts[:first]).glob(str(rest))
        return sorted(p for p in found if p.is_file() and (not p.name.startswith(".") or rest.name.startswith(".")))
    except ValueError:  # `a**b`: pathlib takes `**` only as a whole part
        raise LogSourceError(
            f"the pattern {pattern} is not one this reads: write `**` as a whole part of the path (logs/**/*.log)"
        ) from None


def _bomless(opening: bytes) -> str | None:
    """The wide encoding of a file without a byte-order mark that opens with `opening`, or None (UTF-8).

    It opens with printable ASCII characters (a log's time or level), each with its NUL bytes, and none of the
    characters in the first `_WIDE_SAMPLE` bytes is NUL itself (a UTF-8 file that begins with NUL bytes, as
    `copytruncate` leaves one, is not wide).
    """
    found = _BOMLESS_WIDE.match(opening)
    if found is None or found.lastgroup is None:
        return None
    name = found.lastgroup
    width = 4 if name.startswith("utf_32") else 2
    units = (opening[at : at + width] for at in range(0, len(opening) - width + 1, width))
    return None if any(unit == bytes(width) for unit in units) else name.replace("_", "-")


class _Gzip(gzip.GzipFile):
    """A gzip stream over a file this module opened: closing one closes both."""

    def __init__(self, binary: BinaryIO) -> None:
        super().__init__(fileobj=binary, mode="rb")
        self._binary = binary

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._binary.close()


def _open(path: Path) -> TextIO:
    """The file as text, line ends read universally; UTF-8 unless a byte-order mark says UTF-16 or UTF-32.

    Without a byte-order mark, UTF-16 and UTF-32 are told by their NUL bytes (`_bomless`). A byte that is not UTF-8
    becomes a lone surrogate (`surrogateescape`), for `_lines_of` to count its line.
    """
    binary = open_binary(path, buffering=1 << 20)  # a named pipe no program writes to: NoWriter, not a hang
    raw = cast(BinaryIO, _Gzip(binary)) if path.suffix == ".gz" else binary
    try:
        opening = raw.peek(_WIDE_SAMPLE)[:_WIDE_SAMPLE]  # type: ignore[attr-defined]  # buffered files and gzip peek
    except BaseException:  # not gzip after all, or cut short: counted by `read_lines`
        raw.close()
        raise
    wide = _WIDE_TEXT.match(opening[:8])
    if wide and wide.lastgroup:
        encoding = wide.lastgroup.replace("_", "-")
    else:
        encoding = _bomless(opening) or "utf-8"
    errors = "surrogateescape" if encoding == "utf-8" else "replace"
    return io.TextIOWrapper(raw, encoding=encoding, errors=errors, newline=None)


def _lines_of(path: Path, malformed: Malformed, max_line_chars: int) -> Iterator[SourceLine]:
    name = str(path)
    number = 0
    splits: dict[str, _Split] = {}  # by stream: a line the container runtime split, its parts so far
    with _open(path) as handle:
        while text := handle.readline(max_line_chars):
            number += 1
            if len(text) == max_line_chars and not text.endswith("\n"):
                # Skip the rest of the line chunk by chunk: never hold a huge line in memory.
                size = _bytes(text)
                while chunk := handle.readline(max_line_chars):
                    size += _bytes(chunk.rstrip("\n"))
                    if chunk.endswith("\n"):
                        break
                malformed.add("too_long", f"{name}:{number}", f"{size:,} bytes")
                yield SourceLine(name, number, "", "too_long")
                continue
            text = text.rstrip("\n")
            if number == 1 and text.startswith("\ufeff"):
                text = text[1:]
            if found := _UNREADABLE.search(text):
                if _BINARY.search(text):
                    malformed.add("binary", f"{name}:{number}", "control characters")
                    yield SourceLine(name, number, "", "binary")
                else:
                    where = _bytes(text[: found.start()])
                    malformed.add("invalid_utf8", f"{name}:{number}", f"byte {where} is not UTF-8")
                    yield SourceLine(name, number, "", "invalid_utf8")
                continue
            if (splits or " P " in text[20:48]) and (cri := _CRI_PART.match(text)):
                if (whole := _join_part(splits, cri, text, number, max_line_chars)) is not None:
                    yield _split_line(name, whole, malformed)
                continue
            yield SourceLine(name, number, clean_text(text))
        for split in splits.values():  # a split line the file ends in (rotated mid-line): what there is of it
            yield _split_line(name, split, malformed)


def _split_line(name: str, split: _Split, malformed: Malformed) -> SourceLine:
    if split.text:
        return SourceLine(name, split.number, clean_text(split.text))
    malformed.add("too_long", f"{name}:{split.number}", f"{split.size:,} characters, split by the container runtime")
    return SourceLine(name, split.number, "", "too_long")


@dataclass(slots=True)
class _Split:
    """A line the container runtime split (CRI), while its parts come in: `text` is empty once it is too long."""

    number: int  # its first part's
    head: str  # its first part's time and stream, then `F `: the whole line reads as one written at once
    parts: list[str]
    size: int = 0

    def add(self, part: str, max_chars: int) -> None:
        """Keep `part` while the line stays shorter than `max_chars`; past that, keep nothing (never a huge line)."""
        self.size += len(part)
        if self.size + len(self.head) < max_chars:
            self.parts.append(part)
        else:
            self.parts.clear()

    @property
    def text(self) -> str:
        return self.head + "".join(self.parts) if self.parts or not self.size else ""


def _join_part(splits: dict[str, _Split], cri: re.Match[str], text: str, number: int, max_chars: int) -> _Split | None:
    """Take in a CRI line's part: the whole line when this part ends one (an `F` after `P`s), else None.

    A `F` line with no parts before it is a whole line of its own.
    """
    stream = cri.group("stream")
    split = splits.get(stream)
    if split is None:
        if cri.group("tag") == "F":
            return _Split(number, "", [text])
        split = splits[stream] = _Split(number, cri.group("head") + "F ", [])
    split.add(text[cri.end() :], max_chars)
    return splits.pop(stream) if cri.group("tag") == "F" else None


def _bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogateescape"))


def read_lines(
    files: Sequence[Path], malformed: Malformed, *, max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[SourceLine]:
    """Yield every line of `files` one at a time; a malformed one is counted in `malformed` and has a `problem`.

    Memory stays bounded by `max_line_bytes` (characters) whatever the size of the files. A file that cannot be
    opened or a gzip stream cut short is counted (`unreadable_file`, `truncated_gzip`) after yielding what it held.
    """
    for path in files:
        try:
            yield from _lines_of(path, malformed, max_line_bytes)
        except (EOFError, zlib.error) as err:
            malformed.add("truncated_gzip", str(path), str(err))
        except OSError as err:  # includes gzip.BadGzipFile
            malformed.add("unreadable_file", str(path), getattr(err, "strerror", None) or str(err))
