"""The `sprig.*` functions Argo puts in every expression's environment (Masterminds/sprig v3, GenericFuncMap).

Sprig is written for Go templates, so arguments come in pipeline order: `sprig.replace(old, new, text)`,
`sprig.trimPrefix(prefix, text)`, `sprig.contains(needle, text)`, `sprig.default(fallback, value)`.  Its
arithmetic is lenient (`sprig.add("2", 3)` is 5; a string that is not a number counts as 0).  Functions that
read the clock, randomness or the environment are refused: expressions here are pure.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import zlib
from collections.abc import Callable, Mapping
from typing import Any

from pipelines.local.expressions.errors import ExpressionError, Unsupported
from pipelines.local.expressions.expr.functions import MEMORY_BUDGET, check_text_size, from_json, go_split
from pipelines.local.expressions.expr.runtime import deep_equal, regex
from pipelines.local.govalues import go_json, go_sprint, go_type

__all__ = ["SPRIG"]

_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
_B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567="


def to_int64(value: Any) -> int:
    """spf13/cast ToInt64 as sprig uses it: floats truncate, numeric strings parse, anything else is 0."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value == value and abs(value) != float("inf") else 0
    if isinstance(value, str):
        # strconv.ParseInt(s, 0, 64) after dropping a zero decimal part: "0x1f", "0o17", "010" (octal), "4.0".
        match = re.fullmatch(r"([+-]?)(0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|0[0-7_]*|[1-9][0-9]*)(\.0*)?", value)
        if match is None:
            return 0
        sign, digits = match.group(1), match.group(2)
        if len(digits) > 1 and digits[0] == "0" and digits[1] not in "xXoObB":
            digits = "0o" + digits[1:]
        try:
            return int(sign + digits, 0)
        except ValueError:
            return 0
    return 0


def to_float64(value: Any) -> float:
    """spf13/cast ToFloat64: numbers and numeric strings, anything else is 0."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return 0.0
    return 0.0


def _str(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise ExpressionError(f"sprig.{name} expects a string, not {go_type(value)}")
    return value


def _count(value: Any, name: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise ExpressionError(f"sprig.{name} expects an integer, not {go_type(value)}")


def _within_budget(size: int, name: str, what: str) -> None:
    """Refuse a count past expr-lang's memory budget, which its own `repeat` and `..` keep to.

    Go's sprig has none, and a count mistyped by a few digits would take all of this runner's memory instead of
    failing the step.
    """
    if size > MEMORY_BUDGET:
        raise ExpressionError(
            f"sprig.{name} would make {size:,} {what}; an expression may make at most {MEMORY_BUDGET:,}"
        )


def _repeat(count: Any, text: Any) -> str:
    count, text = _count(count, "repeat"), _str(text, "repeat")
    _within_budget(count, "repeat", "copies")
    check_text_size(len(text) * count, "sprig.repeat")
    return text * count


def _indent(name: str, count: Any, text: Any) -> str:
    count, text = _count(count, name), _str(text, name)
    _within_budget(count, name, "spaces a line")
    check_text_size(len(text) + count * (text.count("\n") + 1), f"sprig.{name}")
    return ("\n" if name == "nindent" else "") + " " * count + text.replace("\n", "\n" + " " * count)


def _list(value: Any, name: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise ExpressionError(f"cannot find {name} on type {go_type(value)}")
    return list(value)


def _dict(value: Any, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ExpressionError(f"sprig.{name} expects a map, not {go_type(value)}")
    return value


def empty(value: Any) -> bool:
    """Sprig's notion of unset: nil, false, 0, and empty strings, lists and maps."""
    if value is None or value is False:
        return True
    if isinstance(value, int | float):
        return value == 0
    if isinstance(value, str | list | tuple | Mapping):
        return len(value) == 0
    return False


def _default(fallback: Any, *given: Any) -> Any:
    return fallback if not given or empty(given[0]) else given[0]


def _title(text: str) -> str:
    """strings.Title: upper-case the first letter of each word, leave the rest alone."""
    return re.sub(r"(?:(?<=[^\w])|^)(\w)", lambda m: m.group(1).upper(), _str(text, "title"))


