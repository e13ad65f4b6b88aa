"""Resource templates' `successCondition` / `failureCondition`: Kubernetes label-selector syntax over JSON paths.

Argo's executor (workflow/executor/resource.go) parses the condition with `labels.Parse` and matches it against
the object through gjson: the label key is a dotted path (`status.state.phase`, `status.conditions.0.type`),
its value is gjson's string form of whatever is there.  So `==`, `=`, `!=`, `in`, `notin` compare strings,
`>` and `<` compare 64-bit integers (a value that is not an integer does not match), a bare key tests that
the path exists, `!key` that it does not, and commas mean AND.  A missing path never matches `==`, `in`, `>`
or `<`, and always matches `!=` and `notin`, exactly like a missing label.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pipelines.local.expressions.errors import ExpressionError, quote_expression
from pipelines.local.govalues import format_float_f, go_json

__all__ = ["evaluate_condition"]

_SPECIAL = "=!(),><"
_OPERATORS = {"==", "=", "!=", "in", "notin", ">", "<"}
_SYMBOLS = {")", ",", "!", "==", "=", ">", "<", "!=", "("}
_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_MISSING = object()


@dataclass(frozen=True, slots=True)
class _Requirement:
    key: str
    operator: str  # ==, !=, in, notin, >, <, exists, !exists
    values: frozenset[str]


def _lex(selector: str) -> list[tuple[str, str]]:
    """(kind, text) tokens, kind being "id", a symbol, or "end"; `in` and `notin` stay ids until parsed."""
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(selector):
        char = selector[position]
        if char in " \t\r\n":
            position += 1
        elif char in _SPECIAL:
            # The longest run of special characters that is still a known symbol, as the Kubernetes lexer does.
            end = position
            best = None
            while end < len(selector) and selector[end] in _SPECIAL:
                end += 1
                if selector[position:end] in _SYMBOLS:
                    best = end
                elif best is not None:
                    break
            if best is None:
                raise ExpressionError(f"unexpected {selector[position:end]!r}")
            tokens.append((selector[position:best], selector[position:best]))
            position = best
        else:
            end = position
            while end < len(selector) and selector[end] not in _SPECIAL and selector[end] not in " \t\r\n":
                end += 1
            tokens.append(("id", selector[position:end]))
            position = end
    tokens.append(("end", ""))
    return tokens


def _check_key(key: str) -> None:
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        raise ExpressionError(f"key {key!r} has an invalid prefix (a lowercase DNS subdomain is required)")
    if len(name) > 63 or not _NAME.fullmatch(name):
        raise ExpressionError(
            f"key {key!r} must be at most 63 letters, digits, '-', '_' or '.' and start and end alphanumeric"
        )


def _check_value(value: str) -> None:
    if value and (len(value) > 63 or not _NAME.fullmatch(value)):
        raise ExpressionError(
            f"value {value!r} must be at most 63 letters, digits, '-', '_' or '.' and start and end alphanumeric"
        )


class _Parser:
    def __init__(self, selector: str) -> None:
        self.tokens = _lex(selector)
        self.pos = 0

    def take(self) -> tuple[str, str]:
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.pos]

    def parse(self) -> tuple[_Requirement, ...]:
        requirements: list[_Requirement] = []
        while self.peek()[0] != "end":
            if self.peek()[0] not in ("id", "!"):
                raise ExpressionError(f"found {self.peek()[1]!r}, expected: !, a key, or the end")
            requirements.append(self.requirement())
            kind, text = self.take()
            if kind == ",":
                if self.peek()[0] not in ("id", "!"):
                    raise ExpressionError(f"found {self.peek()[1]!r}, expected a key after ','")
            elif kind != "end":
                raise ExpressionError(f"found {text!r}, expected ',' or the end")
            else:
                break
        return tuple(requirements)

    def requirement(self) -> _Requirement:
        negated = self.peek()[0] == "!"
        if negated:
            self.take()
        kind, key = self.take()
        if kind != "id":
            raise ExpressionError(f"found {key!r}, expected a key")
        _check_key(key)
        if self.peek()[0] in (",", "end"):
            return _Requirement(key, "!exists" if negated else "exists", frozenset())
        if negated:
            raise ExpressionError(f"'!{key}' takes no operator: it only tests that the path does not exist")
        kind, operator = self.take()
        if operator not in _OPERATORS or (kind == "id" and operator not in ("in", "notin")):
            raise ExpressionError(f"found {operator!r}, expected one of in, notin, =, ==, !=, >, <")
        values = self.value_set() if operator in ("in", "notin") else self.exact_value()
        for value in values:
            _check_value(value)
        if operator in (">", "<") and not all(re.fullmatch(r"[+-]?\d+", v, re.ASCII) for v in values):
            raise ExpressionError(f"the value of '{operator}' must be an integer")
        return _Requirement(key, "==" if operator == "=" else operator, frozenset(values))

    def exact_value(self) -> set[str]:
        if self.peek()[0] in (",", "end"):
            return {""}
        kind, text = self.take()
        if kind != "id":
            raise ExpressionError(f"found {text!r}, expected a value")
        return {text}

    def value_set(self) -> set[str]:
        if self.take()[0] != "(":
            raise ExpressionError("'in' and 'notin' need a parenthesised list of values")
        values: set[str] = set()
        expect_value = True
        while True:
            kind, text = self.take()
            if kind == ")":
                if expect_value and values:
                    values.add("")
                return values or {""}
            if kind == "id" and expect_value:
                values.add(text)
                expect_value = False
            elif kind == ",":
                if expect_value:
                    values.add("")
                expect_value = True
            else:
                raise ExpressionError(f"found {text!r}, expected a value, ',' or ')'")


@lru_cache(maxsize=256)
def _parse(selector: str) -> tuple[_Requirement, ...]:
    return _Parser(selector).parse()


def _lookup(obj: Any, key: str) -> Any:
    """gjson.Get for a plain dotted path: map keys, or array indexes when the part is a number."""
    current = obj
    for part in key.split("."):
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return _MISSING
    return current


def _gjson_string(value: Any) -> str:
    """What gjson's Result.String() gives: strings as they are, numbers in plain notation, null as ""."""
    if value is None:
        return ""
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return format_float_f(value)
    if isinstance(value, str):
        return value
    return go_json(value)


