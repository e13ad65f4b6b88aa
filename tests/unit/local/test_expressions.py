"""Every expression in the upstream Argo examples evaluates locally as it does in Argo."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipelines.local.expressions import (
    ExpressionError,
    depends_targets,
    evaluate_condition,
    evaluate_depends,
    evaluate_expr,
    evaluate_when,
    jsonpath,
    substitute,
)

COIN_HEADS = {"steps.flip-coin.outputs.result": "heads", "steps.heads.outputs.result": "it was heads"}
COIN_TAILS = {"steps.flip-coin.outputs.result": "tails", "steps.tails.outputs.result": "it was tails"}
DAG_HEADS = {"tasks.flip-coin.outputs.result": "heads"}

# (example file, `when` as written, scope, whether the step runs)
WHEN_CASES = [
    ("coinflip-recursive.yaml", "{{steps.flip-coin.outputs.result}} == heads", COIN_HEADS, True),
    ("coinflip-recursive.yaml", "{{steps.flip-coin.outputs.result}} == heads", COIN_TAILS, False),
    ("coinflip-recursive.yaml", "{{steps.flip-coin.outputs.result}} == tails", COIN_TAILS, True),
    ("coinflip-recursive.yaml", "{{steps.flip-coin.outputs.result}} == tails", COIN_HEADS, False),
    ("dag-conditional-parameters.yaml", "{{tasks.flip-coin.outputs.result}} == heads", DAG_HEADS, True),
    ("dag-conditional-parameters.yaml", "{{tasks.flip-coin.outputs.result}} == tails", DAG_HEADS, False),
    ("exit-handlers.yaml", "{{workflow.status}} == Succeeded", {"workflow.status": "Failed"}, False),
    ("exit-handlers.yaml", "{{workflow.status}} != Succeeded", {"workflow.status": "Failed"}, True),
    ("exit-handlers.yaml", "{{workflow.status}} == Succeeded", {"workflow.status": "Succeeded"}, True),
    ("parameter-aggregation-dag.yaml", "{{item.evenness}} == even", {"item.evenness": "even", "item.num": "2"}, True),
    ("parameter-aggregation-dag.yaml", "{{item.evenness}} == even", {"item.evenness": "odd", "item.num": "1"}, False),
]

# (example file, `expression:` of an output parameter, scope, value)
EXPRESSION_CASES = [
    (
        "conditional-parameters.yaml",
        "steps['flip-coin'].outputs.result == 'heads' ? steps.heads.outputs.result : steps.tails.outputs.result",
        COIN_HEADS,
        "it was heads",
    ),
    (
        "conditional-parameters.yaml",
        "steps['flip-coin'].outputs.result == 'heads' ? steps.heads.outputs.result : steps.tails.outputs.result",
        COIN_TAILS,
        "it was tails",
    ),
    (
        "dag-conditional-parameters.yaml",
        "tasks['flip-coin'].outputs.result == 'heads' ? tasks.heads.outputs.result : tasks.tails.outputs.result",
        {"tasks.flip-coin.outputs.result": "tails", "tasks.tails.outputs.result": "it was tails"},
        "it was tails",
    ),
]

# The statuses each DAG example reaches, and whether each `depends` lets its task run then.
DIAMOND_OK = {"A": "Succeeded", "B": "Succeeded", "C": "Succeeded"}
CONTINUE = {"A": "Succeeded", "B": "Failed", "C": "Succeeded", "E": "Failed", "F": "Succeeded"}
ENHANCED = {
    "A": "Succeeded",
    "B": "Succeeded",
    "C": "Failed",
    "should-execute-2": "Succeeded",
    "should-not-execute": "Omitted",
}
AGGREGATION = {
    "odd-or-even": "Succeeded",
    **{f"odd-or-even({i})": "Succeeded" for i in range(4)},
    "divide-by-2": "Succeeded",
}
DEPENDS_CASES = [
    ("dag-diamond.yaml", "A", DIAMOND_OK, True),
    ("dag-diamond.yaml", "B && C", DIAMOND_OK, True),
    ("dag-diamond.yaml", "B && C", {**DIAMOND_OK, "C": "Failed"}, False),
    ("dag-multiroot.yaml", "A && B", {"A": "Succeeded", "B": "Running"}, None),
    ("dag-nested.yaml", "B && C", {"B": "Succeeded", "C": "Skipped"}, True),
    ("dag-continue-on-fail.yaml", "A", CONTINUE, True),
    ("dag-continue-on-fail.yaml", "B.Failed && C", CONTINUE, True),
    ("dag-continue-on-fail.yaml", "E && F", CONTINUE, False),
    ("dag-enhanced-depends.yaml", "A", ENHANCED, True),
    ("dag-enhanced-depends.yaml", "A && (C.Succeeded || C.Failed)", ENHANCED, True),
    ("dag-enhanced-depends.yaml", "B || C", ENHANCED, True),
    ("dag-enhanced-depends.yaml", "B && C", ENHANCED, False),
    ("dag-enhanced-depends.yaml", "should-execute-2.Succeeded || should-not-execute", ENHANCED, True),
    ("dag-conditional-parameters.yaml", "flip-coin", {"flip-coin": "Succeeded"}, True),
    ("loops-dag.yaml", "A", {"A": "Succeeded"}, True),
    ("loops-dag.yaml", "B", {"B": "Running"}, None),
    ("parameter-aggregation-dag.yaml", "odd-or-even", AGGREGATION, True),
    ("parameter-aggregation-dag.yaml", "divide-by-2", AGGREGATION, True),
]

JOB_RUNNING = {"metadata": {"name": "rand-num-x7k2p"}, "status": {"active": 3, "succeeded": 1}}
JOB_DONE = {"metadata": {"name": "rand-num-x7k2p"}, "status": {"succeeded": 3}}
JOB_BROKEN = {"metadata": {"name": "rand-num-x7k2p"}, "status": {"failed": 2, "succeeded": 1}}
CONDITION_CASES = [
    ("k8s-jobs.yaml", "status.succeeded > 2", JOB_RUNNING, False),
    ("k8s-jobs.yaml", "status.succeeded > 2", JOB_DONE, True),
    ("k8s-jobs.yaml", "status.failed > 1", JOB_RUNNING, False),
    ("k8s-jobs.yaml", "status.failed > 1", JOB_BROKEN, True),
]


@pytest.mark.parametrize(("example", "when", "scope", "runs"), WHEN_CASES)
def test_example_when_decides_like_argo(example: str, when: str, scope: dict[str, str], runs: bool) -> None:
    assert evaluate_when(substitute(when, scope)) is runs


@pytest.mark.parametrize(("example", "expression", "scope", "value"), EXPRESSION_CASES)
def test_example_output_expression_picks_the_branch_that_ran(
    example: str, expression: str, scope: dict[str, str], value: str
) -> None:
    assert evaluate_expr(expression, scope) == value


@pytest.mark.parametrize(("example", "depends", "statuses", "runs"), DEPENDS_CASES)
def test_example_depends_decides_like_argo(
    example: str, depends: str, statuses: dict[str, str], runs: bool | None
) -> None:
    assert evaluate_depends(depends, statuses) is runs


@pytest.mark.parametrize(("example", "condition", "job", "matched"), CONDITION_CASES)
def test_example_resource_conditions(example: str, condition: str, job: dict[str, Any], matched: bool) -> None:
    assert evaluate_condition(condition, job) is matched


def test_example_resource_output_json_path() -> None:
    assert jsonpath(JOB_DONE, "{.metadata.name}") == "rand-num-x7k2p"


def test_example_tags_substitute_as_argo_renders_them() -> None:
    scope = {
        "inputs.parameters.message": "hello",
        "inputs.parameters.num": "4",
        "workflow.name": "exit-handlers-abc",
        "workflow.status": "Failed",
        "workflow.duration": "12.3",
        "workflow.failures": [{"displayName": "intentional-fail", "message": "exit 1"}],
        "item": 3,
    }
    assert substitute("{{inputs.parameters.message}}A", scope) == "helloA"
    assert substitute("if [ $(({{inputs.parameters.num}}%2)) -eq 0 ]; then", scope) == "if [ $((4%2)) -eq 0 ]; then"
    assert substitute("{{item}}", scope) == "3"
    args = "echo send e-mail: {{workflow.name}} {{workflow.status}} {{workflow.duration}}. Failed steps "
    assert substitute(args + "{{workflow.failures}}", scope) == (
        "echo send e-mail: exit-handlers-abc Failed 12.3. Failed steps "
        '[{"displayName":"intentional-fail","message":"exit 1"}]'
    )


# Everything the tables above cover, to check the examples hold nothing more.
COVERED = (
    {when for _, when, _, _ in WHEN_CASES}
    | {expression for _, expression, _, _ in EXPRESSION_CASES}
    | {depends for _, depends, _, _ in DEPENDS_CASES}
    | {condition for _, condition, _, _ in CONDITION_CASES}
)
_KEYS = {"when", "depends", "expression", "successCondition", "failureCondition"}


def _expressions(node: Any) -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _KEYS and isinstance(value, str):
                yield key, value
            yield from _expressions(value)
    elif isinstance(node, list):
        for item in node:
            yield from _expressions(item)
    elif isinstance(node, str) and "{{=" in node:
        yield "{{=", node


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)
    elif isinstance(node, str):
        yield node


def _examples(shared_dir: Path) -> list[tuple[str, Any]]:
    return [
        (path.name, yaml.safe_load(path.read_text())) for path in sorted((shared_dir / "argo-examples").glob("*.yaml"))
    ]


def test_every_example_expression_is_covered_above(shared_dir: Path) -> None:
    found = {(name, value) for name, doc in _examples(shared_dir) for _, value in _expressions(doc)}
    assert found, "the shared Argo examples hold no expressions: wrong directory?"
    missing = sorted((name, value) for name, value in found if value not in COVERED)
    assert not missing, f"expressions in the Argo examples without a test here: {missing}"


def test_every_example_expression_parses_and_targets_known_tasks(shared_dir: Path) -> None:
    for name, doc in _examples(shared_dir):
        tasks = {
            task["name"]
            for template in doc["spec"]["templates"]
            for task in (template.get("dag") or {}).get("tasks", [])
        }
        for key, value in _expressions(doc):
            if key == "depends":
                assert depends_targets(value) <= tasks, (name, value)
                # Undecided while nothing ran; never an error.
                assert evaluate_depends(value, {}) is None


def test_every_example_tag_can_be_substituted(shared_dir: Path) -> None:
    tag = re.compile(r"{{\s*([^{}=]+?)\s*}}")
    for name, doc in _examples(shared_dir):
        for text in _strings(doc):
            scope = {match.group(1): "X" for match in tag.finditer(text)}
            result = substitute(text, scope)
            assert "{{" not in result, (name, text, result)


def test_an_unquoted_hyphenated_value_fails_like_govaluate() -> None:
    # Why Argo's examples compare against single words: `flip-coin` is `flip` minus `coin`.
    with pytest.raises(ExpressionError, match="modifier '-'"):
        evaluate_when("flip-coin == flip-coin")
    assert evaluate_when("'flip-coin' == 'flip-coin'") is True
