"""Release against the states a real team's registry is in: odd names, broken versions, bad reports, races, outages.

Each test puts a real MLflow server (tests/mlflow_kit.py) in one state and checks that a release either does the
right thing or says one sentence and changes nothing. The server is this module's own, so a test may edit its
database (a version MLflow left FAILED_REGISTRATION) or stop and restart it in the middle of a release.
"""

from __future__ import annotations

import http.client
import json
import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from mlflow_kit import MlflowServer
from typer.testing import CliRunner

from components.release.cli import app
from components.release.register import Lineage, register, register_model
from components.release.registry import RegistryUnavailable, connect, view
from components.release.verdict import Verdict

pytestmark = pytest.mark.integration

runner = CliRunner()


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[MlflowServer]:
    started = MlflowServer(tmp_path_factory.mktemp("mlflow-sweep"))
    try:
        try:
            started.start()
        except RuntimeError as err:
            pytest.fail(str(err))
        yield started
    finally:
        started.stop()


@pytest.fixture
def client(server):
    return connect(server.url)


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    path = tmp_path / "model"
    path.mkdir()
    (path / "config.json").write_text("{}")
    return path


def release(*args: str):
    return runner.invoke(app, list(args))


def release_runs(client, name: str) -> list[str]:
    """The release runs logged for `name` in any experiment."""
    experiments = [e.experiment_id for e in client.search_experiments()]
    return [r.info.run_id for r in client.search_runs(experiments, filter_string=f"run_name = 'release-{name}'")]


def test_a_name_mlflow_refuses_is_one_sentence_before_any_run_is_logged(server, client, model_dir):
    done = release(
        "register", "--model", str(model_dir), "--registered-model", "team/shop", "--tracking-uri", server.url
    )
    assert done.exit_code == 1 and done.output.count("\n") == 1, done.output
    assert "Names cannot contain '/'" in done.output
    assert release_runs(client, "team/shop") == [], "nothing logged for a release that could not happen"


def test_a_name_with_a_quote_spaces_and_unicode_is_shown(server, client, model_dir):
    name = "shop's assistant ü"
    assert register(client, name, model_dir, Lineage()).version == "1"
    shown = release("show", "--registered-model", name, "--tracking-uri", server.url, "--json")
    assert shown.exit_code == 0, shown.output
    assert [v["version"] for v in json.loads(shown.stdout)["versions"]] == ["1"]


def test_rollback_refuses_a_previous_version_mlflow_failed_to_register(server, client, model_dir):
    for _ in range(2):
        register(client, "shop-failed", model_dir, Lineage())
    with sqlite3.connect(server.root / "mlflow.db") as db:  # what MLflow leaves when a registration fails
        db.execute(
            "update model_versions set status = 'FAILED_REGISTRATION' where name = 'shop-failed' and version = 1"
        )
    done = release("rollback", "--registered-model", "shop-failed", "--tracking-uri", server.url)
    assert done.exit_code == 1 and done.output.count("\n") == 1, done.output
    assert "previous version 1 is FAILED_REGISTRATION" in done.output
    assert view(client, "shop-failed").aliases == {"champion": "2", "previous": "1"}
    shown = release("show", "--registered-model", "shop-failed", "--tracking-uri", server.url)
    assert "version 1 [previous] (FAILED_REGISTRATION)" in shown.output


@pytest.mark.parametrize(
    ("option", "report", "field"),
    [
        ("--evaluation", '{"candidate_score": NaN, "champion_score": 0.5}', "candidate_score nan"),
        ("--evaluation", '{"candidate_score": 1e400}', "candidate_score inf"),
        ("--loadtest", '{"errors": Infinity, "requests": 40}', "errors inf"),
        ("--loadtest", '{"errors": NaN}', "errors nan"),
        ("--loadtest", '{"errors": 2.5, "requests": 40}', "errors 2.5"),
    ],
)
def test_a_report_number_that_judges_nothing_is_one_sentence_and_registers_nothing(
    server, client, model_dir, tmp_path, option, report, field
):
    path = tmp_path / "report.json"
    path.write_text(report)
    done = release(
        "register", "--model", str(model_dir), "--registered-model", "shop-nan", "--tracking-uri", server.url,
        option, str(path),
    )  # fmt: skip
    assert done.exit_code == 1 and done.output.count("\n") == 1, done.output
    assert f"has {field}, which is not a" in done.output
    assert release_runs(client, "shop-nan") == []


