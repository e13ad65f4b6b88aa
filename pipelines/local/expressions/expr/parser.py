"""Parser for the expr-lang dialect (github.com/expr-lang/expr v1.17) behind Argo's `{{=...}}` and `expression:`.

It follows expr's lexer and Pratt parser (parser/parser.go, parser/operator): the same precedence table, `not in`,
chained comparisons (`a < b < c`), the `??`-mixing rule, predicates with `#`, `let`, `if {} else {}`, pipes.
The tree it returns is evaluated by `evaluator`.
"""

from __future__ import annotations

from functools import lru_cache

from pipelines.local.expressions.errors import ExpressionError
from pipelines.local.expressions.expr.lexer import KEYWORDS, Token, tokenize
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
)

__all__ = ["BINARY", "BUILTIN_NAMES", "PREDICATES", "UNARY", "parse"]

# expr's operator table: precedence, and whether the operator is right-associative.
BINARY: dict[str, tuple[int, bool]] = {
    "|": (0, False), "or": (10, False), "||": (10, False), "and": (15, False), "&&": (15, False),
    "==": (20, False), "!=": (20, False), "<": (20, False), ">": (20, False), ">=": (20, False), "<=": (20, False),
    "in": (20, False), "matches": (20, False), "contains": (20, False), "startsWith": (20, False),
    "endsWith": (20, False), "..": (25, False), "+": (30, False), "-": (30, False), "*": (60, False),
    "/": (60, False), "%": (60, False), "**": (100, True), "^": (100, True), "??": (500, False),
}  # fmt: skip
UNARY = {"not": 50, "!": 50, "-": 90, "+": 90}
_COMPARISONS = {"<", ">", ">=", "<="}
_NEGATABLE = {"contains", "matches", "startsWith", "endsWith", "in"}
# Builtins that take a predicate (a closure over `#`): argument kinds, "p" for the predicate, "?" optional.
PREDICATES: dict[str, tuple[str, ...]] = {
    "all": ("e", "p"), "none": ("e", "p"), "any": ("e", "p"), "one": ("e", "p"), "filter": ("e", "p"),
    "map": ("e", "p"), "count": ("e", "p?"), "sum": ("e", "p?"), "find": ("e", "p"), "findIndex": ("e", "p"),
    "findLast": ("e", "p"), "findLastIndex": ("e", "p"), "groupBy": ("e", "p"), "sortBy": ("e", "p", "e?"),
    "reduce": ("e", "p", "e?"),
}  # fmt: skip
# Names the parser turns into builtin calls; the evaluator implements them (functions.py).
BUILTIN_NAMES = frozenset(
    "len type abs ceil floor round int float string trim trimPrefix trimSuffix upper lower split splitAfter "
    "replace repeat join indexOf lastIndexOf hasPrefix hasSuffix max min mean median toJSON fromJSON toBase64 "
    "fromBase64 now duration date timezone first last get take keys values toPairs fromPairs reverse uniq concat "
    "flatten sort bitand bitor bitxor bitnand bitnot bitshl bitshr bitushr".split()
)


def _number(text: str, column: int) -> Literal:
    value = text.replace("_", "")
    lower = value.lower()
    try:
        if lower.startswith(("0x", "0o", "0b")):
            number: int | float = int(value, 0)
        elif "." in lower or "e" in lower:
            number = float(value)
        else:
            number = int(value, 10)
    except ValueError:
        raise ExpressionError(f"invalid number literal {text!r} at column {column}") from None
    if isinstance(number, int) and not -(2**63) <= number < 2**63:
        raise ExpressionError(f"integer literal {text!r} is too large")
    return Literal(number)


