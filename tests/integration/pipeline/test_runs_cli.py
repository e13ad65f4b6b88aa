"""`vcpilot runs` and `vcpilot ui` on real local runs: the runner's records, a workspace, a real sqlite MLflow store."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from net_kit import free_port
from typer.testing import CliRunner

from components import entry
from components.tracking.adapter import DEFAULT_EXPERIMENT, local_store_uri
from components.tracking.runs import workflow_run
from pipelines.cli import app
from pipelines.local.runner import run_workflow

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]

# The agent's record and the release record as the pipeline's steps write them, through the same functions.
DECIDE = """
from agent.observation import Observation, PlanRequest
from agent.policy_rules import RulePolicy
from agent.records import decisions_dir, write_decision
from components.volcano.cluster import NodeInfo

nodes = [NodeInfo(name="node-0", ready=True, gpu_capacity=4, gpu_allocatable=4, gpu_allocated=0)]
observation = Observation(time=1.0, request=PlanRequest(gpus=2, global_batch=8, micro_batch=4), nodes=nodes)
decision = RulePolicy().decide(observation, "plan")
write_decision(decision, decisions_dir("{{workflow.parameters.workspace}}", "{{workflow.name}}"), tracking_uri="")
print(decision.summary)
"""
# One stream: the runner writes stdout through a pipe and stderr straight to main.log, so their order may mix.
TRAIN = """
import sys
print("step 1 loss 2.31", file=sys.stderr)
if "{{workflow.parameters.fail}}" == "yes":
    print("error: the loss is NaN at step 3; lower the learning rate", file=sys.stderr)
    sys.exit(1)
print("step 2 loss 1.02")
"""
RELEASE = """
from components.files import write_json

record = {"registered_model": "shop-assistant", "released": True, "reason": "the candidate wins 0.83 to 0.0",
          "version": {"name": "shop-assistant", "version": "2"}}
