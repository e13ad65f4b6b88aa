"""Argo's synchronization through the local runner: mutexes and semaphores of a template or a whole workflow.

Each locked step prints when it started and ended; a lock must keep their intervals apart (a mutex) or at most its
size at once (a semaphore). Runs of one machine share a lock name as workflows of one cluster do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import Ran, Run

from pipelines.local.runner import StopRequest, run_workflow

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
STAMPED = {"image": "busybox", "command": ["sh"], "source": "date +%s.%N; sleep 0.6; date +%s.%N"}


def workflow(sync: dict[str, Any] | None = None, *, items: int = 3, **spec: Any) -> dict[str, Any]:
    locked = {"name": "locked", "script": STAMPED, **({"synchronization": sync} if sync else {})}
    loop = {"name": "s", "template": "locked", "withItems": list(range(items))}
    main = {"name": "main", "steps": [[loop]]}
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"generateName": "sync-"},
        "spec": {"entrypoint": "main", "templates": [main, locked], **spec},
    }


def most_at_once(ran: Ran) -> int:
    """How many locked steps ran at the same moment, at most."""
    spans = [
        tuple(map(float, (n.get("outputs") or {})["result"].split())) for n in ran.nodes.values() if n["type"] == "Pod"
    ]
    return max(sum(start <= at < end for start, end in spans) for at, _ in spans)


def test_a_mutex_runs_a_templates_steps_one_at_a_time_and_without_it_they_overlap(run: Run) -> None:
    ran = run(workflow({"mutexes": [{"name": "welcome"}]}))
    assert ran.phase == "Succeeded" and most_at_once(ran) == 1
    assert most_at_once(run(workflow())) == 3
    waited = [n for n in ran.nodes.values() if n["type"] == "Pod" and n.get("message")]
    assert not waited, "the waiting message is cleared once the lock is held, as Argo clears it"


def test_a_semaphore_runs_as_many_at_once_as_its_configmap_says(run: Run, tmp_path: Path) -> None:
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "limits"}, "data": {"gpu": "2"}}
    sync = {"semaphores": [{"configMapKeyRef": {"name": "limits", "key": "gpu"}}]}
    path = tmp_path / "wf.yaml"
    path.write_text(yaml.safe_dump_all([config, workflow(sync, items=4)]))
    ran = run(path)
    assert ran.phase == "Succeeded" and most_at_once(ran) == 2


@pytest.mark.parametrize(
    ("sync", "says"),
    [
        (
            {"semaphores": [{"configMapKeyRef": {"name": "nope", "key": "k"}}]},
            "a semaphore's ConfigMap 'nope' is in no",
        ),
        (
            {"semaphores": [{"configMapKeyRef": {"name": "limits", "key": "cpu"}}]},
            "Sync configuration key 'cpu' not found",
        ),
        ({"semaphores": [{"configMapKeyRef": {"name": "limits", "key": "odd"}}]}, "is 'two', not a whole number"),
        ({"mutexes": [{"name": "m", "database": True}]}, "kept in Argo's database, which the local runner has not"),
        ({"mutexes": [{"name": "m"}, {"name": "m"}]}, "names a lock twice"),
    ],
)
def test_a_lock_that_cannot_be_had_errs_its_node_in_one_sentence(
    run: Run, tmp_path: Path, sync: Any, says: str
) -> None:
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "limits"}, "data": {"odd": "two"}}
    path = tmp_path / "wf.yaml"
    path.write_text(yaml.safe_dump_all([config, workflow(sync, items=1)]))
    ran = run(path)
    assert ran.phase in ("Failed", "Error")
    assert says in (ran.message("[0].s(0:0)") or ""), ran.nodes
    # the workflow's own lock: Argo fails the workflow (markWorkflowFailed) before anything runs
    path.write_text(yaml.safe_dump_all([config, workflow(synchronization=sync, items=1)]))
    ran = run(path)
    assert ran.phase == "Failed" and list(ran.nodes) == []
    assert ran.result.status["message"].startswith("Failed to acquire the synchronization lock. ")
    assert says in ran.result.status["message"]


def _runner(home: Path, path: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "VCPILOT_HOME": str(home), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "pipelines.cli", "run-workflow", str(path), "--json"]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _statuses(home: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for record in (home / "runs").glob("*/status.json"):
        try:
            found[record.parent.name] = json.loads(record.read_text())["status"]
        except (ValueError, KeyError):
            continue  # being written
    return found


def test_a_workflow_lock_keeps_a_second_run_pending_with_argos_message_until_the_first_ends(tmp_path: Path) -> None:
    # Two runners, as two workflows on one cluster: the second waits for the first's lock, not for its process.
    home = tmp_path / "home"
    path = tmp_path / "wf.yaml"
    long = {**STAMPED, "source": "date +%s.%N; sleep 3; date +%s.%N"}
    document = workflow(synchronization={"mutexes": [{"name": "nightly"}]}, items=1)
    document["spec"]["templates"][1]["script"] = long
    path.write_text(yaml.safe_dump(document))
    first = _runner(home, path)
    deadline = time.monotonic() + 60
    while not any(s.get("phase") == "Running" for s in _statuses(home).values()):
        assert time.monotonic() < deadline and first.poll() is None, first.communicate()
        time.sleep(0.1)
    second = _runner(home, path)
    message = "Waiting for default/Mutex/nightly lock. Lock status: 0/1"
    while not any(s.get("phase") == "Pending" and s.get("message") == message for s in _statuses(home).values()):
        assert time.monotonic() < deadline and second.poll() is None, second.communicate()
        time.sleep(0.1)
    assert first.wait(60) == 0 and second.wait(60) == 0, (first.communicate(), second.communicate())
    spans = sorted(
        tuple(map(float, n["outputs"]["result"].split()))
        for s in _statuses(home).values()
        for n in s["nodes"].values()
        if n["type"] == "Pod"
    )
    assert len(spans) == 2 and spans[0][1] <= spans[1][0]


def test_a_stop_while_waiting_for_a_lock_ends_the_waiting_step_as_argo_terminate_does(home: Path) -> None:
    from pipelines.local.engine.locks import Lock, holding

    stop = StopRequest()
    with holding(home / "locks", [Lock("default/Mutex/held", 1)], lambda _: None, lambda: False):
        threading.Timer(1.0, stop.set).start()
        result = run_workflow(workflow({"mutexes": [{"name": "held"}]}, items=1), {}, home=home, stop=stop)
    (node,) = [n for n in result.status["nodes"].values() if n["type"] == "Pod"]
    assert result.phase == "Failed" and node["phase"] == "Failed"
    assert node["message"] == "workflow shutdown with strategy:  Terminate"
