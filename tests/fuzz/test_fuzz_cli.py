"""Fuzz every `vcpilot` command that reads a file: random and mutated files must end in a result or one sentence.

Through the real `vcpilot` app (typer's CliRunner): the command exits — any code — with no exception escaping and
no traceback printed, and a refused input leaves the cluster usable (`cluster status` still answers).
Nothing a fuzzed file names is run: pods are not started (the process boundary, `localpods.start`, is replaced)
and `run-workflow` stops where the checked workflow would start running.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fuzz_kit import SHARED, mutated_bytes, mutated_tree, yaml_bytes
from hypothesis import example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner
from vcjob_factory import vcjob

from components.volcano import localpods
from pipelines.cli import app
from pipelines.cluster_sample import sample_job
from pipelines.local import runner

JOBS = [vcjob("train", pods=2, gpus=2), sample_job().to_dict()]
CONFIGS = [{"nodes": [{"name": "big", "count": 2, "gpus": 8}], "queues": [{"name": "research", "weight": 2}]}]
WORKFLOWS = [
    d
    for path in sorted(SHARED.glob("argo-examples/*.yaml"))[:10]
    for d in yaml.safe_load_all(path.read_text())
    if isinstance(d, dict)
] or [{"kind": "Workflow", "spec": {"entrypoint": "m", "templates": [{"name": "m", "container": {"image": "a"}}]}}]
LOGS = [b"081109 203518 143 INFO dfs.DataNode: Receiving block blk_1 src: /10.0.0.1:5\n" * 3]


# Each example runs a whole command (a fresh cluster database, the app): half the profile's count keeps
# `make test` quick, and `make fuzz` still runs a thousand.
FEWER = settings(max_examples=max(1, settings.default.max_examples // 2))


def files(seeds: list[Any]) -> st.SearchStrategy[bytes]:
    """Files of mutated documents, mutated bytes of valid ones, and random bytes."""
    valid = [yaml_bytes(s) for s in seeds]
    return st.one_of(mutated_tree(seeds, steps=3).map(yaml_bytes), mutated_bytes(valid), st.binary(max_size=200))


class _WouldRun(Exception):
    """The workflow passed every check and would start now."""


@contextlib.contextmanager
def _cli(monkeypatch_home: Path) -> Iterator[Any]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VCPILOT_HOME", str(monkeypatch_home))
        patch.setattr(localpods, "start", lambda *args, **kwargs: (2**22 + 1, "not-started"))

        def would_run(*args: Any, **kwargs: Any) -> Any:
            raise _WouldRun

        patch.setattr(runner, "_drive", would_run)
        runner_ = CliRunner()
        yield lambda *args: runner_.invoke(app, list(args))


def _ended_well(result: Any) -> None:
    """Exited (any code) without an exception escaping or a traceback printed; errors on one line."""
    if result.exception is not None and not isinstance(result.exception, SystemExit | _WouldRun):
        raise result.exception
    assert "Traceback" not in result.output
    if result.exit_code not in (0, None) and result.stderr.strip():
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def _with_file(data: bytes, command: list[str], suffix: str = ".yaml") -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"input{suffix}"
        path.write_bytes(data)
        with _cli(Path(tmp) / "home") as run:
            _ended_well(run(*[str(path) if part == "FILE" else part for part in command]))
            status = run("cluster", "status", "--json")
            assert status.exit_code == 0, f"the cluster is unusable after the input: {status.output}"


@FEWER
@given(files(JOBS))
@example(b"\xff\xfe\x00")  # not UTF-8
@example(
    yaml_bytes({**JOBS[0], "spec": {**JOBS[0]["spec"], "tasks": [{**JOBS[0]["spec"]["tasks"][0], "replicas": -2}]}})
)
@example(b"apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata:\n  name; train\nspec: {}\n")  # metadata a string
def test_cluster_submit(data: bytes) -> None:
    _with_file(data, ["cluster", "submit", "FILE", "--json"])


@FEWER
@given(files(CONFIGS))
@example(b"nodes: []\n")  # issue 14: an empty cluster bricked every later command
@example(b"nodes: [{name: a, gpus: 2}, {name: a, gpus: 2}]\n")
def test_cluster_reset_config(data: bytes) -> None:
    _with_file(data, ["cluster", "reset", "--yes", "--config", "FILE"])


@FEWER
@given(files(WORKFLOWS))
@example(b"\xff\xfe\x00")
def test_run_workflow(data: bytes) -> None:
    _with_file(data, ["run-workflow", "FILE", "--json"])


@FEWER
@given(files(WORKFLOWS))
def test_lint(data: bytes) -> None:
    _with_file(data, ["lint", "FILE", "--json"])


@FEWER
@given(st.one_of(mutated_bytes(LOGS), st.binary(max_size=300)))
def test_logs_parse(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _with_file(data, ["logs", "parse", "FILE", "--out", str(Path(tmp) / "out.csv"), "--json"], suffix=".log")
