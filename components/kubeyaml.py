"""YAML as Kubernetes and Argo read it, for every manifest, workflow and config a person hands us.

The API server, kubectl and Argo turn YAML into JSON with go-yaml (sigs.k8s.io/yaml). Where PyYAML's safe loader
differs from that, this loader does what they do:

- a key given twice in one mapping is an error (`mapping key "x" already defined`), not a silent overwrite;
- a plain scalar is read by go-yaml v2's rules (`resolve.go`), not YAML 1.1's as PyYAML has them: `y`, `Y`, `n`, `N`
  are booleans too; a float needs no point (`1e3`, `5e-5`); ints are Go's literals (`012` and `0o12` octal, `0x1F`,
  `0b11`; `08` is the float 8) and never base 60 (`12:30` is the string it looks like, not 750); a number beyond
  float64 stays a string; an unquoted date (`2024-01-01`) stays the string it is in JSON, not a `datetime.date`;
- a key that reads as a number or a boolean is written as JSON writes it (sigs.k8s.io/yaml: `1: x` has the key "1",
  `y: x` the key "true"); a null key is refused, as there;
- aliases that expand a document far beyond what was written are refused (go-yaml: "document contains excessive
  aliasing"): the "billion laughs" — nine anchors of nine aliases each, a few hundred bytes that stand for 9^9
  values — would otherwise take every walk over the document (validation, substitution, JSON) minutes and
  gigabytes; and an alias inside its own anchor (a cycle, which JSON cannot hold) is refused too.

Every refusal is a `yaml.YAMLError`, so each reader words it as it words any broken YAML.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Hashable
from typing import Any

import yaml

__all__ = ["MAX_ALIAS_VALUES", "Dumper", "Loader", "dump", "go_scalar", "json_key", "load", "load_all"]

# How many values aliases may add to a document, beyond those written out. Anchors that a workflow reuses (a
# template's defaults merged into a few dozen steps) add hundreds; a YAML bomb adds millions at once.
MAX_ALIAS_VALUES = 100_000


class Loader(yaml.SafeLoader):
    """PyYAML's safe loader reading as go-yaml does (the module's docstring): duplicates, dates, aliases."""

    def construct_document(self, node: yaml.Node) -> Any:
        """The document of `node`, once its aliases are known to stay within bounds."""
        _check_aliases(node)
        return super().construct_document(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        """A mapping with JSON's keys (`json_key`).

        A ConstructorError names a key given twice (a merged `<<: *defaults` key may be overridden) or one that JSON
        cannot hold.
        """
        seen: set[str] = set()
        for key_node, _ in node.value:
            if key_node.tag == MERGE:
                continue
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str | int | float | bool) and (name := json_key(key)) in seen:
                raise yaml.constructor.ConstructorError(None, None, f"key {name!r} is given twice", key_node.start_mark)
            if isinstance(key, str | int | float | bool):
                seen.add(name)
        self.flatten_mapping(node)
        mapping: dict[Hashable, Any] = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, str | int | float | bool):
                what = "null" if key is None else "a mapping or a list"
                raise yaml.constructor.ConstructorError(
                    None, None, f"a key is {what}; JSON's keys are strings", key_node.start_mark
                )
            mapping[json_key(key)] = self.construct_object(value_node, deep=deep)
        return mapping

    def resolve(self, kind: type[yaml.Node], value: str | None, implicit: tuple[bool, bool]) -> str:
        """A plain scalar's tag as go-yaml v2 resolves it (`GO_SCALAR`); PyYAML's for everything else."""
        if kind is yaml.ScalarNode and implicit[0] and value is not None:
            return MERGE if value == "<<" else GO_SCALAR
        return super().resolve(kind, value, implicit)

    def construct_go_scalar(self, node: yaml.ScalarNode) -> Any:
        """The value of a plain scalar (`go_scalar`)."""
        return go_scalar(self.construct_scalar(node))


_GO_TAGS = {bool: "bool", int: "int", float: "float", type(None): "null", str: "str"}


class Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """PyYAML's safe dumper (libyaml's where PyYAML has it) quoting every string go-yaml would read as another type.

    PyYAML leaves `y`, `n`, `1e3` and `5e-5` plain, as its YAML 1.1 reads them back as strings; Kubernetes and Argo
    would read a boolean and numbers. A scalar goes plain only where go-yaml reads what was written.
    """

    def resolve(self, kind: type[yaml.Node], value: str | None, implicit: tuple[bool, bool]) -> str:
        """The tag go-yaml gives `value` written plain (so the emitter quotes a string it would not read as one)."""
        if kind is yaml.ScalarNode and implicit[0] and value is not None:
            return f"tag:yaml.org,2002:{_GO_TAGS[type(go_scalar(value))]}"
        return str(super().resolve(kind, value, implicit))


def dump(data: Any) -> str:
    """`data` as block YAML in the order given, which Kubernetes and Argo read back as the same values."""
    return str(yaml.dump(data, Dumper=Dumper, sort_keys=False))


GO_SCALAR = "tag:vcpilot,2026:go-plain-scalar"
MERGE = "tag:yaml.org,2002:merge"
Loader.add_constructor(GO_SCALAR, Loader.construct_go_scalar)

_GO_WORDS: dict[str, Any] = {
    **dict.fromkeys(["y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"], True),
    **dict.fromkeys(["n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"], False),
    **dict.fromkeys(["", "~", "null", "Null", "NULL"], None),
    **dict.fromkeys([".nan", ".NaN", ".NAN"], math.nan),
    **dict.fromkeys([".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"], math.inf),
    **dict.fromkeys(["-.inf", "-.Inf", "-.INF"], -math.inf),
}
_GO_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_GO_INT = re.compile(r"([-+]?)(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]+|[1-9][0-9]*|0)")
_BASES = {"x": 16, "o": 8, "b": 2}


def _go_int(text: str) -> int | None:
    """Go's `strconv.ParseInt(text, 0, 64)`, else `ParseUint`: None when neither reads it."""
    match = _GO_INT.fullmatch(text)
    if match is None:
        return None
    sign, digits = match.groups()
    if len(digits) > 66:  # past any 64-bit literal (0b and 64 digits); Python's int() refuses 4,300 digits
        return None
    if len(digits) > 1 and digits[0] == "0":
        base = _BASES.get(digits[1].lower(), 8)
        value = int(digits[2:] if base != 8 or digits[1] in "oO" else digits[1:], base)
    else:
        value = int(digits)
    value = -value if sign == "-" else value
    return value if -(2**63) <= value < 2**63 or (not sign and value < 2**64) else None


