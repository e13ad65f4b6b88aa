"""`vcpilot resume` as `argo resume`: suspended steps wait for it, with the output parameters it supplies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pipelines.local.engine.resume_marker import MARKER
from pipelines.local.runner import RunResult, resume, run_workflow
from pipelines.local.workflow import WorkflowError

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def approval(name: str, outputs: list[dict[str, Any]] | None = None, steps: int = 1) -> dict[str, Any]:
    """build → approve (suspend, no duration) → release, which prints what approve supplied; `steps` approvals."""
    approve: dict[str, Any] = {"name": "approve", "suspend": {}}
    if outputs:
        approve["outputs"] = {"parameters": outputs}
    message = "{{steps.approve0.outputs.parameters.message}}" if outputs else "released"
    say = {"name": "say", "inputs": {"parameters": [{"name": "m"}]}, "container": {"image": "x"}}
    say["container"]["command"] = ["echo", "{{inputs.parameters.m}}"]
    chain = [[{"name": f"approve{i}", "template": "approve"}] for i in range(steps)]
    release = [{"name": "release", "template": "say", "arguments": {"parameters": [{"name": "m", "value": message}]}}]
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": name},
        "spec": {"entrypoint": "main", "templates": [{"name": "main", "steps": [*chain, release]}, approve, say]},
    }


def _status(home: Path, name: str) -> dict[str, Any]:
    try:
        return json.loads((home / "runs" / name / "status.json").read_text())["status"]
    except (OSError, ValueError, KeyError):
        return {}


def _suspended(home: Path, name: str) -> list[str]:
    nodes = (_status(home, name).get("nodes") or {}).values()
    return sorted(n["displayName"] for n in nodes if n["type"] == "Suspend" and n["phase"] == "Running")


def _wait(predicate: Any, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _in_thread(home: Path, source: dict[str, Any]) -> tuple[threading.Thread, list[RunResult]]:
    out: list[RunResult] = []
    thread = threading.Thread(target=lambda: out.append(run_workflow(source, home=home)), daemon=True)
    thread.start()
    return thread, out


def test_a_suspend_without_duration_waits_for_resume_from_another_process(tmp_path: Path) -> None:
    home = tmp_path / "home"
    thread, out = _in_thread(home, approval("gate", steps=2))
    _wait(lambda: _suspended(home, "gate") == ["approve0"])
    node = next(n for n in _status(home, "gate")["nodes"].values() if n["displayName"] == "approve0")
    assert "vcpilot resume gate" in node["message"]
    time.sleep(0.6)
    assert thread.is_alive() and _suspended(home, "gate") == ["approve0"]  # it waits: no resume yet
    asked = resume("gate", home=home)  # the runner holds the run: it is only asked
    assert asked.resumed == ("approve0",) and asked.phase == "Running"
    # The next suspend started after that request: it waits for one of its own.
    _wait(lambda: _suspended(home, "gate") == ["approve1"])
    time.sleep(0.6)
    assert _suspended(home, "gate") == ["approve1"]
    assert resume("gate", home=home).resumed == ("approve1",)
    thread.join(30)
    assert out and out[0].phase == "Succeeded"
    assert out[0].nodes["gate[2].release"]["outputs"]["result"] == "released"


def test_supplied_outputs_come_from_resume_and_a_missing_one_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    thread, out = _in_thread(home, approval("ask", outputs=[{"name": "message", "valueFrom": {"supplied": {}}}]))
    _wait(lambda: _suspended(home, "ask") == ["approve0"])
    with pytest.raises(WorkflowError, match=r"'approve0' has output parameter 'message' to be supplied and no default"):
        resume("ask", home=home)
    with pytest.raises(WorkflowError, match=r"no suspended step of the run has a supplied output parameter 'other'"):
        resume("ask", home=home, outputs={"message": "x", "other": "y"})
    assert not (home / "runs" / "ask" / MARKER).exists()  # refused: nothing asked
    time.sleep(0.4)
    assert _suspended(home, "ask") == ["approve0"]
    resume("ask", home=home, outputs={"message": "ship it"})
    thread.join(30)
    assert out and out[0].phase == "Succeeded"
    assert out[0].nodes["ask[1].release"]["outputs"]["result"] == "ship it"


def test_a_runner_killed_while_suspended_resumes_and_goes_on(tmp_path: Path) -> None:
    home = tmp_path / "home"
    source = tmp_path / "wf.json"
    source.write_text(json.dumps(approval("killed")))
    code = f"from pipelines.local.runner import run_workflow; run_workflow({str(source)!r}, home={str(home)!r})"
    runner = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        _wait(lambda: _suspended(home, "killed") == ["approve0"], 60)
    finally:
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait()
    result = resume("killed", home=home)  # no runner: this call continues the run, past the suspend
    assert result.phase == "Succeeded" and not result.resumed
    assert result.nodes["killed[1].release"]["outputs"]["result"] == "released"


def test_resume_cli_says_what_it_resumed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    thread, out = _in_thread(home, approval("cli", outputs=[{"name": "message", "valueFrom": {"supplied": {}}}]))
    _wait(lambda: _suspended(home, "cli") == ["approve0"])
    env = {**os.environ, "VCPILOT_HOME": str(home), "PYTHONPATH": str(ROOT)}
    cli = [sys.executable, "-m", "pipelines.cli", "resume", "cli"]
    refused = subprocess.run(cli, capture_output=True, text=True, env=env, cwd=ROOT)
    assert refused.returncode == 1 and "--output-parameter message=VALUE" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    bad = subprocess.run([*cli, "--output-parameter", "novalue"], capture_output=True, text=True, env=env, cwd=ROOT)
    assert bad.returncode == 1 and "is not NAME=VALUE; write --output-parameter name=value" in bad.stderr
    done = subprocess.run([*cli, "--output-parameter", "message=hi", "--json"], capture_output=True, text=True,
                          env=env, cwd=ROOT)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"name": "cli", "resumed": ["approve0"]}
    thread.join(30)
    assert out and out[0].phase == "Succeeded"
    assert out[0].nodes["cli[1].release"]["outputs"]["result"] == "hi"