def _matches(requirement: _Requirement, obj: Any) -> bool:
    found = _lookup(obj, requirement.key)
    operator = requirement.operator
    if operator == "exists":
        return found is not _MISSING
    if operator == "!exists":
        return found is _MISSING
    if found is _MISSING:
        return operator in ("!=", "notin")
    try:
        text = _gjson_string(found)
    except ValueError as error:  # a value JSON cannot hold (NaN, an infinity) inside a list or a map
        raise ExpressionError(f"{requirement.key} of the object cannot be read as JSON: {error}") from None
    if operator in ("==", "in"):
        return text in requirement.values
    if operator in ("!=", "notin"):
        return text not in requirement.values
    if not re.fullmatch(r"[+-]?\d+", text, re.ASCII) or not -(2**63) <= int(text) < 2**63:
        return False
    (bound,) = requirement.values
    return int(text) > int(bound) if operator == ">" else int(text) < int(bound)


def evaluate_condition(selector: str, obj: Mapping[str, Any]) -> bool:
    """True when every comma-separated requirement of a resource template condition holds for `obj`.

    Example: `evaluate_condition("status.state.phase in (Failed,Aborted)", job)`.  A malformed condition
    raises ExpressionError; a path that is missing simply does not match.
    """
    try:
        requirements = _parse(selector)
    except ExpressionError as error:
        raise ExpressionError(f"condition {quote_expression(selector)} is malformed: {error}") from None
    return all(_matches(requirement, obj) for requirement in requirements)
