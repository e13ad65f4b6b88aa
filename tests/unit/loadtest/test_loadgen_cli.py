"""`vcpilot loadtest` input handling: datasets, bad options and an unreachable server, each in one sentence."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from components.errors import EXIT_INPUT, EXIT_UNAVAILABLE
from components.loadtest.cli import app
from components.loadtest.client import encode_request, parse_target
from components.loadtest.dataset import DatasetError, load_requests, synthetic_requests


def invoke(*args):
    return CliRunner().invoke(app, list(args))


def one_sentence_error(result, code, *fragments):
    assert result.exit_code == code, result.output
    text = result.stderr.strip()
    assert text.startswith("error: ") and text.count("\n") == 0, text
    assert "Traceback" not in result.output
    if result.stdout:  # with --json, the error is stdout's one JSON document too
        assert json.loads(result.stdout) == {"error": text.removeprefix("error: "), "exit_code": code}
    for fragment in fragments:
        assert fragment in text


@pytest.fixture
def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dataset_requests_cycle_through_the_file(tmp_path):
    path = tmp_path / "eval.jsonl"
    path.write_text('{"prompt": "a", "completion": "1"}\n\n{"prompt": "b", "completion": "2"}\n')
    specs = load_requests(path, 5, max_tokens=4)
    assert [s.prompt for s in specs] == ["a", "b", "a", "b", "a"]
    assert specs[1].expected == "2" and specs[0].max_tokens == 4


def test_a_data_set_of_any_shape_fine_tuning_reads_feeds_a_load_test(tmp_path):
    # It took only {"prompt"} lines: the chat eval set that `finetune` and `evaluate` read was refused here.
    path = tmp_path / "eval.jsonl"
    chat = {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}]}
    answered = {"conversations": [{"from": "human", "value": "Q2"}, {"from": "gpt", "value": "A2"}]}
    path.write_text("\n".join(json.dumps(r) for r in (chat, answered, {"prompt": "p"})) + "\n")
    first, second, third = load_requests(path, 3, max_tokens=4)
    assert first.messages == chat["messages"] and first.expected == ""  # a prompt needs no answer here
    assert first.prompt == "system: S\nuser: Q\nassistant:"  # for /v1/completions, as serve reads a chat
    assert second.messages == [{"role": "user", "content": "Q2"}] and second.expected == "A2"
    assert (third.prompt, third.messages, third.expected) == ("p", [], "")
    assert json.loads(encode_request(parse_target("http://x", chat=True), first))["messages"] == chat["messages"]
    assert json.loads(encode_request(parse_target("http://x"), first))["prompt"] == first.prompt


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (None, "does not exist"),
        ("\n\n", "holds no requests"),
        ('{"prompt": "a"}\n{"prompt": "b"', "eval.jsonl line 2 is not valid JSON"),
        ('{"completion": "x"}\n', "line 1 has no 'prompt'; add it"),
        ('{"messages": [{"role": "wizard", "content": "x"}]}\n', "line 1 message 1 has role 'wizard'"),
    ],
)
def test_bad_datasets_are_named_in_one_sentence(tmp_path, content, fragment):
    path = tmp_path / "eval.jsonl"
    if content is not None:
        path.write_text(content)
    with pytest.raises(DatasetError, match=fragment):
        load_requests(path, 3)


def test_a_dataset_that_never_ends_is_refused_after_a_bounded_read(tmp_path, monkeypatch):
    monkeypatch.setattr("components.files.DATASET_MAX_BYTES", 1024)  # the rule, not 256 MiB of zeros in a test
    with pytest.raises(DatasetError, match=r"^dataset /dev/zero holds more than"):
        load_requests(Path("/dev/zero"), 3)


def test_synthetic_requests_are_seeded():
    assert synthetic_requests(5, seed=1) == synthetic_requests(5, seed=1) != synthetic_requests(5, seed=2)
    assert all(len(s.prompt.split()) == 6 for s in synthetic_requests(5))


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ((), "give --concurrency C"),
        (("--concurrency", "0"), "--concurrency should be greater than 0, got 0"),
        (("--rate", "-2"), "--rate should be greater than 0, got -2.0"),
        (("--concurrency", "2", "--requests", "0"), "--requests"),
        # every request is prepared and recorded in memory: 10**30 filled it before anything was sent
        (("--concurrency", "2", "--requests", str(10**30)), "--requests should be less than or equal to 1000000"),
        (("--rate", "5", "--burstiness", "0"), "--burstiness"),
        (("--concurrency", "2", "--slo-ttft-ms", "-1"), "--slo-ttft-ms"),
        (("--concurrency", "2", "--max-tokens", "0"), "--max-tokens"),
        (("--concurrency", "2", "--timeout-s", "0"), "--timeout-s should be greater than 0, got 0.0"),
        (("--concurrency", "2", "--timeout-s", "nan"), "--timeout-s should be a finite number, got nan"),
        # inf is a rate (all at once), not a burstiness nor an SLO
        (("--rate", "5", "--burstiness", "inf"), "--burstiness should be a finite number, got inf"),
        (("--concurrency", "2", "--slo-ttft-ms", "inf"), "--slo-ttft-ms should be a finite number, got inf"),
        (("--concurrency", "2", "--slo-tpot-ms", "nan"), "--slo-tpot-ms should be a finite number, got nan"),
        (("--concurrency", "2", "--slo-e2el-ms", "inf"), "--slo-e2el-ms should be a finite number, got inf"),
        # after the first request it waited 1e300 s for the second, without a word
        (("--rate", "1e-300", "--requests", "2"), "--rate 1e-300 sends 2 requests over 1.16e+295 days"),
        (("--rate", "0.0001", "--requests", "100"), "more than a load test spans (7 days)"),
    ],
)
def test_bad_options_get_one_sentence(args, fragment, closed_port):
    one_sentence_error(invoke("--url", f"http://127.0.0.1:{closed_port}", *args), EXIT_INPUT, fragment)


def test_a_bad_url_gets_one_sentence():
    one_sentence_error(invoke("--url", "127.0.0.1:8000", "--concurrency", "1"), EXIT_INPUT, "not an http(s) URL")


def test_a_missing_dataset_gets_one_sentence(tmp_path, closed_port):
    url = f"http://127.0.0.1:{closed_port}"
    result = invoke("--url", url, "--concurrency", "1", "--dataset", str(tmp_path / "nope.jsonl"))
    one_sentence_error(result, EXIT_INPUT, "nope.jsonl does not exist")
    (tmp_path / "empty.jsonl").write_text("")
    result = invoke("--url", url, "--concurrency", "1", "--dataset", str(tmp_path / "empty.jsonl"))
    one_sentence_error(result, EXIT_INPUT, "holds no requests")


def test_an_unreachable_url_gets_one_sentence_and_a_nonzero_exit(closed_port):
    result = invoke("--url", f"http://127.0.0.1:{closed_port}", "--concurrency", "2", "--requests", "3", "--json")
    one_sentence_error(result, EXIT_UNAVAILABLE, f"cannot reach http://127.0.0.1:{closed_port}", "--url")


def test_a_percentile_that_is_not_a_choice_is_a_usage_error():
    from typing import get_args, get_type_hints

    from components.loadtest.cli import loadtest_command
    from components.loadtest.metrics import PERCENTILES

    result = invoke("--url", "http://127.0.0.1:1", "--concurrency", "2", "--slo-percentile", "75")
    assert result.exit_code == 2 and "invalid --slo-percentile" in result.stderr  # EXIT_USAGE
    hint = get_type_hints(loadtest_command, include_extras=True)["slo_percentile"]
    assert get_args(get_args(hint)[0]) == tuple(PERCENTILES)
