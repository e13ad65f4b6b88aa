"""expr-lang's builtin functions that take plain values (builtin/builtin.go): `len`, `split`, `toJSON`.

The predicate builtins (`filter`, `map`, `all`…) need closures and live in the evaluator.  The clock builtins
(`now`, `date`, `duration`, `timezone`) are refused: the local runner evaluates expressions as pure functions.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from components.untrusted import loads_json
from pipelines.local.expressions.errors import ExpressionError, Unsupported
from pipelines.local.expressions.expr.runtime import equal, fetch, to_float, to_int
from pipelines.local.govalues import go_json, go_sprint, go_type, is_number

__all__ = ["BUILTINS", "MAX_TEXT", "MEMORY_BUDGET", "check_text_size", "from_json", "go_split", "sort_values"]

# expr-lang's default MemoryBudget: what one evaluation may build (`repeat`'s copies, the items of a range `a..b`).
MEMORY_BUDGET = 1_000_000
# The longest text a repeat may build here. Argo keeps every value in the Workflow object, which etcd holds to
# 1.5 MB, so no longer one could be used; a longer one asked for (copies of copies) would take all of the memory.
MAX_TEXT = 16 * 2**20


def check_text_size(length: int, name: str) -> None:
    """Refuse (ExpressionError) to build a text of `length` characters past MAX_TEXT, before it is built."""
    if length > MAX_TEXT:
        raise ExpressionError(
            f"{name} would make a text of {length:,} characters; an expression may make at most {MAX_TEXT:,}"
        )


def from_json(text: Any) -> Any:
    """`json.Unmarshal` into `any`: every number becomes a float64, as in Go."""
    if not isinstance(text, str):
        raise ExpressionError(f"fromJSON expects a string, not {go_type(text)}")
    try:
        return loads_json(text, parse_int=float)
    except json.JSONDecodeError as error:
        raise ExpressionError(f"invalid JSON: {error.msg} at position {error.pos}") from None
    except ValueError as error:  # nested too deeply for Python's parser, a number beyond its digit limit
        raise ExpressionError(f"invalid JSON: {error}") from None


def _go_round(value: float) -> float:
    """math.Round: halves go away from zero (Python's round() goes to even)."""
    if math.isnan(value) or math.isinf(value):
        return value
    return math.copysign(math.floor(abs(value) + 0.5), value)


def _arity(name: str, args: list[Any], *counts: int) -> None:
    if len(args) not in counts:
        expected = " or ".join(map(str, counts))
        raise ExpressionError(f"invalid number of arguments for {name} (expected {expected}, got {len(args)})")


def _string(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ExpressionError(f"invalid argument for {name} (type {go_type(value)})")
    return value


def _array(name: str, value: Any) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise ExpressionError(f"invalid argument for {name} (type {go_type(value)})")
    return list(value)


def _map(name: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ExpressionError(f"invalid argument for {name} (type {go_type(value)})")
    return value


def _unary(name: str, function: Callable[[Any], Any]) -> Callable[[list[Any]], Any]:
    def call(args: list[Any]) -> Any:
        _arity(name, args, 1)
        return function(args[0])

    return call


def _len(value: Any) -> int:
    if isinstance(value, str | list | tuple | Mapping):
        return len(value)
    raise ExpressionError(f"invalid argument for len (type {go_type(value)})")


def _type(value: Any) -> str:
    if value is None:
        return "nil"
    names = {bool: "bool", int: "int", float: "float", str: "string", list: "array", tuple: "array", dict: "map"}
    return names.get(type(value), "func" if callable(value) else "unknown")


def _numeric(name: str, function: Callable[[float], float]) -> Callable[[list[Any]], Any]:
    def call(args: list[Any]) -> Any:
        _arity(name, args, 1)
        value = args[0]
        if not is_number(value):
            raise ExpressionError(f"invalid argument for {name} (type {go_type(value)})")
        return function(float(value))

    return call


def _abs(value: Any) -> Any:
    if not is_number(value):
        raise ExpressionError(f"invalid argument for abs (type {go_type(value)})")
    return abs(value)


def _flatten_numbers(name: str, args: list[Any]) -> list[Any]:
    numbers: list[Any] = []
    for arg in args:
        if isinstance(arg, list | tuple):
            numbers.extend(_flatten_numbers(name, list(arg)))
        elif is_number(arg):
            numbers.append(arg)
        else:
            raise ExpressionError(f"invalid argument for {name} (type {go_type(arg)})")
    return numbers


def _extreme(name: str, pick: Callable[..., Any]) -> Callable[[list[Any]], Any]:
    def call(args: list[Any]) -> Any:
        if not args:
            raise ExpressionError(f"not enough arguments to call {name}")
        numbers = _flatten_numbers(name, args)
        return pick(numbers) if numbers else None

    return call


def _mean(args: list[Any]) -> float:
    numbers = _flatten_numbers("mean", args)
    return sum(map(float, numbers)) / len(numbers) if numbers else 0.0


def _median(args: list[Any]) -> float:
    numbers = sorted(map(float, _flatten_numbers("median", args)))
    if not numbers:
        return 0.0
    middle = len(numbers) // 2
    return numbers[middle] if len(numbers) % 2 else (numbers[middle - 1] + numbers[middle]) / 2


def _trim(args: list[Any]) -> str:
    _arity("trim", args, 1, 2)
    text = _string("trim", args[0])
    return text.strip() if len(args) == 1 else text.strip(_string("trim", args[1]))


def _trim_affix(name: str, prefix: bool) -> Callable[[list[Any]], Any]:
    def call(args: list[Any]) -> str:
        _arity(name, args, 1, 2)
        text = _string(name, args[0])
        affix = _string(name, args[1]) if len(args) == 2 else " "
        return text.removeprefix(affix) if prefix else text.removesuffix(affix)

    return call


def go_split(text: str, sep: str, limit: int = -1, after: bool = False) -> list[str]:
    """strings.Split / SplitN / SplitAfter(N): an empty separator splits into characters, limit 0 gives []."""
    if limit == 0:
        return []
    if sep == "":
        chars = list(text)
        if 0 < limit < len(chars):
            chars = chars[: limit - 1] + ["".join(chars[limit - 1 :])]
        return chars
    parts = text.split(sep, limit - 1 if limit > 0 else -1)
    if after:
        parts = [part + sep for part in parts[:-1]] + parts[-1:]
    return parts


def _splitter(name: str, after: bool) -> Callable[[list[Any]], Any]:
    def call(args: list[Any]) -> list[str]:
        _arity(name, args, 2, 3)
        limit = to_int(args[2]) if len(args) == 3 else -1
        return go_split(_string(name, args[0]), _string(name, args[1]), limit, after)

    return call


def _replace(args: list[Any]) -> str:
    _arity("replace", args, 3, 4)
    text, old, new = (_string("replace", arg) for arg in args[:3])
    return text.replace(old, new, to_int(args[3]) if len(args) == 4 else -1)


def _repeat(args: list[Any]) -> str:
    _arity("repeat", args, 2)
    count = to_int(args[1])
    if count < 0:
        raise ExpressionError(f"invalid argument for repeat (expected positive integer, got {count})")
    if count > MEMORY_BUDGET:
        raise ExpressionError("memory budget exceeded")
    text = _string("repeat", args[0])
    check_text_size(len(text) * count, "repeat")
    return text * count


def _join(args: list[Any]) -> str:
    _arity("join", args, 1, 2)
    glue = _string("join", args[1]) if len(args) == 2 else ""
    return glue.join(_string("join", item) for item in _array("join", args[0]))


def _string_pair(name: str, function: Callable[[str, str], Any]) -> Callable[[list[Any]], Any]:
    def call(args: list[Any]) -> Any:
        _arity(name, args, 2)
        return function(_string(name, args[0]), _string(name, args[1]))

    return call


def _from_base64(args: list[Any]) -> str:
    _arity("fromBase64", args, 1)
    try:
        return base64.b64decode(_string("fromBase64", args[0]), validate=True).decode(errors="replace")
    except binascii.Error as error:
        raise ExpressionError(f"illegal base64 data: {error}") from None


def _first_or_last(index: int) -> Callable[[list[Any]], Any]:
    def call(args: list[Any]) -> Any:
        _arity("first" if index == 0 else "last", args, 1)
        try:
            return fetch(args[0], index)
        except ExpressionError:
            return None

    return call


def _get(args: list[Any]) -> Any:
    _arity("get", args, 2)
    try:
        return fetch(args[0], args[1])
    except ExpressionError:
        return None


def _take(args: list[Any]) -> list[Any]:
    _arity("take", args, 2)
    items = _array("take", args[0])
    if not isinstance(args[1], int) or isinstance(args[1], bool):
        raise ExpressionError(f"cannot take {go_type(args[1])} elements")
    return items[: max(args[1], 0)]


def _from_pairs(args: list[Any]) -> dict[Any, Any]:
    _arity("fromPairs", args, 1)
    result: dict[Any, Any] = {}
    for pair in _array("fromPairs", args[0]):
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise ExpressionError(f"invalid pair {go_sprint(pair)}")
        result[pair[0]] = pair[1]
    return result


def _uniq(args: list[Any]) -> list[Any]:
    _arity("uniq", args, 1)
    unique: list[Any] = []
    for item in _array("uniq", args[0]):
        if not any(equal(item, seen) for seen in unique):
            unique.append(item)
    return unique


def _concat(args: list[Any]) -> list[Any]:
    return [item for arg in args for item in _array("concat", arg)]


def _flatten(value: Any) -> list[Any]:
    flat: list[Any] = []
    for item in _array("flatten", value):
        flat.extend(_flatten(item) if isinstance(item, list | tuple) else [item])
    return flat


def sort_values(items: list[Any], order: Any = "asc", key: Callable[[Any], Any] = lambda v: v) -> list[Any]:
    """Sort numbers or strings (not a mix), ascending unless `order` is "desc"."""
    if order not in ("asc", "desc"):
        raise ExpressionError(f'unknown order {go_sprint(order)}, use "asc" or "desc"')
    keys = [key(item) for item in items]
    if not (all(is_number(k) for k in keys) or all(isinstance(k, str) for k in keys)):
        raise ExpressionError("sort needs an array of numbers or an array of strings")
    ordered = sorted(zip(keys, range(len(items)), items, strict=True), reverse=order == "desc")
    return [item for _, _, item in ordered]


def _sort(args: list[Any]) -> list[Any]:
    _arity("sort", args, 1, 2)
    return sort_values(_array("sort", args[0]), args[1] if len(args) == 2 else "asc")


def _bits(name: str, function: Callable[[int, int], int]) -> Callable[[list[Any]], Any]:
    def call(args: list[Any]) -> int:
        _arity(name, args, 2)
        left, right = args
        if not (isinstance(left, int) and isinstance(right, int)) or isinstance(left, bool) or isinstance(right, bool):
            raise ExpressionError(f"invalid argument for {name} (type {go_type(left)}, {go_type(right)})")
        return function(left, right)

    return call


def _impure(name: str) -> Callable[[list[Any]], Any]:
    def call(args: list[Any]) -> Any:
        raise Unsupported(f"{name}() reads the clock, which the local runner's expressions do not support")

    return call


BUILTINS: dict[str, Callable[[list[Any]], Any]] = {
    "len": _unary("len", _len),
    "type": _unary("type", _type),
    "abs": _unary("abs", _abs),
    "ceil": _numeric("ceil", lambda v: float(math.ceil(v)) if math.isfinite(v) else v),
    "floor": _numeric("floor", lambda v: float(math.floor(v)) if math.isfinite(v) else v),
    "round": _numeric("round", _go_round),
    "int": _unary("int", to_int),
    "float": _unary("float", to_float),
    "string": _unary("string", go_sprint),
    "trim": _trim,
    "trimPrefix": _trim_affix("trimPrefix", prefix=True),
    "trimSuffix": _trim_affix("trimSuffix", prefix=False),
    "upper": _unary("upper", lambda v: _string("upper", v).upper()),
    "lower": _unary("lower", lambda v: _string("lower", v).lower()),
    "split": _splitter("split", after=False),
    "splitAfter": _splitter("splitAfter", after=True),
    "replace": _replace,
    "repeat": _repeat,
    "join": _join,
    "indexOf": _string_pair("indexOf", lambda s, sub: s.find(sub)),
    "lastIndexOf": _string_pair("lastIndexOf", lambda s, sub: s.rfind(sub)),
    "hasPrefix": _string_pair("hasPrefix", lambda s, p: s.startswith(p)),
    "hasSuffix": _string_pair("hasSuffix", lambda s, p: s.endswith(p)),
    "max": _extreme("max", max),
    "min": _extreme("min", min),
    "mean": _mean,
    "median": _median,
    "toJSON": _unary("toJSON", lambda v: go_json(v, indent="  ")),
    "fromJSON": _unary("fromJSON", from_json),
    "toBase64": _unary("toBase64", lambda v: base64.b64encode(_string("toBase64", v).encode()).decode()),
    "fromBase64": _from_base64,
    "first": _first_or_last(0),
    "last": _first_or_last(-1),
    "get": _get,
    "take": _take,
    "keys": _unary("keys", lambda v: sorted(_map("keys", v))),
    "values": _unary("values", lambda v: [v[k] for k in sorted(_map("values", v))]),
    "toPairs": _unary("toPairs", lambda v: [[k, v[k]] for k in sorted(_map("toPairs", v))]),
    "fromPairs": _from_pairs,
    "reverse": _unary("reverse", lambda v: _array("reverse", v)[::-1]),
    "uniq": _uniq,
    "concat": _concat,
    "flatten": _unary("flatten", _flatten),
    "sort": _sort,
    "bitand": _bits("bitand", lambda a, b: a & b),
    "bitor": _bits("bitor", lambda a, b: a | b),
    "bitxor": _bits("bitxor", lambda a, b: a ^ b),
    "bitnand": _bits("bitnand", lambda a, b: a & ~b),
    "bitshl": _bits("bitshl", lambda a, b: a << b),
    "bitshr": _bits("bitshr", lambda a, b: a >> b),
    "bitushr": _bits("bitushr", lambda a, b: (a % 2**64) >> b),
    "bitnot": _unary("bitnot", lambda v: ~to_int(v)),
    "now": _impure("now"),
    "date": _impure("date"),
    "duration": _impure("duration"),
    "timezone": _impure("timezone"),
}
