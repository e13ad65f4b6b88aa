"""Shortest run first: the PriorityClasses that order our own training gangs by how long each will train.

A cluster that has them (deploy/volcano/priorityclasses.yaml) names each `vcpilot-run-<bound>`, `<bound>` a
whole number of minutes or hours (`vcpilot-run-45m`, `vcpilot-run-6h`), the shorter bound the higher value. The
rule policy gives a gang in the run's own queue, when the run asks for no priority class, the class of the
smallest bound its estimated training fits in (`band_for`); a run longer than every bound gets none. Volcano's
priority plugin then orders the queue's waiting gangs by it, so a short fine-tune does not wait behind a long
one (Sep/Oct 2017 windows of the agent benchmark: −5.5% mean time-to-finish; docs/agent-benchmark.md). The classes
say `preemptionPolicy: Never`: they order, they never evict — with the gang plugin's preemptable check off
(deploy/volcano/scheduler), a higher class would otherwise preempt our own longer runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["RUN_BAND_PREFIX", "band_for", "is_run_band", "run_bands"]

RUN_BAND_PREFIX = "vcpilot-run-"
_BOUND = re.compile(rf"{re.escape(RUN_BAND_PREFIX)}([1-9][0-9]{{0,4}})([mh])")


def _bound_s(name: str) -> float | None:
    """The seconds a run-band class is for; None when `name` is not one."""
    match = _BOUND.fullmatch(name)
    if match is None:
        return None
    return int(match.group(1)) * (60.0 if match.group(2) == "m" else 3600.0)


def is_run_band(name: str) -> bool:
    """Whether `name` is a run-band PriorityClass (`vcpilot-run-45m`)."""
    return _bound_s(name) is not None


def run_bands(classes: Iterable[str]) -> list[str]:
    """The run-band classes among `classes`, shortest bound first (a bound named twice, `60m` and `1h`, once)."""
    bounds: dict[float, str] = {}
    for name in sorted(classes):
        bound = _bound_s(name)
        if bound is not None:
            bounds.setdefault(bound, name)
    return [bounds[b] for b in sorted(bounds)]


def band_for(run_s: float, classes: Iterable[str]) -> str:
    """The class of the smallest bound at least `run_s` seconds among the run bands of `classes`; "" when none."""
    for name in run_bands(classes):
        if run_s <= (_bound_s(name) or 0.0):
            return name
    return ""
