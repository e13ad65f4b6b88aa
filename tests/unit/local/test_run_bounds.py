"""Runs of mutated workflows end, and say why in one sentence: no Python exception, no run without end.

Each case was found by mutating the upstream examples (`../shared/argo-examples`); the comment says what it did.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from pipelines.local.engine import status
from pipelines.local.runner import RunResult, run_workflow


def wf(*templates: dict, **spec: Any) -> dict:
    body = {"entrypoint": "main", "templates": list(templates), **spec}
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "metadata": {"name": "t"}, "spec": body}


def leaf(name: str, *command: str, **fields: Any) -> dict:
    return {"name": name, "container": {"image": "x", "command": list(command)}, **fields}


def messages(result: RunResult) -> dict[str, tuple[str, str | None]]:
    return {n["displayName"]: (n["phase"], n.get("message")) for n in result.status["nodes"].values()}


def test_a_nul_byte_in_a_command_errs_its_step_in_one_sentence(tmp_path: Path) -> None:
    # "internal error: ValueError: embedded null byte" (also from withSequence's format '%c' of 0)
    steps = {"name": "main", "steps": [[{"name": "a", "template": "echo"}]]}
    result = run_workflow(wf(steps, leaf("echo", "echo", "a\x00b")), home=tmp_path)
    assert result.phase == "Failed"
    assert messages(result)["a"] == ("Error", "cannot start 'echo': embedded null byte in its command, args or env.")


@pytest.mark.parametrize("when", ["{{item}} == 1", "{{=sprig.nope()}}"])
def test_a_dag_task_whose_when_keeps_a_tag_errs_instead_of_running(tmp_path: Path, when: str) -> None:
    # the task ran: its `when` was never evaluated (steps err it, and so does Argo's resolveDependencyReferences)
    dag = {"name": "main", "dag": {"tasks": [{"name": "a", "template": "fail", "when": when}]}}
    result = run_workflow(wf(dag, leaf("fail", "false")), home=tmp_path)
    phase, message = messages(result)["a"]
    assert (result.phase, phase) == ("Error", "Error") and "is invalid: Invalid token" in str(message)


def test_a_workflow_deadline_past_what_a_timer_holds_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the deadline's timer thread died with "OverflowError: timestamp out of range" (its traceback on stderr)
    died: list[Any] = []
    monkeypatch.setattr(threading, "excepthook", died.append)
    result = run_workflow(wf(leaf("main", "true"), activeDeadlineSeconds=2**63 - 1), home=tmp_path)
    assert result.phase == "Succeeded" and not died


def test_a_template_that_calls_itself_twice_errs_at_the_node_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a node tree that doubled at each level to the depth bound (2**100 nodes): thousands of threads, no end
    monkeypatch.setattr(status, "MAX_NODES", 60)
    twice = {"name": "main", "steps": [[{"name": "a", "template": "main"}, {"name": "b", "template": "main"}]]}
    result = run_workflow(wf(twice), home=tmp_path)
    assert (result.phase, result.status["message"]) == ("Error", f"{status.TOO_MANY_NODES}.")
    assert len(result.status["nodes"]) < 200


def test_a_backoff_past_what_a_float_holds_is_capped(tmp_path: Path) -> None:
    # "internal error: OverflowError: math range error" at the 34th attempt (factor ** 33 is past 1e308)
    strategy = {"limit": 36, "backoff": {"duration": "1ms", "factor": 2**31 - 1, "cap": "1ms"}}
    steps = {"name": "main", "steps": [[{"name": "a", "template": "fail"}]]}
    result = run_workflow(wf(steps, leaf("fail", "false", retryStrategy=strategy)), home=tmp_path)
    assert messages(result)["a"] == ("Failed", "No more retries left")


def test_a_retry_limit_past_an_int32_wraps_around_as_in_argo(tmp_path: Path) -> None:
    # it retried 3,000,000,000 times: Argo's intstr.Int32 converts Atoi's int64 to an int32, -1294967296 here
    strategy = {"limit": "3000000000"}
    steps = {"name": "main", "steps": [[{"name": "a", "template": "fail"}]]}
    result = run_workflow(wf(steps, leaf("fail", "false", retryStrategy=strategy)), home=tmp_path)
    assert messages(result)["a"] == ("Failed", "No more retries left")
    assert [n for n in messages(result) if n.startswith("a(")] == ["a(0)"]


def test_an_output_parameter_read_from_a_file_without_end_errs_its_step(tmp_path: Path) -> None:
    # "internal error: MemoryError" after reading gigabytes (the host's /dev/zero, here through a link to it)
    outputs = {"parameters": [{"name": "v", "valueFrom": {"path": "/tmp/out"}}]}
    writer = leaf("w", "ln", "-s", "/dev/zero", "/tmp/out", outputs=outputs)
    steps = {"name": "main", "steps": [[{"name": "a", "template": "w"}]]}
    phase, message = messages(run_workflow(wf(steps, writer), home=tmp_path))["a"]
    assert phase == "Error" and str(message).startswith("output parameter 'v': /tmp/out holds more than 16 MiB")


def test_an_output_parameter_that_is_a_directory_says_so(tmp_path: Path) -> None:
    # it said "/tmp/out does not exist"
    outputs = {"parameters": [{"name": "v", "valueFrom": {"path": "/tmp/out"}}]}
    steps = {"name": "main", "steps": [[{"name": "a", "template": "w"}]]}
    result = run_workflow(wf(steps, leaf("w", "mkdir", "/tmp/out", outputs=outputs)), home=tmp_path)
    assert messages(result)["a"] == (
        "Error",
        "output parameter 'v': /tmp/out cannot be read (Is a directory) and has no default.",
    )
