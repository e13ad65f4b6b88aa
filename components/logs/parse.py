"""`vcpilot logs parse`: every input line with its template, in Loghub's structured CSV format.

Loghub's structured format (LineId, Content, EventId, EventTemplate, ParameterList, and the Source file) lets anyone
score our parse with Loghub's own tools, and lets the rest of a log pipeline join lines to templates. Rows stream out
as lines stream in; a second streaming pass writes each row with its template's final text (after the merge pass of
`merging.py`), so memory holds the templates, never the lines.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel

from components.files import make_dirs, put_output, remove_made_dirs
from components.logs.masking import MASK, LineTokenizer, shown_tokens, template_pattern
from components.logs.multiline import (
    BLANK,
    CONTINUING,
    EXCEPTION,
    HEAD,
    TEXT,
    fold,
    joined_message,
    runtime_body,
    told_message,
)
from components.logs.reader import (
    MAX_LINE_BYTES,
    LogSourceError,
    Malformed,
    SourceLine,
    expand_sources,
    read_lines,
    refuse_overwriting,
)
from components.logs.records import RequestRecord, classify
from components.logs.refine import RefineSummary, TemplateRefiner
from components.logs.scoring import grouping_accuracy
from components.logs.templates import Miner, MinerSettings

__all__ = ["COLUMNS", "MALFORMED_EVENT", "PROGRESS_LINES", "ParseSummary", "grouping_accuracy", "parse_files"]

COLUMNS = ("LineId", "Source", "Content", "EventId", "EventTemplate", "ParameterList")
MALFORMED_EVENT = "E0"
"""The EventId of a line that could not be read (binary, invalid UTF-8, too long, broken JSON)."""
PROGRESS_LINES = 20_000  # how often parse_files says how far it got: often enough for a person, rare in the loop
_MALFORMED, _BLANK = "0", "-"  # what a pending row holds instead of a template id
# A pending row of an event over several lines: its first line (whose template and message are the next entry of the
# events file, known once the event ends) and the lines that continue it (`multiline.fold`).
_FIRST, _CONTINUED = "+", "^"


class ParseSummary(BaseModel):
    """What `parse_files` did: lines in, templates found, and what could not be read."""

    files: list[str]
    lines: int
    templates: int
    out: str
    malformed: Malformed
    refine: RefineSummary | None = None


def parse_files(
    sources: Sequence[Path | str],
    out: Path,
    *,
    settings: MinerSettings | None = None,
    state_file: Path | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
    on_lines: Callable[[int], None] | None = None,
    refiner: TemplateRefiner | None = None,
) -> ParseSummary:
    """Mine the templates of every line of `sources` and write one CSV row per line to `out`.

    LineId counts lines across the files in order (1-based). A JSON request record is mined by its prompt, a
    JSON log event by its message. Raises LogSourceError for a missing source or one without any line.
    `on_lines(n)` hears every `PROGRESS_LINES` lines how many were read (a progress display). With a `refiner`,
    the templates are refined by an LLM (`refine.py`) before the rows are written.
    """
    files = expand_sources(sources)
    refuse_overwriting(files, [(out, "--out")] + ([(state_file, "--state")] if state_file is not None else []))
    miner = Miner(settings, state_file)
    malformed = Malformed()
    made = make_dirs(out.parent)  # removed again when the sources turn out to be unusable
    ids = out.with_name(f".{out.name}.ids")
    folded = out.with_name(f".{out.name}.events")  # per event over several lines: its template id and message
    lines = mined_lines = 0
    names: dict[str, int] = {}  # each source file's place in `files`, which the pending rows refer to
    examples: dict[int, str] | None = {} if refiner is not None else None  # a line of each template, to show
    try:
        with (
            ids.open("w", encoding="utf-8", newline="\n") as pending,
            folded.open("w", encoding="utf-8", newline="\n") as ends,
        ):
            write, add, tokenizer = pending.write, miner.add, LineTokenizer(miner.settings.max_tokens)  # hot loop
            event: tuple[str, list[str], list[str]] | None = None  # the first line of the event being read, mined
            exception: str | None = None  # the exception its trace names so far
            told: str | None = None  # the first line of its message under its first line (.NET's)
            in_event = False
            for line, role in fold(read_lines(files, malformed, max_line_bytes=max_line_bytes)):
                lines += 1
                if on_lines is not None and lines % PROGRESS_LINES == 0:
                    on_lines(lines)
                source = names.setdefault(line.source, len(names))
                if role == BLANK:  # no event: a row without one, as detect skips it
                    write(f"{_BLANK}\t{source}\t{line.text}\n")
                    continue
                if role in CONTINUING:
                    if role == EXCEPTION:
                        exception = runtime_body(line.text)
                    elif role == TEXT and told is None:
                        told = told_message(line.text)[0]
                    write(f"{_CONTINUED}\t{source}\t{line.text}\n")
                    continue
                if in_event:  # the event before ends here
                    ends.write(_end_event(event, exception, told, add, examples, tokenizer.max_tokens))
                    in_event = False
                mined = _mined(line, malformed, tokenizer)
                if role == HEAD:
                    mined_lines += mined is not None
                    event, exception, told, in_event = mined, None, None, True
                    write(f"{_FIRST}\t{source}\t\n")
                    continue
                if mined is None:
                    write(f"{_MALFORMED}\t{source}\t\n")
                else:
                    mined_lines += 1
                    text, tokens, shown = mined
                    cluster = add(tokens, shown)
                    if examples is not None and cluster not in examples:
                        examples[cluster] = text
                    write(f"{cluster}\t{source}\t{text}\n")
            if in_event:
                ends.write(_end_event(event, exception, told, add, examples, tokenizer.max_tokens))
        if lines == 0 or not mined_lines:
            where = ", ".join(map(str, sources))
            skipped = f" ({malformed.total} malformed skipped: {malformed.describe()})" if malformed.total else ""
            raise LogSourceError(f"{where} holds no log lines{skipped}: {malformed.remedy('nothing to parse')}")
        events = miner.events()
        if refiner is not None:
            events = refiner.refine(events, examples or {})
        templates = _write_rows(ids, folded, out, events, list(names))
    except BaseException:
        ids.unlink(missing_ok=True)
        folded.unlink(missing_ok=True)
        remove_made_dirs(made)
        raise
    finally:
        ids.unlink(missing_ok=True)
        folded.unlink(missing_ok=True)
    miner.save()
    return ParseSummary(
        files=[str(f) for f in files],
        lines=lines,
        templates=templates,
        out=str(out),
        malformed=malformed,
        refine=refiner.summary if refiner is not None else None,
    )


def _end_event(
    event: tuple[str, list[str], list[str]] | None,
    exception: str | None,
    told: str | None,
    add: Callable[[list[str], list[str]], int],
    examples: dict[int, str] | None,
    max_tokens: int,
) -> str:
    """Mine an event read over several lines, now that it ended; its line of the events file (template id, message).

    Its message is the exception its trace names, the first line its message goes on with (`told`) and its first
    line's (`multiline.joined_message`); an event whose first line is malformed is malformed, its continuation lines
    with it.
    """
    if event is None:
        return f"{_MALFORMED}\t\n"
    text, tokens, shown = event
    if exception or told:
        text = joined_message(text, exception, told)
        tokens, shown = shown_tokens(text, max_tokens)
    cluster = add(tokens, shown)
    if examples is not None and cluster not in examples:
        examples[cluster] = text
    return f"{cluster}\t{text}\n"


def _mined(line: SourceLine, malformed: Malformed, tokenizer: LineTokenizer) -> tuple[str, list[str], list[str]] | None:
    """The text to mine from a line and its tokens (`masking.shown_tokens`), or None for a malformed line (counted)."""
    if line.problem is not None:
        return None
    if not line.text.lstrip().startswith("{"):
        mined = tokenizer.tokens(line.text)  # the fast path: a plain log line, its level is not needed here
        if not mined[0].lstrip().startswith("{"):
            return mined
    entry = classify(line, malformed)  # a JSON line, or one a container runtime wrapped (`records.classify`)
    if entry is None:
        return None
    text = entry.prompt if isinstance(entry, RequestRecord) else entry.message
    if "\n" in text or "\r" in text:  # a JSON string may hold line breaks; a row of the CSV holds one line
        text = " ".join(text.splitlines())
    return (text, *shown_tokens(text, tokenizer.max_tokens))


def _write_rows(ids: Path, folded: Path, out: Path, events: dict[int, tuple[int, str]], sources: list[str]) -> int:
    """Second pass: each pending line becomes a row with its template's final text and its variables.

    ParameterList is what Loghub writes: the Python list of the strings that fill the template's `<*>` in turn
    (empty when the message no longer matches, as when a line was cut at `max_tokens`). A blank line has no event:
    its EventId and EventTemplate are empty. An event over several lines (`multiline.fold`) has its message (its
    exception and first line) as its first row's Content; the lines that continue it keep their own text, with the
    event's EventId and EventTemplate and no parameters.
    """
    rendered: dict[str, tuple[str, str, re.Pattern[str] | None]] = {}  # per template id: EventId, template, pattern
    temporary = out.with_name(f".{out.name}.tmp")
    with (
        ids.open(encoding="utf-8", newline="\n") as pending,
        folded.open(encoding="utf-8", newline="\n") as ends,
        temporary.open("w", newline="", encoding="utf-8") as handle,
    ):
        writerow = csv.writer(handle, lineterminator="\n").writerow
        writerow(COLUMNS)
        current = _MALFORMED  # the template id of the event over several lines being written
        for number, raw in enumerate(pending, start=1):
            cluster, source, text = raw[:-1].split("\t", 2)
            continued = cluster == _CONTINUED
            if cluster == _FIRST:
                current, text = ends.readline()[:-1].split("\t", 1)
            if cluster in (_FIRST, _CONTINUED):
                cluster = current
            event = rendered.get(cluster)
            if event is None:
                known = events.get(int(cluster)) if cluster not in (_MALFORMED, _BLANK) else None
                if cluster == _BLANK:
                    event = ("", "", None)
                elif known is None:  # a malformed line, or a template the miner dropped (least recently used)
                    name = MALFORMED_EVENT if cluster == _MALFORMED else f"E{cluster}"
                    event = (name, "<malformed line>" if cluster == _MALFORMED else "", None)
                else:  # a template without a variable has no parameters to look for: no pattern
                    event = (f"E{known[0]}", known[1], template_pattern(known[1]) if MASK in known[1] else None)
                rendered[cluster] = event
            found = event[2].match(text) if event[2] is not None and not continued else None
            parameters = str(list(found.groups())) if found is not None else "[]"
            writerow((number, sources[int(source)], text, event[0], event[1], parameters))
    put_output(temporary, out)  # `/dev/stdout` and a link are written into, not replaced
    return len({event[0] for cluster, event in rendered.items() if cluster not in (_MALFORMED, _BLANK)})
