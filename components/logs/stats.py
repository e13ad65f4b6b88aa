"""The statistics behind a finding: proportion tests that say a change is real, and a bounded quantile sketch.

A raw threshold ("negative feedback above 10%") fires on five unlucky requests and misses a real jump on a
large template; a test weighs the change against the sample size. Latency percentiles come from a sketch whose
memory depends on the spread of the values, not on how many there were, so a window of a billion requests
costs the same few kilobytes as one of a thousand.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

__all__ = ["ProportionTest", "QuantileSketch", "one_proportion_test", "two_proportion_test"]


class ProportionTest(BaseModel):
    """A one-sided z-test that a proportion went up: the two proportions, z and its p-value."""

    model_config = ConfigDict(frozen=True)

    test: str
    baseline: float = Field(description="the reference proportion (or the budget)")
    current: float
    z: float
    p_value: float


def _upper_tail(z: float) -> float:
    """P(Z >= z) for a standard normal Z."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def two_proportion_test(x1: int, n1: int, x2: int, n2: int) -> ProportionTest:
    """Is x2/n2 larger than x1/n1? Pooled two-proportion z-test, one-sided.

    z = (p2 - p1) / sqrt(p (1 - p) (1/n1 + 1/n2)) with the pooled p = (x1 + x2) / (n1 + n2); both samples must
    be non-empty. When every observation is alike (p is 0 or 1) there is no evidence of a change: z = 0, p = 1.
    """
    if n1 <= 0 or n2 <= 0:
        raise ValueError(f"a proportion test needs two non-empty samples, got n1={n1} and n2={n2}")
    p1, p2 = x1 / n1, x2 / n2
    pooled = (x1 + x2) / (n1 + n2)
    spread = pooled * (1.0 - pooled) * (1.0 / n1 + 1.0 / n2)
    if spread <= 0.0:
        return ProportionTest(test="two-proportion z-test", baseline=p1, current=p2, z=0.0, p_value=1.0)
    z = (p2 - p1) / math.sqrt(spread)
    return ProportionTest(test="two-proportion z-test", baseline=p1, current=p2, z=z, p_value=_upper_tail(z))


def one_proportion_test(x: int, n: int, budget: float) -> ProportionTest:
    """Is x/n larger than `budget`? One-proportion z-test, one-sided, for when there is no baseline window."""
    if n <= 0 or not 0.0 < budget < 1.0:
        raise ValueError(f"a proportion test needs a non-empty sample and a budget in (0, 1), got n={n}, {budget}")
    share = x / n
    z = (share - budget) / math.sqrt(budget * (1.0 - budget) / n)
    return ProportionTest(test="one-proportion z-test", baseline=budget, current=share, z=z, p_value=_upper_tail(z))


class QuantileSketch(BaseModel):
    """Quantiles of non-negative values within a relative error, in memory bounded by their range (DDSketch).

    A value v lands in bin ceil(log_gamma v) with gamma = (1 + a) / (1 - a); every value of a bin is within a
    relative error a of the bin's representative, so quantiles are too.
    """

    relative_accuracy: float = Field(default=0.01, gt=0, lt=1)
    count: int = 0
    zeros: int = 0
    bins: dict[int, int] = Field(default_factory=dict)

    _log_gamma: float = PrivateAttr(default=0.0)

    def model_post_init(self, context: object) -> None:
        """Compute log(gamma) once: `add` runs for every request."""
        self._log_gamma = math.log(self._gamma)

    @property
    def _gamma(self) -> float:
        return (1.0 + self.relative_accuracy) / (1.0 - self.relative_accuracy)

    def add(self, value: float) -> None:
        """Record one value; negative values are clamped to zero."""
        self.count += 1
        if value <= 0.0:
            self.zeros += 1
            return
        key = math.ceil(math.log(value) / self._log_gamma)
        self.bins[key] = self.bins.get(key, 0) + 1

    def merge(self, other: QuantileSketch) -> None:
        """Add every value `other` counted (a sketch of the same accuracy)."""
        if other.relative_accuracy != self.relative_accuracy:
            raise ValueError("only sketches of the same relative accuracy can be merged")
        self.count += other.count
        self.zeros += other.zeros
        for key, n in other.bins.items():
            self.bins[key] = self.bins.get(key, 0) + n

    def quantile(self, q: float) -> float | None:
        """The q-quantile (0 <= q <= 1) of the values added, or None when there are none."""
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"a quantile is between 0 and 1, got {q}")
        if self.count == 0:
            return None
        rank = q * (self.count - 1)
        seen = self.zeros
        if rank < seen:
            return 0.0
        gamma = self._gamma
        for key in sorted(self.bins):
            seen += self.bins[key]
            if seen > rank:
                return 2.0 * gamma**key / (gamma + 1.0)
        return 2.0 * gamma ** max(self.bins) / (gamma + 1.0)
