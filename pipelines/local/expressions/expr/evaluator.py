"""Evaluates expr-lang syntax trees (from `parser.parse`) against an environment of nested maps and functions.

Like expr compiling with `expr.Env(env)`, an unknown top-level name is an error even in a branch that is never
taken, while a missing key deeper down is nil (`inputs.parameters.nope` is nil; `nope` is an error).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from pipelines.local.expressions.errors import ExpressionError, Unsupported
from pipelines.local.expressions.expr.checker import check_types
from pipelines.local.expressions.expr.functions import BUILTINS, MEMORY_BUDGET, sort_values
from pipelines.local.expressions.expr.nodes import (
    Array,
    Binary,
    Builtin,
    Call,
    Chain,
    Conditional,
    Ident,
    Let,
    Literal,
    MapLiteral,
    Member,
    Node,
    Pointer,
    Predicate,
    Sequence,
    Slice,
    Unary,
    children,
)
from pipelines.local.expressions.expr.runtime import (
    add,
    arithmetic,
    compare,
    equal,
    fetch,
    member_in,
    regex,
    slice_of,
)
from pipelines.local.govalues import go_type, is_number

__all__ = ["evaluate", "free_names"]


class _NilChain(Exception):
    """Raised by `a?.b` when `a` is nil; the enclosing Chain turns it into nil."""


def free_names(node: Node, bound: frozenset[str] = frozenset()) -> Iterator[Ident]:
    """Every identifier the environment must provide (those not bound by a `let`), in source order."""
    if isinstance(node, Ident):
        if node.name not in bound:
            yield node
        return
    if isinstance(node, Let):
        yield from free_names(node.value, bound)
        yield from free_names(node.body, bound | {node.name})
        return
    for child in children(node):
        yield from free_names(child, bound)


def _bool(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise ExpressionError(f"{what} must be a bool, not {go_type(value)}")
    return value


def _string(value: Any, operator: str) -> str:
    if not isinstance(value, str):
        raise ExpressionError(f"invalid operation: {operator} on {go_type(value)}")
    return value


class _Evaluator:
    def __init__(self, env: Mapping[str, Any]) -> None:
        self.env = env
        self.scopes: list[dict[str, Any]] = []
        self.frames: list[dict[str, Any]] = []  # the `#`, `#index`, `#acc` of the predicates being run
        self.dispatch: dict[type, Callable[[Any], Any]] = {
            Literal: lambda node: node.value,
            Ident: self.ident,
            Pointer: self.pointer,
            Member: self.member,
            Chain: self.chain,
            Slice: self.slice,
            Unary: self.unary,
            Binary: self.binary,
            Conditional: self.conditional,
            Call: self.call,
            Builtin: self.builtin,
            Array: lambda node: [self.run(item) for item in node.items],
            MapLiteral: self.map_literal,
            Let: self.let,
            Sequence: self.sequence,
        }

    def run(self, node: Node) -> Any:
        return self.dispatch[type(node)](node)

    def ident(self, node: Ident) -> Any:
        for scope in reversed(self.scopes):
            if node.name in scope:
                return scope[node.name]
        if node.name == "$env":
            return self.env
        return self.env.get(node.name)

    def pointer(self, node: Pointer) -> Any:
        frame = self.frames[-1]
        key = node.name or "#"
        if key not in frame:
            raise ExpressionError(f"unknown pointer #{node.name}")
        return frame[key]

    def member(self, node: Member) -> Any:
        container = self.run(node.node)
        key = self.run(node.prop)
        if container is None:
            if node.optional:
                raise _NilChain
            raise ExpressionError(f"cannot fetch {key} from nil")
        return fetch(container, key)

    def chain(self, node: Chain) -> Any:
        try:
            return self.run(node.node)
        except _NilChain:
            return None

    def slice(self, node: Slice) -> Any:
        container = self.run(node.node)
        start = None if node.start is None else self.run(node.start)
        end = None if node.end is None else self.run(node.end)
        return slice_of(container, start, end)

    def unary(self, node: Unary) -> Any:
        value = self.run(node.node)
        if node.op in ("not", "!"):
            return not _bool(value, f"the operand of {node.op}")
        if not is_number(value):
            raise ExpressionError(f"invalid operation: {node.op}{go_type(value)}")
        if node.op == "+":
            return value
        return -value if isinstance(value, float) else arithmetic("-", 0, value)

    def binary(self, node: Binary) -> Any:  # noqa: C901 - one branch per operator family
        op = node.op
        left = self.run(node.left)
        # Like expr's VM, only the left operand must be a bool; the right one is the result as it is.
        if op in ("and", "&&"):
            return self.run(node.right) if _bool(left, f"the left operand of {op}") else False
        if op in ("or", "||"):
            return True if _bool(left, f"the left operand of {op}") else self.run(node.right)
        if op == "??":
            return left if left is not None else self.run(node.right)
        right = self.run(node.right)
        if op in ("==", "!="):
            return equal(left, right) == (op == "==")
        if op in ("<", ">", "<=", ">="):
            return compare(op, left, right)
        if op == "+":
            return add(left, right)
        if op in ("-", "*", "/", "%", "**", "^"):
            return arithmetic("**" if op == "^" else op, left, right)
        if op == "in":
            return member_in(left, right)
        if op in ("matches", "contains", "startsWith", "endsWith"):
            if left is None or right is None:
                return False
            text, other = _string(left, op), _string(right, op)
            if op == "matches":
                return regex(other).search(text) is not None
            if op == "contains":
                return other in text
            return text.startswith(other) if op == "startsWith" else text.endswith(other)
        if op == "..":
            if not (type(left) is int and type(right) is int):
                raise ExpressionError(f"invalid operation: {go_type(left)} .. {go_type(right)}")
            if right - left + 1 >= MEMORY_BUDGET:  # expr-lang's vm grows its memory by the range's size first
                raise ExpressionError("memory budget exceeded")
            return list(range(left, right + 1))
        raise ExpressionError(f"unknown operator {op}")

    def conditional(self, node: Conditional) -> Any:
        cond = self.run(node.cond)
        return self.run(node.then) if _bool(cond, "a condition") else self.run(node.otherwise)

    def call(self, node: Call) -> Any:
        function = self.run(node.callee)
        name = node.callee.name if isinstance(node.callee, Ident) else _describe(node.callee)
        if not callable(function):
            raise ExpressionError(f"{name} is not a function (it is {go_type(function)})")
        args = [self.run(arg) for arg in node.args]
        try:
            return function(*args)
        except ExpressionError as error:
            message = str(error)
            kind = Unsupported if isinstance(error, Unsupported) else ExpressionError
            raise kind(message if message.startswith(name) else f"{name}: {message}") from None
        except (TypeError, ValueError, ArithmeticError, LookupError) as error:
            raise ExpressionError(f"{name}: {error}") from None
        except MemoryError:  # e.g. a string of a terabyte asked for at once: refused before any of it is used
            raise ExpressionError(f"{name}: its result does not fit in memory") from None

    def map_literal(self, node: MapLiteral) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key_node, value_node in node.pairs:
            key = self.run(key_node)
            if not isinstance(key, str):
                raise ExpressionError(f"a map key must be a string, not {go_type(key)}")
            result[key] = self.run(value_node)
        return result

    def let(self, node: Let) -> Any:
        self.scopes.append({node.name: self.run(node.value)})
        try:
            return self.run(node.body)
        finally:
            self.scopes.pop()

    def sequence(self, node: Sequence) -> Any:
        result = None
        for item in node.nodes:
            result = self.run(item)
        return result

    def predicate(self, node: Node, element: Any, index: int, acc: Any = None) -> Any:
        assert isinstance(node, Predicate)
        self.frames.append({"#": element, "index": index, "acc": acc})
        try:
            return self.run(node.node)
        finally:
            self.frames.pop()

    def builtin(self, node: Builtin) -> Any:
        if node.name not in _PREDICATE_BUILTINS:
            return BUILTINS[node.name]([self.run(arg) for arg in node.args])
        items = self.run(node.args[0])
        if not isinstance(items, list | tuple):
            raise ExpressionError(f"cannot iterate over {go_type(items)} in {node.name}")
        return _PREDICATE_BUILTINS[node.name](self, list(items), node.args[1:])


def _describe(node: Node) -> str:
    if isinstance(node, Ident):
        return node.name
    if isinstance(node, Member) and isinstance(node.prop, Literal):
        return f"{_describe(node.node)}.{node.prop.value}"
    return "expression"


def _tests(ev: _Evaluator, items: list[Any], args: tuple[Node, ...], name: str) -> Iterator[bool]:
    for index, item in enumerate(items):
        yield _bool(ev.predicate(args[0], item, index), f"the predicate of {name}")


def _sum(ev: _Evaluator, items: list[Any], args: tuple[Node, ...]) -> Any:
    values = [ev.predicate(args[0], item, i) for i, item in enumerate(items)] if args else items
    total: Any = 0
    for value in values:
        total = add(total, value)
    return total


def _find(ev: _Evaluator, items: list[Any], args: tuple[Node, ...], last: bool, want_index: bool) -> Any:
    order = range(len(items) - 1, -1, -1) if last else range(len(items))
    for index in order:
        if _bool(ev.predicate(args[0], items[index], index), "the predicate of find"):
            return index if want_index else items[index]
    return None  # expr gives nil, not -1, when nothing matches


def _group_by(ev: _Evaluator, items: list[Any], args: tuple[Node, ...]) -> dict[Any, list[Any]]:
    groups: dict[Any, list[Any]] = {}
    for index, item in enumerate(items):
        key = ev.predicate(args[0], item, index)
        if isinstance(key, list | dict):
            raise ExpressionError(f"cannot group by {go_type(key)}")
        groups.setdefault(key, []).append(item)
    return groups


def _sort_by(ev: _Evaluator, items: list[Any], args: tuple[Node, ...]) -> list[Any]:
    order = ev.run(args[1]) if len(args) > 1 else "asc"
    keys = {id(item): ev.predicate(args[0], item, i) for i, item in enumerate(items)}
    return sort_values(items, order, key=lambda item: keys[id(item)])


def _reduce(ev: _Evaluator, items: list[Any], args: tuple[Node, ...]) -> Any:
    if len(args) > 1:
        acc, start = ev.run(args[1]), 0
    elif items:
        acc, start = items[0], 1
    else:
        raise ExpressionError("reduce of empty array with no initial value")
    for index in range(start, len(items)):
        acc = ev.predicate(args[0], items[index], index, acc)
    return acc


_PREDICATE_BUILTINS: dict[str, Callable[[_Evaluator, list[Any], tuple[Node, ...]], Any]] = {
    "all": lambda ev, items, args: all(_tests(ev, items, args, "all")),
    "none": lambda ev, items, args: not any(_tests(ev, items, args, "none")),
    "any": lambda ev, items, args: any(_tests(ev, items, args, "any")),
    "one": lambda ev, items, args: sum(_tests(ev, items, args, "one")) == 1,
    "filter": lambda ev, items, args: [
        item for item, keep in zip(items, _tests(ev, items, args, "filter"), strict=True) if keep
    ],
    "map": lambda ev, items, args: [ev.predicate(args[0], item, i) for i, item in enumerate(items)],
    "count": lambda ev, items, args: (
        sum(_tests(ev, items, args, "count")) if args else sum(_bool(item, "an element of count") for item in items)
    ),
    "sum": _sum,
    "find": lambda ev, items, args: _find(ev, items, args, last=False, want_index=False),
    "findIndex": lambda ev, items, args: _find(ev, items, args, last=False, want_index=True),
    "findLast": lambda ev, items, args: _find(ev, items, args, last=True, want_index=False),
    "findLastIndex": lambda ev, items, args: _find(ev, items, args, last=True, want_index=True),
    "groupBy": _group_by,
    "sortBy": _sort_by,
    "reduce": _reduce,
}


def evaluate(node: Node, env: Mapping[str, Any]) -> Any:
    """Evaluate a parsed expression; unknown top-level names fail first, as expr's type checker makes them."""
    for ident in free_names(node):
        if ident.name != "$env" and ident.name not in env:
            raise ExpressionError(f"unknown name {ident.name}")
    check_types(node, env)
    return _Evaluator(env).run(node)
