"""Resource templates' success and failure conditions match objects as Argo's executor does."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.local.expressions import ExpressionError, evaluate_condition

VCJOB: dict[str, Any] = {
    "metadata": {"name": "ft-1", "labels": {"app": "train"}},
    "status": {
        "state": {"phase": "Completed"},
        "succeeded": 3,
        "failed": 0,
        "ratio": 2.5,
        "whole": 3.0,
        "ready": True,
        "conditions": [{"type": "Ready", "status": "True"}],
        "nothing": None,
    },
}


@pytest.mark.parametrize(
    ("condition", "matched"),
    [
        ("status.state.phase == Completed", True),
        ("status.state.phase = Completed", True),
        ("status.state.phase != Completed", False),
        ("status.state.phase in (Failed,Aborted,Terminated)", False),
        ("status.state.phase in (Completed, Failed)", True),
        ("status.state.phase notin (Failed,Aborted)", True),
        ("status.succeeded > 2", True),
        ("status.succeeded < 2", False),
        ("status.failed > 1", False),
        ("status.ratio > 2", False),  # not an integer: never matches `>`
        ("status.whole > 2", True),  # 3.0 reads as "3"
        ("status.ready == true", True),
        ("status.conditions.0.type == Ready", True),  # array index in the path
        ("status.succeeded", True),  # a bare key: the path exists
        ("status.nothing", True),  # ... even when null
        ("!status.missing", True),
        ("!status.succeeded", False),
        ("status.state.phase == Completed, status.succeeded > 2", True),  # comma means AND
        ("status.state.phase == Completed,status.failed > 0", False),
        # A missing path is "not matched", not an error.
        ("status.missing == x", False),
        ("status.missing > 1", False),
        ("status.missing in (a, b)", False),
        ("status.missing != x", True),
        ("status.missing notin (a)", True),
        ("status.nothing ==", True),  # null reads as the empty string, and an empty value is allowed
    ],
)
def test_conditions(condition: str, matched: bool) -> None:
    assert evaluate_condition(condition, VCJOB) is matched


@pytest.mark.parametrize(
    ("condition", "reason"),
    [
        ("status.phase == 'Completed'", "value"),  # quotes are not allowed in selector values
        ("status.succeeded > two", "must be an integer"),
        ("status.succeeded >= 2", "expected a value"),  # there is no >= in label selectors
        ("status.phase in Completed", "parenthesised"),
        ("status.phase == a b", "expected ',' or the end"),
        ("== Completed", "expected: !, a key"),
        ("!status.phase == x", "takes no operator"),
    ],
)
def test_malformed_conditions_fail_with_one_sentence(condition: str, reason: str) -> None:
    with pytest.raises(ExpressionError, match=reason) as info:
        evaluate_condition(condition, VCJOB)
    assert str(info.value).startswith("condition `")
    assert "\n" not in str(info.value)
