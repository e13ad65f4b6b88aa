"""`vcpilot run` checks its name, parameters and the cluster's queues before it writes, trains or tracks anything."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from components.errors import InputError
from components.volcano.cluster_local import LocalCluster
from pipelines.autopilot_run import run_autopilot
from pipelines.cli import app


def _everything(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    ("params", "name", "says"),
    [
        ({"gpus-wanted": "abc"}, None, "parameter gpus-wanted is 'abc', which is not a whole number"),
        ({"gpus-wanted": "3"}, None, "the training's sizes do not fit together"),
        ({"queue": "nope"}, None, "queue 'nope' does not exist on this cluster; its queues are default"),
        ({"fallback-queue": "spare"}, None, "fallback queue 'spare' does not exist"),
        ({"queue": ""}, None, "the queue is empty; name one of this cluster's queues: default"),
        ({"priority-class": "urgent"}, None, "priority class 'urgent' does not exist on this cluster"),
        ({"nope": "1"}, None, "unknown parameter 'nope'"),
        ({}, "../../x", "is not a run name"),
        # names Argo takes, which the plan step's VCJob cannot carry: the run failed at that step
        ({}, "a.b", "--name 'a.b' cannot name the training's VCJob"),
        ({}, "1abc", "--name '1abc' cannot name the training's VCJob"),
    ],
)
def test_a_refused_run_leaves_no_trace(tmp_path: Path, params: dict[str, str], name: str | None, says: str) -> None:
    home = tmp_path / "home"
    with pytest.raises(InputError, match=says):
        run_autopilot("drift", params, home=home, name=name)
    assert not home.exists()  # no demo data, no champion, no MLflow store, no cluster


def test_an_existing_cluster_is_asked_and_left_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    LocalCluster(home).close()
    before = _everything(home)
    monkeypatch.setenv("VCPILOT_HOME", str(home))
    result = CliRunner().invoke(app, ["run", "-p", "queue=nope", "--name", "refused"])
    assert result.exit_code == InputError.exit_code, result.output
    assert result.stderr.strip().count("\n") == 0 and "queue 'nope' does not exist" in result.stderr
    assert _everything(home) == before
