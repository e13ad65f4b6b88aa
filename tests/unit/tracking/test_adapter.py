"""The tracking adapter: where tracking goes, and every MLflow failure arriving as one TrackingUnavailable.

Against a real sqlite store under tmp_path and a real closed loopback port; nothing of MLflow is patched.
"""

from __future__ import annotations

import http.server
import io
import socket
import threading

import pytest

from components.errors import EXIT_UNAVAILABLE, InputError, Unavailable, VcpilotError, explain
from components.finetune.tracking import MlflowSink, NullSink, open_sink
from components.release.registry import RegistryError, RegistryUnavailable, aliases, connect, mlflow_errors
from components.tracking.adapter import (
    DEFAULT_EXPERIMENT,
    WAIT_ENV,
    TrackingUnavailable,
    bounded_retries,
    check_reachable,
    client,
    configured_uri,
    experiment_name,
    local_store_uri,
    resolve_uri,
    tracking_errors,
)
from components.tracking.runs import close_workflow_run, workflow_run
from components.tracking.steps import StepLog, log_step_run


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    """One real sqlite store for the module: creating its tables takes seconds."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


@pytest.fixture
def down() -> str:
    """A tracking URI on a loopback port that nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_the_target_is_the_explicit_uri_then_the_environment_then_off_or_the_local_store(tmp_path):
    env = {"MLFLOW_TRACKING_URI": "http://mlflow:5000", "VCPILOT_HOME": str(tmp_path)}
    assert configured_uri("sqlite:///given.db", env) == "sqlite:///given.db"
    assert configured_uri(None, env) == configured_uri("", env) == "http://mlflow:5000"
    assert configured_uri(None, {}) == "", "a step outside a workflow logs nothing"
    assert resolve_uri(None, env) == "http://mlflow:5000"
    assert resolve_uri(None, {"VCPILOT_HOME": str(tmp_path)}) == f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"
    assert local_store_uri(tmp_path) == resolve_uri("", {"VCPILOT_HOME": str(tmp_path)})


@pytest.mark.parametrize(
    "uri",
    [
        "http://mlflow:5000",
        "https://m.example.com/mlflow",
        "sqlite:///x.db",
        "postgresql+psycopg2://u@h/db",
        "file:///tmp/mlruns",
        "./mlruns",
        "databricks",
        "databricks-uc://profile",
    ],
)
def test_a_uri_mlflow_keeps_runs_under_is_taken(uri):
    assert configured_uri(uri, {}) == uri == configured_uri(None, {"MLFLOW_TRACKING_URI": uri})


@pytest.mark.parametrize(
    ("uri", "says"),
    [
        ("ftp://mlflow", "is not one MLflow can keep runs under"),
        ("mlflow:5000", "is not one MLflow can keep runs under"),  # a host without its scheme reads as scheme `mlflow`
        ("http://mlflow:99999", "has a port that is not a number from 1 to 65535"),
        ("http://:5000", r"is not an http\(s\) URL"),
    ],
)
def test_a_uri_mlflow_cannot_use_is_one_sentence_naming_where_it_came_from(uri, says):
    # MLflow refused them only once a command had started (a paragraph listing its schemes), or not at all
    with pytest.raises(InputError, match=says) as caught:
        configured_uri(uri, {})
    assert str(caught.value).startswith(f"the MLflow tracking URI {uri!r}") and "\n" not in str(caught.value)
    with pytest.raises(InputError, match=f"MLFLOW_TRACKING_URI {uri!r}"):
        resolve_uri(None, {"MLFLOW_TRACKING_URI": uri})


def test_the_experiment_is_the_explicit_name_then_the_environment_then_the_default():
    assert experiment_name("nightly", {"MLFLOW_EXPERIMENT_NAME": "other"}) == "nightly"
    assert experiment_name(None, {"MLFLOW_EXPERIMENT_NAME": "other"}) == "other"
    assert experiment_name("", {}) == DEFAULT_EXPERIMENT == "llm-autopilot"


def test_an_unreachable_server_is_tracking_unavailable_in_one_sentence(down):
    with pytest.raises(TrackingUnavailable) as raised:
        check_reachable(down, timeout_s=2)
    err = raised.value
    assert isinstance(err, Unavailable) and isinstance(err, VcpilotError)
    assert err.uri == down and err.reason
    message, code = explain(err)
    assert message.startswith(f"MLflow at {down} is unreachable (") and "\n" not in message
    assert code == EXIT_UNAVAILABLE


def test_a_step_waits_for_a_server_that_comes_back_and_a_person_does_not(down, capsys):
    port = int(down.rsplit(":", 1)[1])

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    def come_back() -> None:
        with http.server.HTTPServer(("127.0.0.1", port), Health) as server:
            server.timeout = 5
            server.handle_request()

    with pytest.raises(TrackingUnavailable, match=r"is unreachable \(.+\); start the server"):
        check_reachable(down, timeout_s=1, env={})  # a person's command: at once
    later = threading.Timer(1.0, come_back)
    later.start()
    try:
        check_reachable(down, timeout_s=1, env={WAIT_ENV: "30"})  # a step's: until it answers
    finally:
        later.join()
    warned = capsys.readouterr().err.splitlines()
    assert len(warned) == 1 and warned[0].startswith(f"warning: MLflow at {down} is unreachable (")
    assert warned[0].endswith("Connection refused); waiting up to 30 s")
    with pytest.raises(TrackingUnavailable, match=r"still after 0.5 s\); start the server"):
        check_reachable(down, timeout_s=1, env={WAIT_ENV: "0.5"})
    for bad in ("soon", "-1", "inf", "nan"):
        with pytest.raises(InputError, match=f"^{WAIT_ENV}='{bad}' is not a number of seconds"):
            check_reachable(down, timeout_s=1, env={WAIT_ENV: bad})


