"""JSONPath over decoded JSON: kubectl's `{.metadata.name}` (resource outputs) and Argo's `jsonpath(json, '$.a')`.

Supported: `$`/`@` roots, `.key`, `['key']`, `["key"]`, `[0]`, `[-1]`, `*` and `[*]`, `..key`, unions
`[0,2]` and `['a','b']`, slices `[1:3]`, `.length` (unless there is such a key), and filters
`[?(@.type == 'Ready')]` (comparisons or existence tests, joined by `&&` and `||` as Argo's jsonpath joins them).
A path with a wildcard, union, slice, filter or `..` yields a list; a plain path yields the value itself, and
a missing key or index is an ExpressionError.  A kubectl template with text around the braces, or several
`{...}` groups, renders to a string as kubectl prints it (lists joined by spaces, maps and lists as JSON).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pipelines.local.expressions.errors import ExpressionError, quote_expression
from pipelines.local.govalues import go_json, is_number

__all__ = ["jsonpath", "jsonpath_text"]

_STEP = re.compile(
    r"""\s*(?:
      (?P<recursive>\.\.)(?P<rname>[^.\[\]\s]+|\*)?
    | \.(?P<name>[^.\[\]\s]+)
    | \[\s*(?P<bracket>(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|\?\((?:[^()]|\([^()]*\))*\)|[^\]'"])*)\s*\]
    )""",
    re.VERBOSE,
)
_FILTER = re.compile(r"\s*@(?P<path>[.\[][^=!<>~]*?)\s*(?:(?P<op>==|!=|<=|>=|<|>)\s*(?P<value>.+?))?\s*")
_QUOTED = re.compile(r"""'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)\"""")


@dataclass(frozen=True, slots=True)
class _Step:
    kind: str  # key, index, wildcard, recursive, union, slice, filter
    arg: Any = None


def _unquote(text: str) -> str | None:
    match = _QUOTED.fullmatch(text.strip())
    if match is None:
        return None
    body = match.group(1) if match.group(1) is not None else match.group(2)
    return re.sub(r"\\(.)", r"\1", body)


def _literal(text: str) -> Any:
    quoted = _unquote(text)
    if quoted is not None:
        return quoted
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    if text == "null":
        return None
    try:
        return float(text)
    except ValueError:
        raise ExpressionError(f"unsupported filter value {text!r}") from None


def _bracket(body: str) -> _Step:
    body = body.strip()
    if body == "*":
        return _Step("wildcard")
    if body.startswith("?(") and body.endswith(")"):
        # Any clause of `||` holds when each condition of its `&&` holds.
        clauses = [[_condition(c, body) for c in _split(clause, "&&")] for clause in _split(body[2:-1], "||")]
        return _Step("filter", tuple(tuple(clause) for clause in clauses))
    parts = [part.strip() for part in re.split(r",(?=(?:[^'\"]|'[^']*'|\"[^\"]*\")*$)", body)]
    if len(parts) == 1 and ":" in body and _unquote(body) is None:
        bounds = [int(b) if b.strip() else None for b in body.split(":")]
        if len(bounds) > 3:
            raise ExpressionError(f"bad slice [{body}]")
        return _Step("slice", slice(*bounds))
    keys: list[Any] = []
    for part in parts:
        quoted = _unquote(part)
        if quoted is not None:
            keys.append(quoted)
        elif re.fullmatch(r"-?\d+", part, re.ASCII):
            keys.append(int(part))
        else:
            raise ExpressionError(f"bad subscript [{body}]")
    if len(keys) == 1:
        return _Step("key" if isinstance(keys[0], str) else "index", keys[0])
    return _Step("union", tuple(keys))


def _split(text: str, operator: str) -> list[str]:
    """`text` cut at each `operator` outside quotes (a filter's `||`, then `&&`: `&&` binds tighter)."""
    parts: list[str] = []
    start, quote, i = 0, "", 0
    while i < len(text):
        char = text[i]
        if quote:
            quote = "" if char == quote else quote
            i += 2 if char == "\\" else 1
            continue
        if char in "'\"":
            quote = char
        elif text.startswith(operator, i):
            parts.append(text[start:i])
            start = i + len(operator)
            i = start
            continue
        i += 1
    return [*parts, text[start:]]


def _condition(text: str, body: str) -> tuple[tuple[_Step, ...], str | None, Any]:
    match = _FILTER.fullmatch(text)
    if match is None:
        raise ExpressionError(f"unsupported filter [{body}]")
    value = _literal(match.group("value")) if match.group("op") else None
    return _parse_steps(match.group("path")), match.group("op"), value


def _parse_steps(path: str) -> tuple[_Step, ...]:
    path = path.strip()
    if path[:1] in ("$", "@"):
        path = path[1:]
    elif path and path[0] not in ".[":
        path = "." + path  # kubectl accepts `{metadata.name}` too
    steps: list[_Step] = []
    position = 0
    while position < len(path):
        match = _STEP.match(path, position)
        if match is None or match.end() == position:
            raise ExpressionError(f"unexpected {path[position:]!r}")
        position = match.end()
        if match.group("recursive"):
            name = match.group("rname")
            steps.append(_Step("recursive", name))
        elif match.group("name") is not None:
            name = match.group("name")
            steps.append(_Step("wildcard") if name == "*" else _Step("key", name))
        else:
            steps.append(_bracket(match.group("bracket")))
    return tuple(steps)


def _descendants(value: Any) -> Iterator[Any]:
    yield value
    children = value.values() if isinstance(value, Mapping) else value if isinstance(value, list) else ()
    for child in children:
        yield from _descendants(child)


def _children(value: Any) -> list[Any]:
    if isinstance(value, Mapping):
        return [value[k] for k in sorted(value)]
    return list(value) if isinstance(value, list) else []


def _index(value: Any, index: int) -> tuple[bool, Any]:
    if isinstance(value, list) and -len(value) <= index < len(value):
        return True, value[index]
    return False, None


def _matches(item: Any, steps: tuple[_Step, ...], op: str | None, expected: Any) -> bool:
    try:
        _, values = _select(item, steps)
    except ExpressionError:
        return False
    if not values:
        return False
    actual = values[0] if len(values) == 1 else values
    if op is None:
        return actual is not None and actual is not False and actual != ""
    if op in ("==", "!="):
        same = (is_number(actual) and is_number(expected) and actual == expected) or (
            type(actual) is type(expected) and actual == expected
        )
        return same == (op == "==")
    if not ((is_number(actual) and is_number(expected)) or (isinstance(actual, str) and isinstance(expected, str))):
        return False
    if op == "<":
        return bool(actual < expected)
    if op == "<=":
        return bool(actual <= expected)
    return bool(actual > expected) if op == ">" else bool(actual >= expected)


def _apply(step: _Step, nodes: list[Any], strict: bool) -> list[Any]:
    result: list[Any] = []
    for node in nodes:
        if step.kind == "key":
            if isinstance(node, Mapping) and step.arg in node:
                result.append(node[step.arg])
            elif step.arg == "length" and isinstance(node, list | str | Mapping):
                result.append(len(node))
            elif strict:
                raise ExpressionError(f"key {step.arg!r} not found")
        elif step.kind == "index":
            found, value = _index(node, step.arg)
            if found:
                result.append(value)
            elif strict:
                raise ExpressionError(f"index [{step.arg}] out of range")
        elif step.kind == "wildcard":
            result.extend(_children(node))
        elif step.kind == "recursive":
            for descendant in _descendants(node):
                if step.arg in (None, "*"):
                    result.extend(_children(descendant))
                elif isinstance(descendant, Mapping) and step.arg in descendant:
                    result.append(descendant[step.arg])
        elif step.kind == "union":
            for key in step.arg:
                if isinstance(key, int):
                    found, value = _index(node, key)
                    result.extend([value] if found else [])
                elif isinstance(node, Mapping) and key in node:
                    result.append(node[key])
        elif step.kind == "slice":
            result.extend(node[step.arg] if isinstance(node, list) else [])
        else:
            result.extend(
                item
                for item in _children(node)
                if any(all(_matches(item, *condition) for condition in clause) for clause in step.arg)
            )
    return result


def _select(value: Any, steps: tuple[_Step, ...]) -> tuple[bool, list[Any]]:
    """(whether the path is definite, the selected values); a definite path raises on a missing key."""
    nodes, definite = [value], True
    for step in steps:
        nodes = _apply(step, nodes, strict=definite)
        definite = definite and step.kind in ("key", "index")
    return definite, nodes


@lru_cache(maxsize=512)
def _template(path: str) -> tuple[tuple[str, tuple[_Step, ...] | None], ...]:
    """A kubectl template as (text, None) and (expression, steps) parts."""
    if "{" not in path:
        return ((path, _parse_steps(path)),)
    parts: list[tuple[str, tuple[_Step, ...] | None]] = []
    position = 0
    for match in re.finditer(r"\{((?:[^{}'\"]|'[^']*'|\"[^\"]*\")*)\}", path):
        if match.start() > position:
            parts.append((path[position : match.start()], None))
        parts.append((match.group(1), _parse_steps(match.group(1))))
        position = match.end()
    if position < len(path):
        parts.append((path[position:], None))
    return tuple(parts)


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    return go_json(value)


def _query(obj: Any, path: str, as_text: bool) -> Any:
    try:
        parts = _template(path)
        if len(parts) == 1 and parts[0][1] is not None and not as_text:
            definite, values = _select(obj, parts[0][1])
            return values[0] if definite else values
        rendered: list[str] = []
        for text, steps in parts:
            if steps is None:
                rendered.append(text)
                continue
            definite, values = _select(obj, steps)
            rendered.append(_render(values[0]) if definite else " ".join(_render(v) for v in values))
        return "".join(rendered)
    except ExpressionError as error:
        raise ExpressionError(f"jsonpath {quote_expression(path)} does not apply: {error}") from None
    except ValueError as error:
        raise ExpressionError(f"jsonpath {quote_expression(path)} is malformed: {error}") from None


def jsonpath(obj: Any, path: str) -> Any:
    """Select from decoded JSON with a kubectl-style (`{.a.b}`) or `$.a.b` JSONPath; see the module docstring."""
    return _query(obj, path, as_text=False)


def jsonpath_text(obj: Any, path: str) -> str:
    """What `kubectl get -o jsonpath=PATH` prints: strings as they are, lists space-separated, maps as JSON."""
    text: str = _query(obj, path, as_text=True)
    return text
