"""Go's time.ParseDuration, as metav1.Duration and Argo decode durations: what Go takes, the rest refused.

Every expectation here was checked against Go's own time.ParseDuration (go1.x, `go run`).
"""

from __future__ import annotations

import pytest

from components.durations import DurationError, DurationTooLong, parse_go_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),  # the one number Go takes without a unit
        ("+0", 0.0),
        ("-0", 0.0),
        ("0s", 0.0),
        ("-1s", -1.0),
        ("1h30m", 5400.0),
        ("300ms", 0.3),
        ("500ms", 0.5),
        ("1.5h", 5400.0),
        (".5m", 30.0),
        ("1.s", 1.0),
        ("3\u00b5s", 3e-6),
        ("3\u03bcs", 3e-6),
        ("7us", 7e-6),
        ("12ns", 12e-9),
        ("1h2m3s4ms5us6ns", 3723.004005006),
        ("1.0000000000000000000001s", 1.0),  # digits past what Go keeps are read and dropped
        ("000000000000000000000000001s", 1.0),
        ("2562047h47m16.854775807s", (2**63 - 1) / 1e9),  # the longest a duration can be
        ("-2562047h47m16.854775808s", -(2**63) / 1e9),
    ],
)
def test_what_go_reads(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize(
    "text",
    [
        "10x",
        "1.5",  # a fraction needs its unit (Argo's whole seconds are not Go's)
        "30",
        "00",
        "abc",
        "-",
        "+",
        "",
        ".s",
        "1.",
        " 30s",
        "30s ",
        "1d",
        "1S",
        "1e3s",
        "1h-2m",
        "1_000s",
        "0x10s",
        "inf",
        "nan",
        "\u0663s",  # a digit, but not an ASCII one
    ],
)
def test_what_go_refuses_is_one_sentence_naming_the_value(text: str) -> None:
    with pytest.raises(DurationError) as refused:
        parse_go_duration(text)
    assert not isinstance(refused.value, DurationTooLong)
    assert str(refused.value) == (
        f"{text!r} is not a duration (Go's time.ParseDuration: a number with a unit such as 30s, 5m, 1h30m)"
    )


@pytest.mark.parametrize(
    "text",
    [
        "2562047h47m16.854775808s",  # one nanosecond past an int64
        "-2562047h47m16.854775809s",
        "9223372036854775808ns",
        "99999999999h",
        "99999999999999999999999s",
        "2562047h2562047h",
        "9" * 5000 + "s",  # more digits than Python's int() reads from text
    ],
)
def test_longer_than_go_holds_is_said_so(text: str) -> None:
    with pytest.raises(DurationTooLong, match="is longer than a duration can be"):
        parse_go_duration(text)


@pytest.mark.parametrize("value", [30, 1.5, True, None])
def test_only_text_is_a_duration(value: object) -> None:
    """metav1.Duration's UnmarshalJSON reads a JSON string: a bare number is refused, not taken as seconds."""
    with pytest.raises(DurationError, match="is not a duration"):
        parse_go_duration(value)  # type: ignore[arg-type]
