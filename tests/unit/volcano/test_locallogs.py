"""A job's pod logs are listed in the order they ran, whatever the directory's order and the files' times."""

from __future__ import annotations

import os

from components.volcano.locallogs import pod_logs, tail_lines, whole_lines


def test_runs_are_ordered_by_generation_then_pod_then_time(tmp_path):
    names = [
        "job-w-10.run0-aaaaaa",
        "job-w-2.run0-bbbbbb",
        "job-w-2.run1-cccccc",
        "job-w-2.run0-dddddd",  # the same pod again in generation 0 (a pod restart): after its first run
        "job-m-0.run1-eeeeee",
    ]
    for i, name in enumerate(names):
        path = tmp_path / f"{name}.log"
        path.write_text(f"{name}\n")
        # Times against the run order: the newest file first, so mtime alone would put them backwards.
        os.utime(path, (1000 - i, 1000 - i) if name != "job-w-2.run0-dddddd" else (2000, 2000))
    runs = pod_logs(tmp_path)
    assert [r.run for r in runs] == [
        "job-w-2.run0-bbbbbb",
        "job-w-2.run0-dddddd",
        "job-w-10.run0-aaaaaa",
        "job-m-0.run1-eeeeee",
        "job-w-2.run1-cccccc",
    ]
    assert [r.run for r in pod_logs(tmp_path, "job-w-2")] == [
        "job-w-2.run0-bbbbbb",
        "job-w-2.run0-dddddd",
        "job-w-2.run1-cccccc",
    ]
    assert pod_logs(tmp_path / "missing") == []


def test_tail_and_whole_lines():
    assert tail_lines("a\nb\nc\n", 2) == "b\nc\n"
    assert tail_lines("a\nb", 0) == ""
    assert tail_lines("a\nb", None) == "a\nb"
    assert whole_lines(b"one\ntw", final=False) == b"one\n"
    assert whole_lines(b"one\ntw", final=True) == b"one\ntw"
    assert whole_lines("é".encode()[:1], final=False) == b""


def test_a_job_sees_its_own_runs_not_those_of_an_earlier_job_of_its_name(tmp_path):
    uid = "0123abcd-4567-89ef-0123-456789abcdef"
    for name in ("w-0.run0-0123abcdaaaaaa", "w-0.run0-ffff0000bbbbbb", "w-0.run0-cccccc"):  # ours, another, untagged
        (tmp_path / f"{name}.log").write_text("x\n")
    assert sorted(r.run for r in pod_logs(tmp_path, uid=uid)) == ["w-0.run0-0123abcdaaaaaa", "w-0.run0-cccccc"]
    assert len(pod_logs(tmp_path)) == 3
