"""JSONPath reads resource outputs (`valueFrom.jsonPath`) and serves the `jsonpath()` expression function."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.local.expressions import ExpressionError, jsonpath, jsonpath_text

JOB: dict[str, Any] = {
    "metadata": {"name": "ft-1", "labels": {"app.kubernetes.io/name": "train"}},
    "spec": {"tasks": [{"name": "master", "replicas": 1}, {"name": "worker", "replicas": 3}]},
    "status": {
        "state": {"phase": "Running"},
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "Complete", "status": "False"}],
    },
}


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("{.metadata.name}", "ft-1"),
        (".metadata.name", "ft-1"),
        ("$.metadata.name", "ft-1"),
        ("{.status.state}", {"phase": "Running"}),
        ("{.spec.tasks[1].replicas}", 3),
        ("{.spec.tasks[-1].name}", "worker"),
        ("{.metadata.labels['app.kubernetes.io/name']}", "train"),
        ('$["metadata"]["name"]', "ft-1"),
        ("{.spec.tasks[*].name}", ["master", "worker"]),
        ("{.spec.tasks.*.replicas}", [1, 3]),
        ("{..replicas}", [1, 3]),
        ("{.spec.tasks[0:1].name}", ["master"]),
        ("{.spec.tasks[0,1].replicas}", [1, 3]),
        ('{.status.conditions[?(@.type=="Ready")].status}', ["True"]),
        ("{.status.conditions[?(@.type == 'Complete')].status}", ["False"]),
        ("{.spec.tasks[?(@.replicas > 1)].name}", ["worker"]),
        ("{.spec.tasks.length}", 2),
        ("{.spec.tasks[*].missing}", []),  # a wildcard skips elements without the key
        ("{$}", JOB),
    ],
)
def test_paths(path: str, value: Any) -> None:
    assert jsonpath(JOB, path) == value


def test_text_output_is_what_kubectl_prints() -> None:
    assert jsonpath_text(JOB, "{.metadata.name}") == "ft-1"
    assert jsonpath_text(JOB, "{.spec.tasks[*].name}") == "master worker"
    assert jsonpath_text(JOB, "{.status.state}") == '{"phase":"Running"}'
    assert jsonpath_text(JOB, "{.spec.tasks[1].replicas}") == "3"
    assert jsonpath_text(JOB, "{.status.conditions}") == (
        '[{"status":"True","type":"Ready"},{"status":"False","type":"Complete"}]'
    )


def test_templates_with_text_render_like_kubectl() -> None:
    assert jsonpath(JOB, "name={.metadata.name}") == "name=ft-1"
    assert jsonpath(JOB, "{.metadata.name}/{.status.state.phase}") == "ft-1/Running"
    assert jsonpath(JOB, "{.spec.tasks[*].name} x") == "master worker x"
    assert jsonpath(JOB, "{.status.state} ") == '{"phase":"Running"} '


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("{.metadata.missing}", "key 'missing' not found"),
        ("{.spec.tasks[5]}", "out of range"),
        ("{.metadata.name.first}", "key 'first' not found"),
        ("{.spec.tasks[}", "unexpected"),
    ],
)
def test_missing_or_malformed_paths_fail_with_one_sentence(path: str, reason: str) -> None:
    with pytest.raises(ExpressionError, match=reason) as info:
        jsonpath(JOB, path)
    assert "\n" not in str(info.value)


STAFF: dict[str, Any] = {
    "employees": [{"name": "Baris", "age": 43}, {"name": "Mo", "age": 42}, {"name": "Jai", "age": 44}]
}


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("$.employees[?(@.age>42 && @.age<44)].age", [43]),
        ('$.employees[?(@.age>43 || @.name=="Mo")].name', ["Mo", "Jai"]),
        ('$.employees[?(@.age>42 && @.age<44 || @.name=="Jai")].name', ["Baris", "Jai"]),
        ("$.employees[?(@.name == 'a && b' || @.age == 42)].name", ["Mo"]),
    ],
)
def test_filters_join_comparisons_with_and_or(path: str, value: Any) -> None:
    """`&&` binds tighter than `||` in a filter, as in Argo's jsonpath (evilmonkeyinc/jsonpath v0.8.1,
    script/standard/engine.go: operators "||", "&&" split in that order); the values were printed by that library.

    Before, a filter with `&&` was "unsupported", so upstream's expression-destructure-json-complex left
    `{{=jsonpath(..., '$.employees[?(@.age>42 && @.age<44)].age')}}` in the step's text instead of `[43]`.
    """
    assert jsonpath(STAFF, path) == value