write_json("{{workflow.parameters.workspace}}/runs/{{workflow.name}}/release.json", record)
write_json("{{workflow.parameters.workspace}}/runs/{{workflow.name}}/evaluate/report.json", {"promote": True})
print("released shop-assistant version 2")
"""


def pipeline(workspace: Path, tracking_uri: str) -> dict[str, Any]:
    """A small workflow shaped like llm-autopilot: plan (a decision record), train, release."""

    def script(name: str, source: str) -> dict[str, Any]:
        return {"name": name, "script": {"image": "python", "command": ["python"], "source": source}}

    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"generateName": "mini-autopilot-"},
        "spec": {
            "entrypoint": "main",
            "arguments": {
                "parameters": [
                    {"name": "workspace", "value": str(workspace)},
                    {"name": "mlflow-tracking-uri", "value": tracking_uri},
                    {"name": "fail", "value": "no"},
                ]
            },
            "templates": [
                {
                    "name": "main",
                    "dag": {
                        "tasks": [
                            {"name": "plan-training", "template": "plan"},
                            {"name": "train", "template": "train", "depends": "plan-training"},
                            {"name": "release", "template": "release", "depends": "train"},
                        ]
                    },
                },
                script("plan", DECIDE),
                script("train", TRAIN),
                script("release", RELEASE),
            ],
        },
    }


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory, shared_dir: Path) -> dict[str, Any]:
    """Three runs in one home: a released one, one whose training failed, an upstream example (no workspace)."""
    home = tmp_path_factory.mktemp("runs") / "home"
    workspace = home / "workspace"
    uri = local_store_uri(home)
    workflow = pipeline(workspace, uri)
    good = run_workflow(workflow, {}, home=home, name="good-run")
    bad = run_workflow(workflow, {"fail": "yes"}, home=home, name="bad-run")
    hello = run_workflow(shared_dir / "argo-examples" / "hello-world.yaml", {}, home=home, name="hello")
    parent = workflow_run(uri, DEFAULT_EXPERIMENT, "good-run")  # as the pipeline's steps make it
    return {"home": home, "workspace": workspace, "uri": uri, "parent": parent, "runs": (good, bad, hello)}


@pytest.fixture
def cli(ran: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("VCPILOT_HOME", str(ran["home"]))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return CliRunner()


def test_list_json_shows_the_three_runs_with_outcome_decisions_release_and_mlflow(cli: CliRunner, ran) -> None:
    assert [r.phase for r in ran["runs"]] == ["Succeeded", "Failed", "Succeeded"]
    out = cli.invoke(app, ["runs", "list", "--json"])
    assert out.exit_code == 0, out.output
    runs = {r["name"]: r for r in json.loads(out.stdout)}
    assert {name: r["phase"] for name, r in runs.items()} == {
        "good-run": "Succeeded",
        "bad-run": "Failed",
        "hello": "Succeeded",
    }
    assert [(d["stage"], d["attempt"], d["action"]) for d in runs["good-run"]["decisions"]] == [("plan", 1, "proceed")]
    assert runs["good-run"]["released"] == "shop-assistant version 2"
    assert runs["bad-run"]["released"] is None and runs["hello"]["decisions"] == []
    assert runs["good-run"]["mlflow_run_id"] == ran["parent"]
    assert runs["good-run"]["mlflow_url"].startswith("http://127.0.0.1:5000/#/experiments/")
    assert runs["good-run"]["mlflow_url"].endswith(f"/runs/{ran['parent']}")
    limited = json.loads(cli.invoke(app, ["runs", "list", "--json", "--limit", "1"]).stdout)
    assert [r["name"] for r in limited] == ["hello"]  # the newest


def test_list_without_mlflow_still_lists(cli: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # nothing listens on the discard port
    out = cli.invoke(app, ["runs", "list"])
    assert out.exit_code == 0, out.output
    assert "bad-run  Failed" in out.stdout and "decisions: plan-1: proceed" in out.stdout
    assert "released: shop-assistant version 2" in out.stdout


def test_show_of_a_failed_run_names_the_failing_step_its_reason_and_log(cli: CliRunner, ran) -> None:
    out = cli.invoke(app, ["runs", "show", "bad-run"])
    assert out.exit_code == 0, out.output
    log = ran["home"] / "runs" / "bad-run" / "nodes"
    assert "train  train  Failed" in out.stdout and "exit 1" in out.stdout
    assert "error: the loss is NaN at step 3; lower the learning rate" in out.stdout
    assert f"log: {log}" in out.stdout
    assert "plan-1: proceed (rules):" in out.stdout
    detail = json.loads(cli.invoke(app, ["runs", "show", "bad-run", "--json"]).stdout)
    train = next(s for s in detail["steps"] if s["name"] == "train")
    assert (train["phase"], train["exit_code"]) == ("Failed", 1)
    assert Path(train["log"]).read_text().endswith("lower the learning rate\n")
    steps = [(s["name"], s["phase"]) for s in detail["steps"]]
    assert steps == [("plan-training", "Succeeded"), ("train", "Failed"), ("release", "Omitted")]


def test_show_says_where_the_reports_and_the_mlflow_run_are(cli: CliRunner, ran) -> None:
    detail = json.loads(cli.invoke(app, ["runs", "show", "good-run", "--json"]).stdout)
    run_dir = ran["workspace"] / "runs" / "good-run"
    assert detail["workspace_dir"] == str(run_dir)
    assert set(detail["reports"]) == {str(run_dir / "release.json"), str(run_dir / "evaluate" / "report.json")}
    assert detail["mlflow_run_id"] == ran["parent"]
    assert detail["decisions"][0]["record"] == str(run_dir / "decisions" / "plan-1.json")


def test_logs_prints_one_step_or_all_and_names_the_steps_when_unknown(cli: CliRunner) -> None:
    out = cli.invoke(app, ["runs", "logs", "bad-run", "train"])
    assert out.exit_code == 0
    assert out.stdout == "step 1 loss 2.31\nerror: the loss is NaN at step 3; lower the learning rate\n"
    every = cli.invoke(app, ["runs", "logs", "good-run"]).stdout
    assert every.index("plan: proceed") < every.index("step 2 loss") < every.index("released shop-assistant")
    out = cli.invoke(app, ["runs", "logs", "good-run", "nope"])
    assert out.exit_code == 1  # EXIT_INPUT
    assert out.stderr.strip() == (
        "error: run 'good-run' has no step 'nope' with a log; its steps: plan, plan-training, release, train"
    )


def test_logs_follow_prints_steps_as_they_start_and_lines_as_they_come_until_the_run_ends(
    cli: CliRunner, ran, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    # The path comes as a parameter: a /tmp path spelled out in a script is the pod's own /tmp, kept elsewhere.
    waits = "import pathlib, time\nprint('b line 1', flush=True)\nend = time.time() + 60\n"  # bounded if the test fails
    waits += "while not pathlib.Path('{{workflow.parameters.go}}').exists() and time.time() < end:\n"
    waits += "    time.sleep(0.05)\nprint('b line 2')\nprint('b partial', end='')\n"
    steps = [("a", "print('a says hi')"), ("b", waits)]
    templates = [{"name": n, "script": {"image": "python", "command": ["python"], "source": src}} for n, src in steps]
    tasks = [{"name": "a", "template": "a"}, {"name": "b", "template": "b", "depends": "a"}]
    workflow = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": "followed"},
        "spec": {
            "entrypoint": "main",
            "arguments": {"parameters": [{"name": "go", "value": str(go)}]},
            "templates": [{"name": "main", "dag": {"tasks": tasks}}, *templates],
        },
    }
    home = ran["home"]
    runner = threading.Thread(target=run_workflow, args=(workflow,), kwargs={"home": home})
    runner.start()
    env = {**os.environ, "VCPILOT_HOME": str(home), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "pipelines.cli", "runs", "logs", "followed", "--follow"]
    try:
        deadline = time.monotonic() + 30
        while not (home / "runs" / "followed" / "status.json").is_file() and time.monotonic() < deadline:
            time.sleep(0.05)
        typo = cli.invoke(app, ["runs", "logs", "followed", "bee", "-f"])  # refused at once, not at the run's end
        assert typo.exit_code == 1 and "has no step 'bee'; its steps and templates: a, b, followed, main" in typo.stderr
        follower = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = []
        while "b line 1\n" not in seen:  # b waits for `go` until the follower has shown its first line
            line = follower.stdout.readline() if follower.stdout else ""
            assert line, f"the follower ended before b's first line: {seen}"
            seen.append(line)
        go.touch()
        rest, err = follower.communicate(timeout=60)
    finally:
        go.touch()
        runner.join()
    assert follower.returncode == 0, err
    log = home / "runs" / "followed" / "nodes"
    assert [line for line in seen + rest.splitlines(keepends=True) if not line.startswith("──")] == [
        "a says hi\n",
        "b line 1\n",
        "b line 2\n",
        "b partial\n",  # its last line, unended, once the run is over
    ]
    headers = [line for line in seen + rest.splitlines() if line.startswith("──")]
    assert [h.split(" (")[0] for h in headers] == ["── a", "── b"] and all(str(log) in h for h in headers)
    tail = cli.invoke(app, ["runs", "logs", "followed", "b", "--tail", "2"])
    assert tail.exit_code == 0 and tail.stdout == "b line 2\nb partial"


def test_unknown_and_escaping_names_are_refused_in_one_sentence(cli: CliRunner, ran) -> None:
    for command in (["show"], ["logs"], ["delete", "--yes"]):
        out = cli.invoke(app, ["runs", *command, "../good-run"])
        assert out.exit_code == 1  # EXIT_INPUT
        assert out.stderr.strip().startswith("error: '../good-run' is not a run name")
    out = cli.invoke(app, ["runs", "delete", "--yes", "no-such-run"])
    assert out.exit_code == 1  # EXIT_INPUT
    assert out.stderr.strip().startswith("error: there is no run named 'no-such-run'")
    assert (ran["home"] / "runs" / "good-run" / "status.json").is_file()


def test_delete_removes_the_state_says_what_and_marks_the_mlflow_run_deleted(cli: CliRunner, ran) -> None:
    from mlflow.tracking import MlflowClient

    home = ran["home"]
    run_workflow(pipeline(ran["workspace"], ran["uri"]), {}, home=home, name="doomed")
    parent = workflow_run(ran["uri"], DEFAULT_EXPERIMENT, "doomed")
    out = cli.invoke(app, ["runs", "delete", "doomed"], input="y\n")  # no terminal: no answer is read
    assert out.exit_code == 1 and (home / "runs" / "doomed").is_dir()
    assert "error: runs delete would remove run doomed (Succeeded): pass --yes when there is no terminal" in out.stderr
    with pytest.MonkeyPatch.context() as patch:  # at a terminal: asked, and told no
        patch.setattr(entry, "interactive", lambda: True)
        out = cli.invoke(app, ["runs", "delete", "doomed"], input="n\n")
    assert out.exit_code == 1 and (home / "runs" / "doomed").is_dir() and "run doomed left as it was" in out.stderr
    out = cli.invoke(app, ["runs", "delete", "doomed", "--yes"])
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert lines[0] == f"removed {home / 'runs' / 'doomed'} (the runner's record: status.json and 3 step logs)"
    assert (
        lines[1]
        == f"removed {ran['workspace'] / 'runs' / 'doomed'} (its reports, decisions and models in the workspace)"
    )
    assert lines[2] == f"MLflow run {parent} and its 0 nested runs, marked deleted in {ran['uri']}"
    assert not (home / "runs" / "doomed").exists() and not (ran["workspace"] / "runs" / "doomed").exists()
    assert MlflowClient(ran["uri"]).get_run(parent).info.lifecycle_stage == "deleted"
    assert "doomed" not in cli.invoke(app, ["runs", "list"]).stdout


def test_delete_refuses_a_running_run(cli: CliRunner, ran) -> None:
    home = ran["home"]
    slow = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": "busy"},
        "spec": {"entrypoint": "wait", "templates": [{"name": "wait", "suspend": {"duration": "3"}}]},
    }
    runner = threading.Thread(target=run_workflow, args=(slow,), kwargs={"home": home})
    runner.start()
    try:
        deadline = time.monotonic() + 30
        while not (home / "runs" / "busy" / "status.json").is_file() and time.monotonic() < deadline:
            time.sleep(0.05)
        out = cli.invoke(app, ["runs", "delete", "busy", "--yes"])
        assert out.exit_code == 1  # EXIT_INPUT
        assert out.stderr.strip() == "error: run 'busy' is still running in another process; wait for it or stop it."
        assert (home / "runs" / "busy" / "status.json").is_file()
        assert "busy  Running" in cli.invoke(app, ["runs", "list"]).stdout
    finally:
        runner.join()
    assert cli.invoke(app, ["runs", "delete", "busy", "--yes"]).exit_code == 0


@pytest.fixture
def ui(ran: dict[str, Any]) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """`vcpilot ui` as a person starts it, on a free port of the test home's store."""
    port = free_port()
    env = {**os.environ, "VCPILOT_HOME": str(ran["home"]), "PYTHONPATH": str(ROOT)}
    env.pop("MLFLOW_TRACKING_URI", None)
    command = [sys.executable, "-m", "pipelines.cli", "ui", "--port", str(port)]
    # Started with SIGINT ignored, as a script's `cmd &` starts it (CI ran the suite so, and the UI never stopped):
    # `vcpilot ui` must stop on Ctrl-C all the same.
    process = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # noqa: PLW1509
    )
    try:
        yield process, port
    finally:
        if process.poll() is None:  # a failed test: Ctrl-C stops the server's group too, SIGKILL would leave it
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def test_ui_serves_mlflow_on_the_local_store_and_stops_on_ctrl_c(ui, ran) -> None:
    process, port = ui
    assert process.stdout is not None
    first = process.stdout.readline()  # printed once the server answers /health
    assert first.strip() == f"MLflow UI: http://127.0.0.1:{port}", process.stderr and process.stderr.read()
    assert process.stdout.readline().startswith(
        f"experiment {DEFAULT_EXPERIMENT}: http://127.0.0.1:{port}/#/experiments/"
    )
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as page:
        assert page.status == 200 and "MLflow" in page.read().decode()
    taken = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "ui", "--port", str(port)],
        env={**os.environ, "VCPILOT_HOME": str(ran["home"]), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert taken.returncode == 1  # EXIT_INPUT
    assert taken.stderr.strip().startswith(f"error: port {port} on 127.0.0.1 is taken")
    process.send_signal(signal.SIGINT)  # what Ctrl-C sends
    # The server's group gets SIGTERM, then SIGKILL after 10 s (pipelines/mlflow_ui.py _stop): on a loaded machine
    # its workers take that long, and the interpreter's exit some more.
    try:
        code = process.wait(timeout=60)
    except subprocess.TimeoutExpired:  # CI saw this once: say where it stood, for the next reader
        ps = ["ps", "-ww", "-eo", "pid,ppid,pgid,stat,wchan:20,etime,args"]  # -ww: not cut at 80 columns
        listed = subprocess.run(ps, capture_output=True, text=True).stdout.splitlines()
        tree = "\n".join(line for line in listed if "mlflow" in line or "pipelines.cli" in line)
        process.kill()
        log = (ran["home"] / "mlflow-ui.log").read_text(errors="replace")[-2000:]
        pytest.fail(
            f"vcpilot ui still ran 60 s after SIGINT:\n{tree}\nstderr: {process.stderr and process.stderr.read()}\n"
            f"server log: {log}"
        )
    assert code == 0
    assert "MLflow UI stopped" in (process.stderr.read() if process.stderr else "")
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # our own GET left the port in TIME_WAIT
        sock.bind(("127.0.0.1", port))  # the server and its workers are gone: the port is free again


def test_a_vcjob_step_shows_its_job_and_its_pods_logs(cli: CliRunner, ran) -> None:
    """A resource step, as llm-autopilot's `vcjob` template: the reason and the log are the pods'."""
    from vcjob_factory import vcjob

    manifest = vcjob("train-job", "echo 'rank 0 step 1'; echo 'error: CUDA out of memory' >&2; exit 3", gpus=0)
    workflow = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": "gang"},
        "spec": {
            "entrypoint": "main",
            "templates": [
                {
                    "name": "main",
                    "steps": [[{"name": "train", "template": "vcjob", "arguments": {
                        "parameters": [{"name": "manifest", "value": json.dumps(manifest)}]}}]],
                },
                {
                    "name": "vcjob",
                    "inputs": {"parameters": [{"name": "manifest"}]},
                    "resource": {
                        "action": "create",
                        "manifest": "{{inputs.parameters.manifest}}",
                        "setOwnerReference": True,
                        "successCondition": "status.state.phase == Completed",
                        "failureCondition": "status.state.phase in (Failed,Aborted,Terminated)",
                    },
                },
            ],
        },
    }  # fmt: skip
    assert run_workflow(workflow, {}, home=ran["home"]).phase == "Failed"
    detail = json.loads(cli.invoke(app, ["runs", "show", "gang", "--json"]).stdout)
    train = next(s for s in detail["steps"] if s["name"] == "train")
    assert train["job"] == "default/train-job" and train["error"] == "error: CUDA out of memory"
    assert len(train["pod_logs"]) == 1
    out = cli.invoke(app, ["runs", "logs", "gang", "train"])
    assert out.exit_code == 0 and "rank 0 step 1" in out.stdout
    out = cli.invoke(app, ["runs", "delete", "gang", "--yes"])
    assert "the VCJobs it created on LocalCluster: train-job" in out.stdout


