"""expr-lang's runtime semantics (vm/runtime): equality, ordering, arithmetic, member access, `in`, conversions.

Values are what Argo's environment holds once decoded: str, int, float, bool, None, list and dict.  Booleans
are never numbers here (Python's `True == 1` is not Go's), ints stay ints until mixed with floats, and `/`
always yields a float, as in expr.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from pipelines.local.expressions.errors import ExpressionError
from pipelines.local.expressions.goregexp import RegexpError, compile_go
from pipelines.local.govalues import go_type, is_number

__all__ = [
    "add",
    "arithmetic",
    "compare",
    "deep_equal",
    "equal",
    "fetch",
    "member_in",
    "regex",
    "slice_of",
    "to_float",
    "to_int",
]

_INT64 = 2**63
_GO_FLOAT = re.compile(
    r"[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|inf|infinity)|nan", re.IGNORECASE | re.ASCII
)


def _wrap_int(value: int) -> int:
    """Go ints are 64-bit and wrap around silently."""
    return ((value + _INT64) % (2 * _INT64)) - _INT64


def deep_equal(left: Any, right: Any) -> bool:
    """reflect.DeepEqual on decoded values: same types all the way down (`{"a": 1} != {"a": 1.0}`)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, list):
        return len(left) == len(right) and all(deep_equal(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(deep_equal(v, right[k]) for k, v in left.items())
    return bool(left == right)


def equal(left: Any, right: Any) -> bool:
    """Expr's `==`: numbers compare by value across int and float, lists element-wise, maps deeply."""
    if is_number(left) and is_number(right):
        return bool(left == right)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(equal(a, b) for a, b in zip(left, right, strict=True))
    return deep_equal(left, right)


def compare(op: str, left: Any, right: Any) -> bool:
    """`<`, `>`, `<=`, `>=` between two numbers or two strings; anything else is an error."""
    if not ((is_number(left) and is_number(right)) or (isinstance(left, str) and isinstance(right, str))):
        raise ExpressionError(f"invalid operation: {go_type(left)} {op} {go_type(right)}")
    if op == "<":
        return bool(left < right)
    if op == ">":
        return bool(left > right)
    if op == "<=":
        return bool(left <= right)
    return bool(left >= right)


def add(left: Any, right: Any) -> Any:
    """`+`: numbers, or two strings; expr never converts a number to a string for you."""
    if isinstance(left, str) and isinstance(right, str):
        return left + right
    if is_number(left) and is_number(right):
        if isinstance(left, int) and isinstance(right, int):
            return _wrap_int(left + right)
        return float(left) + float(right)
    raise ExpressionError(f"invalid operation: {go_type(left)} + {go_type(right)}")


def _go_divide(left: float, right: float) -> float:
    if right == 0:
        if left == 0 or math.isnan(left):
            return math.nan
        return math.copysign(math.inf, left) * math.copysign(1.0, right)
    return left / right


def arithmetic(op: str, left: Any, right: Any) -> Any:
    """`-`, `*`, `/`, `%`, `**` and `^` with Go's results: `/` and `**` give floats, `%` wants integers."""
    if not (is_number(left) and is_number(right)):
        raise ExpressionError(f"invalid operation: {go_type(left)} {op} {go_type(right)}")
    both_int = isinstance(left, int) and isinstance(right, int)
    if op == "-":
        return _wrap_int(left - right) if both_int else float(left) - float(right)
    if op == "*":
        return _wrap_int(left * right) if both_int else float(left) * float(right)
    if op == "/":
        return _go_divide(float(left), float(right))
    if op == "%":
        if not both_int:
            raise ExpressionError(f"invalid operation: {go_type(left)} % {go_type(right)}")
        if right == 0:
            raise ExpressionError("integer divide by zero")
        remainder = abs(left) % abs(right)  # Go truncates toward zero: the sign follows the dividend
        return -remainder if left < 0 else remainder
    try:
        return math.pow(float(left), float(right))
    except OverflowError:
        return math.inf
    except ValueError:
        return math.nan


def to_int(value: Any, name: str = "int") -> int:
    """Expr's `int()`: truncates floats and parses decimal strings (`strconv.Atoi`)."""
    if isinstance(value, bool) or value is None:
        raise ExpressionError(f"invalid operation: {name}({go_type(value)})")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return -_INT64
        return _wrap_int(int(value))
    if isinstance(value, str):
        if re.fullmatch(r"[+-]?\d+", value) and value.isascii():
            number = int(value)
            if -_INT64 <= number < _INT64:
                return number
        raise ExpressionError(f"invalid operation: {name}({value})")
    raise ExpressionError(f"invalid operation: {name}({go_type(value)})")


def to_float(value: Any, name: str = "float") -> float:
    """Expr's `float()`: numbers as they are, strings with `strconv.ParseFloat`."""
    if isinstance(value, bool) or value is None:
        raise ExpressionError(f"invalid operation: {name}({go_type(value)})")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        if value.isascii() and _GO_FLOAT.fullmatch(value):
            return float(value)
        raise ExpressionError(f"invalid operation: {name}({value})")
    raise ExpressionError(f"invalid operation: {name}({go_type(value)})")


def _index(value: Any, length: int) -> int:
    index = to_int(value) if not isinstance(value, str) else None
    if index is None:
        raise ExpressionError(f"invalid operation: int({go_type(value)})")
    if index < 0:
        index += length
    if not 0 <= index < length:
        raise ExpressionError(f"index out of range: {index} (array length is {length})")
    return index


def fetch(container: Any, key: Any) -> Any:
    """`a.b` and `a[k]`: a missing map key is nil, an index out of range and anything on nil are errors."""
    if isinstance(container, Mapping):
        if key is None:
            key = ""
        if not isinstance(key, str):
            raise ExpressionError(f"cannot use {go_type(key)} as a key of {go_type(container)}")
        return container.get(key)
    if isinstance(container, list | tuple):
        return container[_index(key, len(container))]
    if isinstance(container, str):
        data = container.encode()
        return data[_index(key, len(data))]  # Go indexes strings by byte
    shown = key if isinstance(key, str) else repr(key)
    raise ExpressionError(f"cannot fetch {shown} from {go_type(container)}")


def slice_of(container: Any, start: Any, end: Any) -> Any:
    """`a[from:to]` on arrays and strings, clamped like expr's runtime.Slice."""
    if not isinstance(container, list | tuple | str):
        raise ExpressionError(f"cannot slice {go_type(container)}")
    data: Any = container.encode() if isinstance(container, str) else container
    length = len(data)
    low = 0 if start is None else to_int(start)
    high = length if end is None else to_int(end)
    low = max(low + length if low < 0 else low, 0)
    high = min(max(high + length if high < 0 else high, 0), length)
    low = min(low, high)
    part = data[low:high]
    return part.decode(errors="replace") if isinstance(container, str) else list(part)


def member_in(needle: Any, haystack: Any) -> bool:
    """`x in array` compares with `==`; `k in map` looks for a key; `in` on nil is false."""
    if haystack is None:
        return False
    if isinstance(haystack, list | tuple):
        return any(equal(item, needle) for item in haystack)
    if isinstance(haystack, Mapping):
        if needle is None:
            needle = ""
        if not isinstance(needle, str):
            raise ExpressionError(f"cannot use {go_type(needle)} as a key of {go_type(haystack)}")
        return needle in haystack
    raise ExpressionError(f'operator "in" not defined on {go_type(haystack)}')


def regex(pattern: str) -> Any:
    """A Go (RE2) regular expression, compiled by RE2 itself (goregexp)."""
    try:
        return compile_go(pattern)
    except RegexpError as error:
        raise ExpressionError(f"invalid regular expression {pattern!r}: {error}") from None
