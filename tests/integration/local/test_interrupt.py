"""`vcpilot run-workflow` as a person runs it: a line per step when piped, clean `--json`, and Ctrl-C.

Each test starts the CLI in a subprocess with its own VCPILOT_HOME, as a shell would: stdout to a pipe, SIGINT
for Ctrl-C. The steps write their pid into a directory given as a parameter (the runner rewrites a template's
own /tmp paths, not parameter values), so the test can see whether they still run.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from vcjob_factory import vcjob

from pipelines.local.runner import resume

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
DIR = "{{workflow.parameters.dir}}"
# Sleeps unless `dir/go` exists: the first run hangs until stopped, the resumed one finishes at once.
HANG = f"echo $$ > {DIR}/%s.pid; if [ -f {DIR}/go ]; then exit 0; fi; sleep 60"


def escaped(script: str) -> str:
    """`script` as a pod's command must say it for the shell to see `script`: each `$$` doubled."""
    return script.replace("$$", "$$$$")


STOPPABLE = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "Workflow",
    "metadata": {"name": "stop-me"},
    "spec": {
        "entrypoint": "main",
        "onExit": "bye",
        "arguments": {"parameters": [{"name": "dir"}]},
        "templates": [
            {
                "name": "main",
                "dag": {
                    "tasks": [
                        {"name": "train", "template": "train"},
                        {"name": "side", "template": "side"},
                        {"name": "after", "template": "side", "depends": "train && side"},
                    ]
                },
            },
            {
                "name": "train",
                "resource": {
                    "action": "create",
                    "setOwnerReference": True,
                    "successCondition": "status.state.phase == Completed",
                    "failureCondition": "status.state.phase in (Failed,Aborted,Terminated)",
                    # A container's command is expanded as the kubelet does it: `$$` is one `$` there.
                    "manifest": json.dumps(vcjob("train-", escaped(HANG % "pod"), generate_name=True, gpus=0)),
                },
            },
            {"name": "side", "script": {"image": "alpine", "command": ["sh"], "source": HANG % "side"}},
            {"name": "bye", "container": {"image": "alpine", "command": ["sh", "-c", f"echo ran >> {DIR}/bye"]}},
        ],
    },
}

# Two steps; the second waits for `dir/go`, so the test can see the first one's line before the run ends.
PIPED = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "Workflow",
    "metadata": {"name": "piped"},
    "spec": {
        "entrypoint": "main",
        "arguments": {"parameters": [{"name": "dir"}]},
        "templates": [
            {
                "name": "main",
                "steps": [[{"name": "first", "template": "say"}], [{"name": "second", "template": "wait"}]],
            },
            {"name": "say", "container": {"image": "alpine", "command": ["sh", "-c", "echo hi"]}},
            {
                "name": "wait",
                "container": {
                    "image": "alpine",
                    "command": ["sh", "-c", f"while [ ! -f {DIR}/go ]; do sleep 0.05; done; echo done"],
                },
            },
        ],
    },
}


def _start(tmp_path: Path, workflow: dict[str, Any], *extra: str) -> tuple[subprocess.Popen[str], Path, Path]:
    marks, home = tmp_path / "marks", tmp_path / "home"
    marks.mkdir()
    source = tmp_path / "wf.yaml"
    source.write_text(yaml.safe_dump(workflow))
    env = {**os.environ, "VCPILOT_HOME": str(home), "PYTHONPATH": str(ROOT)}
    env.pop("VCPILOT_PROGRESS", None)
    command = [sys.executable, "-m", "pipelines.cli", "run-workflow", str(source), "-p", f"dir={marks}", *extra]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return process, marks, home


