"""DAG `depends` decides when a task runs exactly as Argo's enhanced depends logic does."""

from __future__ import annotations

import pytest

from pipelines.local.expressions import ExpressionError, depends_targets, evaluate_depends, expand_depends


@pytest.mark.parametrize(
    ("depends", "phase", "runs"),
    [
        ("x", "Succeeded", True),
        ("x", "Skipped", True),  # a bare name also fires on Skipped (DESIGN.md: write x.Succeeded)
        ("x", "Daemoned", True),
        ("x", "Failed", False),
        ("x", "Error", False),
        ("x", "Omitted", False),
        ("x.Succeeded", "Skipped", False),
        ("x.Failed", "Failed", True),
        ("x.Errored", "Error", True),
        ("x.Skipped", "Skipped", True),
        ("x.Omitted", "Omitted", True),
        ("x.Daemoned", "Daemoned", True),
        ("!x.Succeeded", "Failed", True),
        ("x.Succeeded || x.Failed", "Failed", True),
    ],
)
def test_results_of_one_task(depends: str, phase: str, runs: bool) -> None:
    assert evaluate_depends(depends, {"x": phase}) is runs


@pytest.mark.parametrize("phase", ["Running", "Pending", None])
def test_nothing_is_decided_until_every_dependency_is_done(phase: str | None) -> None:
    statuses = {"a": "Failed"} | ({"b": phase} if phase else {})
    # Even though `a` already failed, Argo waits for `b` before deciding.
    assert evaluate_depends("a && b", statuses) is None


def test_hyphenated_task_names() -> None:
    statuses = {"flip-coin": "Succeeded", "should-not-execute": "Omitted"}
    assert evaluate_depends("flip-coin.Succeeded && !should-not-execute", statuses) is True
    assert depends_targets("flip-coin.Succeeded || should-not-execute") == {"flip-coin", "should-not-execute"}


def test_continue_on_widens_a_bare_name() -> None:
    assert evaluate_depends("train", {"train": "Failed"}) is False
    assert evaluate_depends("train", {"train": "Failed"}, continue_on={"train": {"failed": True}}) is True
    assert evaluate_depends("train", {"train": "Error"}, continue_on={"train": {"failed": True}}) is False
    assert evaluate_depends("train", {"train": "Error"}, continue_on={"train": {"error": True}}) is True
    assert expand_depends("a && b", {"b": {"failed": True}}) == (
        "(a.Succeeded || a.Skipped || a.Daemoned) && (b.Succeeded || b.Skipped || b.Daemoned || b.Failed)"
    )


def test_old_style_dependencies_are_a_conjunction() -> None:
    dependencies = ["A", "B"]
    statuses = {"A": "Succeeded", "B": "Skipped"}
    assert evaluate_depends(" && ".join(dependencies), statuses) is True


def test_any_succeeded_and_all_failed_read_the_children_of_an_expanded_task() -> None:
    mixed = {"fan": "Failed", "fan(0)": "Failed", "fan(1)": "Succeeded"}
    failed = {"fan": "Failed", "fan(0)": "Failed", "fan(1)": "Failed"}
    assert evaluate_depends("fan.AnySucceeded", mixed) is True
    assert evaluate_depends("fan.AllFailed", mixed) is False
    assert evaluate_depends("fan.AllFailed", failed) is True
    assert evaluate_depends("fan.AnySucceeded", failed) is False
    # A task without children is neither.
    assert evaluate_depends("solo.AnySucceeded || solo.AllFailed", {"solo": "Failed"}) is False


@pytest.mark.parametrize(
    ("depends", "reason"),
    [
        ("x.Successful", "task result 'Successful' for task 'x' is invalid"),
        ("x &&", "cannot parse"),
        ("(x", "cannot parse"),
    ],
)
def test_invalid_depends_fail_with_one_sentence(depends: str, reason: str) -> None:
    with pytest.raises(ExpressionError, match=reason) as info:
        evaluate_depends(depends, {"x": "Succeeded"})
    assert "\n" not in str(info.value)
