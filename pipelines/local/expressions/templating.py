"""Argo's `{{...}}` substitution and `{{=...}}` expressions over a flat scope (util/template in Argo).

The scope is flat (`"inputs.parameters.x"`, `"tasks.A.outputs.result"`).  A simple tag is looked up with its
whitespace trimmed; an expression tag is evaluated with expr-lang against the scope expanded into nested maps
(util/expand), plus Argo's functions `asInt`, `asFloat`, `jsonpath`, `toJson` and `sprig.*` (util/expr/env).
Strings are inserted as they are; other values as Go's JSON (`[1,2]`, `{"a":1}`, `2.5`, `true`).

Unlike Argo, which ends an expression tag at the first `}}`, the end of `{{=...}}` skips quoted strings and
balanced brackets, so `{{=toJSON({'a': {'b': 1}})}}` works.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from pipelines.local.expressions.errors import ExpressionError, UnresolvedVariable, Unsupported, quote_expression
from pipelines.local.expressions.expr.evaluator import evaluate, free_names
from pipelines.local.expressions.expr.functions import from_json
from pipelines.local.expressions.expr.nodes import Binary, Ident, Let, Literal, Member, Node, children
from pipelines.local.expressions.expr.parser import parse
from pipelines.local.expressions.expr.runtime import to_float, to_int
from pipelines.local.expressions.jsonpath import jsonpath
from pipelines.local.expressions.sprig import SPRIG
from pipelines.local.govalues import go_json

__all__ = ["argo_env", "evaluate_expr", "expand_scope", "render_value", "substitute"]

_ABSENT = object()


def render_value(value: Any) -> str:
    """A value as Argo writes it into a string: strings as they are, everything else as Go's JSON."""
    if isinstance(value, str):
        return value
    try:
        return go_json(value)
    except ValueError as error:
        raise ExpressionError(f"cannot render {value!r}: {error}") from None


def expand_scope(scope: Mapping[str, Any], roots: frozenset[str] | None = None) -> dict[str, Any]:
    """`{"a.b": 1, "a.c": 2}` -> `{"a": {"b": 1, "c": 2}}`; a key that is a prefix of another one is dropped.

    With `roots`, only the keys under those top-level names are expanded (an expression reads a few of them).
    """
    items = [(k, v) for k, v in scope.items() if roots is None or k.partition(".")[0] in roots]
    parents = {key[:i] for key, _ in items for i, char in enumerate(key) if char == "."}
    nested: dict[str, Any] = {}
    for key, value in items:
        if key in parents:
            continue
        *path, last = key.split(".")
        node = nested
        for part in path:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[last] = value
    return nested


def _jsonpath_function(document: Any, path: Any) -> Any:
    if not isinstance(document, str) or not isinstance(path, str):
        raise ExpressionError("jsonpath(json, path) takes two strings")
    return jsonpath(from_json(document), path)


def _to_json(value: Any) -> str:
    try:
        return go_json(value)
    except ValueError as error:
        raise ExpressionError(str(error)) from None


def argo_env(scope: Mapping[str, Any], roots: frozenset[str] | None = None) -> dict[str, Any]:
    """The environment Argo's controller gives expr-lang: the expanded scope (under `roots`) and Argo's functions."""
    env = expand_scope(scope, roots)
    env["asInt"] = lambda value: to_int(value)
    env["asFloat"] = lambda value: to_float(value)
    env["jsonpath"] = _jsonpath_function
    env["toJson"] = _to_json
    env["sprig"] = SPRIG
    return env


@lru_cache(maxsize=2048)
def _parse_expression(expression: str) -> Node:
    try:
        return parse(expression)
    except ExpressionError as error:
        raise ExpressionError(f"expression {quote_expression(expression)} is malformed: {error}") from None


@lru_cache(maxsize=2048)
def _roots(expression: str) -> frozenset[str] | None:
    """The top-level names an expression reads; only they need expanding (`$env` needs them all: None)."""
    names = frozenset(ident.name for ident in free_names(_parse_expression(expression)))
    return None if "$env" in names else names


def evaluate_expr(expression: str, scope: Mapping[str, Any]) -> Any:
    """Evaluate an expr-lang expression (`valueFrom.expression`, `{{=...}}`, hooks) against a flat scope.

    Parameters are strings in Argo, so compare numbers with `asInt(inputs.parameters.n) > 2`; hyphenated names
    need brackets: `tasks['flip-coin'].outputs.result`.  A missing nested key is nil (None); an unknown top-level
    name, a type error or a malformed expression raises ExpressionError.
    """
    tree = _parse_expression(expression)
    roots = _roots(expression)
    try:
        return evaluate(tree, argo_env(scope, roots))
    except ExpressionError as error:
        raise ExpressionError(f"expression {quote_expression(expression)} failed: {error}") from None


def _member_path(node: Member) -> str | None:
    """`a.b['c']` as "a.b.c", or None when any part is computed, an index or optional."""
    parts: list[str] = []
    current: Node = node
    while isinstance(current, Member):
        if current.optional or not isinstance(current.prop, Literal) or not isinstance(current.prop.value, str):
            return None
        parts.append(current.prop.value)
        current = current.node
    if not isinstance(current, Ident):
        return None
    parts.append(current.name)
    return ".".join(reversed(parts))


