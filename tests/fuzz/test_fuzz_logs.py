"""Fuzz the log reader, the masker and the folding of stack traces: any bytes are lines or counted malformed ones,
any text masks without error, any mix of trace shapes is one CSV row per line in `logs parse`."""

from __future__ import annotations

import csv
import gzip
import random
import re
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from fuzz_kit import SHARED, mutated_bytes
from hypothesis import example, given
from hypothesis import strategies as st

from components.logs.masking import (
    LineTokenizer,
    level_of,
    mask_variables,
    message_tokens,
    shown_tokens,
    split_header,
)
from components.logs.parse import parse_files
from components.logs.reader import LogSourceError, Malformed, read_lines
from components.logs.records import read_entries
from components.logs.timestamps import TimeReader

# Real lines of the formats we read: the first lines of each loghub sample when ../shared is there, else a few.
_FALLBACK = [
    "081109 203518 143 INFO dfs.DataNode$DataXceiver: Receiving blk_-1608999687919862906 src: /10.250.19.102:5410",
    "[Sun Dec 04 04:47:44 2005] [notice] workerEnv.init() ok /etc/httpd/conf/workers2.properties",
    "2015-07-29 17:41:44,747 - INFO  [QuorumPeer[myid=1]/0:0:0:0:0:0:0:0:2181:FastLeaderElection@774] - Notification",
    "Dec 10 06:55:46 LabSZ sshd[24200]: Invalid user webmaster from 173.234.31.186",
    '{"ts": "2024-05-01T10:00:00Z", "level": "error", "msg": "timeout after 30s", "request_id": "9f1c"}',
]


def _seed_lines() -> list[str]:
    lines = list(_FALLBACK)
    for path in sorted(SHARED.glob("datasets/loghub/*/*_2k.log")):
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines += [next(handle).rstrip("\n") for _ in range(3)]
    return lines


LINES = _seed_lines()
FILES = ["\n".join(LINES[i : i + 4]).encode() + b"\n" for i in range(0, len(LINES), 4)]
LOG_BYTES = st.one_of(mutated_bytes(FILES), st.binary(max_size=600))
LOG_TEXT = st.one_of(
    st.sampled_from(LINES),
    st.text(max_size=300),
    mutated_bytes([s.encode() for s in LINES]).map(lambda b: b.decode("utf-8", errors="replace")),
)


def _expected_lines(data: bytes) -> int:
    """How many lines a reader must yield for `data`: LF, CR and CRLF each end one; an unterminated last counts."""
    return len(data.splitlines())


@given(LOG_BYTES)
@example(b"\xef\xbb\xbf")  # a byte-order mark alone
@example(b"x" * 64 + b"\n" + b"y" * 200)  # lines at and past the length limit, the last one unterminated
@example(b"\r\n\r\n\x1b[31mred\x1b[0m\n")
def test_every_line_is_yielded_as_text_or_counted(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "service.log"
        path.write_bytes(data)
        malformed = Malformed()
        lines = list(read_lines([path], malformed, max_line_bytes=64))
    assert len(lines) == _expected_lines(data)
    assert [line.number for line in lines] == list(range(1, len(lines) + 1))
    assert sum(line.problem is not None for line in lines) == malformed.total
    for line in lines:
        assert "\n" not in line.text
        assert line.problem is None or line.text == ""


@given(LOG_BYTES, st.integers(min_value=0, max_value=400))
@example(b"", 0)
def test_a_cut_or_corrupt_gzip_is_counted_not_raised(data: bytes, cut: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "service.log.gz"
        packed = gzip.compress(data)
        path.write_bytes(packed[:cut] if cut < len(packed) else packed)
        malformed = Malformed()
        lines = list(read_lines([path], malformed, max_line_bytes=64))
    if cut >= len(packed):
        assert len(lines) == _expected_lines(data)
    elif cut > 0:  # an empty file is an empty log, not a broken one
        assert malformed.counts.get("truncated_gzip", 0) + malformed.counts.get("unreadable_file", 0) == 1


@given(LOG_TEXT)
@example("[" * 40)  # unbalanced brackets: the header pattern must not backtrack for ever
@example("0x" + "f" * 200)
def test_masking_keeps_the_line_and_masks_whole_tokens(line: str) -> None:
    header, message = split_header(line)
    assert header + message == line
    level = level_of(header, message)
    assert level is None or level == level.upper()
    masked = mask_variables(message)
    assert isinstance(masked, str)
    tokens = message_tokens(message, max_tokens=20)
    assert len(tokens) <= 20


@given(LOG_TEXT, st.randoms(use_true_random=False))
@example("rdd_2_0 rdd_2_1 0x1f <*>", random.Random(1))
def test_the_tokens_of_any_line_of_a_shape_are_the_uncached_ones(line: str, rng: random.Random) -> None:
    redrawn = re.sub(r"[0-9]", lambda _: rng.choice("0123456789"), line)  # the same shape, other digits
    tokenizer = LineTokenizer(max_tokens=20)
    for text in (line, redrawn, line):
        message = split_header(text)[1]
        assert tokenizer.tokens(text) == (message, *shown_tokens(message, max_tokens=20))


# Words whose digits decide what collapses into a list, what stays a word, and what `0x` or `<*>` read as.
_WORDS = ["rdd_1_2", "rdd_3_4", "blk_5", "x", "ssh2", "12", "a1/b2/c3", "id7", "<*>", "0x1f", "5x1f", "7.5", "r1_<"]


@given(
    st.lists(st.sampled_from(_WORDS), min_size=1, max_size=8).map(" ".join),
    st.sampled_from([1, 2, 3, 100]),
    st.randoms(use_true_random=False),
)
def test_lists_whose_digits_decide_what_collapses_are_tokenized_as_uncached(
    message: str, max_tokens: int, rng: random.Random
) -> None:
    tokenizer = LineTokenizer(max_tokens=max_tokens)
    for _ in range(4):
        line = "2026-11-29 10:00:01 INFO x: " + re.sub(r"[0-9]", lambda _: rng.choice("12"), message)  # same or not
        expected = split_header(line)[1]
        assert tokenizer.tokens(line) == (expected, *shown_tokens(expected, max_tokens))


@given(LOG_TEXT, st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2099, 1, 1)))
@example("Feb 29 12:00:00 host x", datetime(2027, 1, 1))  # a leap day in a year without one
@example("9999-12-31T23:59:59-23:59 x", datetime(2026, 1, 1))
@example("1" * 13 + " " + "2" * 10, datetime(2026, 1, 1))
def test_reading_a_time_never_raises(line: str, reference: datetime) -> None:
    seconds = TimeReader(reference.replace(tzinfo=UTC)).line(line)
    assert seconds is None or isinstance(seconds, float)


