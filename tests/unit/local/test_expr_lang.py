"""expr-lang expressions evaluate as expr v1.17 does inside Argo (checked against the Go library)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from pipelines.local.expressions import ExpressionError, evaluate_expr

SCOPE: dict[str, Any] = {
    "inputs.parameters.n": "5",
    "inputs.parameters.ratio": "2.5",
    "inputs.parameters.word": "abc",
    "inputs.parameters.list": "[1, 2, 3]",
    "inputs.parameters.doc": '{"a": {"b": [10, 20]}}',
    "inputs.parameters.deep": "[" * 50_000 + "]" * 50_000,  # JSON nested deeper than Python's parser recurses
    "tasks.flip-coin.outputs.result": "heads",
    "tasks.A.outputs.parameters.p": "x",
    "workflow.name": "wf-1",
    "workflow.status": "Failed",
    "retries": "2",
    "item.a": "1",
    "item.b": "two",
}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("asInt(inputs.parameters.n) > 2", True),
        ("asInt(inputs.parameters.n) + 1", 6),
        ("asFloat(inputs.parameters.ratio) * 2", 5.0),
        ("tasks['flip-coin'].outputs.result", "heads"),
        ("tasks.A.outputs.parameters.p + '-y'", "x-y"),
        ("inputs.parameters.missing", None),  # a missing nested key is nil
        ("inputs.parameters.missing ?? 'default'", "default"),
        ("tasks?.B?.outputs.result", None),
        ("workflow.status == 'Failed' ? 'cry' : 'celebrate'", "cry"),
        ("item.a + item.b", "1two"),
        ("asInt(retries) < 3", True),
        ("7 / 2", 3.5),  # `/` always yields a float
        ("4 / 2", 2.0),
        ("7 % 3", 1),
        ("-7 % 3", -1),  # Go truncates toward zero
        ("2 ** 10", 1024.0),
        ("1 < 2 < 3", True),
        ("1 == 1.0", True),
        ("inputs.parameters.n == 5 ? 'same' : 'different'", "different"),  # no static type: false at run time
        ("2 in [1, 2]", True),
        ("2 not in [1, 2]", False),
        ("'a' in {'a': 1}", True),
        ("'abc' matches '^a.c$'", True),
        ("inputs.parameters.word contains 'b'", True),
        ("inputs.parameters.word startsWith 'ab'", True),
        ("not (1 > 2)", True),
        ("1..3", [1, 2, 3]),
        ("[1, 2, 3][1:]", [2, 3]),
        ("[1, 2, 3][-1]", 3),
        ("{a: 1, 'b-c': 2}['b-c']", 2),
        ("len('héllo')", 5),
        ("string(1000000.0)", "1e+06"),  # Go's %v
        ("int('42')", 42),
        ("upper(workflow.name)", "WF-1"),
        ("split('a,b', ',')", ["a", "b"]),
        ("join(['a', 'b'], '-')", "a-b"),
        ("fromJSON(inputs.parameters.list)[1]", 2.0),  # JSON numbers are float64
        ("fromJSON(inputs.parameters.doc).a.b[1]", 20.0),
        ("jsonpath(inputs.parameters.doc, '$.a.b')", [10.0, 20.0]),
        ("toJson({'b': 1, 'a': [true]})", '{"a":[true],"b":1}'),
        ("filter([1, 2, 3, 4], # > 2)", [3, 4]),
        ("map([1, 2], # * 10)", [10, 20]),
        ("all([1, 2], # > 0) && any([1, 2], # == 2)", True),
        ("count([1, 2, 3], # % 2 == 1)", 2),
        ("sum([1, 2, 3])", 6),
        ("reduce([1, 2, 3], #acc + #)", 6),
        ("map([{'n': 1}, {'n': 2}], .n)", [1, 2]),
        ("[3, 1, 2] | sort() | map(# * 2)", [2, 4, 6]),
        ("let x = asInt(inputs.parameters.n); x * x", 25),
        ("if 1 > 2 { 'a' } else { 'b' }", "b"),
        ("sprig.upper('abc')", "ABC"),
    ],
)
def test_expressions(expression: str, expected: Any) -> None:
    result = evaluate_expr(expression, SCOPE)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("nope == 1", "unknown name nope"),  # expr checks top-level names before running
        ("false ? nope : 1", "unknown name nope"),  # ... even in a branch that never runs
        ("retries == 1", "mismatched types string and int"),  # a top-level string against a number
        ("'1' == 1", "mismatched types string and int"),  # two literals of different types
        ("tasks.flip-coin.outputs.result", "unknown name coin"),  # `tasks.flip - coin.outputs.result`
        ("asInt(inputs.parameters.word)", "int(abc)"),
        ("asInt(inputs.parameters.ratio)", "int(2.5)"),
        ("inputs.parameters.n + 1", "string + int"),  # parameters are strings
        ("inputs.parameters.n > 2", "string > int"),
        ("5.5 % 2", "mismatched types float64 and int"),
        ("5 % 0", "integer divide by zero"),
        ("[1][5]", "index out of range"),
        ("tasks.B.outputs.result", "cannot fetch outputs from nil"),
        ("nil ?? 1 + 2", "cannot be mixed"),
        ("1 +", "unexpected token end of expression"),
        ("(1", "unexpected"),
        ("'unterminated", "not terminated"),
        ("1 @ 2", "unrecognized character"),
        ("filter(1, # > 0)", "cannot iterate"),
        ("now()", "clock"),
        ("jsonpath(inputs.parameters.doc, '$.a.c')", "not found"),
        ("fromJSON(inputs.parameters.deep)", "invalid JSON: JSON nested too deeply to be read"),
        # expr-lang's memory budget: a range of 1e8 items took 4 s and gigabytes, `map` over it a MemoryError
        ("len(1..100000000)", "memory budget exceeded"),
        ("map(1..100000000, #)", "memory budget exceeded"),
        # copies of copies: a terabyte asked for at once
        ("repeat(repeat('x', 1000000), 1000000)", "repeat would make a text of 1,000,000,000,000 characters"),
    ],
)
def test_failures_are_one_sentence_errors(expression: str, reason: str) -> None:
    with pytest.raises(ExpressionError, match=re.escape(reason)) as info:
        evaluate_expr(expression, SCOPE)
    assert "\n" not in str(info.value)
    assert f"`{expression}`" in str(info.value)


def test_non_string_scope_values_keep_their_type() -> None:
    scope = {"workflow.failures": [{"displayName": "a"}], "item": 3}
    assert evaluate_expr("workflow.failures[0].displayName", scope) == "a"
    assert evaluate_expr("item + 1", scope) == 4


def test_a_parent_key_gives_way_to_its_children_as_in_argo() -> None:
    # "tasks.A.outputs.parameters" (the JSON list withParam reads) and "tasks.A.outputs.parameters.p" coexist.
    scope = {"tasks.A.outputs.parameters": '[{"name": "p"}]', "tasks.A.outputs.parameters.p": "x"}
    assert evaluate_expr("tasks.A.outputs.parameters.p", scope) == "x"


def test_to_json_matches_go_marshal_indent() -> None:
    text = evaluate_expr("toJSON({'b': [1, 2.5], 'a': 'x<y'})", {})
    assert text == '{\n  "a": "x\\u003cy",\n  "b": [\n    1,\n    2.5\n  ]\n}'
    assert json.loads(text) == {"a": "x<y", "b": [1, 2.5]}
