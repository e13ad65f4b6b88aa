"""What one log line says: a service log event (plain text or JSON) or one request the model served.

The service writes two kinds of lines into the same sources: text logs (`2026-11-29 ... ERROR ...`) and JSON
request records (`{"request_id": ..., "prompt": ..., "feedback": "negative", "correction": ...}`). Classifying
a line here keeps everything downstream typed; a line that is neither is counted as malformed, not guessed at.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

from components.errors import InputError
from components.logs.header import LETTER_LEVELS, SYSLOG_LEVELS
from components.logs.masking import ERROR_LEVELS, level_of, split_header
from components.logs.multiline import (
    BLANK,
    EXCEPTION,
    HEAD,
    MORE,
    TEXT,
    fold,
    joined_message,
    runtime_body,
    told_message,
    traced_level,
)
from components.logs.reader import MAX_LINE_BYTES, Malformed, SourceLine, clean_text, read_lines
from components.redact import MASK as SECRET_MASK
from components.redact import secret_name

__all__ = ["LATENCY_KEYS", "TIME_KEYS", "Entry", "LogEvent", "RequestRecord", "classify", "read_entries"]

Feedback = Literal["positive", "negative", "none"]
# Serilog's compact JSON writes `@m` (its rendered message) and `@mt` (its template); structlog's JSONRenderer writes
# `event`, tried last, as other logs name a kind of event so.
# journald's `journalctl -o json` (MESSAGE, PRIORITY, __REALTIME_TIMESTAMP in µs) and GELF (short_message) too.
# OpenTelemetry's log record: `body` (a string, or `{"stringValue": …}` in OTLP JSON), `severityText`, `severityNumber`.
_MESSAGE_KEYS = ("message", "msg", "log", "@m", "@mt", "event", "MESSAGE", "short_message", "body")
_LEVEL_KEYS = ("level", "severity", "levelname", "log.level", "@l", "PRIORITY", "severityText", "severity_text")
_OTEL_SEVERITY_KEYS = ("severityNumber", "severity_number")  # 1-4 TRACE, 5-8 DEBUG, … 17-20 ERROR, 21-24 FATAL
_OTEL_LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL")
_MONGODB_SEVERITY = re.compile(r"[FEWI]|D[1-5]?")  # MongoDB's `"s"`: one letter, debug with its verbosity
TIME_KEYS = ("timestamp", "time", "ts", "@timestamp", "@t", "__REALTIME_TIMESTAMP", "timeUnixNano", "time_unix_nano")
"""The fields of a JSON line that say when it was written, the first present wins."""
LATENCY_KEYS = ("latency_ms", "duration_ms", "elapsed_ms", "response_time_ms")
"""The fields of a JSON line that say how long its request took, in milliseconds."""
# The same in other units, each by the milliseconds in one, read where no field above is: nginx's `request_time` is
# seconds. A field with no unit in its name (`latency`, `duration`) is not read: seconds and milliseconds both occur.
_SCALED_LATENCY_KEYS = {
    **dict.fromkeys(("latency_s", "duration_s", "elapsed_s", "latency_seconds", "duration_seconds"), 1e3),
    "request_time": 1e3,
    **dict.fromkeys(("latency_us", "duration_us"), 1e-3),
    "duration_ns": 1e-6,
}
_SCALED_LATENCY_NAMES = frozenset(_SCALED_LATENCY_KEYS)
_STATUS_KEYS = ("status", "status_code", "statusCode", "response_code")  # a JSON access log's HTTP status
_FEEDBACK: dict[str, Feedback] = {
    **dict.fromkeys(("positive", "up", "thumbs_up", "thumbs-up", "thumbsup", "like", "liked", "good", "helpful",
                     "+1", "1", "\N{THUMBS UP SIGN}"), "positive"),
    **dict.fromkeys(("negative", "down", "thumbs_down", "thumbs-down", "thumbsdown", "dislike", "disliked", "bad",
                     "unhelpful", "not_helpful", "-1", "\N{THUMBS DOWN SIGN}"), "negative"),
    **dict.fromkeys(("none", "", "null", "neutral", "0"), "none"),
}  # fmt: skip
_OK_WORDS = frozenset({"ok", "success", "succeeded"})
_ERROR_WORDS = frozenset({"error", "failed", "failure", "fail"})


class RequestRecord(BaseModel):
    """One request the model served, as the service logs it (one JSON object per line).

    A completion request logs its `prompt`; a chat request its `messages` (OpenAI's shape, read as fine-tuning reads
    them), and then its prompt is the last user message: what is mined and compared.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    prompt: str
    messages: tuple[dict[str, str], ...] = ()
    completion: str = Field(default="", validation_alias=AliasChoices("completion", "response"))
    request_id: str = ""
    timestamp: str | None = Field(default=None, validation_alias=AliasChoices(*TIME_KEYS))
    latency_ms: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, validation_alias=AliasChoices(*LATENCY_KEYS)
    )  # finite: `1e999` reads as inf
    status: int = Field(default=200, description="HTTP status code; `ok`/`error` are read as 200/500")
    feedback: Feedback = "none"
    correction: str | None = None
    category: str = ""  # what the service files the request under (a route, an intent, a product type), optional

    @field_validator("timestamp", "request_id", mode="before")
    @classmethod
    def _as_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int | float) else value

    @field_validator("status", mode="before")
    @classmethod
    def _status(cls, value: Any) -> Any:
        """An HTTP status code, or a word: `ok` is 200, `error` is 500."""
        if isinstance(value, str) and not (value.strip().isdigit() and value.isascii()):
            word = value.strip().lower()
            if word in _OK_WORDS:
                return 200
            if word in _ERROR_WORDS:
                return 500
            raise ValueError(f"{value!r} is neither an HTTP code nor one of ok, error")
        return value

    @field_validator("feedback", mode="before")
    @classmethod
    def _feedback(cls, value: Any) -> Any:
        """A rating as services write it: a word (any case), a thumb, or 1 / -1 / 0; `true` says neither way."""
        if value is None:
            return "none"
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if isinstance(value, str) and (feedback := _FEEDBACK.get(value.strip().lower())) is not None:
            return feedback
        raise ValueError(
            f"{value!r} is none of positive, negative, none (or up/down, thumbs_up/thumbs_down, like/dislike, "
            "good/bad, 1/-1/0)"
        )

    @property
    def failed(self) -> bool:
        """The server failed the request (5xx); a client error (4xx) is not the model's fault."""
        return self.status >= 500


