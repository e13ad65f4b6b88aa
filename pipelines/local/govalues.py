"""How Go prints values (fmt's %v, encoding/json), so rendered parameters match what Argo's controller writes."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

__all__ = [
    "format_float_f",
    "format_float_g",
    "go_json",
    "go_parameters_json",
    "go_quote",
    "go_sprint",
    "go_type",
    "is_number",
]

# encoding/json escapes these so that its output is safe inside HTML; Argo's JSON keeps them escaped.
_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
# strconv.Quote's escapes besides these: \a and \v; other unprintable runes as \xHH, \uHHHH or \UHHHHHHHH.
_QUOTE_ESCAPES = {**_SHORT_ESCAPES, "\a": "\\a", "\v": "\\v"}
# The fields of Argo's Parameter and ValueFrom structs (and Kubernetes' ConfigMapKeySelector) in their declared
# order, which encoding/json keeps; the string-valued ones (AnyString) it writes as strings.
_PARAMETER_FIELDS = ("name", "default", "value", "valueFrom", "globalName", "enum", "description")
_VALUE_FROM_FIELDS = (
    "path",
    "jsonPath",
    "jqFilter",
    "event",
    "parameter",
    "supplied",
    "configMapKeyRef",
    "default",
    "expression",
)
_STRUCT_FIELDS = {"valueFrom": _VALUE_FROM_FIELDS, "configMapKeyRef": ("name", "key", "optional")}
_ANY_STRINGS = frozenset({"default", "value", "description"})


def is_number(value: Any) -> bool:
    """True for ints and floats, but not for bools (which Python counts as ints and Go does not)."""
    return type(value) in (int, float)


def go_type(value: Any) -> str:
    """The Go type name Argo's error messages would show for a decoded JSON value."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "map[string]interface {}"
    if isinstance(value, list | tuple):
        return "[]interface {}"
    if callable(value):
        return "func"
    return type(value).__name__


def _shortest_digits(value: float) -> tuple[str, int]:
    """The shortest decimal digits that round-trip `value` (positive, finite), and the decimal point position."""
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    assert isinstance(exponent, int)
    point = len(digits) + exponent  # digits[:point] are before the decimal point
    return text, point


def _format_exponent(digits: str, point: int, min_exp_digits: int) -> str:
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    exp = point - 1
    sign = "-" if exp < 0 else "+"
    return f"{mantissa}e{sign}{abs(exp):0{min_exp_digits}d}"


def _format_fixed(digits: str, point: int) -> str:
    if point <= 0:
        return "0." + "0" * -point + digits
    if point >= len(digits):
        return digits + "0" * (point - len(digits))
    return digits[:point] + "." + digits[point:]


def _special(value: float) -> str | None:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1, value) < 0 else "0"
    return None


def format_float_g(value: float) -> str:
    """Go's `%v` for a float64: shortest digits, exponent form below 1e-4 and from 1e6 up (`1e+06`)."""
    special = _special(value)
    if special is not None:
        return special
    digits, point = _shortest_digits(abs(value))
    exp = point - 1
    # strconv's shortest %g switches to %e when exp < -4 || exp >= 6, hence Go's surprising `1e+06`.
    text = _format_exponent(digits, point, 2) if exp < -4 or exp >= 6 else _format_fixed(digits, point)
    return "-" + text if value < 0 else text


def format_float_f(value: float) -> str:
    """Go's `strconv.FormatFloat(v, 'f', -1, 64)`: shortest digits, never an exponent."""
    special = _special(value)
    if special is not None:
        return special
    digits, point = _shortest_digits(abs(value))
    text = _format_fixed(digits, point)
    return "-" + text if value < 0 else text


def _json_float(value: float) -> str:
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"json: unsupported value: {format_float_g(value)}")
    magnitude = abs(value)
    if magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21):
        digits, point = _shortest_digits(magnitude)
        text = _format_exponent(digits, point, 1)
        return "-" + text if value < 0 else text
    return format_float_f(value)


def _json_string(text: str) -> str:
    out = []
    for char in text:
        if char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif char in _JSON_ESCAPES:
            out.append(_JSON_ESCAPES[char])
        elif char < " ":
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def go_json(value: Any, indent: str = "", _depth: int = 0) -> str:
    """`json.Marshal` (or `json.MarshalIndent(v, "", indent)`): sorted map keys, Go's float format, HTML escapes."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _json_float(value)
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, Mapping):
        items = [(_json_string(str(k)), v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))]
        if not items:
            return "{}"
        if not indent:
            return "{" + ",".join(f"{k}:{go_json(v)}" for k, v in items) + "}"
        inner, outer = "\n" + indent * (_depth + 1), "\n" + indent * _depth
        return "{" + ",".join(f"{inner}{k}: {go_json(v, indent, _depth + 1)}" for k, v in items) + outer + "}"
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        if not indent:
            return "[" + ",".join(go_json(v) for v in value) + "]"
        inner, outer = "\n" + indent * (_depth + 1), "\n" + indent * _depth
        return "[" + ",".join(f"{inner}{go_json(v, indent, _depth + 1)}" for v in value) + outer + "]"
    raise ValueError(f"json: unsupported type: {go_type(value)}")


def go_parameters_json(parameters: Iterable[Mapping[str, Any]]) -> str:
    """`json.Marshal` of Argo's []Parameter, as `{{workflow.parameters}}` and `{{inputs.parameters}}` hold it."""
    return "[" + ",".join(_go_struct(p, _PARAMETER_FIELDS) for p in parameters) + "]"


def _go_struct(value: Mapping[str, Any], fields: tuple[str, ...]) -> str:
    """A struct in its fields' order, empty ones left out (omitempty), AnyString fields as strings."""
    out = []
    for name in fields:
        item = value.get(name)
        if item is None or item == [] or (item == "" and name not in _ANY_STRINGS):  # AnyString: a pointer, kept
            continue
        if name in _STRUCT_FIELDS and isinstance(item, Mapping):
            text = _go_struct(item, _STRUCT_FIELDS[name])
        elif name in _ANY_STRINGS or name == "enum":
            strings = [v if isinstance(v, str) else json.dumps(v) for v in (item if name == "enum" else [item])]
            text = go_json(strings if name == "enum" else strings[0])
        else:
            text = go_json(item)
        out.append(f"{_json_string(name)}:{text}")
    return "{" + ",".join(out) + "}"


def go_quote(text: str) -> str:
    """Go's `strconv.Quote`: a double-quoted Go string literal, as Argo writes `{{workflow.failures}}`."""
    out = []
    for char in text:
        if char in _QUOTE_ESCAPES:
            out.append(_QUOTE_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'


def go_sprint(value: Any) -> str:
    """Go's `fmt.Sprintf("%v", value)` for decoded JSON values: `<nil>`, `[a b]`, `map[k:v]`, `1e+21`."""
    if value is None:
        return "<nil>"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return format_float_g(value)
    if isinstance(value, Mapping):
        pairs = sorted(value.items(), key=lambda kv: str(kv[0]))
        return "map[" + " ".join(f"{go_sprint(k)}:{go_sprint(v)}" for k, v in pairs) + "]"
    if isinstance(value, list | tuple):
        return "[" + " ".join(go_sprint(v) for v in value) + "]"
    return str(value)
