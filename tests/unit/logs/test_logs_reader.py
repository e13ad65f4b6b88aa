"""Bad lines and bad files are counted by kind and skipped; only a missing source stops a run."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import pytest
from logformat_kit import generate
from logformats import FORMATS

from components.logs.parse import parse_files
from components.logs.reader import LogSourceError, Malformed, expand_sources, read_lines
from components.logs.records import LogEvent, RequestRecord, read_entries

GOOD_REQUEST = {"request_id": "r1", "prompt": "hi", "completion": "hello", "latency_ms": 12, "feedback": "negative"}


def _entries(*files: Path, **kwargs: int) -> tuple[list[object], Malformed]:
    malformed = Malformed()
    return [entry for _, entry in read_entries(list(files), malformed, **kwargs)], malformed


def test_every_kind_of_malformed_line_is_counted_and_the_good_lines_still_come_through(tmp_path: Path) -> None:
    path = tmp_path / "mixed.log"
    with path.open("wb") as out:
        out.write(b"2026-11-29 INFO first good line\n")
        out.write(b"\x00\x01\x02\x03binary\xff\xfe\n")
        out.write(b"caf\xe9 latin-1 is not UTF-8\n")
        out.write(b'{"request_id": "r2", "prompt": "truncat\n')
        out.write(b"x" * (1 << 20) + b"\n")  # a 1 MiB line
        out.write(b'{"prompt": "hi", "latency_ms": "slow"}\n')
        out.write(b'{"unrelated": 1}\n')
        out.write(json.dumps(GOOD_REQUEST).encode() + b"\n")
        out.write(b"2026-11-29 ERROR last good line")  # no final newline
    entries, malformed = _entries(path)
    assert malformed.counts == {
        "binary": 1,
        "invalid_utf8": 1,
        "invalid_json": 1,
        "too_long": 1,
        "invalid_record": 1,
    }
    assert [type(e).__name__ for e in entries] == ["LogEvent", "LogEvent", "RequestRecord", "LogEvent"]
    assert entries[1] == LogEvent("unrelated=1", None)  # no message: read as its fields
    assert isinstance(entries[3], LogEvent) and entries[3].failed and entries[3].message == "last good line"
    assert malformed.examples["invalid_json"][0].startswith(f"{path}:4: not complete JSON")
    assert malformed.examples["too_long"] == [f"{path}:5: 1,048,576 bytes"]
    assert "latency_ms" in malformed.examples["invalid_record"][0]


def test_json_that_python_reads_and_no_request_holds_is_counted_not_fatal(tmp_path: Path) -> None:
    # each of these once stopped `vcpilot logs parse` with an internal error, or put an infinite latency in a report
    path = tmp_path / "odd.jsonl"
    lines = [
        '{"prompt": ' + "[" * 50_000 + "]" * 50_000 + "}",  # nested deeper than Python's parser recurses
        '{"prompt": "x", "latency_ms": 1e999999}',  # reads as inf
        '{"prompt": "x", "latency_ms": ' + "9" * 5000 + "}",  # beyond Python's int digits limit
        '{"prompt": "x", "status": "２００"}',  # not an HTTP code in ASCII digits
        json.dumps(GOOD_REQUEST),
    ]
    path.write_text("\n".join(lines) + "\n")
    entries, malformed = _entries(path)
    assert [type(e).__name__ for e in entries] == ["RequestRecord"]
    assert malformed.counts == {"invalid_json": 2, "invalid_record": 2}
    assert malformed.examples["invalid_json"][0] == f"{path}:1: JSON nested too deeply to be a log record"


def test_a_long_line_is_skipped_in_bounded_chunks_without_losing_the_next_line(tmp_path: Path) -> None:
    path = tmp_path / "long.log"
    path.write_bytes(b"short one\n" + b"y" * 5000 + b"\nshort two\n")
    malformed = Malformed()
    lines = [line for line in read_lines([path], malformed, max_line_bytes=64) if line.problem is None]
    assert [(line.number, line.text) for line in lines] == [(1, "short one"), (3, "short two")]
    assert malformed.counts == {"too_long": 1}


def test_gzip_files_directories_and_globs_are_read(tmp_path: Path) -> None:
    (tmp_path / "logs" / "nested").mkdir(parents=True)
    with gzip.open(tmp_path / "logs" / "a.log.gz", "wt") as out:
        out.write("INFO one\nINFO two\n")
    (tmp_path / "logs" / "nested" / "b.jsonl").write_text(json.dumps(GOOD_REQUEST) + "\n")
    (tmp_path / "logs" / ".hidden").write_text("ignored\n")
    entries, malformed = _entries(*expand_sources([tmp_path / "logs"]))
    assert len(entries) == 3 and malformed.total == 0
    assert isinstance(entries[2], RequestRecord) and entries[2].feedback == "negative"
    assert expand_sources([f"{tmp_path}/logs/**/*.jsonl"]) == [tmp_path / "logs" / "nested" / "b.jsonl"]


def test_a_truncated_gzip_keeps_what_it_held_and_is_counted(tmp_path: Path) -> None:
    whole = gzip.compress(b"".join(b"INFO line %d\n" % i for i in range(2000)))
    path = tmp_path / "cut.log.gz"
    path.write_bytes(whole[: len(whole) // 2])
    (tmp_path / "fake.gz").write_bytes(b"not gzip at all\n")
    entries, malformed = _entries(path, tmp_path / "fake.gz")
    assert 0 < len(entries) < 2000
    assert malformed.counts == {"truncated_gzip": 1, "unreadable_file": 1}


def test_a_link_to_nothing_is_named_as_such(tmp_path: Path) -> None:
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "gone").symlink_to(tmp_path / "rotated-away.log")
    for link in ("loop", "gone"):
        with pytest.raises(LogSourceError, match=r"is a symbolic link to nothing \(a loop, or a missing target\)"):
            expand_sources([tmp_path / link])


def test_a_missing_source_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(
        LogSourceError, match=r"^the log source .*nope does not exist: give a file, a directory or a glob$"
    ):
        expand_sources([tmp_path / "nope"])
    with pytest.raises(LogSourceError, match="matches no file"):
        expand_sources([f"{tmp_path}/*.log"])


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_is_not_a_log_source(device: str) -> None:
    # /dev/zero was read as one endless line, skipped chunk by chunk: the command never ended
    with pytest.raises(LogSourceError, match=rf"^the log source {device} is a device, not a log file"):
        expand_sources([device])


def test_json_log_events_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"level": "error", "message": "db down"}\n\n   \n{"msg": "ok"}\n')
    entries, malformed = _entries(path)
    assert entries == [LogEvent("db down", "ERROR"), LogEvent("ok", None)] and malformed.total == 0


def test_json_events_without_a_message_field_are_read_as_their_fields(tmp_path: Path) -> None:
    # A Kubernetes audit event, Serilog's compact JSON (`@t`, `@l`, `@mt`), Elastic's ECS (`log.level`): each was
    # counted invalid_record, or its level not read.
    path = tmp_path / "events.jsonl"
    audit = {
        "kind": "Event",
        "level": "Metadata",
        "stage": "ResponseComplete",
        "requestURI": "/api/v1/namespaces/default/pods",
        "verb": "list",
        "user": {"username": "system:admin", "groups": ["system:masters"]},
        "responseStatus": {"code": 200},
        "requestReceivedTimestamp": "2026-12-05T08:49:42.123456Z",
        "annotations": ["a list is not read"],
    }
    clef = {"@t": "2026-12-05T08:49:42Z", "@mt": "User {UserId} logged in", "@l": "Warning", "UserId": 12}
    ecs = {"@timestamp": "2026-12-05T08:49:42Z", "log.level": "error", "message": "payment failed"}
    path.write_text("".join(json.dumps(record) + "\n" for record in (audit, clef, ecs, {"note": "two words"})))
    entries, malformed = _entries(path)
    assert malformed.total == 0
    assert entries == [
        LogEvent(
            "kind=Event stage=ResponseComplete requestURI=/api/v1/namespaces/default/pods verb=list "
            "user.username=system:admin responseStatus.code=200 requestReceivedTimestamp=2026-12-05T08:49:42.123456Z",
            "METADATA",
        ),
        LogEvent("User {UserId} logged in", "WARNING", "2026-12-05T08:49:42Z"),
        LogEvent("payment failed", "ERROR", "2026-12-05T08:49:42Z"),
        LogEvent('note="two words"', None),
    ]


def test_journald_and_gelf_json_are_read_with_their_levels_and_times(tmp_path: Path) -> None:
    # `journalctl -o json` (a node's kubelet) and GELF: their message, level and time were not read — every field,
    # the timestamps too, went into the mined text, and PRIORITY "3" (err) counted no error.
    path = tmp_path / "node.jsonl"
    journald = {
        "__REALTIME_TIMESTAMP": "1796600001495572",
        "__MONOTONIC_TIMESTAMP": "179660000149557",
        "_HOSTNAME": "node-1",
        "PRIORITY": "3",
        "SYSLOG_IDENTIFIER": "kubelet",
        "MESSAGE": "Failed to pull image nginx:1.27",
    }
    gelf = {"version": "1.1", "host": "web-1", "short_message": "disk full", "timestamp": 1796600000.5, "level": 4}
    path.write_text("".join(json.dumps(record) + "\n" for record in (journald, gelf, {**journald, "PRIORITY": "6"})))
    entries, malformed = _entries(path)
    assert malformed.total == 0
    assert entries == [
        LogEvent("Failed to pull image nginx:1.27", "ERR", "1796600001495572"),
        LogEvent("disk full", "WARNING", 1796600000.5),
        LogEvent("Failed to pull image nginx:1.27", "INFO", "1796600001495572"),
    ]
    assert entries[0].failed and not entries[1].failed


def test_json_lines_of_structlog_pino_and_a_container_runtime(tmp_path: Path) -> None:
    # structlog names its message `event` (each line was counted invalid_record), pino writes levels as numbers, and
    # a container runtime's `log` holds the program's whole line, header and all.
    path = tmp_path / "events.jsonl"
    path.write_text(
        '{"event": "user 7 logged in", "level": "info", "timestamp": "2026-12-05T08:49:42Z"}\n'
        '{"level": 50, "time": 1764924582000, "msg": "db down"}\n'
        '{"log": "2026-12-05 08:49:42,123 ERROR web.app: lookup failed\\n", "stream": "stderr"}\n'
    )
    entries, malformed = _entries(path)
    assert malformed.total == 0
    assert entries == [
        LogEvent("user 7 logged in", "INFO", "2026-12-05T08:49:42Z"),
        LogEvent("db down", "ERROR", 1764924582000),
        LogEvent("lookup failed", "ERROR"),
    ]


def test_mongodb_json_lines_are_read_with_their_one_letter_severity_and_time(tmp_path: Path) -> None:
    # MongoDB (4.4 on) writes `"s": "E"` and `"t": {"$date": …}`: every line was no level and no time.
    path = tmp_path / "mongod.log"
    line = '{{"t":{{"$date":"2026-12-03T10:00:0{}.123+00:00"}},"s":"{}","c":"NETWORK","ctx":"conn1","msg":"{}"}}\n'
    path.write_text(line.format(1, "E", "Error receiving request") + line.format(2, "I", "Connection accepted"))
    entries, malformed = _entries(path)
    assert malformed.total == 0
    assert entries == [
        LogEvent("Error receiving request", "ERROR", "2026-12-03T10:00:01.123+00:00"),
        LogEvent("Connection accepted", "INFO", "2026-12-03T10:00:02.123+00:00"),
    ]


def test_nested_message_and_level_fields_of_rust_tracing_and_elastic_ecs(tmp_path: Path) -> None:
    # TGI (Rust's tracing-subscriber) nests its message in `fields`; ECS may nest `log.level`. The first was read as
    # `fields.message="…" target=…`, the second had no level.
    path = tmp_path / "events.jsonl"
    path.write_text(
        '{"timestamp":"2026-12-03T10:00:00.123Z","level":"ERROR","fields":{"message":"Shard 0 failed"},'
        '"target":"text_generation_launcher"}\n'
        '{"@timestamp":"2026-12-03T10:00:01Z","log":{"level":"error","logger":"app"},"message":"db down"}\n'
    )
    entries, malformed = _entries(path)
    assert malformed.total == 0
    assert entries == [
        LogEvent("Shard 0 failed", "ERROR", "2026-12-03T10:00:00.123Z"),
        LogEvent("db down", "ERROR", "2026-12-03T10:00:01Z"),
    ]


def test_a_json_access_lines_5xx_status_is_an_error_at_any_level(tmp_path: Path) -> None:
    # nginx's `escape=json` log and Envoy's JSON access log have no level, a service's may say info: a 5xx was none.
    path = tmp_path / "access.jsonl"
    path.write_text(
        '{"remote_addr": "10.0.0.7", "request": "POST /v1/completions HTTP/1.1", "status": "502"}\n'
        '{"level": "info", "msg": "request done", "status_code": 503}\n'
        '{"level": "info", "msg": "request done", "status": 404}\n'
        '{"level": "info", "msg": "request done", "status": "ok"}\n'
    )
    entries, malformed = _entries(path)
    assert malformed.total == 0
    assert [entry.failed for entry in entries] == [True, True, False, False]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
def test_a_utf16_or_utf32_file_with_its_byte_order_mark_is_read_as_text(tmp_path: Path, encoding: str) -> None:
    # PowerShell's `kubectl logs pod > app.log` writes UTF-16 with a mark: every line was counted `binary`.
    text = "2026-12-05 08:49:42 ERROR café closed\n2026-12-05 08:49:43 INFO reopened\n"
    data = text.encode(encoding)
    if encoding == "utf-16-be":  # the codec named by its byte order writes no mark
        data = b"\xfe\xff" + data
    path = tmp_path / "app.log"
    path.write_bytes(data)
    entries, malformed = _entries(path)
    assert malformed.total == 0
    assert entries == [LogEvent("café closed", "ERROR"), LogEvent("reopened", "INFO")]


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
@pytest.mark.parametrize("fmt", ["logback", "uvicorn", "Windows"])
def test_a_utf16_or_utf32_file_without_a_byte_order_mark_is_read_as_text(
    tmp_path: Path, encoding: str, fmt: str
) -> None:
    # Windows tools write UTF-16 without a mark too: every line was `binary` (NUL bytes), the file refused as holding
    # no log lines, or skipped unseen in a directory of other logs. Its NUL bytes tell it.
    lines = [line.raw for line in generate(next(f for f in FORMATS if f.name == fmt), 40, seed=5)]
    text = "".join(f"{line}\r\n" for line in lines)
    (tmp_path / "utf8.log").write_text(text, encoding="utf-8")
    (tmp_path / "wide.log").write_bytes(text.encode(encoding))
    expected, _ = _entries(tmp_path / "utf8.log")
    entries, malformed = _entries(tmp_path / "wide.log")
    assert malformed.total == 0 and entries == expected
    parse_files([tmp_path / "utf8.log"], tmp_path / "utf8.csv")
    parse_files([tmp_path / "wide.log"], tmp_path / "wide.csv")
    rows = [
        (tmp_path / f"{name}.csv").read_text(encoding="utf-8").replace(f"{name}.log", "") for name in ("utf8", "wide")
    ]
    assert rows[0] == rows[1]


@pytest.mark.parametrize(
    "opening",
    [
        b"\x00" * 64,  # `copytruncate` leaves NUL bytes where the file was cut
        b"a\x00b\x00c\x00d\x00e\x00f\x00g\x00h\x00\x00\x00",  # UTF-16's shape, then a NUL character
        b"\x01\x00\x02\x00\x03\x00\x04\x00\x05\x00\x06\x00\x07\x00\x08\x00",  # 16-bit numbers, not text
    ],
)
def test_nul_bytes_that_are_not_wide_text_stay_binary(tmp_path: Path, opening: bytes) -> None:
    path = tmp_path / "app.log"
    path.write_bytes(opening + b"\n2026-12-05 08:49:42 INFO ready\n")
    entries, malformed = _entries(path)
    assert entries == [LogEvent("ready", "INFO")] and malformed.counts == {"binary": 1}


def test_a_lone_carriage_return_ends_a_line_as_a_newline_does(tmp_path: Path) -> None:
    # Old Mac files and progress bars end lines with `\r` alone: the whole file was one line (past 1 MiB, a
    # `too_long` one), its header read across the breaks, and the `\r` went unquoted into parse's CSV.
    path = tmp_path / "mac.log"
    path.write_bytes(b"2026-12-05 08:49:42 INFO a 1\r2026-12-05 08:49:43 INFO a 2\r\n2026-12-05 08:49:44 WARN b\n")
    malformed = Malformed()
    assert [(line.number, line.text) for line in read_lines([path], malformed)] == [
        (1, "2026-12-05 08:49:42 INFO a 1"),
        (2, "2026-12-05 08:49:43 INFO a 2"),
        (3, "2026-12-05 08:49:44 WARN b"),
    ]
    out = tmp_path / "parsed.csv"
    parse_files([path], out)
    with out.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [(row["Content"], row["EventTemplate"]) for row in rows] == [("a 1", "a <*>"), ("a 2", "a <*>"), ("b", "b")]


def test_terminal_colours_are_taken_out_of_plain_and_json_lines(tmp_path: Path) -> None:
    # A coloured header was no header (`[32m2026-…` is no time) and ERROR no level; Docker's json-file log holds the
    # same codes, written `\u001b`.
    path = tmp_path / "colour.log"
    path.write_text(
        "\x1b[32m2026-12-05 08:49:42\x1b[0m \x1b[1;31mERROR\x1b[0m connection 3 reset\n"
        + json.dumps({"log": "2026-12-05 08:49:43 \x1b[33mWARN\x1b[0m disk 91% full\n", "stream": "stdout"})
        + "\n"
    )
    entries, malformed = _entries(path)
    assert malformed.total == 0
    assert entries == [LogEvent("connection 3 reset", "ERROR"), LogEvent("disk 91% full", "WARN")]


def test_a_glob_takes_no_link_to_a_directory_and_each_file_is_read_once(tmp_path: Path) -> None:
    # `logs/**/*.log` followed a link to `.` until paths grew too long (the file read 40 times); two such links and it
    # never ended. A node's /var/log/containers/*.log link into /var/log/pods: given both, each was read twice.
    (tmp_path / "logs" / "pods").mkdir(parents=True)
    (tmp_path / "logs" / "pods" / "0.log").write_text("INFO one\n")
    (tmp_path / "logs" / "again").symlink_to(".")
    (tmp_path / "logs" / "containers").mkdir()
    (tmp_path / "logs" / "containers" / "web.log").symlink_to(tmp_path / "logs" / "pods" / "0.log")
    assert expand_sources([f"{tmp_path}/logs/**/*.log"]) == [tmp_path / "logs" / "containers" / "web.log"]
    assert expand_sources([tmp_path / "logs", tmp_path / "logs" / "pods" / "0.log"]) == [
        tmp_path / "logs" / "containers" / "web.log"
    ]


def test_feedback_is_read_as_services_write_it(tmp_path: Path) -> None:
    # A thumb, a word in capitals, 1 / -1: each record was malformed and skipped, its rating lost.
    written = ["thumbs_down", "NEGATIVE", -1, "👎", "Dislike", "thumbs_up", "like", 1, "👍", 0, None, "", "neutral"]
    path = tmp_path / "requests.jsonl"
    path.write_text("".join(json.dumps({"prompt": "p", "feedback": value}) + "\n" for value in written + [True, "meh"]))
    entries, malformed = _entries(path)
    assert [entry.feedback for entry in entries] == ["negative"] * 5 + ["positive"] * 4 + ["none"] * 4
    assert malformed.examples["invalid_record"] == [
        f"{path}:14: feedback: True is none of positive, negative, none (or up/down, thumbs_up/thumbs_down, "
        "like/dislike, good/bad, 1/-1/0)",
        f"{path}:15: feedback: 'meh' is none of positive, negative, none (or up/down, thumbs_up/thumbs_down, "
        "like/dislike, good/bad, 1/-1/0)",
    ]


def test_a_latency_in_seconds_or_nanoseconds_is_read_in_milliseconds(tmp_path: Path) -> None:
    # nginx's JSON log writes `request_time` in seconds (quoted), others `_s`, `_us`, `_ns`: no latency was read.
    path = tmp_path / "requests.jsonl"
    path.write_text(
        '{"prompt": "a", "request_time": "0.250"}\n'
        '{"prompt": "b", "latency_s": 1.5}\n'
        '{"prompt": "c", "duration_ns": 1500000}\n'
        '{"prompt": "d", "latency_ms": 7, "latency_s": 9}\n'  # milliseconds first
        '{"msg": "served", "duration_us": 2500}\n'
        '{"prompt": "e", "latency_s": "soon"}\n'
    )
    entries, malformed = _entries(path)
    assert [entry.latency_ms for entry in entries] == [250.0, 1500.0, 1.5, 7, 2.5]
    assert malformed.examples["invalid_record"] == [f"{path}:6: latency_s: 'soon' is not a number"]


def test_opentelemetry_log_records_are_read_with_their_severity_and_time(tmp_path: Path) -> None:
    # OTel's `body`, `severityText` / `severityNumber` and `timeUnixNano`: each line was read as its fields
    # (`body="db down" severityText=ERROR …`), with no level and no time.
    path = tmp_path / "otel.jsonl"
    path.write_text(
        '{"timeUnixNano": "1764756000123000000", "severityText": "ERROR", "body": "db down"}\n'
        '{"time_unix_nano": 1764756001000000000, "severityNumber": 9, "body": {"stringValue": "served"}}\n'
        '{"severityNumber": 21, "body": "out of memory"}\n'
        '{"severityNumber": 99, "body": "no such severity"}\n'
    )
    entries, malformed = _entries(path)
    assert malformed.total == 0
    assert entries == [
        LogEvent("db down", "ERROR", "1764756000123000000"),
        LogEvent("served", "INFO", 1764756001000000000),
        LogEvent("out of memory", "FATAL"),
        LogEvent("no such severity", None),
    ]


def test_json_lines_a_container_runtime_wrapped_are_read_as_json(tmp_path: Path) -> None:
    # A node's /var/log/containers (CRI) and `kubectl logs --timestamps` put a time before each JSON line the app
    # wrote: the JSON was a message of its own (no level, no request, no latency), its errors and feedback unseen.
    path = tmp_path / "app_default_web-1.log"
    path.write_text(
        '2026-12-03T10:00:00.123456789Z stderr F {"level":"error","msg":"db down"}\n'
        '2026-12-03T10:00:01.123456789Z stdout F {"level":"info","msg":"served","latency_ms":12}\n'
        '2026-12-03T10:00:02.123456789Z stdout F {"prompt":"hi","completion":"x","feedback":"negative"}\n'
        '2026-12-03T10:00:03.123456789Z {"level":"warn","msg":"slow"}\n'  # kubectl logs --timestamps
        "2026-12-03T10:00:04.123456789Z stdout F {braces} are a message here\n"
    )
    entries, malformed = _entries(path)
    assert malformed.total == 0
    assert entries == [
        LogEvent("db down", "ERROR"),
        LogEvent("served", "INFO", None, 12),
        RequestRecord(prompt="hi", completion="x", feedback="negative"),
        LogEvent("slow", "WARN"),
        LogEvent("{braces} are a message here", None),
    ]


def test_a_line_the_container_runtime_split_is_read_whole(tmp_path: Path) -> None:
    # kubelet cuts a line at 16 KiB into `P` parts and an `F` one (a node's /var/log/containers): a long chat
    # request's parts were lines of their own — the record lost, its halves two odd events.
    record = {"messages": [{"role": "user", "content": "q" * 40}], "response": "a", "feedback": "negative"}
    text = json.dumps(record)
    pieces = [text[:30], text[30:60], text[60:]]
    path = tmp_path / "web_default_model-1.log"
    path.write_text(
        f"2026-12-03T10:00:00.1Z stdout P {pieces[0]}\n"
        '2026-12-03T10:00:00.2Z stderr F {"level":"error","msg":"between the parts"}\n'  # another stream goes on
        f"2026-12-03T10:00:00.3Z stdout P {pieces[1]}\n"
        f"2026-12-03T10:00:00.4Z stdout F {pieces[2]}\n"
        "2026-12-03T10:00:01.0Z stdout P password=hunt\n"  # a credential split across parts is masked
        "2026-12-03T10:00:01.1Z stdout F er2-hunter3 and the rest\n"
        "2026-12-03T10:00:02.0Z stderr P the file ends before this line does\n"
    )
    lines = list(read_lines([path], Malformed()))
    assert [(line.number, line.text) for line in lines] == [
        (2, '2026-12-03T10:00:00.2Z stderr F {"level":"error","msg":"between the parts"}'),
        (1, f"2026-12-03T10:00:00.1Z stdout F {text}"),
        (5, "2026-12-03T10:00:01.0Z stdout F password=*** and the rest"),
        (7, "2026-12-03T10:00:02.0Z stderr F the file ends before this line does"),
    ]
    entries, malformed = _entries(path)
    assert malformed.total == 0
    assert isinstance(entries[1], RequestRecord) and entries[1].feedback == "negative"


def test_a_split_line_too_long_to_mine_is_counted_without_holding_its_parts(tmp_path: Path) -> None:
    path = tmp_path / "long.log"
    parts = "".join(f"2026-12-03T10:00:00.{n}Z stdout P {'y' * 40}\n" for n in range(1, 9))
    path.write_text(parts + "2026-12-03T10:00:01Z stdout F end\n2026-12-03T10:00:02Z stdout F next line\n")
    malformed = Malformed()
    lines = list(read_lines([path], malformed, max_line_bytes=128))
    assert [(line.number, line.text, line.problem) for line in lines] == [
        (1, "", "too_long"),
        (10, "2026-12-03T10:00:02Z stdout F next line", None),
    ]
    assert malformed.examples["too_long"] == [f"{path}:1: 323 characters, split by the container runtime"]
