"""Stream the lines of log sources — files, directories, globs, `.gz` — in bounded memory, never failing on a bad line.

A production log directory holds whatever the service and its neighbours wrote: binary blobs, a truncated
gzip, half-written JSON, a line of one megabyte. Each of those is counted by kind (with a few places to look)
and skipped; only a source that does not exist or holds nothing stops the run, with one sentence.
"""

from __future__ import annotations

import glob
import gzip
import re
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal, cast

from pydantic import BaseModel, Field

from components.errors import VcpilotError

__all__ = [
    "MAX_LINE_BYTES",
    "LogSourceError",
    "Malformed",
    "MalformedKind",
    "SourceLine",
    "expand_sources",
    "read_lines",
]

MAX_LINE_BYTES = 1 << 20
"""A line of this many bytes or more (1 MiB) is not a log line we mine; it is counted as `too_long`."""
STDIN = Path("/dev/stdin")  # the source `-`

MalformedKind = Literal[
    "binary", "invalid_utf8", "too_long", "invalid_json", "invalid_record", "unreadable_file", "truncated_gzip"
]
_EXAMPLES_PER_KIND = 3
# Control characters that never appear in text logs (tab, newline, carriage return and ESC for colours do).
_BINARY = re.compile(rb"[\x00-\x08\x0e-\x1a\x1c-\x1f]")


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


def expand_sources(sources: Iterable[Path | str]) -> list[Path]:
    """The files behind `sources` (files, directories searched recursively, or glob patterns), in a stable order.

    `-` is standard input (`kubectl logs POD | vcpilot logs parse -`), read once as it comes. Raises LogSourceError
    when a source does not exist or a pattern matches no file.
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
        elif glob.has_magic(str(source)):
            matches = sorted(Path(p) for p in glob.glob(str(source), recursive=True) if Path(p).is_file())
            if not matches:
                raise LogSourceError(f"the pattern {source} matches no file: check the path")
            files.extend(matches)
        else:
            raise LogSourceError(f"the log source {source} does not exist: give a file, a directory or a glob")
    return files


def _open(path: Path) -> BinaryIO:
    if path.suffix == ".gz":
        return cast(BinaryIO, gzip.open(path, "rb"))
    return open(path, "rb", buffering=1 << 20)


def _lines_of(path: Path, malformed: Malformed, max_line_bytes: int) -> Iterator[SourceLine]:
    name = str(path)
    number = 0
    with _open(path) as handle:
        while raw := handle.readline(max_line_bytes):
            number += 1
            if len(raw) == max_line_bytes and not raw.endswith(b"\n"):
                # Skip the rest of the line chunk by chunk: never hold a huge line in memory.
                size = len(raw)
                while chunk := handle.readline(max_line_bytes):
                    size += len(chunk.rstrip(b"\r\n"))
                    if chunk.endswith(b"\n"):
                        break
                malformed.add("too_long", f"{name}:{number}", f"{size:,} bytes")
                yield SourceLine(name, number, "", "too_long")
                continue
            raw = raw.rstrip(b"\r\n")
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                text = raw.decode("utf-8") if not _BINARY.search(raw) else None
            except UnicodeDecodeError as err:
                malformed.add("invalid_utf8", f"{name}:{number}", f"byte {err.start} is not UTF-8")
                yield SourceLine(name, number, "", "invalid_utf8")
                continue
            if text is None:
                malformed.add("binary", f"{name}:{number}", "control characters")
                yield SourceLine(name, number, "", "binary")
                continue
            yield SourceLine(name, number, text)


def read_lines(
    files: Sequence[Path], malformed: Malformed, *, max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[SourceLine]:
    """Yield every line of `files` one at a time; a malformed one is counted in `malformed` and has a `problem`.

    Memory stays bounded by `max_line_bytes` whatever the size of the files. A file that cannot be opened or a
    gzip stream cut short is counted (`unreadable_file`, `truncated_gzip`) after yielding what it held.
    """
    for path in files:
        try:
            yield from _lines_of(path, malformed, max_line_bytes)
        except (EOFError, zlib.error) as err:
            malformed.add("truncated_gzip", str(path), str(err))
        except OSError as err:  # includes gzip.BadGzipFile
            malformed.add("unreadable_file", str(path), getattr(err, "strerror", None) or str(err))