def _go_path(function: str) -> Callable[[Any], Any]:
    def call(value: Any) -> Any:
        path = _str(value, function)
        if function == "isAbs":
            return path.startswith("/")
        if function == "ext":
            base = path.rsplit("/", 1)[-1]
            return base[base.rfind(".") :] if "." in base else ""
        clean = _clean(path)
        if function == "clean":
            return clean
        if function == "base":
            stripped = path.rstrip("/")
            return "." if path == "" else (stripped.rsplit("/", 1)[-1] if stripped else "/")
        parent = path[: path.rfind("/") + 1]
        return _clean(parent) if parent else "."

    return call


def _clean(path: str) -> str:
    if path == "":
        return "."
    rooted = path.startswith("/")
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == ".." and parts and parts[-1] != "..":
            parts.pop()
        elif part != ".." or not rooted:
            parts.append(part)
    joined = "/".join(parts)
    return ("/" + joined) if rooted else (joined or ".")


def _go_expand(template: str) -> Callable[[re.Match[str]], str]:
    """Go's Regexp.Expand: `$1`, `${1}` and `${name}` refer to groups, `$$` is a dollar, unknown groups are empty."""

    def expand(match: re.Match[str]) -> str:
        def group(ref: re.Match[str]) -> str:
            name = ref.group(1) or ref.group(2)
            if name is None:
                return "$"
            try:
                return match.group(int(name) if name.isdigit() else name) or ""
            except (IndexError, KeyError):
                return ""

        return re.sub(r"\$(?:\{(\w+)\}|(\w+)|\$)", group, template)

    return expand


def _substr(start: Any, end: Any, text: Any) -> str:
    start, end, text = _count(start, "substr"), _count(end, "substr"), _str(text, "substr")
    if start < 0:
        return text[:end]
    return text[start:] if end < 0 or end > len(text) else text[start:end]


def _trunc(count: Any, text: Any) -> str:
    count, text = _count(count, "trunc"), _str(text, "trunc")
    if count < 0 and len(text) + count > 0:
        return text[len(text) + count :]
    return text[:count] if count >= 0 else text


def _fail(message: Any) -> Any:
    raise ExpressionError(go_sprint(message))


def _regex_find_all(pattern: str, text: str, limit: int) -> list[str]:
    found = [m.group(0) for m in regex(pattern).finditer(text)]
    return found if limit < 0 else found[:limit]


def _regex_split(pattern: str, text: str, limit: int) -> list[str]:
    if limit == 0:
        return []
    return regex(pattern).split(text, maxsplit=max(limit - 1, 0)) if pattern else list(text)


def _b64decode(text: str, decoder: Callable[[str], bytes], alphabet: str) -> str:
    try:
        return decoder(text).decode(errors="replace")
    except (binascii.Error, ValueError):
        # sprig returns Go's error text instead of failing.
        position = next((i for i, char in enumerate(text) if char not in alphabet), len(text))
        return f"illegal base64 data at input byte {position}"


