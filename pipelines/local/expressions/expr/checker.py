"""The part of expr-lang's type checker that rejects expressions before they run (checker/checker.go).

expr compiles against the environment, so an operand whose type is known statically -- a literal, a top-level
variable such as `retries`, or the result of `len()` or a comparison -- must suit its operator even in a branch
that never runs: `retries == 1` (a string against an int) fails in Argo instead of being false.  Values read
from maps (`inputs.parameters.n`) have no static type and are only checked when the expression runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipelines.local.expressions.errors import ExpressionError
from pipelines.local.expressions.expr.nodes import (
    Array,
    Binary,
    Builtin,
    Conditional,
    Ident,
    Let,
    Literal,
    MapLiteral,
    Node,
    Sequence,
    Unary,
    children,
)

__all__ = ["check_types"]

_NUMBERS = {"int", "float64"}
_BUILTIN_TYPES = {
    **dict.fromkeys(["len", "int", "count", "indexOf", "lastIndexOf", "bitand", "bitor", "bitxor", "bitnot"], "int"),
    **dict.fromkeys(["float", "mean", "median", "ceil", "floor", "round"], "float64"),
    **dict.fromkeys(
        "string upper lower trim trimPrefix trimSuffix toJSON join repeat replace type toBase64 fromBase64".split(),
        "string",
    ),
    **dict.fromkeys(["hasPrefix", "hasSuffix", "all", "any", "none", "one"], "bool"),
    **dict.fromkeys("split splitAfter filter map keys values sort sortBy reverse uniq concat flatten".split(), "array"),
}
_GO_NAMES = {"array": "[]interface {}", "map": "map[string]interface {}", "nil": "unknown"}


def _kind_of_value(value: Any) -> str | None:
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "map"
    return None


def _name(kind: str | None) -> str:
    return _GO_NAMES.get(kind or "", kind or "interface {}")


def _mismatch(op: str, left: str | None, right: str | None) -> ExpressionError:
    return ExpressionError(f"invalid operation: {op} (mismatched types {_name(left)} and {_name(right)})")


def _binary(node: Binary, left: str | None, right: str | None) -> str | None:  # noqa: C901 - checker.go's table
    op = node.op
    known = left is not None and right is not None and "nil" not in (left, right)
    if op in ("==", "!="):
        if known and left != right and not (left in _NUMBERS and right in _NUMBERS):
            raise _mismatch(op, left, right)
        return "bool"
    if op in ("<", ">", "<=", ">="):
        if known and not ((left in _NUMBERS and right in _NUMBERS) or left == right == "string"):
            raise _mismatch(op, left, right)
        return "bool"
    if op in ("and", "or", "&&", "||"):
        if any(kind not in (None, "bool") for kind in (left, right)):
            raise _mismatch(op, left, right)
        return "bool"
    if op in ("contains", "startsWith", "endsWith", "matches"):
        if any(kind not in (None, "string") for kind in (left, right)):
            raise _mismatch(op, left, right)
        return "bool"
    if op == "in":
        if right not in (None, "array", "map"):
            raise _mismatch(op, left, right)
        return "bool"
    if op == "+":
        if known and not ((left in _NUMBERS and right in _NUMBERS) or left == right == "string"):
            raise _mismatch(op, left, right)
        if left == right and left in ("string", "int"):
            return left
        return "float64" if known else None
    if op in ("-", "*", "/", "%", "**", "^"):
        wanted = {"int"} if op == "%" else _NUMBERS
        if any(kind not in (None, *wanted) for kind in (left, right)):
            raise _mismatch(op, left, right)
        if op in ("/", "**", "^"):
            return "float64"
        return "int" if left == right == "int" else ("float64" if known else None)
    if op == "..":
        if any(kind not in (None, "int") for kind in (left, right)):
            raise _mismatch(op, left, right)
        return "array"
    return None


def _check(node: Node, env: Mapping[str, Any], bound: frozenset[str]) -> str | None:  # noqa: C901 - one per node
    if isinstance(node, Literal):
        return _kind_of_value(node.value)
    if isinstance(node, Ident):
        return None if node.name in bound else _kind_of_value(env.get(node.name, ...))
    if isinstance(node, Let):
        _check(node.value, env, bound)
        return _check(node.body, env, bound | {node.name})
    if isinstance(node, Binary):
        left, right = _check(node.left, env, bound), _check(node.right, env, bound)
        return _binary(node, left, right)
    if isinstance(node, Unary):
        kind = _check(node.node, env, bound)
        wanted = {"bool"} if node.op in ("not", "!") else _NUMBERS
        if kind is not None and kind not in wanted:
            raise ExpressionError(f"invalid operation: {node.op} (mismatched type {_name(kind)})")
        return kind
    if isinstance(node, Conditional):
        cond = _check(node.cond, env, bound)
        if cond not in (None, "bool"):
            raise ExpressionError(f"non-bool expression (type {_name(cond)}) used as condition")
        then, otherwise = _check(node.then, env, bound), _check(node.otherwise, env, bound)
        return then if then == otherwise else None
    if isinstance(node, Sequence):
        kinds = [_check(item, env, bound) for item in node.nodes]
        return kinds[-1]
    if isinstance(node, Array | MapLiteral):
        for child in children(node):
            _check(child, env, bound)
        return "array" if isinstance(node, Array) else "map"
    kinds = [_check(child, env, bound) for child in children(node)]
    if isinstance(node, Builtin):
        return kinds[0] if node.name == "abs" and kinds else _BUILTIN_TYPES.get(node.name)
    return None


def check_types(node: Node, env: Mapping[str, Any]) -> None:
    """Raise ExpressionError where expr's checker would refuse to compile `node` against `env`."""
    _check(node, env, frozenset())