class _Parser:
    def __init__(self, source: str) -> None:
        self.tokens = tokenize(source)
        self.pos = 0
        self.depth = 0  # predicate nesting: `#` and `.name` mean the current element only inside one

    @property
    def current(self) -> Token:
        return self.tokens[self.pos]

    def advance(self) -> Token:
        token = self.tokens[self.pos]
        if token.kind != "eof":
            self.pos += 1
        return token

    def fail(self, message: str | None = None, token: Token | None = None) -> ExpressionError:
        token = token or self.current
        return ExpressionError(f"{message or f'unexpected token {token}'} at column {token.column}")

    def expect(self, kind: str, value: str | None = None) -> Token:
        if self.current.is_(kind, *(() if value is None else (value,))):
            return self.advance()
        raise self.fail()

    def parse(self) -> Node:
        node = self.sequence()
        if self.current.kind != "eof":
            raise self.fail()
        return node

    def sequence(self) -> Node:
        nodes = [self.expression(0)]
        while self.current.is_("op", ";"):
            self.advance()
            if self.current.kind == "eof":
                break
            nodes.append(self.expression(0))
        return nodes[0] if len(nodes) == 1 else Sequence(tuple(nodes))

    def expression(self, precedence: int) -> Node:  # noqa: C901 - mirrors parser.go's parseExpression
        if precedence == 0 and self.current.is_("op", "let"):
            return self.let()
        if precedence == 0 and self.current.is_("op", "if"):
            return self.if_else()
        left = self.primary()
        previous = ""
        while (token := self.current).kind == "op":
            negate = token.value == "not"
            if negate:
                following = self.tokens[self.pos + 1]
                if following.value not in _NEGATABLE or following.kind != "op":
                    raise self.fail(token=following)
                if BINARY[following.value][0] < precedence:
                    break
                self.advance()
                token = following
            operator = BINARY.get(token.value)
            if operator is None or operator[0] < precedence:
                break
            self.advance()
            if token.value == "|":
                name = self.expect("ident")
                left = self.call(name, [left])
            elif previous == "??" and token.value != "??":
                raise self.fail(
                    f"operator {token.value} and coalesce expressions (??) cannot be mixed, wrap either in parentheses",
                    token,
                )
            elif token.value in _COMPARISONS:
                left = self.comparison(left, token, operator[0])
            else:
                right = self.expression(operator[0] if operator[1] else operator[0] + 1)
                left = Binary(token.value, left, right)
                if negate:
                    left = Unary("not", left)
            previous = token.value
        if precedence == 0:
            left = self.conditional(left)
        return left

    def comparison(self, left: Node, token: Token, precedence: int) -> Node:
        root: Node | None = None
        while True:
            right = self.expression(precedence + 1)
            node = Binary(token.value, left, right)
            root = node if root is None else Binary("&&", root, node)
            left, token = right, self.current
            if not (token.kind == "op" and token.value in _COMPARISONS):
                return root
            self.advance()

    def conditional(self, node: Node) -> Node:
        while self.current.is_("op", "?"):
            self.advance()
            if not self.current.is_("op", ":"):
                then = self.expression(0)
                self.expect("op", ":")
                node = Conditional(node, then, self.expression(0))
            else:
                self.advance()
                node = Conditional(node, node, self.expression(0))
        return node

    def let(self) -> Node:
        self.expect("op", "let")
        name = self.expect("ident").value
        self.expect("op", "=")
        value = self.expression(0)
        self.expect("op", ";")
        return Let(name, value, self.sequence())

    def if_else(self) -> Node:
        self.advance()
        cond = self.expression(0)
        self.expect("bracket", "{")
        then = self.sequence()
        self.expect("bracket", "}")
        self.expect("op", "else")
        if self.current.is_("op", "if"):
            return Conditional(cond, then, self.if_else())
        self.expect("bracket", "{")
        otherwise = self.sequence()
        self.expect("bracket", "}")
        return Conditional(cond, then, otherwise)

    def primary(self) -> Node:
        token = self.current
        if token.kind == "op" and token.value in UNARY:
            self.advance()
            return self.postfix(Unary(token.value, self.expression(UNARY[token.value])))
        if token.is_("bracket", "("):
            self.advance()
            node = self.sequence()
            self.expect("bracket", ")")
            return self.postfix(node)
        if self.depth > 0 and token.is_("op", "#", "."):
            name = ""
            if token.value == "#":
                self.advance()
                if self.current.kind == "ident":
                    name = self.advance().value
            return self.postfix(Pointer(name))
        if token.is_("op", "::"):
            self.advance()
            return self.postfix(self.call(self.expect("ident"), []))
        return self.secondary()

    def secondary(self) -> Node:
        token = self.advance()
        if token.kind == "ident":
            if token.value in ("true", "false"):
                return Literal(token.value == "true")
            if token.value == "nil":
                return Literal(None)
            node: Node = self.call(token, []) if self.current.is_("bracket", "(") else Ident(token.value)
        elif token.kind == "number":
            return _number(token.value, token.column)
        elif token.kind == "string":
            node = Literal(token.value)
        elif token.is_("bracket", "["):
            items: list[Node] = []
            while not self.current.is_("bracket", "]"):
                if items:
                    self.expect("op", ",")
                    if self.current.is_("bracket", "]"):
                        break
                items.append(self.expression(0))
            self.expect("bracket", "]")
            node = Array(tuple(items))
        elif token.is_("bracket", "{"):
            node = self.map_literal()
        else:
            raise self.fail(token=token)
        return self.postfix(node)

    def map_literal(self) -> Node:
        pairs: list[tuple[Node, Node]] = []
        while not self.current.is_("bracket", "}"):
            if pairs:
                self.expect("op", ",")
                if self.current.is_("bracket", "}"):
                    break
            key: Node
            if self.current.kind in ("number", "string", "ident"):
                key = Literal(self.advance().value)
            elif self.current.is_("bracket", "("):
                key = self.expression(0)
            else:
                raise self.fail("a map key must be a string, a number, an identifier or an expression in parentheses")
            self.expect("op", ":")
            pairs.append((key, self.expression(0)))
        self.expect("bracket", "}")
        return MapLiteral(tuple(pairs))

    def call(self, token: Token, arguments: list[Node]) -> Node:
        name = token.value
        if name in PREDICATES:
            self.expect("bracket", "(")
            for index, kind in enumerate(PREDICATES[name][len(arguments) :]):
                if self.current.is_("bracket", ")"):
                    if kind.endswith("?"):
                        break
                    raise self.fail(f"{name} expects at least {len(PREDICATES[name])} arguments")
                if index > 0:
                    self.expect("op", ",")
                arguments.append(self.predicate() if kind.startswith("p") else self.expression(0))
            if self.current.is_("op", ","):
                self.advance()
            self.expect("bracket", ")")
            return Builtin(name, tuple(arguments))
        arguments = self.arguments(arguments)
        if name in BUILTIN_NAMES:
            return Builtin(name, tuple(arguments))
        return Call(Ident(name), tuple(arguments))

    def arguments(self, arguments: list[Node]) -> list[Node]:
        offset = len(arguments)
        self.expect("bracket", "(")
        while not self.current.is_("bracket", ")"):
            if len(arguments) > offset:
                self.expect("op", ",")
            if self.current.is_("bracket", ")"):
                break
            arguments.append(self.expression(0))
        self.expect("bracket", ")")
        return arguments

    def predicate(self) -> Node:
        braces = self.current.is_("bracket", "{")
        if braces:
            self.advance()
        self.depth += 1
        if braces:
            node = self.sequence()
        else:
            node = self.expression(0)
            if self.current.is_("op", ";"):
                raise self.fail("wrap a predicate with several statements in { and }")
        self.depth -= 1
        if braces:
            self.expect("bracket", "}")
        return Predicate(node)

    def postfix(self, node: Node) -> Node:
        while True:
            token = self.current
            optional = token.is_("op", "?.")
            if optional and self.tokens[self.pos + 1].is_("bracket", "["):
                self.advance()
                token = self.current
            if token.is_("op", ".", "?."):
                self.advance()
                name = self.advance()
                if name.kind != "ident" and not (name.kind == "op" and name.value in KEYWORDS):
                    raise self.fail("expected a name after '.'", name)
                inner = node.node if isinstance(node, Chain) else node
                member: Node = Member(inner, Literal(name.value), optional)
                if self.current.is_("bracket", "("):
                    member = Call(member, tuple(self.arguments([])))
                node = Chain(member) if optional or isinstance(node, Chain) else member
            elif token.is_("bracket", "["):
                self.advance()
                if self.current.is_("op", ":"):
                    self.advance()
                    end = None if self.current.is_("bracket", "]") else self.expression(0)
                    node = Slice(node, None, end)
                else:
                    start = self.expression(0)
                    if self.current.is_("op", ":"):
                        self.advance()
                        end = None if self.current.is_("bracket", "]") else self.expression(0)
                        node = Slice(node, start, end)
                    else:
                        # Unlike `.name`, an index does not extend an optional chain (parser.go does the same).
                        node = Chain(Member(node, start, True)) if optional else Member(node, start)
                self.expect("bracket", "]")
            else:
                return node


@lru_cache(maxsize=2048)
def parse(source: str) -> Node:
    """Parse an expr-lang expression into its syntax tree; raises ExpressionError (without the expression)."""
    return _Parser(source).parse()
