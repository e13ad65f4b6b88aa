"""Fuzz the Argo expression dialects: expr-lang, `when`, `{{...}}` substitution, `depends`, conditions, JSONPath.

Each evaluator is pure and documents one failure: ExpressionError, one sentence. Mutations of the expressions the
unit tests check (and of Argo's own examples) must get a value or that error, never another exception.
"""

from __future__ import annotations

import math
from typing import Any

from fuzz_kit import JSON, ROOT, mutated_text, mutated_tree, one_line, string_cases
from hypothesis import example, given
from hypothesis import strategies as st

from pipelines.local.expressions import (
    ExpressionError,
    evaluate_condition,
    evaluate_depends,
    evaluate_expr,
    evaluate_when,
    jsonpath,
    jsonpath_text,
    substitute,
)

UNIT = ROOT / "tests" / "unit" / "local"
SCOPE: dict[str, Any] = {
    "inputs.parameters.n": "5",
    "inputs.parameters.word": "abc",
    "inputs.parameters.list": "[1, 2, 3]",
    "inputs.parameters.doc": '{"a": {"b": [10, 20]}}',
    "tasks.flip-coin.outputs.result": "heads",
    "tasks.A.outputs.parameters.p": "x",
    "workflow.name": "wf-1",
    "workflow.status": "Failed",
    "retries": "2",
    "item": "3",
}
VCJOB: dict[str, Any] = {
    "metadata": {"name": "ft-1", "labels": {"app": "train"}},
    "status": {"state": {"phase": "Completed"}, "succeeded": 3, "failed": 0, "ratio": 2.5, "ready": True},
}

EXPR_SEEDS = string_cases(UNIT / "test_expr_lang.py", UNIT / "test_expr_sprig.py") or [
    "asInt(inputs.parameters.n) > 2",
    "tasks['flip-coin'].outputs.result == 'heads' ? 'a' : 'b'",
    "sprig.upper(workflow.name) + string(1..3)",
]
WHEN_SEEDS = string_cases(UNIT / "test_expr_when.py") or ["heads == heads", "5 > 3 && !(tails == heads)"]
CONDITION_SEEDS = string_cases(UNIT / "test_expr_conditions.py") or ["status.state.phase in (Failed,Aborted)"]
DEPENDS_SEEDS = string_cases(UNIT / "test_expr_depends.py") or ["A && (B.Failed || C.AnySucceeded)"]
JSONPATH_SEEDS = string_cases(UNIT / "test_expr_jsonpath.py") or ["{.status.state.phase}", "$.metadata.labels"]
TEMPLATE_SEEDS = [
    "{{inputs.parameters.n}}",
    "{{=asInt(inputs.parameters.n) + 1}}",
    "echo {{tasks.A.outputs.parameters.p}} {{=sprig.upper(workflow.name)}}",
    "{{workflow.status}}-{{item}}",
]
EXPR_TOKENS = [
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ".",
    "?.",
    "??",
    "?",
    ":",
    "'",
    '"',
    "`",
    "\\",
    "+",
    "-",
    "*",
    "/",
    "%",
    "**",
    "==",
    "!=",
    "<",
    ">=",
    "&&",
    "||",
    "!",
    "not ",
    " in ",
    " matches ",
    "..",
    "nil",
    "true",
    "1e309",
    "9223372036854775808",
    "-0",
    "asInt(",
    "asFloat(",
    "toJSON(",
    "fromJSON(",
    "jsonpath(",
    "sprig.",
    "len(",
    "filter(",
    "map(",
    "#",
    "let x = 1; ",
    "inputs.parameters.",
    "tasks.",
    "'\\u",
    "\x00",
    "é",
]
WHEN_TOKENS = [
    "(",
    ")",
    "==",
    "!=",
    "=~",
    "!~",
    ">",
    "<=",
    "&&",
    "||",
    "!",
    "'",
    '"',
    "-",
    "+",
    "1.5e3",
    "heads",
    "true",
    "false",
    "?",
    ":",
    "[",
    "]",
    ",",
    "in",
    "0x",
    "\\",
    "\n",
]
CONDITION_TOKENS = [
    ",",
    "==",
    "=",
    "!=",
    " in ",
    " notin ",
    "(",
    ")",
    "!",
    ">",
    "<",
    ".",
    "[",
    "]",
    "status.",
    "metadata.labels.",
    " ",
    "Completed",
    "-1",
    "1e3",
]
DEPENDS_TOKENS = [
    "&&",
    "||",
    "!",
    "(",
    ")",
    ".",
    "Succeeded",
    "Failed",
    "AnySucceeded",
    "AllFailed",
    "Errored",
    "Skipped",
    "Daemoned",
    "A",
    "B",
    " ",
    "-",
    "x(0)",
]
JSONPATH_TOKENS = [
    "{",
    "}",
    ".",
    "..",
    "[",
    "]",
    "*",
    "?(",
    "@",
    "==",
    "'",
    "$",
    "range",
    "end",
    ":",
    "-1",
    ",",
    "0",
    "metadata",
    "status",
]


def _raises_one_sentence(call: Any) -> Any:
    try:
        return call()
    except ExpressionError as err:
        one_line(str(err))
        return None


@given(mutated_text(EXPR_SEEDS, EXPR_TOKENS))
@example("1" * 400 + "+")  # a huge integer literal
@example("(" * 300)  # nesting deep enough to exhaust a recursive parser
@example("'abc'[1:0:-1]")
@example("[1][9223372036854775808]")
def test_expr_lang(expression: str) -> None:
    _raises_one_sentence(lambda: evaluate_expr(expression, SCOPE))


@given(mutated_text(WHEN_SEEDS, WHEN_TOKENS))
@example("(" * 300 + "true")
@example("1e999 > 1")
def test_when(condition: str) -> None:
    result = _raises_one_sentence(lambda: evaluate_when(condition))
    assert result is None or isinstance(result, bool)


@given(mutated_text(TEMPLATE_SEEDS + EXPR_SEEDS[:20], EXPR_TOKENS + ["{{", "}}", "{{=", "{{ "]), st.booleans())
def test_substitute(text: str, strict: bool) -> None:
    result = _raises_one_sentence(lambda: substitute(text, SCOPE, strict=strict))
    assert result is None or isinstance(result, str)


@given(mutated_text(DEPENDS_SEEDS, DEPENDS_TOKENS))
@example("(" * 300 + "A")
def test_depends(expression: str) -> None:
    statuses = {"A": "Succeeded", "B": "Failed", "C": "Running", "x(0)": "Succeeded", "x": "Succeeded"}
    result = _raises_one_sentence(lambda: evaluate_depends(expression, statuses))
    assert result in (None, True, False)


@given(mutated_text(CONDITION_SEEDS, CONDITION_TOKENS), mutated_tree([VCJOB]))
@example("status.state.phase== Completed", {"status": {"state": {"phase": [math.inf]}}})  # a raw ValueError (make fuzz)
def test_success_and_failure_conditions(condition: str, obj: Any) -> None:
    if not isinstance(obj, dict):
        obj = {"status": obj}
    result = _raises_one_sentence(lambda: evaluate_condition(condition, obj))
    assert result is None or isinstance(result, bool)


@given(mutated_text(JSONPATH_SEEDS, JSONPATH_TOKENS), st.one_of(mutated_tree([VCJOB]), JSON))
def test_jsonpath(path: str, obj: Any) -> None:
    _raises_one_sentence(lambda: jsonpath(obj, path))
    text = _raises_one_sentence(lambda: jsonpath_text(obj, path))
    assert text is None or isinstance(text, str)
