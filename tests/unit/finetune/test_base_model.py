"""The base-model rule: 'tiny', a path, or a Hub id exactly as huggingface_hub's own validate_repo_id has it."""

from __future__ import annotations

import pytest
from huggingface_hub.utils import HFValidationError, validate_repo_id
from hypothesis import given
from hypothesis import strategies as st

from components.finetune.base_model import check_base_model, is_hub_id


def hub_takes(value: str) -> bool:
    try:
        validate_repo_id(value)
    except HFValidationError:
        return False
    return True


@given(st.text(alphabet="ab9-_./ üZ", max_size=12) | st.text(max_size=8))
def test_the_hub_id_rule_is_the_hubs(value: str) -> None:
    assert is_hub_id(value) == hub_takes(value)


@pytest.mark.parametrize(
    "value",
    ["a" * 96, "a" * 97, "o/" + "a" * 96, "o/" + "a" * 97, "o" * 96 + "/a", "o" * 97 + "/a", "a.git", "a--b", "a..b"],
)
def test_the_hub_id_rule_at_its_edges(value: str) -> None:
    assert is_hub_id(value) == hub_takes(value)


@pytest.mark.parametrize(
    "value", ["tiny", "Qwen/Qwen2.5-0.5B-Instruct", "gpt2", "/models/my model", "./m", "../m", "/workspace/runs/x"]
)
def test_models_a_run_can_train_are_taken(value: str) -> None:
    assert check_base_model(value, "--base-model") == value


@pytest.mark.parametrize("value", ["x y", "", "a/b/c", "~/models/m", "-model", "org/name.git", "ü", "m\n"])
def test_a_name_no_loader_can_read_is_refused_naming_the_option(value: str) -> None:
    with pytest.raises(ValueError, match=r"^--base-model .* is not a model: give 'tiny', a model directory"):
        check_base_model(value, "--base-model")