def go_scalar(text: str) -> Any:
    """A plain scalar as go-yaml v2 reads it: a boolean, null, an int, a float, or the string itself."""
    if text in _GO_WORDS:
        return _GO_WORDS[text]
    if text[:1] == "." and _GO_FLOAT.fullmatch(text):
        return float(text)
    if text[:1] not in set("+-0123456789"):
        return text
    plain = text.replace("_", "")
    number = _go_int(plain)
    if number is not None:
        return number
    if _GO_FLOAT.fullmatch(plain) and not math.isinf(value := float(plain)):
        return value
    return text


def _float32_text(value: float) -> str:
    """Go's `strconv.FormatFloat(value, 'g', -1, 32)`: the shortest digits that read back as the same float32."""
    try:
        single = struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        single = math.copysign(math.inf, value)
    if math.isnan(single) or math.isinf(single):
        return "NaN" if math.isnan(single) else ("+Inf" if single > 0 else "-Inf")
    for precision in range(9):
        text = f"{single:.{precision}e}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == single:
            break
    mantissa, exponent = text.split("e")
    digits, point = mantissa.lstrip("-").replace(".", "").rstrip("0") or "0", int(exponent) + 1
    if single == 0:
        digits, point = "0", 1
    if not -4 <= point - 1 < 6:
        body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "") + f"e{point - 1:+03d}"
    elif point <= 0:
        body = "0." + "0" * -point + digits
    else:
        body = digits[:point] + "0" * (point - len(digits)) + ("." + digits[point:] if len(digits) > point else "")
    return "-" + body if math.copysign(1, single) < 0 else body


def json_key(key: Any) -> str:
    """A mapping key as sigs.k8s.io/yaml writes it into JSON: ints in decimal, booleans as words, floats as float32."""
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, float):
        return {"+Inf": ".inf", "-Inf": "-.inf", "NaN": ".nan"}.get(text := _float32_text(key), text)
    return str(key)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_aliases(root: yaml.Node) -> None:
    """Refuse a document whose aliases add more than MAX_ALIAS_VALUES values, or that holds itself.

    The composer gives an alias the very node of its anchor, so the document is a graph; the values it stands for
    are counted once per node (memoised, depth-first without recursion), in time of the nodes written.
    """
    values: dict[int, int] = {}  # node id -> values it stands for, aliases expanded
    open_: set[int] = set()  # nodes whose children are being counted: meeting one again is a cycle
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, counted_children = stack.pop()
        key = id(node)
        if counted_children:
            values[key] = 1 + sum(values[id(child)] for child in _children(node))
            open_.discard(key)
            continue
        if key in values:
            continue
        if key in open_:
            raise yaml.composer.ComposerError(None, None, "an alias refers to its own anchor", node.start_mark)
        open_.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in values)
    written = len(values)  # every node written out, counted once
    if values[id(root)] - written > MAX_ALIAS_VALUES:
        raise yaml.composer.ComposerError(
            None,
            None,
            f"its aliases expand it to {values[id(root)]:,} values from {written:,} written (more than "
            f"{MAX_ALIAS_VALUES:,} added); Kubernetes refuses such a document (excessive aliasing): write the "
            "values out",
            root.start_mark,
        )


def load_all(text: str) -> list[Any]:
    """Every document of `text`, empty ones dropped; yaml.YAMLError (or RecursionError, too deep) when unreadable."""
    return [document for document in yaml.load_all(text, Loader=Loader) if document is not None]


def load(text: str) -> Any:
    """The single document of `text` (None when empty); as `load_all` otherwise."""
    return yaml.load(text, Loader=Loader)
