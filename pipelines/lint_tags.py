"""`{{...}}` tags as Argo's validator reads them: fasttemplate's scan, ProcessArgs' substitution, Go's JSON text.

Argo (util/template, workflow/common.SubstituteParams) marshals a template to JSON, replaces the tags it knows in
two passes (the workflow's and the pod's variables, then the inputs), and checks the tags left over. We work on
the strings themselves, which is the same as long as each string's `{{` is closed inside it; a tag is looked up
as Go's JSON spells it (a newline inside it is an escape there, not a space to trim), and an expression tag
(`{{=...}}`) is never checked. A stand-in for a value that only exists at run time is a placeholder, as Argo's.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["is_parameter", "lookup_key", "placeholder", "strings", "substitute", "tags"]

# validate.go's paramRegex: a name that is itself a tag (`globalName: "{{inputs.parameters.n}}"`) is given at run time.
_PARAMETER = re.compile(r"{{[-a-zA-Z0-9]+(\.[-a-zA-Z0-9_]+)*}}")
_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_counter = itertools.count()


def placeholder() -> str:
    """A stand-in for a value known only at run time: Argo's own prefix, and each one its own, as Argo's are."""
    return f"__argo__internal__placeholder-{next(_counter)}"


def is_parameter(text: str) -> bool:
    """Tell whether `text` holds a simple tag (Argo's isParameter), so that it is only known at run time."""
    return _PARAMETER.search(text) is not None


def lookup_key(tag: str) -> str:
    """The key Argo looks `{{tag}}` up by: the tag as encoding/json writes it, spaces trimmed."""
    return _json_text(tag).strip()


def _json_text(text: str) -> str:
    """`text` inside a JSON string as Go's encoding/json writes it (which also escapes <, > and &)."""
    quoted = json.dumps(text, ensure_ascii=False)[1:-1]
    return "".join(_GO_ESCAPES.get(char, char) for char in quoted)


def tags(text: str) -> list[str] | None:
    """The tags of `text` in order (their inside, untrimmed), or None when a `{{` is never closed in it.

    Argo scans the whole template's JSON, so an unclosed `{{` reaches into the strings after it: what it then
    checks cannot be told from one string, and we check nothing there.
    """
    found: list[str] = []
    start = text.find("{{")
    while start >= 0:
        end = text.find("}}", start + 2)
        if end < 0:
            return None
        found.append(text[start + 2 : end])
        start = text.find("{{", end + 2)
    return found


def substitute(text: str, values: Mapping[str, str]) -> str:
    """`text` with the tags `values` knows replaced, as Argo's Replace with unresolved tags allowed.

    A tag nested in another (`{{steps.run-{{inputs.parameters.d}}.status}}`) has its inner tag replaced when that
    one is known; an expression tag is left for run time; a `{{` never closed is left as it is.
    """
    if "{{" not in text:
        return text
    out: list[str] = []
    at = 0
    start = text.find("{{")
    while start >= 0:
        end = text.find("}}", start + 2)
        if end < 0:
            break
        out.append(text[at:start])
        out.append(_replace(text[start + 2 : end], values))
        at = end + 2
        start = text.find("{{", at)
    out.append(text[at:])
    return "".join(out)


def _replace(tag: str, values: Mapping[str, str]) -> str:
    if tag.startswith("="):
        return "{{" + tag + "}}"
    key = lookup_key(tag)
    if key in values:
        return values[key]
    inner = tag.rfind("{{")
    nested = _json_text(tag[inner + 2 :]) if inner > 0 else None  # looked up as it is, untrimmed
    if nested is not None and nested in values:  # the outer tag stays open: `{{steps.run-` + the value
        return "{{" + tag[:inner] + values[nested]
    return "{{" + tag + "}}"


def strings(value: Any, path: str, rewritten: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """Every string in `value` (map keys with a tag too, as Argo's JSON holds them) with its path.

    `rewritten` gives what a part of `value` became (None: it is gone), by path.
    """
    value = rewritten.get(path, value)
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        added = [at.rpartition(".")[2] for at in rewritten if at.rpartition(".")[0] == path]  # a value given
        for key, item in {**dict.fromkeys(added), **value}.items():
            if isinstance(key, str) and "{{" in key:
                yield f"{path}.{key}", key
            yield from strings(item, f"{path}.{key}", rewritten)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from strings(item, f"{path}[{index}]", rewritten)
