"""One figure of a benchmark beside its goal: what `make bench` (benchmarks/report.py) collects from every benchmark.

A benchmark defines each of its goals once, where it measures the figure, and prints the figures under the key
`figures` of its JSON document: `figure("submit to Running", 1.03, "<=", 1.5, unit="x", baseline="Popen")`.
"""

from __future__ import annotations

import operator
from typing import Literal

__all__ = ["figure"]

_COMPARE = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt, "==": operator.eq}


def figure(
    name: str,
    value: float | None,
    op: Literal["<=", "<", ">=", ">", "=="],
    target: float,
    *,
    unit: str = "",
    baseline: str = "",
) -> dict[str, object]:
    """The figure `name` (in `unit`; `x` for a ratio to `baseline`), its goal `op target`, and whether it is met.

    A value of None is a figure that could not be measured here (its baseline tool is missing): never met.
    """
    return {
        "name": name,
        "value": None if value is None else round(value, 4),
        "unit": unit,
        "goal": f"{op} {target:g}",
        "baseline": baseline,
        "met": value is not None and bool(_COMPARE[op](value, target)),
    }