def _alive(pid_file: Path) -> bool:
    """Whether the process runs (a zombie waiting for init to reap it does not)."""
    try:
        stat = Path(f"/proc/{int(pid_file.read_text())}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def _gone(pid_file: Path, timeout: float = 5) -> bool:
    """Whether the process ends within `timeout` seconds (SIGKILL is sent; its delivery is not instant)."""
    deadline = time.monotonic() + timeout
    while _alive(pid_file):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _until(check: Any, process: subprocess.Popen[str], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert process.poll() is None, f"the runner ended before {what}: {process.communicate()}"
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.05)


def _running(process: subprocess.Popen[str], marks: Path) -> None:
    """Wait until the VCJob's pod and the script step both run."""
    _until(lambda: (marks / "pod.pid").is_file() and (marks / "side.pid").is_file(), process, "both steps ran")


def test_piped_output_shows_a_line_per_step_while_the_run_goes(tmp_path: Path) -> None:
    process, marks, _home = _start(tmp_path, PIPED)
    try:
        assert process.stdout is not None
        seen = []
        while not any("✔ first (say) Succeeded" in line for line in seen):
            line = process.stdout.readline()
            assert line, f"stdout ended before the first step's line: {seen}"
            seen.append(line)
        assert process.poll() is None  # the line came while the run still goes, not at its end
        assert any("run piped Running" in line for line in seen)
        assert seen[-1].startswith("[0:00:")  # time since the start: a CI log shows where the minutes went
        (marks / "go").touch()
        rest, _err = process.communicate(timeout=60)
    finally:
        (marks / "go").touch()  # a failed look must not leave the waiting pod behind
        process.kill()
    assert process.returncode == 0
    assert "✔ second (wait) Succeeded" in rest and "✔ piped Succeeded" in rest


def test_json_keeps_stdout_one_document_and_the_progress_on_stderr(tmp_path: Path) -> None:
    process, marks, _home = _start(tmp_path, PIPED, "--json")
    (marks / "go").touch()
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert json.loads(out)["phase"] == "Succeeded"  # the whole of stdout is one JSON document
    assert "✔ first (say) Succeeded" in err and "✔ second (wait) Succeeded" in err


def test_ctrl_c_stops_the_pods_records_the_run_stopped_and_says_how_to_resume(tmp_path: Path) -> None:
    process, marks, home = _start(tmp_path, STOPPABLE)
    try:
        _running(process, marks)
        process.send_signal(signal.SIGINT)  # what Ctrl-C sends
        out, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 130
    assert "vcpilot resume stop-me" in err
    assert _gone(marks / "pod.pid") and _gone(marks / "side.pid")  # the VCJob's pod and the script step
    document = json.loads((home / "runs" / "stop-me" / "status.json").read_text())
    status = document["status"]
    assert (status["phase"], status["message"]) == ("Failed", "Stopped with strategy 'Terminate'")
    assert document["spec"]["shutdown"] == "Terminate"  # where Argo records `argo terminate`
    nodes = {n["displayName"]: n for n in status["nodes"].values()}
    assert nodes["train"]["message"] == "workflow shutdown with strategy:  Terminate"
    assert "after" not in nodes and not (marks / "bye").exists()  # nothing started after the stop
    assert "✖ stop-me Failed: Stopped with strategy 'Terminate'" in out

    (marks / "go").touch()
    result = resume("stop-me", home=home)

    assert result.phase == "Succeeded"
    phases = {n["displayName"]: n["phase"] for n in result.status["nodes"].values()}
    assert phases["train"] == phases["side"] == phases["after"] == "Succeeded"
    assert (marks / "bye").read_text() == "ran\n"  # the exit handler runs once, at the real end


def test_a_second_ctrl_c_exits_at_once(tmp_path: Path) -> None:
    process, marks, _home = _start(tmp_path, STOPPABLE)
    try:
        _running(process, marks)
        process.send_signal(signal.SIGINT)
        assert process.stderr is not None
        first = ""
        while not first.strip():  # the handler's line starts on a line of its own
            first = process.stderr.readline()
        assert "interrupted: stopping the run" in first
        process.send_signal(signal.SIGINT)  # while the first stop is under way
        _out, rest = process.communicate(timeout=30)
        err = first + rest
    finally:
        process.kill()
        for pid_file in marks.glob("*.pid"):  # an exit at once may leave them: they are the test's to end
            with contextlib.suppress(ProcessLookupError):
                os.killpg(os.getpgid(int(pid_file.read_text())), signal.SIGKILL)
    assert process.returncode == 130
    assert "interrupted again: exiting now" in err and "vcpilot resume stop-me" in err
