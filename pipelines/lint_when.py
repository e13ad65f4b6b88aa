"""`when` and `depends`: their syntax, which Argo hands to govaluate only at run time, and the DAG they draw."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["DEPENDS_WORD", "ancestors", "expression_error", "substitute_tags", "task_dependencies", "topological"]

DEPENDS_WORD = re.compile(r"([a-zA-Z0-9][-a-zA-Z0-9]*?\.[A-Z][a-zA-Z]+)|([a-zA-Z0-9][-a-zA-Z0-9]*)")
"""A word of `depends` (common/ancestry.go): a task name, optionally followed by `.Result`."""

# Argo replaces every {{...}} tag before govaluate sees the text; `true` stands in for the value, as the one
# token that may go wherever a value of any kind could (after `!`, a string could not).
_TAG = re.compile(r"{{.*?}}", re.DOTALL)

# Token kinds of govaluate's lexer (lexerState.go), and which kinds may follow each one.
_VALUES = {"NUMERIC", "BOOLEAN", "VARIABLE", "ACCESSOR", "STRING"}
_OPERAND_START = {"PREFIX", "NUMERIC", "BOOLEAN", "VARIABLE", "ACCESSOR", "STRING", "CLAUSE"}
_AFTER_VALUE = {"MODIFIER", "COMPARATOR", "LOGICALOP", "CLAUSE_CLOSE", "TERNARY", "SEPARATOR"}
_NEXT: dict[str, set[str]] = {
    "START": _OPERAND_START,
    "CLAUSE": _OPERAND_START | {"CLAUSE_CLOSE"},
    "CLAUSE_CLOSE": _AFTER_VALUE | _VALUES | {"CLAUSE"},
    "NUMERIC": _AFTER_VALUE,
    "BOOLEAN": _AFTER_VALUE,
    "STRING": _AFTER_VALUE,
    "VARIABLE": _AFTER_VALUE,
    "ACCESSOR": _AFTER_VALUE | {"CLAUSE"},
    "MODIFIER": _OPERAND_START | {"CLAUSE_CLOSE"},
    "COMPARATOR": _OPERAND_START | {"CLAUSE_CLOSE"},
    "LOGICALOP": _OPERAND_START | {"CLAUSE_CLOSE"},
    "PREFIX": (_OPERAND_START - {"PREFIX", "STRING"}) | {"CLAUSE_CLOSE"},
    "TERNARY": _OPERAND_START | {"SEPARATOR"},
    "SEPARATOR": _OPERAND_START,
}
_CAN_END = _VALUES | {"CLAUSE_CLOSE"}
_SYMBOLS = {
    "MODIFIER": {"+", "-", "*", "/", "%", "**", "&", "|", "^", ">>", "<<"},
    "COMPARATOR": {"==", "!=", ">", ">=", "<", "<=", "=~", "!~"},
    "LOGICALOP": {"&&", "||"},
    "TERNARY": {"?", ":", "??"},
}
_PREFIXES = {"-", "!", "~"}


class _SyntaxProblem(Exception):
    """A reason the expression does not parse, worded for a person."""


def substitute_tags(text: str, placeholder: str = "true") -> str:
    """The expression as govaluate would see it, with every `{{...}}` tag replaced by `placeholder`."""
    return _TAG.sub(placeholder, text)


def ancestors(name: str, graph: Mapping[str, set[str]]) -> set[str]:
    """Every task `name` waits for, directly or through others (graph: task -> the tasks it depends on)."""
    seen: set[str] = set()
    todo = list(graph.get(name, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def task_dependencies(task: dict[str, Any], names: set[str]) -> set[str]:
    """The tasks of `names` a DAG task waits for, by `depends` or `dependencies`."""
    depends, listed = task.get("depends"), task.get("dependencies")
    words = {match.group(0).partition(".")[0] for match in DEPENDS_WORD.finditer(str(depends or ""))}
    return (words | {str(name) for name in (listed if isinstance(listed, list) else [])}) & names


def topological(graph: Mapping[str, set[str]]) -> list[str] | None:
    """The tasks in an order that runs each after those it depends on (Argo's sortDAGTasks); None for a cycle."""
    waiting = {name: len(deps) for name, deps in graph.items()}
    order = [name for name, count in waiting.items() if not count]
    for name in order:  # grows as it goes
        for other, deps in graph.items():
            if name in deps:
                waiting[other] -= 1
                if not waiting[other]:
                    order.append(other)
    return order if len(order) == len(graph) else None


def expression_error(text: str) -> str | None:
    """Why govaluate would refuse `text` (already free of `{{...}}` tags), or None when it parses."""
    try:
        tokens = _tokens(text)
        _check(tokens)
        # Argo then turns each bare word into a string literal and has govaluate check the tokens again.
        _check([("STRING" if kind == "VARIABLE" else kind, word) for kind, word in tokens])
    except _SyntaxProblem as problem:
        return str(problem)
    return None


def _symbol_run(text: str, i: int) -> int:
    """The end of the run of operator characters starting at i (govaluate's isNotAlphanumeric, up to a space)."""
    while i < len(text) and not (text[i].isalnum() or text[i] in "()[]'\"" or text[i].isspace()):
        i += 1
    return i


def _tokens(text: str) -> list[tuple[str, str]]:
    """Split `text` into (kind, text) tokens the way govaluate's lexer does."""
    tokens: list[tuple[str, str]] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char.isspace():
            i += 1
            continue
        state = tokens[-1][0] if tokens else "START"
        if text.startswith("0x", i):
            end = i + 2
            while end < len(text) and text[end] in "0123456789abcdefABCDEF":
                end += 1
            tokens.append(("NUMERIC", text[i:end]))
        elif char.isdigit() or char == ".":
            end = i
            while end < len(text) and (text[end].isdigit() or text[end] == "."):
                end += 1
            word = text[i:end]
            if word.count(".") > 1 or word == ".":
                raise _SyntaxProblem(f"{word!r} is not a number")
            tokens.append(("NUMERIC", word))
        elif char == ",":
            end = i + 1
            tokens.append(("SEPARATOR", char))
        elif char == "[":
            end = text.find("]", i)
            if end < 0:
                raise _SyntaxProblem("a '[' is never closed")
            end += 1
            tokens.append(("VARIABLE", text[i:end]))
        elif char.isalpha():
            end = i
            while end < len(text) and (text[end].isalnum() or text[end] in "_."):
                end += 1
            tokens.append(_word(text[i:end]))
        elif char in "'\"":
            end = i + 1
            while end < len(text) and text[end] not in "'\"":
                end += 2 if text[end] == "\\" else 1
            if end >= len(text):
                raise _SyntaxProblem("a quoted string is never closed")
            end += 1
            tokens.append(("STRING", text[i:end]))
        elif char in "()":
            end = i + 1
            tokens.append(("CLAUSE" if char == "(" else "CLAUSE_CLOSE", char))
        else:
            end = _symbol_run(text, i)
            symbol = text[i:end]
            kind = "PREFIX" if symbol in _PREFIXES and "PREFIX" in _NEXT[state] else None
            kind = kind or next((k for k, symbols in _SYMBOLS.items() if symbol in symbols), None)
            if kind is None:
                raise _SyntaxProblem(f"{symbol!r} is not an operator (quote values that contain it)")
            tokens.append((kind, symbol))
        i = end
    return tokens


def _word(word: str) -> tuple[str, str]:
    """Classify a bare word: boolean, the `in` operator, a field accessor, or a variable (an unquoted string)."""
    if word in ("true", "false"):
        return "BOOLEAN", word
    if word in ("in", "IN"):
        return "COMPARATOR", word
    if "." in word:
        if word.endswith("."):
            raise _SyntaxProblem(f"{word!r} ends with a dot")
        for part in word.split(".")[1:]:
            if part[:1] != part[:1].upper():
                raise _SyntaxProblem(f"{word!r} reads as a field access; quote it if it is a value")
        return "ACCESSOR", word
    return "VARIABLE", word


def _check(tokens: list[tuple[str, str]]) -> None:
    """Walk the token kinds through govaluate's transition table and check that parentheses balance."""
    state, last, depth = "START", "", 0
    for kind, text in tokens:
        if kind not in _NEXT[state]:
            if state == "VARIABLE" and kind == "CLAUSE":
                raise _SyntaxProblem(f"{last!r} is not a function Argo knows")
            if state == "START":
                raise _SyntaxProblem(f"it cannot start with {text!r}")
            raise _SyntaxProblem(f"{text!r} cannot follow {last!r}")
        depth += {"CLAUSE": 1, "CLAUSE_CLOSE": -1}.get(kind, 0)
        if depth < 0:
            raise _SyntaxProblem("a ')' has no matching '('")
        state, last = kind, text
    if depth:
        raise _SyntaxProblem("a '(' is never closed")
    if state not in _CAN_END:
        raise _SyntaxProblem(f"it ends with the operator {last!r}" if last else "it is empty")
