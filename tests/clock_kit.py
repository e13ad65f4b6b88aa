"""A clock a test moves by hand, for code that takes `clock=` (LocalCluster)."""

from __future__ import annotations


class Clock:
    """The cluster's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now
