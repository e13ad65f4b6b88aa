"""Outputs are replaced atomically when they are plain files, and written into when they are not.

`--out /dev/stdout` as root renamed a regular file over `/dev/stdout`, for every process of the machine; `--out`
a symbolic link replaced the link with a file. Links and streams (a terminal, a pipe, `/dev/null`, this process's
own descriptors) are written into; a pipe that nothing reads is one sentence, not a wait for ever.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from components.errors import VcpilotError
from components.files import check_output, put_output, write_bytes, write_text

ROOT = Path(__file__).resolve().parents[2]


def test_a_plain_file_is_replaced_whole_and_nothing_is_left_beside_it(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("old and longer\n")
    write_text(target, "new\n")
    assert target.read_text() == "new\n" and sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_a_symbolic_link_keeps_pointing_where_it_did_and_its_file_gets_the_bytes(tmp_path: Path) -> None:
    real, link = tmp_path / "real.csv", tmp_path / "link.csv"
    real.write_text("old and longer\n")
    link.symlink_to(real)
    write_text(link, "new\n")
    assert link.is_symlink() and real.read_text() == "new\n"
    tmp = tmp_path / ".link.csv.tmp"
    tmp.write_text("again\n")
    put_output(tmp, link)
    assert link.is_symlink() and real.read_text() == "again\n" and not tmp.exists()


def test_this_process_s_own_descriptor_is_written_through_as_dev_stdout_is(tmp_path: Path) -> None:
    # `/dev/stdout` is a link to /proc/self/fd/1; a link of our own to the write end of a pipe stands in for it, so
    # that a regression replaces this link, not the machine's /dev/stdout.
    read_end, write_end = os.pipe()
    stdout = tmp_path / "stdout"
    stdout.symlink_to(f"/proc/self/fd/{write_end}")
    try:
        check_output(stdout, "--out")
        write_bytes(stdout, b"one\n")
        tmp = tmp_path / "tmp"
        tmp.write_bytes(b"two\n")
        put_output(tmp, stdout)
    finally:
        os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        assert pipe.read() == b"one\ntwo\n"
    assert stdout.is_symlink() and not tmp.exists()


def test_a_named_pipe_is_written_into_while_a_program_reads_it_and_refused_when_none_does(tmp_path: Path) -> None:
    pipe = tmp_path / "out.csv"
    os.mkfifo(pipe)
    check_output(pipe, "--out")  # opening it to see would end its reader's stream: left to the write
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(pipe.read_bytes()))
    reader.start()
    tmp = tmp_path / "tmp"
    for _ in range(200):  # the reader's open waits for a writer: put_output is that writer
        tmp.write_bytes(b"rows\n")  # a failed put removes it too
        try:
            put_output(tmp, pipe)
            break
        except OSError as err:  # the reader thread has not opened it yet
            assert err.errno == errno.ENXIO and not tmp.exists()
            threading.Event().wait(0.05)
    reader.join(10)
    assert got == [b"rows\n"] and pipe.exists() and not tmp.exists()

    tmp.write_bytes(b"rows\n")
    with pytest.raises(OSError, match="a named pipe that no program reads; start its reader first") as caught:
        put_output(tmp, pipe)
    assert caught.value.errno == errno.ENXIO and not tmp.exists()


def test_checking_a_link_to_a_file_before_the_work_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    real, link = tmp_path / "real.json", tmp_path / "link.json"
    real.write_text("kept\n")
    link.symlink_to(real)
    check_output(link, "--report")
    assert real.read_text() == "kept\n"
    real.chmod(0o444)
    if os.access(real, os.W_OK):  # root writes a read-only file anyway
        return
    with pytest.raises(VcpilotError, match=r"^--report .*link.json cannot be written: Permission denied$"):
        check_output(link, "--report")


def test_logs_parse_into_a_link_to_stdout_prints_the_rows_and_keeps_the_link(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("a line\nb line\n")
    stdout = tmp_path / "stdout"
    stdout.symlink_to("/proc/self/fd/1")
    command = [sys.executable, "-m", "pipelines.cli", "logs", "parse", str(log), "--out", str(stdout)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = done.stdout.splitlines()
    assert rows[0] == "LineId,Source,Content,EventId,EventTemplate,ParameterList"
    assert rows[1].startswith("1,") and rows[3] == f"2 lines, 2 templates → {stdout}"
    assert stdout.is_symlink() and sorted(p.name for p in tmp_path.iterdir()) == ["app.log", "stdout"]


def test_a_link_to_a_file_not_there_yet_is_checked_without_creating_it_then_written_through(tmp_path: Path) -> None:
    link, target = tmp_path / "report.json", tmp_path / "volume" / "report.json"
    link.symlink_to(target)
    with pytest.raises(VcpilotError, match="links to .*volume/report.json, whose directory does not exist"):
        check_output(link, "--out")
    target.parent.mkdir()
    check_output(link, "--out")
    assert not target.exists(), "a check creates nothing"
    write_text(link, "{}\n")
    assert link.is_symlink() and target.read_text() == "{}\n"
