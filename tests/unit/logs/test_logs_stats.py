"""The tests behind every finding, checked against numbers worked out by hand."""

from __future__ import annotations

import math
import random

import pytest

from components.logs.stats import QuantileSketch, one_proportion_test, two_proportion_test


def test_two_proportion_test_matches_the_hand_computed_example() -> None:
    # 10 of 200 (5%) before, 30 of 200 (15%) now. Pooled p = 40/400 = 0.1,
    # standard error = sqrt(0.1 * 0.9 * (1/200 + 1/200)) = sqrt(0.0009) = 0.03, z = (0.15 - 0.05) / 0.03 = 3.333...,
    # one-sided p = P(Z >= 3.333) = 0.000429.
    result = two_proportion_test(10, 200, 30, 200)
    assert result.baseline == 0.05 and result.current == 0.15
    assert result.z == pytest.approx(10 / 3)
    assert result.p_value == pytest.approx(0.000429, abs=5e-6)


def test_a_drop_is_not_evidence_of_a_rise() -> None:
    result = two_proportion_test(30, 200, 10, 200)
    assert result.z == pytest.approx(-10 / 3) and result.p_value > 0.99


def test_identical_windows_without_variance_give_no_evidence() -> None:
    assert two_proportion_test(0, 50, 0, 80).p_value == 1.0
    assert two_proportion_test(50, 50, 80, 80).p_value == 1.0


def test_the_same_share_on_a_larger_sample_is_stronger_evidence() -> None:
    small = two_proportion_test(2, 20, 4, 20)  # 10% -> 20% of 20
    large = two_proportion_test(200, 2000, 400, 2000)  # 10% -> 20% of 2000
    assert small.p_value > 0.1 and large.p_value < 1e-15


def test_one_proportion_test_against_a_budget() -> None:
    # 40 of 200 = 20% against a 5% budget: z = 0.15 / sqrt(0.05 * 0.95 / 200) = 9.733
    result = one_proportion_test(40, 200, 0.05)
    assert result.z == pytest.approx(0.15 / math.sqrt(0.0475 / 200))
    assert result.p_value < 1e-20


def test_empty_samples_are_refused_with_a_sentence() -> None:
    with pytest.raises(ValueError, match="two non-empty samples"):
        two_proportion_test(0, 0, 1, 10)


def test_quantiles_are_within_the_sketch_accuracy_in_bounded_memory() -> None:
    rng = random.Random(3)
    values = [rng.lognormvariate(4.5, 0.8) for _ in range(50_000)]
    sketch = QuantileSketch()
    for value in values:
        sketch.add(value)
    ordered = sorted(values)
    for q in (0.5, 0.95, 0.99):
        exact = ordered[round(q * (len(ordered) - 1))]
        assert sketch.quantile(q) == pytest.approx(exact, rel=0.02)
    assert len(sketch.bins) < 1000  # independent of the 50,000 values
    restored = QuantileSketch.model_validate_json(sketch.model_dump_json())
    assert restored.quantile(0.95) == sketch.quantile(0.95)


def test_quantiles_of_nothing_and_of_zeros() -> None:
    sketch = QuantileSketch()
    assert sketch.quantile(0.5) is None
    sketch.add(0)
    sketch.add(100)
    assert sketch.quantile(0) == 0.0 and sketch.quantile(1) == pytest.approx(100, rel=0.01)


def test_two_merged_sketches_are_the_sketch_of_all_their_values() -> None:
    first, second, together = QuantileSketch(), QuantileSketch(), QuantileSketch()
    for value in [0.0, 3.0, 120.0, 95.5, 400.0]:
        first.add(value)
        together.add(value)
    for value in [88.0, 0.0, 1000.0]:
        second.add(value)
        together.add(value)
    first.merge(second)
    assert first == together
    with pytest.raises(ValueError, match="same relative accuracy"):
        first.merge(QuantileSketch(relative_accuracy=0.05))
