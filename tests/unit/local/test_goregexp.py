"""Regular expressions in the three dialects mean what Go's regexp (RE2) means, as in Argo's controller.

Each case here went Python's way before (pipelines/local/expressions/goregexp.py says why that mattered).
"""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.local.expressions import ExpressionError, evaluate_expr, evaluate_when

BACKTRACKS = "a" * 40 + "!"  # (a+)+$ against it: Python's engine tried ~2^40 ways; RE2 is linear


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (f"'{BACKTRACKS}' matches '(a+)+$'", False),
        ("'é' matches '^\\\\w$'", False),  # Go's \w, \d, \s and \b are ASCII
        ("'e' matches '^\\\\w$'", True),
        ("'٣' matches '^\\\\d$'", False),
        ("'a\\n' matches 'a$'", False),  # $ is the end of the text, not before a final line break
        ("'a\\nb' matches '(?m)a$'", True),
        ("'ab' matches '(?i)AB\\\\z'", True),  # Go's \z (Python spells it \Z)
        (f"sprig.regexMatch('(a|aa)+$', '{BACKTRACKS}')", False),
        ("sprig.regexFind('[[:digit:]]+', 'ab12c')", "12"),  # POSIX classes, which Python's re does not know
        ("sprig.regexReplaceAll('(?P<x>o)', 'foo', '<${x}>')", "f<o><o>"),
        ("sprig.regexReplaceAll('(o)', 'foo', '[$2]')", "f[][]"),  # a group it lacks is empty, as Go's Expand
        ("sprig.regexSplit('\\\\s+', 'a b\\tc', -1)", ["a", "b", "c"]),
    ],
)
def test_expr_and_sprig_read_patterns_as_go(expression: str, expected: Any) -> None:
    assert evaluate_expr(expression, {}) == expected


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("'ab' matches 'a(?=b)'", "invalid perl operator: (?="),  # lookarounds: Python took them
        ("'aa' matches '(a)\\\\1'", "invalid escape sequence: \\1"),  # backreferences
        ("'a' matches 'a\\\\Z'", "invalid escape sequence: \\Z"),
        ("sprig.regexMatch('a{1001}', 'a')", "invalid repetition size: {1001}"),  # Go's limit is 1000 too
    ],
)
def test_a_pattern_go_refuses_is_one_sentence(expression: str, reason: str) -> None:
    with pytest.raises(ExpressionError, match="invalid regular expression") as caught:
        evaluate_expr(expression, {})
    assert reason in str(caught.value) and "\n" not in str(caught.value)


def test_govaluate_compares_with_go_patterns() -> None:
    assert evaluate_when(f"'{BACKTRACKS}' =~ '(a+)+$'") is False
    assert evaluate_when("'é' =~ '^\\\\w$'") is False
    assert evaluate_when("'e' =~ '^\\\\w$'") is True
    assert evaluate_when("'é' !~ '^\\\\w$'") is True
    with pytest.raises(ExpressionError, match=r"unable to compile regexp pattern 'a\(\?=b\)': invalid perl operator"):
        evaluate_when("'ab' =~ 'a(?=b)'")
