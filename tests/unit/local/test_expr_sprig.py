"""`sprig.*` functions behave as Masterminds/sprig does in Argo's expressions (checked against the Go library)."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.local.expressions import ExpressionError, evaluate_expr

SCOPE = {"inputs.parameters.name": "Hello World", "inputs.parameters.n": "5", "inputs.parameters.csv": "a,b,c"}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("sprig.upper(inputs.parameters.name)", "HELLO WORLD"),
        ("sprig.lower(inputs.parameters.name)", "hello world"),
        ("sprig.trim('  x  ')", "x"),
        ("sprig.title('hello wORLD')", "Hello WORLD"),
        # Pipeline argument order: what to do first, the text last.
        ("sprig.replace('l', 'L', inputs.parameters.name)", "HeLLo WorLd"),
        ("sprig.trimPrefix('Hello ', inputs.parameters.name)", "World"),
        ("sprig.trimSuffix(' World', inputs.parameters.name)", "Hello"),
        ("sprig.contains('lo W', inputs.parameters.name)", True),
        ("sprig.hasPrefix('He', inputs.parameters.name)", True),
        ("sprig.hasSuffix('xx', inputs.parameters.name)", False),
        ("sprig.splitList(',', inputs.parameters.csv)", ["a", "b", "c"]),
        ("sprig.join('-', sprig.splitList(',', inputs.parameters.csv))", "a-b-c"),
        ("sprig.default('fallback', '')", "fallback"),
        ("sprig.default('fallback', 'given')", "given"),
        ("sprig.default('fallback', inputs.parameters.missing)", "fallback"),
        # Lenient arithmetic on strings, as spf13/cast converts them.
        ("sprig.int(inputs.parameters.n)", 5),
        ("sprig.int('4.0')", 4),
        ("sprig.int('not a number')", 0),
        ("sprig.add(inputs.parameters.n, 2, 0.9)", 7),
        ("sprig.sub(10, '3')", 7),
        ("sprig.mul(2, 3, 4)", 24),
        ("sprig.div(-7, 2)", -3),
        ("sprig.max(1, '7', 3)", 7),
        ("sprig.min(4, 2.9)", 2),
        ("sprig.toString(2.5)", "2.5"),
        ("sprig.toString([1, 'a'])", "[1 a]"),
        ("sprig.toJson({'b': 1, 'a': '<'})", '{"a":"\\u003c","b":1}'),
        ("sprig.dict('a', 1, 'b')", {"a": 1, "b": ""}),
        ("sprig.regexReplaceAll('(o)', 'foo', '[$1]')", "f[o][o]"),
        ("sprig.b64enc('hi')", "aGk="),
        ("sprig.until(3)", [0, 1, 2]),
        ("sprig.ternary('yes', 'no', 1 > 0)", "yes"),
    ],
)
def test_sprig(expression: str, expected: Any) -> None:
    result = evaluate_expr(expression, SCOPE)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("sprig.now()", "clock"),  # impure functions are refused
        ("sprig.randAlphaNum(5)", "randomness"),
        ("sprig.env('HOME')", "not a function"),  # Argo removes env and expandenv
        ("sprig.upper(1)", "expects a string"),
        ("sprig.div(1, 0)", "divide by zero"),
        # a count a few digits too long: a MemoryError (an internal error), or the machine's memory, not the step's
        ("sprig.until(100000000)", "sprig.until would make 100,000,000 items; an expression may make at most"),
        ("sprig.untilStep(0, 1000000000, 1)", "sprig.untilStep would make 1,000,000,000 items"),
        ("sprig.repeat(10000000000, 'x')", "sprig.repeat would make 10,000,000,000 copies"),
        ("sprig.indent(1000000000, 'x')", "sprig.indent would make 1,000,000,000 spaces a line"),
        ("sprig.repeat(1000000, sprig.repeat(1000000, 'x'))", "would make a text of 1,000,000,000,000 characters"),
    ],
)
def test_refused_or_failing_sprig_calls(expression: str, reason: str) -> None:
    with pytest.raises(ExpressionError, match=reason) as info:
        evaluate_expr(expression, SCOPE)
    assert "\n" not in str(info.value)