# Lines of every shape the folding of stack traces tells apart (components.logs.multiline), and some it must not fold.
TRACE_SHAPES = [
    "2026-12-05 08:49:42,001 ERROR app: request 7 failed",
    "2026-12-05 08:49:43 INFO app: ok",
    "Traceback (most recent call last):",
    '  File "/app/x.py", line 12, in handler',
    "    result = model(x)",
    "    ^^^^^^",
    "ValueError: bad value 3",
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
    "java.lang.IllegalStateException: queue 4 is full",
    "\tat com.example.Orders.place(Orders.java:12)",
    "Caused by: java.io.IOException: reset",
    "\t... 12 more",
    "panic: runtime error: index out of range",
    "goroutine 1 [running]:",
    "main.main()",
    "\t/app/main.go:12 +0x1d",
    "[signal SIGSEGV: segmentation violation]",
    "INFO:     127.0.0.1 - GET /health 200",
    "fail: Microsoft.AspNetCore.Server.Kestrel[13]",  # .NET's console event: its message indented below
    "      Connection id 0HMV: An unhandled exception was thrown by the application.",
    "      System.InvalidOperationException: boom",
    "  indented config line",
    "",
    "   ",
]
TRACE_FILES = st.lists(
    st.one_of(st.sampled_from(TRACE_SHAPES), st.sampled_from(LINES), st.text(max_size=40)), max_size=40
).map(lambda lines: "\n".join(lines).encode("utf-8", errors="surrogatepass") + b"\n")


@given(st.lists(st.one_of(TRACE_FILES, mutated_bytes(FILES)), min_size=1, max_size=3))
@example([b"Traceback (most recent call last):\n  File \"a.py\", line 1\nKeyError: 'k'\n"])  # a trace first in its file
def test_any_mix_of_stack_trace_shapes_parses_to_one_row_per_line(files: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for index, data in enumerate(files):
            path = Path(tmp) / f"service-{index}.log"
            path.write_bytes(data)
            paths.append(path)
        lines = list(read_lines(paths, Malformed()))
        entries = list(read_entries(paths, Malformed()))
        out = Path(tmp) / "out" / "structured.csv"
        try:
            summary = parse_files(paths, out)
        except LogSourceError:  # nothing to mine: one sentence, and no CSV left behind
            assert not out.exists()
            return
        with out.open(encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
    assert len(rows) == len(lines) == summary.lines
    # every event detect reads begins at a row of its own, and no two events share a first line
    assert len({(line.source, line.number) for line, _ in entries}) == len(entries)
    assert len(entries) <= sum(1 for line in lines if line.problem is None and line.text.strip())
