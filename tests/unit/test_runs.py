"""Run names and MLflow UI links for `vcpilot runs`: what reaches the filesystem, and where a link points."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.errors import InputError
from pipelines.runs import check_name, list_runs, show_run
from pipelines.runs_mlflow import find_parent_runs, target, ui_url


@pytest.mark.parametrize("name", ["llm-autopilot-20260101-010101", "a", "hello.world-1"])
def test_workflow_names_are_accepted(name: str) -> None:
    assert check_name(name) == name


@pytest.mark.parametrize("name", ["../x", "..", "a/b", "/etc", "Upper", "-a", "a-", "a..b", "", "x" * 254])
def test_names_that_are_not_workflow_names_are_refused_in_one_sentence(name: str) -> None:
    with pytest.raises(InputError, match="is not a run name: workflow names are lower-case"):
        check_name(name)


def test_ui_links_point_at_the_server_or_at_vcpilot_ui_for_the_local_store() -> None:
    assert ui_url("http://mlflow.team:5000/", "3", "abc") == "http://mlflow.team:5000/#/experiments/3/runs/abc"
    assert ui_url("sqlite:////home/me/.vcpilot/mlflow.db", "1") == "http://127.0.0.1:5000/#/experiments/1"
    assert ui_url("databricks", "1", "abc") is None


def test_an_empty_home_lists_nothing_and_opens_no_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert list_runs(tmp_path) == []
    assert find_parent_runs(target(tmp_path)) == {}  # a store that does not exist is not created
    assert not (tmp_path / "mlflow.db").exists()
    with pytest.raises(InputError, match=r"there is no run named 'x' in .*; the runs there: none"):
        show_run(tmp_path, "x")
