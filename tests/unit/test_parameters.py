"""The template's parameter check: what Argo itself lets through (enums) and what our steps could not read."""

from __future__ import annotations

import pytest

from pipelines.parameters import PARAMETERS, check_parameters

DEFAULTS = {p.name or "": str(p.value) for p in PARAMETERS}


def test_the_defaults_pass() -> None:
    check_parameters(DEFAULTS)


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("mode", "bogus", "choose one of auto, force, dry-run"),
        ("gpus-per-pod", "3", "choose one of 1, 2, 4, 8"),
        ("agent-policy", "", "choose one of rules, llm"),
        ("gpus-wanted", "abc", "not a whole number"),
        ("gpus-wanted", "2.5", "not a whole number"),
        ("train-max-steps", "0", "at least 1"),
        ("slo-ttft-ms", "-5", "at least 0"),
        ("slo-tpot-ms", "nan", "not a finite number"),
        ("eval-margin", "inf", "not a finite number"),
        ("cpu-per-gpu", "-1", "greater than 0"),
        ("memory-per-gpu", "lots", "greater than 0"),
        ("gpus-min", "9", "more than gpus-wanted"),
    ],
)
def test_a_bad_value_gets_one_sentence_naming_the_parameter(name: str, value: str, says: str) -> None:
    with pytest.raises(ValueError, match=says) as caught:
        check_parameters({**DEFAULTS, name: value})
    assert "\n" not in str(caught.value) and name in str(caught.value)


def test_parameters_it_does_not_know_are_left_to_argo() -> None:
    check_parameters({"mode": "force", "something-else": "x"})