def _guarded(node: Node, guarded: set[int]) -> None:
    """Mark the members that `??` or `?.` protect, which may therefore be missing (Argo's guardVisitor)."""
    if isinstance(node, Binary) and node.op == "??":
        stack: list[Any] = [node.left]
        while stack:
            item = stack.pop()
            if isinstance(item, Member):
                guarded.add(id(item))
            stack.extend(children(item))
    if isinstance(node, Member) and node.optional and isinstance(node.node, Member):
        guarded.add(id(node.node))
    for child in children(node):
        _guarded(child, guarded)


@lru_cache(maxsize=2048)
def _required_paths(expression: str) -> tuple[str, ...]:
    """Every variable and member path the expression reads unguarded, like Argo's getIdentifiers."""
    tree = _parse_expression(expression)
    guarded: set[int] = set()
    _guarded(tree, guarded)
    paths: list[str] = []

    def visit(node: Node, bound: frozenset[str]) -> None:
        path = None
        if isinstance(node, Ident) and node.name not in bound:
            path = node.name
        elif isinstance(node, Member) and id(node) not in guarded:
            path = _member_path(node)
            if path is not None and path.split(".", 1)[0] in bound:
                path = None
        if path is not None and path not in paths:
            paths.append(path)
        if isinstance(node, Let):
            visit(node.value, bound)
            visit(node.body, bound | {node.name})
            return
        for child in children(node):
            visit(child, bound)

    visit(tree, frozenset())
    return tuple(paths)


def _has_path(env: Mapping[str, Any], path: str) -> bool:
    current: Any = env
    for part in path.split("."):
        if not isinstance(current, Mapping) or part not in current:
            return False
        current = current[part]
    return True


def _expression_end(text: str, start: int) -> int:
    """Index of the `}}` closing an expression tag, skipping quoted strings and balanced brackets."""
    depth, quote, i = 0, "", start
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\" and quote != "`":
                i += 1
            elif char == quote:
                quote = ""
        elif char in "'\"`":
            quote = char
        elif depth == 0 and text.startswith("}}", i):
            return i
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(depth - 1, 0)
        i += 1
    return text.find("}}", start)


def _replace_expression(expression: str, scope: Mapping[str, Any], strict: bool) -> str | None:
    """The rendered value of `{{=expression}}`, or None to leave the tag as it is (non-strict only)."""
    paths = _required_paths(expression)  # raises on a malformed expression, strict or not, as Argo does
    env = argo_env(scope, _roots(expression))
    missing = [path for path in paths if not _has_path(env, path)]
    if missing:
        if strict:
            raise UnresolvedVariable(
                missing[0], f"unable to resolve {missing[0]} in {{{{={' '.join(expression.split())}}}}}"
            )
        return None
    try:
        value = evaluate(_parse_expression(expression), env)
    except ExpressionError as error:
        if not strict and not isinstance(error, Unsupported):  # left as written, Argo would have had a value
            return None
        kind = Unsupported if isinstance(error, Unsupported) else ExpressionError
        raise kind(f"expression {quote_expression(expression)} failed: {error}") from None
    if value is None:
        if not strict:
            return None
        raise ExpressionError(f"expression {quote_expression(expression)} evaluated to nil")
    return render_value(value)


def _replace_simple(tag: str, scope: Mapping[str, Any], strict: bool) -> str:
    key = tag.strip()
    if key in scope:
        value = scope[key]
        if value is None:
            raise ExpressionError(
                f"unable to substitute {{{{{key}}}}}: the task that produces it was skipped or omitted"
                " and it declares no default"
            )
        return render_value(value)
    nested_at = tag.rfind("{{")
    if nested_at > 0:
        # `{{tasks.{{item}}.x}}`: Argo resolves the inner tag and leaves `{{tasks.<value>` for a later pass.
        inner = scope.get(tag[nested_at + 2 :], _ABSENT)
        if inner is None:
            raise ExpressionError(f"unable to substitute {{{{{key}}}}}: {tag[nested_at + 2 :]} is absent")
        if isinstance(inner, str):
            return "{{" + tag[:nested_at] + inner
    if strict:
        raise UnresolvedVariable(key)
    return "{{" + tag + "}}"


def substitute(text: str, scope: Mapping[str, Any], *, strict: bool = True) -> str:
    """Replace every `{{name}}` and `{{=expression}}` in `text` from the flat `scope`.

    Unknown names raise UnresolvedVariable when `strict`, and are left as they are otherwise (Argo does that
    while it resolves a template in several passes).  A value that is None (an absent optional output) raises
    ExpressionError in both modes, as Argo does.
    """
    start = text.find("{{")
    if start < 0:
        return text
    out: list[str] = []
    position = 0
    while start >= 0:
        out.append(text[position:start])
        is_expression = text.startswith("{{=", start)
        end = _expression_end(text, start + 3) if is_expression else text.find("}}", start + 2)
        if end < 0:
            raise ExpressionError(f"{quote_expression(text[start:])} opens '{{{{' without a closing '}}}}'")
        if is_expression:
            expression = text[start + 3 : end]
            value = _replace_expression(expression, scope, strict)
            out.append(text[start : end + 2] if value is None else value)
        else:
            out.append(_replace_simple(text[start + 2 : end], scope, strict))
        position = end + 2
        start = text.find("{{", position)
    out.append(text[position:])
    return "".join(out)
