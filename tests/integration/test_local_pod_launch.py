"""A pod started in a transaction that a kill undid is adopted by the next bind, never started a second time."""

from __future__ import annotations

import shlex
import time

import pytest

from components.volcano import localpods

pytestmark = pytest.mark.integration


def test_a_launch_record_names_its_running_process_then_its_end_and_is_forgotten_once_committed(tmp_path):
    intent = tmp_path / "launches" / "pod-0.gen1"
    exit_file = tmp_path / "exits" / "pod-0"
    pid, token = localpods.start(["sleep", "0.5"], {"PATH": "/usr/bin:/bin"}, str(tmp_path), tmp_path / "log",
                                 exit_file, None, intent)  # fmt: skip
    adopted = localpods.adopt(intent)
    assert adopted == (pid, token, exit_file) and localpods.is_alive(pid, token)
    deadline = time.monotonic() + 10
    while localpods.read_exit_code(exit_file) is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    ended = localpods.adopt(intent)
    assert ended is not None and ended[0] == pid
    while localpods.is_alive(ended[0], ended[1]):  # the wrapper writes the exit file, then exits
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert localpods.read_exit_code(ended[2]) == 0, "the adopted pod's end is read from its exit file"
    localpods.forget(intent)
    assert localpods.adopt(intent, wait_s=0) is None and list(intent.parent.iterdir()) == []


def test_a_record_written_before_a_start_that_never_happened_starts_the_pod(tmp_path):
    intent = tmp_path / "pod-0.gen1"
    intent.write_text('{"exit_file": "/nowhere"}')  # the controller died between the record and the process
    assert localpods.adopt(intent, wait_s=0.1) is None


def test_the_reconcile_hook_is_one_command_line_whatever_the_home_path_holds(tmp_path):
    # LocalCluster's hook quotes VCPILOT_HOME (shlex); a home with a space or a quote stays one word, and nothing
    # lands in the directory the pod ran in (the hook once ran unparsed: split at the space, its quotes literal)
    home = tmp_path / "my home's $HOME *"
    home.mkdir()
    ran, cwd = home / "reconciled", tmp_path / "cwd"
    cwd.mkdir()
    hook = f"touch {shlex.quote(str(ran))}"
    exit_file = tmp_path / "exit"
    localpods.start(["true"], {"PATH": "/usr/bin:/bin"}, str(cwd), tmp_path / "log", exit_file, hook)
    deadline = time.monotonic() + 10
    while not ran.exists():
        assert time.monotonic() < deadline, "the hook did not run"
        time.sleep(0.05)
    assert localpods.read_exit_code(exit_file) == 0 and list(cwd.iterdir()) == []
