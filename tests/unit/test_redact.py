"""What components.redact masks in text and in JSON-like records, and what it must leave alone."""

from __future__ import annotations

import io
import logging
import signal
import subprocess
import sys
import time

import pytest

from components.entry import new_app, run
from components.errors import InputError
from components.redact import (
    MASK,
    MAX_LINE,
    LogRedactor,
    RedactingFilter,
    redact,
    redact_bytes,
    redact_text,
    secret_name,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abcdefghijkl123", "Authorization: Bearer ***"),
        ("Authorization: Bearer abcdefghijklmnop", "Authorization: Bearer ***"),
        ("authorization: basic dXNlcjpwYXNz", "authorization: basic ***"),
        # prose stays readable: DeepSpeed's "Using client Optimizer as basic optimizer" was "basic ***"
        ("Using client Optimizer as basic optimizer", "Using client Optimizer as basic optimizer"),
        ("api_key=sk-abcdefghijklmnopqrstu", "api_key=***"),
        ('{"MLFLOW_TRACKING_PASSWORD": "hunter2xx"}', '{"MLFLOW_TRACKING_PASSWORD": "***"}'),
        ("postgresql://mlflow:s3cret@db:5432/x", "postgresql://mlflow:***@db:5432/x"),
        ("the key sk-proj0123456789abcdefXYZ leaked", "the key *** leaked"),
        ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJlMTIz here", "jwt *** here"),
    ],
)
def test_credentials_in_text_are_masked(text, expected):
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "step=3 loss=0.5 max_tokens=128",
        "tokens: 512",
        "http://host:8080/path",
        "needs a bearer token: pass --token-file FILE or set VCPILOT_MCP_TOKEN=$(openssl rand -hex 32)",
        "password: <yours>",
    ],
)
def test_ordinary_text_is_left_alone(text):
    assert redact_text(text) == text


def test_secret_named_fields_and_env_entries_are_blanked_and_numbers_kept():
    record = {
        "env": [{"name": "ARGO_TOKEN", "value": "plain-looking"}, {"name": "LOG_LEVEL", "value": "debug"}],
        "apiKey": "k",
        "max_tokens": 5,
        "auth": {"token": "t"},
        "note": "no secret",
    }
    assert redact(record) == {
        "env": [{"name": "ARGO_TOKEN", "value": MASK}, {"name": "LOG_LEVEL", "value": "debug"}],
        "apiKey": MASK,
        "max_tokens": 5,
        "auth": {"token": MASK},
        "note": "no secret",
    }
    assert [secret_name(n) for n in ("MLFLOW_TRACKING_TOKEN", "tokens_per_s", "author")] == [True, False, False]


def test_a_secret_named_field_of_any_shape_is_blanked_all_through():
    # An MCP client may send `env: {"HF_TOKEN": ["…"]}`; the audit log records the arguments before validation.
    record = {
        "env": {"HF_TOKEN": ["plain-looking"], "API_KEY": {"v": "plain"}, "EMPTY_TOKEN": ""},
        "items": [{"name": "ARGO_TOKEN", "value": ["plain-looking"]}],
        "password": [1, "plain"],
    }
    assert redact(record) == {
        "env": {"HF_TOKEN": [MASK], "API_KEY": {"v": MASK}, "EMPTY_TOKEN": ""},
        "items": [{"name": "ARGO_TOKEN", "value": [MASK]}],
        "password": [1, MASK],
    }


def test_a_long_hostile_line_is_redacted_in_linear_time():
    started = time.perf_counter()
    for text in ("A" * 50_000, "a-" * 25_000, "x:" * 25_000, "ab." * 15_000 + "://"):
        redact_text(text)
    assert time.perf_counter() - started < 1.0


def test_a_log_record_is_redacted_before_a_handler_writes_it():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("test_redact")
    logger.addHandler(handler)
    try:
        logger.warning("retrying with %s", "Authorization: Bearer abcdefghijklmnop")
    finally:
        logger.removeHandler(handler)
    assert stream.getvalue() == "retrying with Authorization: Bearer ***\n"


LOGS_AFTER_START = """
import sys
from components.entry import new_app, run
app = new_app()
@app.command()
def connect() -> None:
    assert "logging" not in sys.modules, "imported before the command: this test would prove nothing"
    import logging
    logging.getLogger("client").warning("retrying with %s", "Authorization: Bearer abcdefghijklmnop")
sys.exit(run(app, [], "connect"))
"""


def test_a_library_that_imports_logging_inside_a_command_is_redacted_too():
    # components.entry imports no `logging` (it costs every command 4 %, benchmarks/cli.py): its filter goes on
    # `logging.lastResort` when a command's library first imports it, before that library can log.
    done = subprocess.run([sys.executable, "-c", LOGS_AFTER_START], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "retrying with Authorization: Bearer ***\n"


def test_a_commands_error_sentence_never_carries_a_credential(capsys):
    app = new_app()

    @app.command()
    def connect() -> None:
        raise InputError("cannot reach http://mlflow:s3cr3t-pass@tracking:5000: connection refused")

    assert run(app, [], "connect") == 1
    assert capsys.readouterr().err == "error: cannot reach http://mlflow:***@tracking:5000: connection refused\n"


def test_a_log_is_redacted_line_by_line_whatever_its_chunks():
    log = b"step 1 loss 2.5\nAuthorization: Bearer abcdefghijkl123\nkey sk-abcdefghijklmnopqrstu \xff\n"
    log += b"no newline token=abcdefghij"
    expected = b"step 1 loss 2.5\nAuthorization: Bearer ***\nkey *** \xff\nno newline token=***"
    assert redact_bytes(log) == expected
    for size in (1, 7, 64):
        lines = LogRedactor()
        out = b"".join(lines.feed(log[i : i + size]) for i in range(0, len(log), size)) + lines.close()
        assert out == expected, size


def test_a_line_longer_than_the_limit_is_passed_on_in_pieces():
    lines = LogRedactor()
    assert lines.feed(b"x" * (MAX_LINE - 1)) == b""  # held: the line may still end
    assert len(lines.feed(b"xx")) == MAX_LINE + 1  # past the limit: out it goes, masked as it stands
    assert lines.close() == b""


def test_the_filter_script_masks_its_input_and_outlives_a_stop_signal():
    import components.redact

    filter_ = subprocess.Popen(
        [sys.executable, "-I", "-S", components.redact.__file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert filter_.stdin is not None and filter_.stdout is not None
    filter_.stdin.write(b"password=hunter2-planted\n")
    filter_.stdin.flush()
    assert filter_.stdout.readline() == b"password=***\n"  # a line at a time, not at the end
    filter_.send_signal(signal.SIGTERM)  # a pod stopping: what it prints on its way out still gets through
    out, _ = filter_.communicate(b"saved the checkpoint, sk-abcdefghijklmnopqrstu", timeout=10)
    assert (out, filter_.returncode) == (b"saved the checkpoint, ***", 0)
