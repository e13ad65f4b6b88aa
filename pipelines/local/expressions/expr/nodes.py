"""The syntax tree of expr-lang expressions, shared by the parser, the type checks and the evaluator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "Array",
    "Binary",
    "Builtin",
    "Call",
    "Chain",
    "Conditional",
    "Ident",
    "Let",
    "Literal",
    "MapLiteral",
    "Member",
    "Node",
    "Pointer",
    "Predicate",
    "Sequence",
    "Slice",
    "Unary",
    "children",
]


class Node:
    """Base of the syntax tree."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Literal(Node):
    """A constant: number, string, bool or nil."""

    value: Any


@dataclass(frozen=True, slots=True)
class Ident(Node):
    """A variable of the environment (or of a `let`)."""

    name: str


@dataclass(frozen=True, slots=True)
class Pointer(Node):
    """`#` (the current element in a predicate), `#index`, `#acc`."""

    name: str


@dataclass(frozen=True, slots=True)
class Member(Node):
    """`a.b`, `a['b']`, `a[0]`, `a?.b`."""

    node: Node
    prop: Node
    optional: bool = False


@dataclass(frozen=True, slots=True)
class Chain(Node):
    """An optional chain: any `?.` meeting nil makes the whole chain nil."""

    node: Node


@dataclass(frozen=True, slots=True)
class Slice(Node):
    """`a[from:to]`."""

    node: Node
    start: Node | None
    end: Node | None


@dataclass(frozen=True, slots=True)
class Unary(Node):
    """`not a`, `!a`, `-a`, `+a`."""

    op: str
    node: Node


@dataclass(frozen=True, slots=True)
class Binary(Node):
    """Any binary operator, `in`, `matches`, `..` and `??` included."""

    op: str
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Conditional(Node):
    """`c ? a : b` and `if c { a } else { b }`."""

    cond: Node
    then: Node
    otherwise: Node


@dataclass(frozen=True, slots=True)
class Call(Node):
    """A call of a function held by the environment: `asInt(x)`, `sprig.upper(x)`."""

    callee: Node
    args: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Builtin(Node):
    """A call of an expr builtin, predicates included: `len(x)`, `filter(xs, # > 1)`."""

    name: str
    args: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Predicate(Node):
    """The closure argument of a predicate builtin."""

    node: Node


@dataclass(frozen=True, slots=True)
class Array(Node):
    """`[a, b]`."""

    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class MapLiteral(Node):
    """`{k: v}`; keys are strings or parenthesised expressions."""

    pairs: tuple[tuple[Node, Node], ...]


@dataclass(frozen=True, slots=True)
class Let(Node):
    """`let name = value; body`."""

    name: str
    value: Node
    body: Node


@dataclass(frozen=True, slots=True)
class Sequence(Node):
    """`a; b` evaluates both and yields the last."""

    nodes: tuple[Node, ...]


def children(node: Node) -> list[Node]:
    """The direct sub-nodes of a node, in source order."""
    found: list[Node] = []
    field: str
    for field in getattr(node, "__slots__", ()):
        value = getattr(node, field)
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, Node):
                found.append(item)
            elif isinstance(item, tuple):  # the (key, value) pairs of a map literal
                found.extend(part for part in item if isinstance(part, Node))
    return found