# The plan step of a night when MLflow was down from start to end: its decision waits in the run's spools.
DECIDE_DOWN = DECIDE.replace(
    'tracking_uri="")',
    'workflow="{{workflow.name}}", tracking_uri="{{workflow.parameters.mlflow-tracking-uri}}",\n'
    '               spool_dir="{{workflow.parameters.workspace}}/runs/{{workflow.name}}/tracking")',
)


def test_replay_sends_what_waited_while_mlflow_was_down_once(cli: CliRunner, ran, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    with socket.socket() as sock:  # a loopback port nothing listens on: MLflow down all night
        sock.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{sock.getsockname()[1]}"
    workflow = pipeline(ran["workspace"], down)
    workflow["spec"]["templates"][1]["script"]["source"] = DECIDE_DOWN
    run_workflow(workflow, {}, home=ran["home"], name="late-run")
    shown = cli.invoke(app, ["runs", "show", "late-run"])
    assert "MLflow records wait in" in shown.output and "vcpilot runs replay late-run" in shown.output

    out = cli.invoke(app, ["runs", "replay", "late-run"])  # to the run's own MLflow, still down
    assert out.exit_code == 3 and "wait in" in out.output and "vcpilot runs replay late-run" in out.output
    later = f"sqlite:///{tmp_path / 'later.db'}"
    out = cli.invoke(app, ["runs", "replay", "late-run", "--tracking-uri", later, "--json"])
    assert out.exit_code == 0, out.output
    sent = json.loads(out.stdout)
    assert sent["sent"] > 0 and sent["pending"] == 0 and sent["skipped"] == 0
    again = json.loads(cli.invoke(app, ["runs", "replay", "late-run", "--tracking-uri", later, "--json"]).stdout)
    assert again["sent"] == 0 and again["pending"] == 0

    client = MlflowClient(later)
    experiment = client.get_experiment_by_name(DEFAULT_EXPERIMENT).experiment_id
    (parent,) = client.search_runs([experiment], filter_string="tags.`vcpilot.workflow` = 'late-run'")
    (child,) = client.search_runs([experiment], filter_string=f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    assert child.info.run_name == "plan-1"
    assert len(client.search_traces(locations=[experiment], run_id=child.info.run_id)) == 1
    assert "MLflow records wait" not in cli.invoke(app, ["runs", "show", "late-run"]).output