def test_a_report_that_is_a_directory_says_so(server, model_dir, tmp_path):
    done = release(
        "register", "--model", str(model_dir), "--registered-model", "shop-dir", "--tracking-uri", server.url,
        "--evaluation", str(tmp_path),
    )  # fmt: skip
    assert done.exit_code == 1 and f"the evaluate report {tmp_path} is not a file" in done.output


def test_a_tracking_directory_is_one_sentence_naming_what_to_give(tmp_path):
    done = release("show", "--registered-model", "shop", "--tracking-uri", str(tmp_path / "mlruns"))
    assert done.exit_code == 1 and done.output.count("\n") == 1, done.output
    assert "sqlite:///" in done.output and "maintenance mode" not in done.output


def test_releases_racing_on_a_new_model_all_register_and_leave_one_champion(server, client, model_dir):
    results: list[object] = []
    start = threading.Barrier(4)

    def one() -> None:
        start.wait()
        try:
            results.append(register(connect(server.url), "shop-race", model_dir, Lineage()))
        except Exception as err:  # noqa: BLE001 - what each racer ended with is the result
            results.append(err)

    threads = [threading.Thread(target=one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [type(r).__name__ for r in results] == ["Registered"] * 4, results
    shown = view(client, "shop-race")
    assert sorted(v.version for v in shown.versions) == ["1", "2", "3", "4"]
    assert shown.aliases["champion"] in {"1", "2", "3", "4"}


class CutBeforeAlias:
    """A loopback proxy to MLflow that stops the server when the first alias move arrives: an outage between
    registering a version and making it champion."""

    def __init__(self, backend: MlflowServer) -> None:
        self.backend = backend
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.path.endswith("/registered-models/alias") and outer.armed:
                    outer.armed = False
                    outer.backend.stop()
                    self.send_response(503)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                connection = http.client.HTTPConnection("127.0.0.1", outer.backend.port, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                connection.request(self.command, self.path, body=body, headers=headers)
                answer = connection.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(key, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = forward

            def log_message(self, *args: object) -> None:
                pass

        self.armed = True
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()


def test_mlflow_down_before_the_alias_move_loses_nothing_and_a_rerun_doubles_nothing(server, model_dir, monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "sweep-cut")
    register(connect(server.url), "shop-cut", model_dir, Lineage())  # version 1, the champion to replace
    proxy = CutBeforeAlias(server)
    try:
        with pytest.raises(RegistryUnavailable) as err:
            register_model(model_dir, "shop-cut", workflow="wf-cut", tracking_uri=proxy.url, verdict=Verdict())
        assert "version 2 of shop-cut is registered but champion was not moved" in str(err.value)
        assert "run the same step again" in str(err.value) and "\n" not in str(err.value)
        server.start()
        again = register_model(model_dir, "shop-cut", workflow="wf-cut", tracking_uri=proxy.url, verdict=Verdict())
    finally:
        proxy.http.shutdown()
        if server.proc is None or server.proc.poll() is not None:  # the other tests need it
            server.start()
    assert (again.version, again.champion, again.previous) == ("2", "2", "1")
    shown = view(connect(server.url), "shop-cut")
    assert [v.version for v in shown.versions] == ["2", "1"], "the rerun finished version 2, it made no third"
    assert shown.versions[0].tags["vcpilot.replaced"] == "1"


def test_a_name_longer_than_the_registry_keeps_is_refused_before_anything_is_logged(server, client, model_dir):
    name = "shop-" + "x" * 252
    done = release("register", "--model", str(model_dir), "--registered-model", name, "--tracking-uri", server.url)
    assert done.exit_code == 1 and done.output.count("\n") == 1, done.output
    assert "is 257 characters long; MLflow's registry keeps names of at most 256" in done.output
    assert release_runs(client, name) == []
