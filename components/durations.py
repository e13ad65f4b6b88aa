"""Go's time.ParseDuration, the one reader of the durations Kubernetes, Volcano and Argo take as text ("1h30m").

metav1.Duration (a Volcano policy's `timeout`, a Job's `runningEstimate`) and Argo's durations are decoded by Go,
so a value counts only if Go reads it: "10x", "1.5" (a fraction needs its unit), " 30s" and "1d" are refused, and
"0", "-1s", "1.5h", ".5m" and "300ms" are taken. This is a port of Go's own algorithm on whole nanoseconds, so the
range (an int64 of nanoseconds, about 292 years) ends where Go's does, to the nanosecond.
"""

from __future__ import annotations

import re

__all__ = ["DURATION_FORM", "DurationError", "DurationTooLong", "parse_go_duration"]

# How to write one, for the sentences that refuse a value.
DURATION_FORM = "Go's time.ParseDuration: a number with a unit such as 30s, 5m, 1h30m"

# Go's unitMap; µ is either code point Go takes (U+00B5 MICRO SIGN, U+03BC GREEK SMALL LETTER MU).
_UNIT_NS = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,
    "\u03bcs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3_600 * 1_000_000_000,
}
# The grammar Go reads: an optional sign, then numbers each with its unit ("1h30m", "1.5s", ".5m", "2.s"), or "0".
# Checked whole first, so that text of another form is "not a duration" even where Go's loop would overflow before
# it reached the fault; the parts are then summed as Go sums them.
# Patterns, compiled by `re` on first use (its cache keeps them): a command that parses no duration pays nothing.
_PART = r"([0-9]*)(?:\.([0-9]*))?(ns|us|\u00b5s|\u03bcs|ms|s|m|h)"
_FORM = r"[+-]?(?:0|(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+)"
_LIMIT = 1 << 63  # the magnitude a duration may reach: an int64's, -2**63 itself included


class DurationError(ValueError):
    """The text is not a duration Go reads; the message is one sentence naming the value."""


class DurationTooLong(DurationError):
    """The text has a duration's form but more nanoseconds than Go's int64 holds."""


def parse_go_duration(text: str) -> float:
    """Seconds in `text` as Go's time.ParseDuration reads it; DurationError when Go refuses it.

    A signed sequence of decimal numbers, each with a unit (ns, us, µs, ms, s, m, h): "300ms", "-1.5h", "2h45m".
    A bare "0" (or "+0", "-0") is the one number without a unit. Nothing else: no spaces, no exponent, no "d".
    """
    if not isinstance(text, str):
        raise DurationError(f"{text!r} is not a duration ({DURATION_FORM})")
    return _nanoseconds(text) / 1e9


def _nanoseconds(orig: str) -> int:
    """time.ParseDuration (Go's src/time/format.go) on Python's unbounded ints, with Go's overflow checks."""
    if re.fullmatch(_FORM, orig) is None:
        raise DurationError(f"{orig!r} is not a duration ({DURATION_FORM})")
    too_long = DurationTooLong(f"{orig!r} is longer than a duration can be (about 292 years)")
    negative, body = orig.startswith("-"), orig.lstrip("+-")
    if body == "0":  # Go's special case: zero needs no unit
        return 0
    total = 0
    for whole, fraction_digits, unit in re.findall(_PART, body):
        per_unit = _UNIT_NS[unit]
        whole = whole.lstrip("0")
        value = int(whole or "0") if len(whole) <= 20 else _LIMIT + 1  # (int() refuses thousands of digits)
        if value > _LIMIT // per_unit:  # leadingInt's overflow, or the unit's
            raise too_long
        value *= per_unit
        fraction, scale = _leading_fraction(fraction_digits)
        if fraction > 0:
            # Go adds the fraction in float64 (nanosecond-exact for fractions of an hour) and truncates it.
            value += int(float(fraction) * (float(per_unit) / scale))
            if value > _LIMIT:
                raise too_long
        total += value
        if total > _LIMIT:
            raise too_long
    if negative:
        return -total
    if total > _LIMIT - 1:
        raise too_long
    return total


def _leading_fraction(digits: str) -> tuple[int, float]:
    """Go's leadingFraction: the digits it keeps before they would overflow, and 10 to the power of their count."""
    value, scale = 0, 1.0
    for c in digits:
        following = value * 10 + int(c)
        if value > (_LIMIT - 1) // 10 or following > _LIMIT:
            break  # Go keeps consuming digits but adds no more of them
        value, scale = following, scale * 10
    return value, scale
