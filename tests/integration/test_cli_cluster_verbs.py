"""`vcpilot cluster` on real LocalCluster pods: the sample completes, logs come in run order and follow, describe."""

from __future__ import annotations

import json
import threading
import time

import pytest
import yaml
from typer.testing import CliRunner
from vcjob_factory import vcjob

from pipelines import cli_cluster
from pipelines.cli import app

pytestmark = pytest.mark.integration


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.setenv("VCPILOT_HOME", str(tmp_path / "home"))
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(app, ["cluster", *args])

    yield invoke
    invoke("reset", "--yes")


def wait_for(run, name, phases=("Completed", "Failed"), timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        info = json.loads(run("get", name, "--json").stdout)
        if info["phase"] in phases:
            return info
        assert time.monotonic() < deadline, f"{name} is still {info['phase']}"
        time.sleep(0.1)


def test_the_sample_submits_as_it_is_and_completes(run, tmp_path):
    sample = tmp_path / "job.yaml"
    sample.write_text(run("sample").stdout)
    submitted = run("submit", str(sample), "--json")
    assert submitted.exit_code == 0, submitted.output
    assert wait_for(run, "hello")["phase"] == "Completed"
    logs = json.loads(run("logs", "hello", "--json").stdout)["runs"]
    assert [r["pod"] for r in logs] == ["hello-worker-0", "hello-worker-1"]
    assert [r["text"].split(",")[0] for r in logs] == ["hello from pod 0 of the gang", "hello from pod 1 of the gang"]


def test_logs_come_in_run_order_with_pod_and_tail(run, tmp_path):
    # Pod 0 fails once, after pod 1 has printed its lines and exited (were pod 1 still running, the restart would
    # kill it wherever it was, as CI saw): the job restarts, and both pods run in generation 0 and in generation 1.
    marker, printed = tmp_path / "failed-once", tmp_path / "pod-1-printed"
    script = (
        f'echo "start $VC_TASK_INDEX"; echo two; echo three; '
        f'if [ "$VC_TASK_INDEX" = 1 ]; then touch "{printed}"; else while [ ! -f "{printed}" ]; do sleep 0.05; done; '
        f'[ -f "{marker}" ] || {{ touch "{marker}"; exit 3; }}; fi'
    )
    job = vcjob("flaky", script, pods=2, gpus=1, policies=[{"event": "PodFailed", "action": "RestartJob"}])
    path = tmp_path / "flaky.yaml"
    path.write_text(yaml.safe_dump(job))
    assert run("submit", str(path)).exit_code == 0
    assert wait_for(run, "flaky")["phase"] == "Completed"
    runs = json.loads(run("logs", "flaky", "--json").stdout)["runs"]
    generations = [r["generation"] for r in runs]
    assert generations == sorted(generations) and generations[-1] == 1
    assert all(r["text"].startswith(f"start {r['pod'][-1]}") for r in runs)
    last_generation = [r["pod"] for r in runs if r["generation"] == 1]
    assert last_generation == ["flaky-main-0", "flaky-main-1"]

    only = run("logs", "flaky", "--pod", "flaky-main-1", "--tail", "1")
    assert only.exit_code == 0
    blocks = only.stdout.split("==> ")[1:]
    assert blocks and all(b.startswith("flaky-main-1.run") for b in blocks)
    assert all(b.splitlines()[1:] == ["three"] for b in blocks)


def test_logs_of_a_job_submitted_again_under_its_name_are_its_own(run, tmp_path):
    # The files of a deleted job stay (`vcpilot runs show` reads them); a new job of the same name showed them as
    # its own, as kubectl logs never does.
    path = tmp_path / "again.yaml"
    for word in ("before", "after"):
        path.write_text(yaml.safe_dump(vcjob("again", f"echo {word}")))
        assert run("submit", str(path)).exit_code == 0
        assert wait_for(run, "again")["phase"] == "Completed"
        runs = json.loads(run("logs", "again", "--json").stdout)["runs"]
        assert [r["text"] for r in runs] == [f"{word}\n"]
        if word == "before":
            assert run("delete", "again").exit_code == 0


def test_follow_prints_lines_as_they_come_and_ends_with_the_job(run, tmp_path, monkeypatch):
    monkeypatch.setattr(cli_cluster, "FOLLOW_POLL_S", 0.05)
    release = tmp_path / "release"
    script = f'echo first; while [ ! -f "{release}" ]; do sleep 0.05; done; printf "last, no newline"'
    path = tmp_path / "slow.yaml"
    path.write_text(yaml.safe_dump(vcjob("slow", script)))
    assert run("submit", str(path)).exit_code == 0
    wait_for(run, "slow", phases=("Running",))
    threading.Timer(1.0, release.touch).start()
    started = time.monotonic()
    followed = run("logs", "slow", "-f")
    assert followed.exit_code == 0, followed.output
    assert time.monotonic() - started >= 0.9, "it returned before the job finished"
    lines = followed.stdout.splitlines()
    assert lines[0].startswith("==> slow-main-0.run0-") and lines[1:] == ["first", "last, no newline"]


def test_describe_a_pod_and_a_node_with_their_events(run, tmp_path):
    path = tmp_path / "one.yaml"
    path.write_text(yaml.safe_dump(vcjob("one", "echo done", gpus=2)))
    assert run("submit", str(path)).exit_code == 0
    info = wait_for(run, "one")
    node = info["pods"][0]["node"]
    pod = run("describe", "pod/one-main-0")
    assert pod.exit_code == 0, pod.output
    for fragment in (
        "Job:",
        "one",
        "Succeeded",
        "Node:",
        node,
        "Scheduled",
        "vcpilot cluster logs one --pod one-main-0",
    ):
        assert fragment in pod.stdout
    described = json.loads(run("describe", f"node/{node}", "--json").stdout)
    assert any(e["reason"] == "Scheduled" and e["object"] == "Pod/one-main-0" for e in described["events"])
    events = json.loads(run("events", "--for", "pod/one-main-0", "--json").stdout)["events"]
    assert {e["object"] for e in events} == {"Pod/one-main-0"} and events
