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
    value: float,
    op: Literal["<=", "<", ">=", ">", "=="],
    target: float,
    *,
    unit: str = "",
    baseline: str = "",
) -> dict[str, object]:
    """The figure `name` (in `unit`; `x` for a ratio to `baseline`), its goal `op target`, and whether it is met."""
    return {
        "name": name,
        "value": round(value, 4),
        "unit": unit,
        "goal": f"{op} {target:g}",
        "baseline": baseline,
        "met": bool(_COMPARE[op](value, target)),
    }
