"""`when` conditions behave as govaluate behaves inside Argo's controller (checked against the Go library)."""

from __future__ import annotations

import pytest

from pipelines.local.expressions import ExpressionError, evaluate_when


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ("heads == heads", True),
        ("tails == heads", False),
        ("Succeeded != Succeeded", False),
        ("'heads' == heads", True),
        ('"double" == double', True),
        ("5 > 3", True),
        ("10 > 9", True),  # numbers, not strings
        ("'10' > '9'", False),  # quoted: compared as strings
        ("'5' == 5", False),  # no coercion between strings and numbers
        ("5 == 5.0", True),
        ("0x10 == 16", True),
        (".5 == 0.5", True),
        ("3 - -3 == 6", True),
        ("1 + 2 * 3 == 7", True),
        ("(1 + 2) * 3 == 9", True),
        ("2 ** 3 == 8", True),
        ("-10 % 3 == -1", True),
        ("a + b == ab", True),
        ("heads in (heads, tails)", True),
        ("edge in (heads, tails)", False),
        ("abc =~ '^a'", True),
        ("abc !~ 'z'", True),
        ("true", True),
        ("false", False),
        ("!(a == b)", True),
        ("true && false || true", True),
        ("false && v1.2 == x", False),  # short-circuit: the right side never runs
        ("1 == 1 ? true : false", True),
        ("'2024-01-01' < '2024-06-01'", True),  # govaluate reads dates as times
        ("", True),
    ],
)
def test_conditions(condition: str, expected: bool) -> None:
    assert evaluate_when(condition) is expected


@pytest.mark.parametrize(
    ("condition", "reason"),
    [
        ("flip-coin == x", "modifier '-'"),  # an unquoted hyphenated word is a subtraction
        ("hello world == hello world", "cannot transition token types"),  # unquoted spaces
        ("v1.2 == v1.2", "no parameter 'v1' found"),  # a dotted word is an accessor
        ("a.b == c", "unexported field"),
        ('{"a":1} == x', "Invalid token"),  # unquoted JSON
        ("a ==", "unexpected end of expression"),
        ("(a == b", "unbalanced parenthesis"),
        ("'a == b", "unclosed string literal"),
        ("foo(1) == 1", "undefined function foo"),
        ("5 > 'a'", "it is not a number"),
        ("a && true", "not a bool"),
        ("heads in (tails)", "comparator 'in'"),  # one value in parentheses is not a list
        ("Running", "not a boolean"),
        ("TRUE", "not a boolean"),
        ("1 ? 2 : 3", "ternary operator"),
        ("   ", "unexpected end of expression"),
    ],
)
def test_malformed_or_non_boolean_conditions_fail_with_one_sentence(condition: str, reason: str) -> None:
    with pytest.raises(ExpressionError, match=reason) as info:
        evaluate_when(condition)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("when expression `")


def test_a_multiline_condition_is_reported_on_one_line() -> None:
    with pytest.raises(ExpressionError) as info:
        evaluate_when("a ==\nb ==")
    assert "\n" not in str(info.value)
