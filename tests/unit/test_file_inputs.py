"""Every file a command reads is refused in one sentence naming it: unreadable, not UTF-8, broken YAML or JSON.

The readers all go through `components.files`; this pins the class, reader by reader, with the same bad bytes.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from unwritable_kit import KINDS, unwritable_place

from agent.guardrails import Guardrails
from agent.records import read_decision
from components.errors import VcpilotError
from components.files import (
    MANIFEST_MAX_BYTES,
    check_output,
    check_output_dir,
    load_document,
    load_documents,
    lock_within,
    read_dataset,
    read_text,
    write_bytes,
)
from components.finetune.data import load_examples
from components.loadtest.dataset import load_requests
from components.volcano.localconfig import load_config
from pipelines.workspace import read_report

NOT_UTF8 = b'{"prompt": "caf\xe9", "completion": "x"}\n'


class _Report(BaseModel):
    ok: bool


def _in_dir(name: str) -> Callable[[Path], Path]:
    return lambda directory: directory / name


READERS: dict[str, tuple[Callable[[Path], Any], Callable[[Path], Path]]] = {
    "read_text": (read_text, _in_dir("f.yaml")),
    "load_document": (load_document, _in_dir("f.yaml")),
    "cluster config": (load_config, _in_dir("c.yaml")),
    "guardrails": (Guardrails.from_file, _in_dir("g.yaml")),
    "step report": (lambda p: read_report(str(p), _Report, "detect"), _in_dir("r.json")),
    "decision record": (read_decision, _in_dir("d.json")),
    "finetune data": (lambda p: load_examples(p.parent), _in_dir("train.jsonl")),
    "loadtest data": (lambda p: load_requests(p, 4), _in_dir("prompts.jsonl")),
}


@pytest.mark.parametrize("reader", READERS)
def test_a_file_that_is_not_utf8_is_one_sentence_naming_it(tmp_path: Path, reader: str) -> None:
    read, place = READERS[reader]
    path = place(tmp_path)
    path.write_bytes(NOT_UTF8)
    with pytest.raises(VcpilotError) as caught:
        read(path)
    sentence = str(caught.value)
    assert str(path) in sentence and "is not UTF-8 text" in sentence and "\n" not in sentence


@pytest.mark.parametrize("reader", [name for name in READERS if name not in ("step report", "finetune data")])
def test_a_named_pipe_nothing_writes_to_is_refused_not_waited_on(tmp_path: Path, reader: str) -> None:
    # `vcpilot cluster submit PIPE`, `cluster reset --config PIPE`, `evaluate --eval-set PIPE`… waited forever
    read, place = READERS[reader]
    path = place(tmp_path)
    os.mkfifo(path)
    with pytest.raises(VcpilotError) as caught:
        read(path)
    assert f"{path} is a named pipe that no program writes to; give a file" in str(caught.value)


def test_a_named_pipe_whose_writer_is_there_is_read_as_written(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    os.mkfifo(path)
    writer = os.open(path, os.O_RDWR)  # a writer present, nothing written yet: the read waits for the text
    threading.Timer(0.2, lambda: (os.write(writer, b"kind: Job\n"), os.close(writer))).start()
    assert read_text(path, "manifest") == "kind: Job\n"


def test_a_stream_is_read_once_and_read_again_gives_the_same_bytes_while_a_file_is_read_anew(tmp_path: Path) -> None:
    # A command may read its input twice (run-workflow lints it, then loads it): a pipe gives its bytes once.
    read, write = os.pipe()
    os.write(write, b"kind: Job\n")
    os.close(write)
    try:
        assert read_text(f"/dev/fd/{read}", "manifest") == read_text(f"/dev/fd/{read}", "manifest") == "kind: Job\n"
    finally:
        os.close(read)
    path = tmp_path / "job.yaml"
    path.write_text("kind: Job\n")
    assert read_text(path) == "kind: Job\n"
    path.write_text("kind: Pod\n")
    assert read_text(path) == "kind: Pod\n"


def test_a_data_set_past_its_limit_says_so_in_words(monkeypatch) -> None:
    # "holds more than 256 MiB, more than a the evaluation set vcpilot reads"
    monkeypatch.setattr("components.files.DATASET_MAX_BYTES", 2**20)
    with pytest.raises(VcpilotError, match=r"^the evaluation set /dev/zero holds more than 1 MiB, more than vcpilot"):
        read_dataset("/dev/zero", "the evaluation set")


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"a: [1, 2\n", "is not valid YAML or JSON at line 2, column 1"),
        (b'{"a": 1', "is not valid YAML or JSON"),
        (b"count: !!int abc\n", "is not valid YAML or JSON: invalid literal for int"),
        (b"a: 1\na: 2\n", "is not valid YAML or JSON at line 2, column 1: key 'a' is given twice"),
        (b"a: &x [*x]\nb: !!python/object:os.system {}\n", "is not valid YAML or JSON"),
        (b"a: 1\n---\nb: 2\n", "holds 2 YAML documents; give one"),
        (b"- a list\n", "must hold a mapping of fields, not a list"),
        (b"\x00\x01", "is not valid YAML or JSON"),
        # JSON nested deeper than Python's parser recurses: an internal error of `cluster submit` once
        (b"[" * 50_000 + b"]" * 50_000, "nests its values too deeply to be read"),
        (b'{"a":' * 50_000 + b"1" + b"}" * 50_000, "nests its values too deeply to be read"),
    ],
)
def test_a_document_that_does_not_parse_is_one_sentence_naming_it(tmp_path: Path, content: bytes, says: str) -> None:
    path = tmp_path / "doc.yaml"
    path.write_bytes(content)
    with pytest.raises(VcpilotError, match=says) as caught:
        load_document(path, "manifest")
    assert str(caught.value).startswith(f"manifest {path}") and "\n" not in str(caught.value)


def test_a_missing_file_and_a_directory_are_named(tmp_path: Path) -> None:
    with pytest.raises(VcpilotError, match=f"cannot read manifest {tmp_path / 'nope'}: No such file or directory"):
        read_text(tmp_path / "nope", "manifest")
    with pytest.raises(VcpilotError, match=f"manifest {tmp_path} is a directory; give a file"):
        load_documents(tmp_path, "manifest")


def test_a_manifest_is_read_at_most_to_its_limit(tmp_path: Path) -> None:
    # `/dev/zero` given by mistake was read without end (gigabytes in seconds); a huge file is refused the same way
    with pytest.raises(VcpilotError, match="manifest /dev/zero holds more than 16 MiB, more than any manifest"):
        load_documents("/dev/zero", "manifest")
    big = tmp_path / "big.yaml"
    big.write_bytes(b"a: 1\n" + b"#" * MANIFEST_MAX_BYTES)
    with pytest.raises(VcpilotError, match="holds more than 16 MiB"):
        load_document(big, "manifest")
    assert read_text(big, "dataset").startswith("a: 1")  # only manifests are bounded


@pytest.mark.parametrize(
    "content", ['{"kind": "Job", "spec": {"queue": "a", "queue": "b"}}', "kind: Job\nspec:\n  queue: a\n  queue: b\n"]
)
def test_a_key_given_twice_is_refused_in_json_as_in_yaml(tmp_path: Path, content: str) -> None:
    # An API server with strict field validation (kubectl's default) refuses it; Python's json kept the last.
    path = tmp_path / "job.json"
    path.write_text(content)
    with pytest.raises(
        VcpilotError,
        match=r"manifest .*job.json is not valid YAML or JSON at line \d+, column \d+: key 'queue' is given twice",
    ):
        load_documents(path, "manifest")


def test_json_and_yaml_both_read(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"a": [1, 2]}')
    (tmp_path / "b.yaml").write_text("{a: [1, 2]}\n")  # flow YAML that is not JSON
    (tmp_path / "empty.yaml").write_text("")
    assert load_document(tmp_path / "a.json") == load_document(tmp_path / "b.yaml") == {"a": [1, 2]}
    assert load_document(tmp_path / "empty.yaml") == {}


DEEP_JSON_LINE = '{"prompt": ' + "[" * 50_000 + "]" * 50_000 + ', "completion": "c"}\n'
HUGE_NUMBER_LINE = '{"prompt": "p", "completion": "c", "n": ' + "9" * 5000 + "}\n"


@pytest.mark.parametrize("line", [DEEP_JSON_LINE, HUGE_NUMBER_LINE], ids=["nested too deeply", "5,000 digits"])
@pytest.mark.parametrize("reader", ["finetune data", "loadtest data"])
def test_a_json_line_python_cannot_read_is_one_sentence_naming_its_line(tmp_path: Path, reader: str, line: str) -> None:
    read, place = READERS[reader]
    path = place(tmp_path)
    path.write_text('{"prompt": "p", "completion": "c"}\n' + line)
    with pytest.raises(VcpilotError) as caught:
        read(path)
    sentence = str(caught.value)
    assert str(path) in sentence and "line 2" in sentence and "not valid JSON" in sentence and "\n" not in sentence


def test_a_write_that_fails_names_the_file_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.mkdir()
    with pytest.raises(IsADirectoryError) as caught:
        write_bytes(target, b"{}")
    assert caught.value.filename == str(target) and sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_lock_within_waits_its_time_for_a_lock_held_elsewhere_then_takes_it_once_let_go(tmp_path):
    path = tmp_path / "run.lock"
    path.touch()
    with open(path) as holder, open(path) as other:  # two opens: two locks that exclude each other, as two processes
        assert lock_within(holder.fileno(), 0.0)
        began = time.monotonic()
        assert not lock_within(other.fileno(), 0.1)
        assert time.monotonic() - began >= 0.1
        holder.close()  # closing lets go, as a process's death does
        assert lock_within(other.fileno(), 0.0)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("check", [check_output, check_output_dir])
@pytest.mark.parametrize("deeper", [False, True])
def test_an_output_where_no_file_can_be_created_is_refused_in_one_sentence(tmp_path, kind, check, deeper):
    # root passes permission bits, so the directory's mode said nothing: `--report /proc/x/r.json` was taken, and
    # refused only once the work was done (a load test run, a model version registered)
    with unwritable_place(kind, tmp_path) as place:
        path = place.under("a", "out") if deeper else place.directory / "out"
        with pytest.raises(VcpilotError) as caught:
            check(path, "--out")
        assert str(caught.value) == (
            f"--out {path} cannot be written: no file can be created in {place.directory} ({place.strerror}); "
            "give a path in a writable directory"
        )


@pytest.mark.parametrize("check", [check_output, check_output_dir])
def test_the_writable_check_leaves_nothing_behind_and_makes_no_directory(tmp_path, check):
    (tmp_path / "kept").write_text("old")
    before = (tmp_path / "kept").stat()
    check(tmp_path / "new" / "deeper" / "out", "--out")  # made later, by the command: probed where it would be
    check(tmp_path / "kept" if check is check_output else tmp_path, "--out")  # an output already there: not touched
    assert [p.name for p in tmp_path.iterdir()] == ["kept"]
    assert (tmp_path / "kept").read_text() == "old" and (tmp_path / "kept").stat().st_mtime_ns == before.st_mtime_ns


def test_the_checks_that_came_before_keep_their_sentences(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(VcpilotError, match=r"^--report .* is a directory; give the path of a file to write$"):
        check_output(tmp_path, "--report")
    with pytest.raises(VcpilotError, match=r"^--out .*/file is a file; give the path of a directory to write into$"):
        check_output_dir(tmp_path / "file", "--out")
    with pytest.raises(VcpilotError, match=r"is under .*/file, a file; give a path under a directory$"):
        check_output(tmp_path / "file" / "r.json", "--report")


@pytest.mark.parametrize("link", ["loop", "dangling"])
def test_an_output_at_or_under_a_link_to_nothing_is_refused_naming_its_option(tmp_path, link):
    # `compile --out LOOP`, `finetune --out LOOP` checked nothing and ended in "error: LOOP: File exists";
    # `compile --out LOOP/sub` in "error: LOOP/sub: Too many levels of symbolic links", naming no option
    if link == "loop":
        (tmp_path / "b").symlink_to(tmp_path / "link")
        (tmp_path / "link").symlink_to(tmp_path / "b")
    else:
        (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    place = tmp_path / "link"
    with pytest.raises(VcpilotError, match=r"^--out .*/link is a symbolic link to nothing \(a loop, or a missing"):
        check_output_dir(place, "--out")
    with pytest.raises(VcpilotError, match=r"^--out .*/link/sub is under .*/link, a symbolic link to nothing"):
        check_output_dir(place / "sub", "--out")
    with pytest.raises(VcpilotError, match=r"^--report .*/link/r.json is under .*/link, a symbolic link to nothing"):
        check_output(place / "r.json", "--report")
    assert sorted(p.name for p in tmp_path.iterdir()) == (["b", "link"] if link == "loop" else ["link"])


def _unhung(path: Path) -> threading.Timer:
    """A writer that comes after 10 s, so that a reader that waits on the pipe regressed to a failure, not a hang."""

    def rescue() -> None:
        with contextlib.suppress(OSError):  # nobody was waiting: nothing to rescue
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))

    timer = threading.Timer(10.0, rescue)
    timer.start()
    return timer


def _lint_problem(path: Path) -> str:
    from pipelines.lint import lint_files

    (problem,) = lint_files([path])
    return problem.message


def _token_problem(path: Path) -> str:
    from agent.mcp_http import load_token

    with pytest.raises(VcpilotError) as caught:
        load_token(path)
    return str(caught.value)


def _log_problem(path: Path) -> str:
    from components.logs.reader import Malformed, read_lines

    malformed = Malformed()
    assert list(read_lines([path], malformed)) == []
    assert malformed.counts == {"unreadable_file": 1}
    return malformed.remedy("point it at the service's logs")


@pytest.mark.parametrize("problem", [_lint_problem, _token_problem, _log_problem], ids=["lint", "token", "logs"])
def test_the_readers_outside_components_files_refuse_a_named_pipe_nothing_writes_to(
    tmp_path: Path, problem: Callable[[Path], str]
) -> None:
    # `vcpilot logs detect --current PIPE`, `lint PIPE` and `mcp --token-file PIPE` waited forever
    path = tmp_path / "pipe"
    os.mkfifo(path)
    rescue = _unhung(path)
    try:
        said = problem(path)
    finally:
        rescue.cancel()
    assert "a named pipe that no program writes to; start its writer first, or give a file" in said


def test_a_gzip_log_through_a_named_pipe_whose_writer_is_there_is_read(tmp_path: Path) -> None:
    from components.logs.reader import Malformed, read_lines

    path = tmp_path / "app.log.gz"
    os.mkfifo(path)
    writer = os.open(path, os.O_RDWR)
    threading.Timer(0.2, lambda: (os.write(writer, gzip.compress(b"one\ntwo\n")), os.close(writer))).start()
    assert [line.text for line in read_lines([path], Malformed())] == ["one", "two"]


def test_open_binary_leaves_no_descriptor_open_when_it_refuses(tmp_path: Path) -> None:
    from components.files import NoWriter, open_binary

    os.mkfifo(tmp_path / "pipe")
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(IsADirectoryError):
        open_binary(tmp_path)
    with pytest.raises(NoWriter):
        open_binary(tmp_path / "pipe")
    assert len(os.listdir("/proc/self/fd")) == before