def _until_step(start: Any, stop: Any, step: Any, name: str = "untilStep") -> list[int]:
    start, stop, step = _count(start, name), _count(stop, name), _count(step, name)
    if (stop < start and step >= 0) or (stop >= start and step <= 0):
        return []
    _within_budget(-(-(stop - start) // step), name, "items")
    return list(range(start, stop, step))


def _round(value: Any, places: Any, round_on: float = 0.5) -> float:
    scale = 10 ** to_float64(places)
    digit = scale * to_float64(value)
    fraction = digit - int(digit)
    return (float(-(-digit // 1)) if fraction >= round_on else float(digit // 1)) / scale


def _refuse(name: str) -> Callable[..., Any]:
    def call(*_: Any) -> Any:
        raise Unsupported(f"sprig.{name} depends on the clock, randomness or the host, which local runs refuse")

    return call


def _push(items: Any, value: Any) -> list[Any]:
    return [*_list(items, "append"), value]


def _sort_alpha(items: Any) -> list[str]:
    return sorted(go_sprint(item) for item in _list(items, "sortAlpha"))


def _type_of(value: Any) -> str:
    return "<nil>" if value is None else go_type(value)


def _kind_of(value: Any) -> str:
    kinds = {bool: "bool", int: "int", float: "float64", str: "string", list: "slice", dict: "map"}
    return "invalid" if value is None else kinds.get(type(value), "func")


def _has(needle: Any, haystack: Any) -> bool:
    return any(deep_equal(item, needle) for item in _list(haystack, "has"))


def _dig(*args: Any) -> Any:
    if len(args) < 3:
        raise ExpressionError("sprig.dig needs at least three arguments")
    *keys, fallback, current = args
    for key in keys:
        if not isinstance(current, Mapping) or key not in current:
            return fallback
        current = current[key]
    return current


SPRIG: dict[str, Callable[..., Any]] = {
    # strings
    "trim": lambda s: _str(s, "trim").strip(),
    "upper": lambda s: _str(s, "upper").upper(),
    "lower": lambda s: _str(s, "lower").lower(),
    "title": _title,
    "untitle": lambda s: _str(s, "untitle")[:1].lower() + s[1:],
    "substr": _substr,
    "repeat": _repeat,
    "trimAll": lambda cutset, s: _str(s, "trimAll").strip(_str(cutset, "trimAll")),
    "trimSuffix": lambda suffix, s: _str(s, "trimSuffix").removesuffix(_str(suffix, "trimSuffix")),
    "trimPrefix": lambda prefix, s: _str(s, "trimPrefix").removeprefix(_str(prefix, "trimPrefix")),
    "nospace": lambda s: "".join(_str(s, "nospace").split()),
    "trunc": _trunc,
    "contains": lambda needle, s: _str(needle, "contains") in _str(s, "contains"),
    "hasPrefix": lambda prefix, s: _str(s, "hasPrefix").startswith(_str(prefix, "hasPrefix")),
    "hasSuffix": lambda suffix, s: _str(s, "hasSuffix").endswith(_str(suffix, "hasSuffix")),
    "quote": lambda *values: " ".join(go_json(go_sprint(v)) for v in values if v is not None),
    "squote": lambda *values: " ".join(f"'{go_sprint(v)}'" for v in values if v is not None),
    "cat": lambda *values: " ".join(go_sprint(v) for v in values if v is not None),
    "indent": lambda n, s: _indent("indent", n, s),
    "nindent": lambda n, s: _indent("nindent", n, s),
    "replace": lambda old, new, s: _str(s, "replace").replace(_str(old, "replace"), _str(new, "replace")),
    "plural": lambda one, many, count: one if count == 1 else many,
    "toString": go_sprint,
    "sha1sum": lambda s: hashlib.sha1(_str(s, "sha1sum").encode()).hexdigest(),
    "sha256sum": lambda s: hashlib.sha256(_str(s, "sha256sum").encode()).hexdigest(),
    "sha512sum": lambda s: hashlib.sha512(_str(s, "sha512sum").encode()).hexdigest(),
    "adler32sum": lambda s: str(zlib.adler32(_str(s, "adler32sum").encode())),
    "b64enc": lambda s: base64.b64encode(_str(s, "b64enc").encode()).decode(),
    "b64dec": lambda s: _b64decode(_str(s, "b64dec"), lambda t: base64.b64decode(t, validate=True), _B64),
    "b32enc": lambda s: base64.b32encode(_str(s, "b32enc").encode()).decode(),
    "b32dec": lambda s: _b64decode(_str(s, "b32dec"), base64.b32decode, _B32),
    # conversions
    "atoi": lambda s: to_int64(_str(s, "atoi")) if re.fullmatch(r"[+-]?\d+", s, re.ASCII) else 0,
    "int": to_int64,
    "int64": to_int64,
    "float64": to_float64,
    "toStrings": lambda v: [go_sprint(i) for i in _list(v, "toStrings") if i is not None],
    "toDecimal": lambda v: int(go_sprint(v), 8) if re.fullmatch(r"[+-]?[0-7]+", go_sprint(v)) else 0,
    "split": lambda sep, s: {f"_{i}": part for i, part in enumerate(go_split(_str(s, "split"), sep))},
    "splitList": lambda sep, s: go_split(_str(s, "splitList"), _str(sep, "splitList")),
    "splitn": lambda sep, n, s: {
        f"_{i}": part for i, part in enumerate(go_split(_str(s, "splitn"), sep, _count(n, "splitn")))
    },
    "join": lambda sep, v: _str(sep, "join").join(
        go_sprint(i) for i in (v if isinstance(v, list | tuple) else [] if v is None else [v]) if i is not None
    ),
    "sortAlpha": _sort_alpha,
    # arithmetic
    "add1": lambda v: to_int64(v) + 1,
    "add": lambda *values: sum(to_int64(v) for v in values),
    "sub": lambda a, b: to_int64(a) - to_int64(b),
    "mul": lambda a, *values: _product([to_int64(a), *map(to_int64, values)]),
    "div": lambda a, b: _int_divide(to_int64(a), to_int64(b)),
    "mod": lambda a, b: _int_modulo(to_int64(a), to_int64(b)),
    "max": lambda a, *values: max([to_int64(a), *map(to_int64, values)]),
    "biggest": lambda a, *values: max([to_int64(a), *map(to_int64, values)]),
    "min": lambda a, *values: min([to_int64(a), *map(to_int64, values)]),
    "maxf": lambda a, *values: max([to_float64(a), *map(to_float64, values)]),
    "minf": lambda a, *values: min([to_float64(a), *map(to_float64, values)]),
    "addf": lambda *values: sum(map(to_float64, values)),
    "add1f": lambda v: to_float64(v) + 1,
    "subf": lambda a, *values: to_float64(a) - sum(map(to_float64, values)),
    "mulf": lambda a, *values: _product([to_float64(a), *map(to_float64, values)]),
    "divf": lambda a, *values: _float_divide(to_float64(a), [to_float64(v) for v in values]),
    "floor": lambda v: float(int(to_float64(v) // 1)),
    "ceil": lambda v: float(-int(-to_float64(v) // 1)),
    "round": _round,
    "until": lambda count: _until_step(0, count, 1 if _count(count, "until") >= 0 else -1, "until"),
    "untilStep": _until_step,
    # defaults and flow
    "default": _default,
    "empty": empty,
    "coalesce": lambda *values: next((v for v in values if not empty(v)), None),
    "all": lambda *values: all(not empty(v) for v in values),
    "any": lambda *values: any(not empty(v) for v in values),
    "compact": lambda v: [i for i in _list(v, "compact") if not empty(i)],
    "ternary": lambda when_true, when_false, condition: when_true if condition is True else when_false,
    "fromJson": lambda s: _quiet(from_json, s),
    "mustFromJson": from_json,
    "toJson": lambda v: go_json(v),
    "mustToJson": lambda v: go_json(v),
    "toPrettyJson": lambda v: go_json(v, indent="  "),
    "toRawJson": lambda v: go_json(v).replace("\\u003c", "<").replace("\\u003e", ">").replace("\\u0026", "&"),
    "fail": _fail,
    # lists
    "list": lambda *values: list(values),
    "tuple": lambda *values: list(values),
    "first": lambda v: (_list(v, "first") or [None])[0],
    "last": lambda v: (_list(v, "last") or [None])[-1],
    "rest": lambda v: _list(v, "rest")[1:],
    "initial": lambda v: _list(v, "initial")[:-1],
    "append": _push,
    "push": _push,
    "prepend": lambda items, value: [value, *_list(items, "prepend")],
    "reverse": lambda v: _list(v, "reverse")[::-1],
    "uniq": lambda v: [x for i, x in enumerate(_list(v, "uniq")) if not any(deep_equal(x, y) for y in v[:i])],
    "without": lambda items, *omit: [x for x in _list(items, "without") if not any(deep_equal(x, o) for o in omit)],
    "has": _has,
    "slice": lambda items, *bounds: _list(items, "slice")[
        to_int64(bounds[0]) if bounds else 0 : to_int64(bounds[1]) if len(bounds) > 1 else None
    ],
    "concat": lambda *lists: [item for items in lists for item in _list(items, "concat")],
    "chunk": lambda size, items: [items[i : i + size] for i in range(0, len(_list(items, "chunk")), size)],
    # dictionaries
    "dict": lambda *pairs: {
        go_sprint(k): (pairs[i + 1] if i + 1 < len(pairs) else "") for i, k in enumerate(pairs) if i % 2 == 0
    },  # fmt: skip
    "get": lambda d, key: _dict(d, "get").get(key, ""),
    "set": lambda d, key, value: {**_dict(d, "set"), key: value},
    "unset": lambda d, key: {k: v for k, v in _dict(d, "unset").items() if k != key},
    "hasKey": lambda d, key: key in _dict(d, "hasKey"),
    "keys": lambda *dicts: [k for d in dicts for k in _dict(d, "keys")],
    "values": lambda d: list(_dict(d, "values").values()),
    "pluck": lambda key, *dicts: [d[key] for d in dicts if key in _dict(d, "pluck")],
    "pick": lambda d, *keys: {k: v for k, v in _dict(d, "pick").items() if k in keys},
    "omit": lambda d, *keys: {k: v for k, v in _dict(d, "omit").items() if k not in keys},
    "merge": lambda dst, *srcs: _merge(dst, srcs, overwrite=False),
    "mergeOverwrite": lambda dst, *srcs: _merge(dst, srcs, overwrite=True),
    "dig": _dig,
    # regular expressions
    "regexMatch": lambda pattern, s: regex(_str(pattern, "regexMatch")).search(_str(s, "regexMatch")) is not None,
    "regexFind": lambda pattern, s: m.group(0) if (m := regex(pattern).search(_str(s, "regexFind"))) else "",
    "regexFindAll": lambda pattern, s, n: _regex_find_all(pattern, _str(s, "regexFindAll"), _count(n, "regexFindAll")),
    "regexReplaceAll": lambda pattern, s, repl: regex(pattern).sub(_go_expand(repl), _str(s, "regexReplaceAll")),
    "regexReplaceAllLiteral": lambda pattern, s, repl: regex(pattern).sub(lambda _: repl, s),
    "regexSplit": lambda pattern, s, n: _regex_split(pattern, _str(s, "regexSplit"), _count(n, "regexSplit")),
    "regexQuoteMeta": lambda s: re.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\1", _str(s, "regexQuoteMeta")),
    # paths
    "base": _go_path("base"),
    "dir": _go_path("dir"),
    "clean": _go_path("clean"),
    "ext": _go_path("ext"),
    "isAbs": _go_path("isAbs"),
    # reflection
    "typeOf": _type_of,
    "typeIs": lambda name, value: _type_of(value) == name,
    "kindOf": _kind_of,
    "kindIs": lambda name, value: _kind_of(value) == name,
    "deepEqual": deep_equal,
}
for _name in ("now", "date", "dateInZone", "ago", "toDate", "unixEpoch", "randAlphaNum", "randAlpha", "randAscii",
              "randNumeric", "randInt", "randBytes", "uuidv4", "shuffle", "getHostByName", "bcrypt", "htpasswd",
              "genPrivateKey", "genCA", "genSelfSignedCert", "genSignedCert", "encryptAES", "decryptAES"):  # fmt: skip
    SPRIG[_name] = _refuse(_name)


def _product(values: list[Any]) -> Any:
    result = values[0]
    for value in values[1:]:
        result *= value
    return result


def _int_divide(left: int, right: int) -> int:
    if right == 0:
        raise ExpressionError("sprig.div: integer divide by zero")
    quotient = abs(left) // abs(right)
    return quotient if (left < 0) == (right < 0) else -quotient


def _int_modulo(left: int, right: int) -> int:
    if right == 0:
        raise ExpressionError("sprig.mod: integer divide by zero")
    remainder = abs(left) % abs(right)
    return -remainder if left < 0 else remainder


def _float_divide(left: float, divisors: list[float]) -> float:
    for divisor in divisors:
        if divisor == 0:
            raise ExpressionError("sprig.divf: division by zero")
        left /= divisor
    return left


def _quiet(function: Callable[[Any], Any], value: Any) -> Any:
    try:
        return function(value)
    except ExpressionError:
        return None


def _merge(dst: Any, sources: tuple[Any, ...], overwrite: bool) -> dict[str, Any]:
    merged = dict(_dict(dst, "merge"))
    for source in sources:
        for key, value in _dict(source, "merge").items():
            if overwrite or key not in merged or empty(merged[key]):
                merged[key] = value
    return merged