@dataclass(slots=True)  # not frozen: a frozen dataclass costs 1 µs more per line
class LogEvent:
    """One service log line: its message without the header, its level, and what a JSON line adds (time, latency)."""

    message: str
    level: str | None
    timestamp: str | float | None = None  # a JSON line's time field; a text line's time is read from its text
    latency_ms: float | None = None

    @property
    def failed(self) -> bool:
        """The line reports an error (ERROR, FATAL, ... or an exception)."""
        return self.level in ERROR_LEVELS


Entry = LogEvent | RequestRecord


def _from_json(line: SourceLine, malformed: Malformed) -> Entry | None:
    try:
        data = json.loads(line.text)
    except ValueError as err:
        malformed.add("invalid_json", line.where, f"not complete JSON ({err})")
        return None
    except RecursionError:  # `[[[[…` thousands deep: JSON, but no log record nests like that
        malformed.add("invalid_json", line.where, "JSON nested too deeply to be a log record")
        return None
    if not isinstance(data, dict):
        malformed.add("invalid_record", line.where, "a JSON line must be an object")
        return None
    return _from_object(data, line, malformed)


def _wrapped_object(message: str) -> dict[str, Any] | None:
    """The JSON object a text line's message is, after a container runtime's prefix; None when it is not one.

    CRI's `2026-…Z stdout F ` (a node's /var/log/containers), `kubectl logs --timestamps`; `{braces} in a message`
    stay text.
    """
    try:
        data = json.loads(message)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _from_object(data: dict[str, Any], line: SourceLine, malformed: Malformed) -> Entry | None:
    """The entry a JSON object holds: a request (`prompt`, or a chat's `messages`) or a log event."""
    if "prompt" in data or _is_chat(data.get("messages")):
        try:
            return RequestRecord.model_validate(_request(data))
        except InputError as err:
            malformed.add("invalid_record", line.where, str(err))
            return None
        except ValidationError as err:
            problem = err.errors()[0]
            field = ".".join(str(part) for part in problem["loc"]) or "record"
            said = problem["ctx"]["error"] if problem["type"] == "value_error" else problem["msg"]  # ours, as written
            malformed.add("invalid_record", line.where, f"{field}: {said}")
            return None
    message = next((data[key] for key in _MESSAGE_KEYS if isinstance(data.get(key), str)), None)
    if message is None:  # Rust's tracing-subscriber (TGI, vector) nests it: `"fields": {"message": …}`; OTLP JSON too
        message = _nested(data, "fields", "message") or _nested(data, "body", "stringValue")
    if message is None:
        message = _fields_text(data)
    if not message:
        malformed.add("invalid_record", line.where, "neither a request (no 'prompt') nor a log event (no 'message')")
        return None
    level = next((_level_name(data[key]) for key in _LEVEL_KEYS if data.get(key)), None)
    if level is None and (ecs := _nested(data, "log", "level")):  # ECS writes `log.level` nested as well
        level = _level_name(ecs)
    if level is None and isinstance(data.get("s"), str) and _MONGODB_SEVERITY.fullmatch(data["s"]):
        level = LETTER_LEVELS[data["s"][0]]
    if level is None and (number := next((data[k] for k in _OTEL_SEVERITY_KEYS if k in data), None)) is not None:
        if isinstance(number, int) and not isinstance(number, bool) and 1 <= number <= 24:
            level = _OTEL_LEVELS[(number - 1) // 4]
    if any(_server_error(data.get(key)) for key in _STATUS_KEYS):
        level = "ERROR"  # an access log's 5xx (nginx's, Envoy's JSON): the server failed the request, at any level
    stamp = next((data[key] for key in TIME_KEYS if isinstance(data.get(key), str | int | float)), None)
    if stamp is None:  # MongoDB's `"t": {"$date": "2026-12-03T10:00:00.123Z"}`
        stamp = _nested(data, "t", "$date")
    latency = next((data[key] for key in LATENCY_KEYS if _is_latency(data.get(key))), None)
    if latency is None and (scaled := _scaled_latency(data)) is not None and _is_latency(scaled[1]):
        latency = scaled[1]
    # A container runtime's `{"log": "2026-12-05 08:49:42,123 ERROR app: ...\n"}` holds the program's whole line,
    # colours and all (JSON writes ESC as `\u001b`, so only now is it one).
    header, message = split_header(clean_text(message))
    return LogEvent(message.strip(), level or level_of(header, message), stamp, latency)


def _is_chat(messages: Any) -> bool:
    """`messages` as a chat request logs them: a list of objects with a role (a count of messages is no chat)."""
    return isinstance(messages, list) and bool(messages) and all(isinstance(m, dict) and "role" in m for m in messages)


def _request(data: dict[str, Any]) -> dict[str, Any]:
    """A request's fields as `RequestRecord` reads them.

    A chat request (`messages`, no `prompt`) asks its last user message (else its last); a latency in another unit
    is given in milliseconds.
    """
    if (scaled := _scaled_latency(data)) is not None and not any(key in data for key in LATENCY_KEYS):
        key, latency = scaled
        if latency is None:
            raise InputError(f"{key}: {data[key]!r} is not a number")
        data = {**data, LATENCY_KEYS[0]: latency}
    if "messages" not in data:
        return data
    if "prompt" in data:  # a completion request: its prompt is what was asked
        return {key: value for key, value in data.items() if key != "messages"}
    from components.finetune.records import chat_messages

    messages = chat_messages(data, "the request")
    asked = next((m["content"] for m in reversed(messages) if m["role"] == "user"), messages[-1]["content"])
    return {**data, "prompt": asked, "messages": messages}


def _nested(data: dict[str, Any], outer: str, inner: str) -> str | None:
    """The text at `data[outer][inner]`, if there is one."""
    nested = data.get(outer)
    value = nested.get(inner) if isinstance(nested, dict) else None
    return value if isinstance(value, str) else None


_FIELDS_READ = 32
_BARE = re.compile(r'[^\s"=]+')  # a value written as it is; one with a space, a quote or `=` in it is quoted
_KEYS_NOT_READ = frozenset((*TIME_KEYS, *LATENCY_KEYS, *_SCALED_LATENCY_KEYS, *_LEVEL_KEYS, *_OTEL_SEVERITY_KEYS))


def _fields_text(data: dict[str, Any]) -> str:
    """An event without a message (a Kubernetes audit event, a metrics line) read as its fields: `key=value …`.

    Its values that are not containers, in order, an object's one level down as `key.inner=value`; its time,
    level and latency are read apart. Variables among them are masked as in any message, the keys stay constant.
    A value whose name says it is secret (`password`, `api_key`) reads `***`, whatever it looks like.
    """
    pairs: list[str] = []
    for key, value in data.items():
        if key in _KEYS_NOT_READ:
            continue
        secret = secret_name(key)
        inner = value.items() if isinstance(value, dict) else [("", value)]
        for name, item in inner:
            if isinstance(item, str | int | float | bool) or item is None:
                text = item if isinstance(item, str) and _BARE.fullmatch(item) else json.dumps(item, ensure_ascii=False)
                if isinstance(item, str) and item and (secret or (name and secret_name(name))):
                    text = SECRET_MASK
                pairs.append(f"{key}.{name}={text}" if name else f"{key}={text}")
    return " ".join(pairs[:_FIELDS_READ])


# pino and bunyan write levels as numbers; journald's PRIORITY and GELF's level are syslog's severities, 0 to 7.
_NUMBERED_LEVELS = {10: "TRACE", 20: "DEBUG", 30: "INFO", 40: "WARN", 50: "ERROR", 60: "FATAL"}


def _level_name(value: Any) -> str:
    if isinstance(value, str) and value.isascii() and value.isdigit():  # journald writes PRIORITY as "3"
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        if value in _NUMBERED_LEVELS:
            return _NUMBERED_LEVELS[value]
        if 0 <= value < len(SYSLOG_LEVELS):
            return SYSLOG_LEVELS[value]
    return str(value).upper()


def _server_error(value: Any) -> bool:
    """An HTTP status of 500 to 599, as a number or as digits."""
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    return isinstance(value, int) and not isinstance(value, bool) and 500 <= value <= 599


def _scaled_latency(data: dict[str, Any]) -> tuple[str, float | None] | None:
    """The first latency in another unit (`_SCALED_LATENCY_KEYS`): its field and milliseconds; None if there is none.

    The milliseconds are None where the value is no number (a request record then says so).
    """
    if _SCALED_LATENCY_NAMES.isdisjoint(data):  # the common case, in one look
        return None
    key = next(key for key in _SCALED_LATENCY_KEYS if key in data)
    value = data[key]
    try:  # nginx's JSON log quotes its numbers: "0.250"
        number = float(value) if isinstance(value, str | int | float) and not isinstance(value, bool) else math.nan
    except ValueError:
        number = math.nan
    return key, number * _SCALED_LATENCY_KEYS[key] if math.isfinite(number) else None


def _is_latency(value: Any) -> bool:  # finite: `1e999` reads as inf, which no request took
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < math.inf


def classify(line: SourceLine, malformed: Malformed) -> Entry | None:
    """The entry a line holds, or None when it is blank or malformed (counted in `malformed`)."""
    if line.problem is not None:
        return None
    text = line.text
    stripped = text.lstrip()
    if not stripped:
        return None
    if stripped[0] == "{":
        return _from_json(line, malformed)
    header, message = split_header(text)
    body = message.strip()
    if header and body[:1] == "{" and (data := _wrapped_object(body)) is not None:
        return _from_object(data, line, malformed)  # a JSON line, as a container runtime wrote it to the node
    return LogEvent(body, level_of(header, message))


def _folded(entry: Entry, exception: str | None, told: tuple[str, str | None] | None, traced: bool) -> Entry:
    """The entry of an event over several lines (`multiline`), its message joined with what it `told` below.

    The level its first line names, else the one the line below names (java.util.logging's); one that carries a
    stack trace (`traced`) is an error, its message naming the exception.
    """
    if isinstance(entry, RequestRecord) or not (traced or told):
        return entry
    message, level = told if told is not None else (None, None)
    level = entry.level or level
    level = traced_level(level) if traced else level
    return LogEvent(joined_message(entry.message, exception, message), level, entry.timestamp, entry.latency_ms)


def read_entries(
    files: Sequence[Path], malformed: Malformed, *, max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[tuple[SourceLine, Entry]]:
    """Stream (line, entry) pairs from `files`, one per event; blank lines are skipped, malformed ones counted.

    A stack trace's lines are folded into the event that logged it (`multiline.fold`): the pair holds the event's
    first line, and its entry the message and error of the whole event (`multiline.joined_message`).
    """
    head: tuple[SourceLine, Entry] | None = None  # an event whose continuation lines are still being read
    exception: str | None = None
    told: tuple[str, str | None] | None = None  # the first line of its message under its first line, its level
    traced = False  # whether they hold a stack trace (not only more of the message)
    for line, role in fold(read_lines(files, malformed, max_line_bytes=max_line_bytes)):
        if role == MORE or role == EXCEPTION:
            traced = True
            if role == EXCEPTION:
                exception = runtime_body(line.text)
            continue
        if role == TEXT:
            told = told_message(line.text) if told is None else told
            continue
        if role == BLANK:
            continue
        if head is not None:
            yield head[0], _folded(head[1], exception, told, traced)
            head = None
        entry = classify(line, malformed)
        if entry is None:
            continue  # a malformed first line: its continuation lines go with it
        if role == HEAD:
            head, exception, told, traced = (line, entry), None, None, False
        else:
            yield line, entry
    if head is not None:
        yield head[0], _folded(head[1], exception, told, traced)
