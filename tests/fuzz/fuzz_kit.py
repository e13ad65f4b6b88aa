"""What every fuzz test shares: JSON-like values, mutations of real inputs (bytes and YAML structure), the verdict.

The property is the same everywhere (issue 14): a random or mutated input gets a result or an error of our tree —
`components.errors.VcpilotError`, or a `ValueError` where that is the function's contract — never another
exception. Mutations start from real, valid inputs so that they reach past the first check.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"

# Scalars chosen to break assumptions: wrong types, signs, huge and fractional numbers, odd strings.
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1, -2, 0.5, 1e308, float("inf"), float("nan"), 2**63]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["", " ", "-1", "0.5", "1Gi", "abc", "../x", "{{", "}}", "\x00", "é", "null", "~", "*"]),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into `doc` (keys and indices), the root included."""
    out = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            out += _paths(value, (*prefix, i))
    return out


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    return doc


def _delete(doc: Any, path: tuple[Any, ...]) -> Any:
    if not path:
        return doc
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    del parent[path[-1]]
    return doc


@st.composite
def mutated_tree(draw: st.DrawFn, seeds: list[Any], steps: int = 3) -> Any:
    """One of `seeds` (JSON-like documents) after up to `steps` structural mutations.

    A mutation replaces a value with a random one (or one from elsewhere in the document), deletes a key or an
    item, adds an unknown key, or wraps a value in a list — the mistakes a hand-edited manifest holds.
    """
    doc = copy.deepcopy(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(min_value=1, max_value=steps))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(["replace", "replace", "copy", "delete", "add", "wrap"]))
        if action == "replace":
            doc = _set(doc, path, draw(JSON))
        elif action == "copy":
            source = draw(st.sampled_from(paths))
            doc = _set(doc, path, copy.deepcopy(_get(doc, source)))
        elif action == "delete":
            doc = _delete(doc, path)
        elif action == "add":
            target = _get(doc, path)
            if isinstance(target, dict):
                target[draw(st.text(max_size=10))] = draw(JSON)
            elif isinstance(target, list):
                target.append(draw(JSON))
        else:
            doc = _set(doc, path, [copy.deepcopy(_get(doc, path))])
    return doc


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


@st.composite
def mutated_bytes(draw: st.DrawFn, seeds: list[bytes], steps: int = 4) -> bytes:
    """One of `seeds` after up to `steps` byte-level mutations: flips, inserts (bytes that are not UTF-8 among
    them), deletions, a truncation, a duplicated slice."""
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(min_value=1, max_value=steps))):
        where = draw(st.integers(min_value=0, max_value=len(data)))
        action = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "duplicate", "special"]))
        if action == "flip" and where < len(data):
            data[where] ^= 1 << draw(st.integers(min_value=0, max_value=7))
        elif action == "insert":
            data[where:where] = draw(st.binary(min_size=1, max_size=8))
        elif action == "delete":
            del data[where : where + draw(st.integers(min_value=1, max_value=16))]
        elif action == "truncate":
            del data[where:]
        elif action == "duplicate":
            data[where:where] = data[where : where + draw(st.integers(min_value=1, max_value=64))]
        else:
            special = [
                b"\xff\xfe",
                b"\x00",
                b"\xef\xbb\xbf",
                b"\t",
                b": ",
                b"- ",
                b"{",
                b"[",
                b"&a",
                b"*a",
                b"!!python/",
            ]
            data[where:where] = draw(st.sampled_from(special))
    return bytes(data)


def yaml_bytes(doc: Any) -> bytes:
    """A document as a user would write it."""
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True).encode()


def ours(err: BaseException, *allowed: type[BaseException]) -> bool:
    """True when `err` is an error of our tree (or one of `allowed`, the function's documented contract)."""
    from components.errors import VcpilotError

    return isinstance(err, (VcpilotError, *allowed))


def result_or_ours(call: Callable[[], Any], *allowed: type[BaseException]) -> Any:
    """Run `call`; return its result, or None when it raised an allowed error; re-raise anything else."""
    try:
        return call()
    except Exception as err:
        if ours(err, *allowed):
            return None
        raise


def one_line(message: str) -> None:
    """A message for a person: one line, not empty, no traceback."""
    assert message.strip(), "an empty error message"
    assert "\n" not in message.strip(), message
    assert "Traceback" not in message, message


@st.composite
def mutated_text(draw: st.DrawFn, seeds: list[str], vocabulary: list[str], steps: int = 3) -> str:
    """One of `seeds` (expressions, selectors, paths) after up to `steps` edits: a token of `vocabulary` inserted,
    a span deleted or doubled, two characters swapped, or random text put in."""
    text = draw(st.sampled_from(seeds))
    for _ in range(draw(st.integers(min_value=1, max_value=steps))):
        where = draw(st.integers(min_value=0, max_value=len(text)))
        action = draw(st.sampled_from(["token", "token", "delete", "double", "swap", "random"]))
        if action == "token":
            text = text[:where] + draw(st.sampled_from(vocabulary)) + text[where:]
        elif action == "delete":
            text = text[:where] + text[where + draw(st.integers(min_value=1, max_value=8)) :]
        elif action == "double":
            text = text[:where] + text[where : where + 12] + text[where:]
        elif action == "swap" and where + 1 < len(text):
            text = text[:where] + text[where + 1] + text[where] + text[where + 2 :]
        else:
            text = text[:where] + draw(st.text(max_size=4)) + text[where:]
    return text


def string_cases(*paths: Path) -> list[str]:
    """The first string of every tuple in these test modules: the cases a unit test's parametrize lists."""
    import ast

    found: list[str] = []
    for path in paths:
        if not path.is_file():
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Tuple) and node.elts:
                first = node.elts[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    found.append(first.value)
    return list(dict.fromkeys(found))
