"""`vcpilot logs parse --llm-refine` against a real OpenAI-compatible endpoint on loopback: asked once per template."""

from __future__ import annotations

import contextlib
import csv
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from components.logs.cli import app

pytestmark = pytest.mark.integration

USERS = ("alice", "bob", "carol")


@contextlib.contextmanager
def _endpoint(answer: str | None = None) -> Iterator[list[dict[str, Any]]]:
    """A chat endpoint that writes each user name of the template it is shown as `<*>` (or always says `answer`)."""
    asked: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            asked.append(body)
            prompt = body["messages"][0]["content"]
            template = prompt.split("Template: ", 1)[1].split("\n", 1)[0]
            reply = answer or " ".join("<*>" if word in USERS else word for word in template.split(" "))
            data = json.dumps({"choices": [{"message": {"role": "assistant", "content": reply}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    asked.append({"url": f"http://127.0.0.1:{server.server_address[1]}/v1"})
    try:
        yield asked
    finally:
        server.shutdown()
        server.server_close()


def _parse(log: Path, out: Path, url: str, cache: Path) -> Any:
    env = {"VCPILOT_LLM_URL": url, "VCPILOT_LLM_MODEL": "fake", "VCPILOT_LOGS_STATE": ""}
    return CliRunner().invoke(
        app, ["parse", str(log), "--out", str(out), "--llm-refine", "--llm-cache", str(cache)], env=env
    )


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture
def log(tmp_path: Path) -> Path:
    # Two words: Drain keeps `Disconnected alice` and `Disconnected bob` apart, and three values are too few to merge.
    path = tmp_path / "auth.log"
    path.write_text("".join(f"Disconnected {USERS[i % 3]}\n" for i in range(30)) + "Connection closed\n")
    return path


def test_templates_the_llm_writes_alike_become_one_event_and_are_asked_once(log: Path, tmp_path: Path) -> None:
    cache = tmp_path / "llm.json"
    with _endpoint() as asked:
        url = asked.pop(0)["url"]
        done = _parse(log, tmp_path / "out.csv", url, cache)
        assert done.exit_code == 0, done.output
        assert "LLM refinement: 4 asked, 0 from the cache, 3 changed" in done.output
        rows = _rows(tmp_path / "out.csv")
        disconnected = [row for row in rows if row["Content"].startswith("Disconnected")]
        assert {row["EventTemplate"] for row in disconnected} == {"Disconnected <*>"}
        assert len({row["EventId"] for row in disconnected}) == 1
        assert disconnected[1]["ParameterList"] == "['bob']"
        assert rows[-1]["EventTemplate"] == "Connection closed"
        assert len(asked) == 4 and asked[0]["model"] == "fake"

        again = _parse(log, tmp_path / "again.csv", url, cache)
        assert "LLM refinement: 0 asked, 4 from the cache, 3 changed" in again.output
        assert len(asked) == 4  # the cache answered: no new request
        assert _rows(tmp_path / "again.csv") == rows


def test_an_answer_that_no_longer_fits_the_line_is_not_used(log: Path, tmp_path: Path) -> None:
    with _endpoint(answer="Something <*> else") as asked:
        done = _parse(log, tmp_path / "out.csv", asked.pop(0)["url"], tmp_path / "llm.json")
    assert done.exit_code == 0 and "3 changed" not in done.output and "0 changed" in done.output
    assert {row["EventTemplate"] for row in _rows(tmp_path / "out.csv")} >= {"Disconnected alice", "Disconnected bob"}


def test_an_unreachable_endpoint_leaves_the_mined_templates_and_says_so(log: Path, tmp_path: Path) -> None:
    with _endpoint() as asked:
        url = asked.pop(0)["url"]
    done = _parse(log, tmp_path / "out.csv", url, tmp_path / "llm.json")  # the server is gone: connection refused
    assert done.exit_code == 0
    assert "LLM refinement: 1 asked, 0 from the cache, 0 changed" in done.output
    assert "LLM refinement stopped: the LLM endpoint could not be reached (ConnectError)" in done.output
    assert {row["EventTemplate"] for row in _rows(tmp_path / "out.csv")} >= {"Disconnected alice", "Disconnected bob"}
    assert not (tmp_path / "llm.json").exists()


def test_without_an_endpoint_the_flag_is_one_sentence(log: Path, tmp_path: Path) -> None:
    done = CliRunner().invoke(
        app, ["parse", str(log), "--out", str(tmp_path / "out.csv"), "--llm-refine"], env={"VCPILOT_LLM_URL": ""}
    )
    assert done.exit_code == 1
    assert done.output.startswith("error: VCPILOT_LLM_URL is not set: point it at an OpenAI-compatible API")
    assert done.output.rstrip().endswith("or leave --llm-refine out")
    assert not (tmp_path / "out.csv").exists()
