"""Argo's `when` conditions, evaluated with govaluate's rules (github.com/Knetic/govaluate) as Argo uses it.

Argo substitutes the `{{...}}` tags first, lexes the text with govaluate, turns every bare word (a govaluate
*variable*) into a string literal, and evaluates without parameters (workflow/controller/steps.go,
shouldExecute).  So `heads == heads` is true, `'5' == 5` is false (no coercion), numbers are float64,
`flip-coin == x` fails (`flip` minus `coin`), and a dotted word such as `v1.2` fails (an *accessor*).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from pipelines.local.expressions.errors import ExpressionError, quote_expression
from pipelines.local.expressions.goregexp import GoRegexp, RegexpError, compile_go
from pipelines.local.expressions.govaluate.lexer import (
    COMPARATOR_OPS,
    TERNARY_OPS,
    Token,
    check_syntax,
    compile_patterns,
    tokenize,
)
from pipelines.local.govalues import format_float_g

__all__ = ["evaluate_when"]


class _Stage:
    """One node of the evaluation tree: an operator symbol with operands, or a literal (symbol None)."""

    __slots__ = ("symbol", "left", "right", "value")

    def __init__(self, symbol: str | None, left: _Stage | None = None, right: _Stage | None = None, value: Any = None):
        self.symbol = symbol
        self.left = left
        self.right = right
        self.value = value


class _Planner:
    """Builds the evaluation tree with govaluate's precedence, from the loosest binding to the tightest.

    `,` then `? : ??` then `||`, `&&`, comparators, `& | ^`, `<< >>`, `+ -`, `* / %`, `**`, and prefixes.
    """

    _LEVELS = (
        ("SEPARATOR", {","}),
        ("TERNARY", TERNARY_OPS),
        ("LOGICALOP", {"||"}),
        ("LOGICALOP", {"&&"}),
        ("COMPARATOR", COMPARATOR_OPS),
        ("MODIFIER", {"&", "|", "^"}),
        ("MODIFIER", {"<<", ">>"}),
        ("MODIFIER", {"+", "-"}),
        ("MODIFIER", {"*", "/", "%"}),
        ("MODIFIER", {"**"}),
    )

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.pos = 0

    def peek(self) -> Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def plan(self, level: int = 0) -> _Stage | None:
        if level == len(self._LEVELS):
            return self.plan_value()
        kind, symbols = self._LEVELS[level]
        left = self.plan(level + 1)
        while (token := self.peek()) is not None and token.kind == kind and token.value in symbols:
            self.pos += 1
            right = self.plan(level + 1)
            if kind == "SEPARATOR":
                items = left.value if left is not None and left.symbol == "," else [left]
                left = _Stage(",", value=[*items, right])
            else:
                left = _Stage(token.value, left, right)
        return left

    def plan_value(self) -> _Stage | None:
        token = self.peek()
        if token is None or token.kind == "CLAUSE_CLOSE":
            return None
        self.pos += 1
        if token.kind == "CLAUSE":
            inner = self.plan()
            self.pos += 1  # the closing parenthesis, which the balance check guarantees
            return _Stage("()", right=inner)
        if token.kind == "PREFIX":
            return _Stage("prefix" + token.value, right=self.plan_value())
        if token.kind == "ACCESSOR":
            if (following := self.peek()) is not None and following.kind == "CLAUSE":
                self.plan_value()
            return _Stage("accessor", value=token.value)
        if token.kind in ("NUMERIC", "STRING", "PATTERN", "BOOLEAN", "TIME", "VARIABLE"):
            return _Stage(None, value=token.value)
        raise ExpressionError(f"unable to plan token kind {token.kind} [{token.shown()}]")


@lru_cache(maxsize=2048)
def _compile(text: str) -> _Stage | None:
    tokens = tokenize(text)
    check_syntax(tokens)
    compile_patterns(tokens)
    # Argo turns every bare word into a string literal, then has govaluate check and plan the result again.
    tokens = [Token("STRING", t.value) if t.kind == "VARIABLE" else t for t in tokens]
    check_syntax(tokens)
    compile_patterns(tokens)
    planner = _Planner(tokens)
    stage = planner.plan()
    if planner.pos != len(tokens):
        raise ExpressionError(f"unexpected token {tokens[planner.pos].shown()}")
    return stage


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return format_float_g(value)
    if isinstance(value, list):
        return "[" + " ".join(_shown(v) for v in value) + "]"
    if isinstance(value, GoRegexp):
        return value.pattern
    return "<nil>" if value is None else str(value)


def _is_float(value: Any) -> bool:
    return type(value) is float


def _same(left: Any, right: Any) -> bool:
    """reflect.DeepEqual: equal types and values; `'5' == 5` is false."""
    if type(left) is not type(right):
        return False
    if isinstance(left, list):
        return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right, strict=True))
    return bool(left == right)


def _fail(kind: str, value: Any, symbol: str) -> ExpressionError:
    reasons = {
        "logical": "cannot be used with the logical operator '{s}', it is not a bool",
        "modifier": "cannot be used with the modifier '{s}', it is not a number",
        "comparator": "cannot be used with the comparator '{s}', it is not a number",
        "ternary": "cannot be used with the ternary operator '{s}', it is not a bool",
        "prefix": "cannot be used with the prefix '{s}'",
    }
    return ExpressionError(f"value '{_shown(value)}' " + reasons[kind].format(s=symbol))


def _int64(value: float) -> int:
    return ((int(value) + 2**63) % 2**64) - 2**63


def _arithmetic(symbol: str, left: float, right: float) -> Any:
    try:
        if symbol == "-":
            return left - right
        if symbol == "*":
            return left * right
        if symbol == "/":
            if right == 0:
                return (
                    math.nan
                    if left == 0 or math.isnan(left)
                    else math.copysign(math.inf, left) * math.copysign(1, right)
                )
            return left / right
        if symbol == "%":
            return math.nan if right == 0 else math.fmod(left, right)
        if symbol == "**":
            return math.pow(left, right)
        if symbol == "&":
            return float(_int64(left) & _int64(right))
        if symbol == "|":
            return float(_int64(left) | _int64(right))
        if symbol == "^":
            return float(_int64(left) ^ _int64(right))
        # Go converts both sides to uint64; a negative or huge shift count shifts everything out.
        count = int(right) if 0 <= right < 64 else 64
        if symbol == "<<":
            return float((int(left) % 2**64 << count) % 2**64)
        return float((int(left) % 2**64) >> count)
    except OverflowError:
        return math.inf
    except ValueError:
        return math.nan


def _evaluate(stage: _Stage | None) -> Any:
    if stage is None:
        return None
    symbol = stage.symbol
    if symbol is None:
        return stage.value
    if symbol == "()":
        return _evaluate(stage.right)
    if symbol == ",":
        return [_evaluate(item) for item in stage.value]
    if symbol == "accessor":
        raise ExpressionError(f"no parameter '{stage.value[0]}' found")
    if symbol.startswith("prefix"):
        right = _evaluate(stage.right)
        if symbol == "prefix!":
            if not isinstance(right, bool):
                raise _fail("prefix", right, "!")
            return not right
        if not _is_float(right):
            raise _fail("prefix", right, symbol[-1])
        return -right if symbol == "prefix-" else float(~_int64(right))
    left = _evaluate(stage.left)
    # Short circuits happen before type checks, exactly as in govaluate's evaluateStage.
    if (symbol == "&&" and left is False) or (symbol == "||" and left is True):
        return left
    if symbol in ("??", ":") and left is not None:
        return left
    if symbol == "?":
        if not isinstance(left, bool):
            raise _fail("ternary", left, "?")
        return _evaluate(stage.right) if left else None
    right = _evaluate(stage.right)
    if symbol in ("??", ":"):
        return right
    if symbol in ("&&", "||"):
        for value in (left, right):
            if not isinstance(value, bool):
                raise _fail("logical", value, symbol)
        return right
    if symbol in ("==", "!="):
        return _same(left, right) == (symbol == "==")
    if symbol in (">", ">=", "<", "<="):
        if not ((_is_float(left) and _is_float(right)) or (isinstance(left, str) and isinstance(right, str))):
            raise _fail("comparator", left, symbol)
        return {">": left > right, ">=": left >= right, "<": left < right, "<=": left <= right}[symbol]
    if symbol in ("=~", "!~"):
        if not isinstance(left, str):
            raise _fail("comparator", left, symbol)
        if not isinstance(right, str | GoRegexp):
            raise _fail("comparator", right, symbol)
        try:
            pattern = right if isinstance(right, GoRegexp) else compile_go(right)
        except RegexpError as error:
            raise ExpressionError(f"unable to compile regexp pattern '{right}': {error}") from None
        return (pattern.search(left) is not None) == (symbol == "=~")
    if symbol == "in":
        if not isinstance(right, list):
            raise _fail("comparator", right, "in")
        return any(type(item) is type(left) and item == left for item in right)
    if symbol == "+":
        if _is_float(left) and _is_float(right):
            return left + right
        if not isinstance(left, str) and not isinstance(right, str):
            raise _fail("modifier", left, "+")
        return _shown(left) + _shown(right)
    for value in (left, right):
        if not _is_float(value):
            raise _fail("modifier", value, symbol)
    return _arithmetic(symbol, left, right)


def evaluate_when(text: str) -> bool:
    """Evaluate an Argo `when` condition after `{{...}}` substitution, as Argo's controller does with govaluate.

    Bare words are strings (`{{steps.flip-coin.outputs.result}} == heads` works), numbers are float64, there is
    no coercion between strings and numbers, and the result must be a bool.  An empty condition is true.
    """
    if text == "":
        return True
    try:
        result = _evaluate(_compile(text))
    except ExpressionError as error:
        raise ExpressionError(f"when expression {quote_expression(text)} is invalid: {error}") from None
    if not isinstance(result, bool):
        raise ExpressionError(
            f"when expression {quote_expression(text)} evaluated to {_shown(result)!r}, not a boolean"
            " (hint: quote operands that contain spaces or symbols)"
        )
    return result