def test_mlflows_own_failure_against_a_dead_server_is_tracking_unavailable(down):
    with bounded_retries(), pytest.raises(TrackingUnavailable, match=f"MLflow at {down} could not list") as raised:
        with tracking_errors(down, "list the experiments"):
            client(down).search_experiments()
    assert raised.value.reason.startswith("MlflowException: ")
    assert raised.value.__cause__ is not None, "the original error is kept for whoever debugs"


def test_a_local_store_answers_and_its_refusals_are_tracking_unavailable_too(store):
    parent = workflow_run(store, "adapter", "wf-adapter")
    assert workflow_run(store, "adapter", "wf-adapter") == parent, "found again by the workflow's name"
    with pytest.raises(TrackingUnavailable, match="could not read a run that is not there"):
        with tracking_errors(store, "read a run that is not there"):
            client(store).get_run("0" * 32)


def test_a_bug_is_not_taken_for_tracking_being_unavailable(store):
    with pytest.raises(KeyError), tracking_errors(store, "do anything"):
        {}["missing"]


def test_a_workflow_run_on_a_dead_server_raises_and_a_closing_step_can_say_so(down, tmp_path):
    report = tmp_path / "summary.json"
    report.write_text('{"status": "Failed"}')
    with bounded_retries(), pytest.raises(TrackingUnavailable):
        close_workflow_run(down, "adapter", "wf-dead", "Failed", {"summary": report})


def test_a_damaged_report_does_not_keep_the_parent_run_open(store, tmp_path):
    damaged = tmp_path / "loadtest.json"
    damaged.write_text("{not json")
    run_id = close_workflow_run(store, "adapter", "wf-damaged", "Failed", {"loadtest": damaged})
    run = client(store).get_run(run_id)
    assert run.info.status == "FAILED" and run.data.tags["vcpilot.status"] == "Failed"


def test_closing_the_run_ends_killed_the_nested_runs_whose_pods_died(store):
    mlflow = client(store)
    parent = workflow_run(store, "adapter", "wf-orphans")
    experiment = mlflow.get_run(parent).info.experiment_id
    died = mlflow.create_run(experiment, run_name="finetune-1", tags={"mlflow.parentRunId": parent}).info.run_id
    ended = mlflow.create_run(experiment, run_name="finetune-2", tags={"mlflow.parentRunId": parent}).info.run_id
    mlflow.set_terminated(ended, status="FINISHED")
    other = mlflow.create_run(experiment, run_name="elsewhere").info.run_id  # another workflow's: left alone
    assert close_workflow_run(store, "adapter", "wf-orphans", "Succeeded", {}) == parent
    statuses = {run_id: mlflow.get_run(run_id).info.status for run_id in (died, ended, other, parent)}
    assert statuses == {died: "KILLED", ended: "FINISHED", other: "RUNNING", parent: "FINISHED"}


def test_a_step_logs_to_a_local_store_and_a_dead_one_costs_one_warning(store, down, tmp_path):
    report = tmp_path / "report.json"
    report.write_text('{"errors": 0}')
    env = {
        "MLFLOW_TRACKING_URI": store,
        "MLFLOW_EXPERIMENT_NAME": "adapter",
        "VCPILOT_WORKFLOW": "wf-step",
        "VCPILOT_TRACKING_SPOOL": str(tmp_path / "spool"),
    }
    warnings = io.StringIO()
    run_id = log_step_run(StepLog(step="detect-logs", metrics={"errors": 0.0}, artifacts=(report,)), env, warn=warnings)
    assert run_id is not None and warnings.getvalue() == ""
    assert client(store).get_run(run_id).data.metrics == {"errors": 0.0}
    dead = {**env, "MLFLOW_TRACKING_URI": down}
    assert log_step_run(StepLog(step="detect-logs"), dead, warn=warnings, timeout_s=2) is None
    assert warnings.getvalue().count("\n") == 1 and "is unreachable" in warnings.getvalue()
    assert "wait in" in warnings.getvalue(), "the record is spooled, not lost"


def test_training_on_a_dead_server_spools_its_metrics_with_one_warning(down, tmp_path, capsys):
    env = {"MLFLOW_TRACKING_URI": down, "VCPILOT_WORKFLOW": "wf-1", "VCPILOT_TRACKING_SPOOL": str(tmp_path)}
    sink = open_sink(env, is_main=True)
    assert isinstance(sink, MlflowSink)
    for step in range(1, 4):
        sink.log_metrics(step, {"loss": 1.0 / step})
    sink.finish(succeeded=True)
    assert capsys.readouterr().err.count("warning:") == 1
    assert sink.recorder.spool.pending() == 2 + 3 + 1, "parent, attempt run, three steps of metrics, the end"
    assert isinstance(open_sink({}, is_main=True), NullSink), "no tracking URI: nothing to report to"


def test_the_registry_unreachable_is_both_a_registry_error_and_tracking_unavailable(down):
    with pytest.raises(RegistryUnavailable) as raised:
        connect(down, timeout_s=2)
    err = raised.value
    assert isinstance(err, RegistryError) and isinstance(err, TrackingUnavailable)
    assert explain(err)[1] == EXIT_UNAVAILABLE
    assert str(err).startswith(f"MLflow at {down} is unreachable (")


def test_the_registry_refusing_stays_a_registry_error(store):
    registry = connect(store)
    assert aliases(registry, "never-registered") is None, "a missing model is an answer, not a failure"
    with pytest.raises(RegistryError, match="reading version 1 of never-registered failed") as raised:
        with mlflow_errors("reading version 1 of never-registered", store):
            registry.get_model_version("never-registered", "1")
    assert not isinstance(raised.value, TrackingUnavailable), "MLflow answered: trying again changes nothing"
