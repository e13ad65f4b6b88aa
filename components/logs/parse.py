"""`vcpilot logs parse`: every input line with its template, in Loghub's structured CSV format.

Loghub's benchmark format (LineId, EventId, EventTemplate) lets anyone check our grouping against the
published ground truth, and lets the rest of a log pipeline join lines to templates. Rows stream out as
lines stream in; a second streaming pass writes each row with its template's final text, so memory holds the
templates, never the lines.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel

from components.logs.masking import shown_tokens, split_header
from components.logs.reader import MAX_LINE_BYTES, LogSourceError, Malformed, SourceLine, expand_sources, read_lines
from components.logs.records import RequestRecord, classify
from components.logs.scoring import grouping_accuracy
from components.logs.templates import Miner, MinerSettings

__all__ = ["COLUMNS", "MALFORMED_EVENT", "PROGRESS_LINES", "ParseSummary", "grouping_accuracy", "parse_files"]

COLUMNS = ("LineId", "EventId", "EventTemplate")
MALFORMED_EVENT = "E0"
PROGRESS_LINES = 20_000  # how often parse_files says how far it got: often enough for a person, rare in the loop
"""The EventId of a line that could not be read (binary, invalid UTF-8, too long, broken JSON)."""


class ParseSummary(BaseModel):
    """What `parse_files` did: lines in, templates found, and what could not be read."""

    files: list[str]
    lines: int
    templates: int
    out: str
    malformed: Malformed


def parse_files(
    sources: Sequence[Path | str],
    out: Path,
    *,
    settings: MinerSettings | None = None,
    state_file: Path | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
    on_lines: Callable[[int], None] | None = None,
) -> ParseSummary:
    """Mine the templates of every line of `sources` and write one CSV row per line to `out`.

    LineId counts lines across the files in order (1-based). A JSON request record is mined by its prompt, a
    JSON log event by its message. Raises LogSourceError for a missing source or one without any line.
    `on_lines(n)` hears every `PROGRESS_LINES` lines how many were read (a progress display).
    """
    files = expand_sources(sources)
    miner = Miner(settings, state_file)
    malformed = Malformed()
    out.parent.mkdir(parents=True, exist_ok=True)
    ids = out.with_name(f".{out.name}.ids")
    lines = 0
    try:
        with ids.open("w", encoding="utf-8") as pending:
            write, add, max_tokens = pending.write, miner.add, miner.settings.max_tokens  # the hot loop
            for line in read_lines(files, malformed, max_line_bytes=max_line_bytes):
                lines += 1
                if on_lines is not None and lines % PROGRESS_LINES == 0:
                    on_lines(lines)
                text = _message(line, malformed)
                write("0\n" if text is None else f"{add(*shown_tokens(text, max_tokens))}\n")
        if lines == 0:
            raise LogSourceError(f"{', '.join(map(str, sources))} holds no log lines: nothing to parse")
        templates = _write_rows(ids, out, miner)
    finally:
        ids.unlink(missing_ok=True)
    miner.save()
    return ParseSummary(
        files=[str(f) for f in files], lines=lines, templates=templates, out=str(out), malformed=malformed
    )


def _message(line: SourceLine, malformed: Malformed) -> str | None:
    """The text to mine from a line, or None when the line is malformed (counted)."""
    if line.problem is not None:
        return None
    if not line.text.lstrip().startswith("{"):
        return split_header(line.text)[1]  # the fast path: a plain log line, its level is not needed here
    entry = classify(line, malformed)
    if entry is None:
        return None
    return entry.prompt if isinstance(entry, RequestRecord) else entry.message


def _write_rows(ids: Path, out: Path, miner: Miner) -> int:
    """Second pass: each line's template id becomes a row with the template's final text.

    A row's text after its LineId depends only on its template, so it is rendered (CSV-quoted) once per template.
    """
    events = miner.events()
    rendered: dict[str, str] = {}
    buffer = io.StringIO()
    renderer = csv.writer(buffer, lineterminator="\n")
    temporary = out.with_name(f".{out.name}.tmp")
    with ids.open(encoding="utf-8") as pending, temporary.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle, lineterminator="\n").writerow(COLUMNS)
        for number, raw in enumerate(pending, start=1):
            row = rendered.get(raw)
            if row is None:
                cluster = int(raw)
                known = events.get(cluster) if cluster else None
                if known is None:  # a malformed line, or a template the miner dropped (least recently used)
                    event = (MALFORMED_EVENT, "<malformed line>") if not cluster else (f"E{cluster}", "")
                else:
                    event = (f"E{known[0]}", known[1])
                renderer.writerow(event)
                row = rendered[raw] = buffer.getvalue()
                buffer.seek(0)
                buffer.truncate()
            handle.write(f"{number},{row}")
    os.replace(temporary, out)
    return sum(1 for raw in rendered if raw != "0\n")
