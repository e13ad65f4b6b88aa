"""Exact match, perplexity and the promotion rule, on stub models whose answers we choose."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from components.evaluate.decision import decide, slo_outcome
from components.evaluate.scoring import EvalSetError, Example, exact_match, normalize, read_eval_set, score


class StubModel:
    """Answers from a table; every reference token has probability 1/2."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.budgets: list[int] = []

    def complete(self, prompt: str, max_new_tokens: int) -> str:
        self.budgets.append(max_new_tokens)
        return self.answers.get(prompt, " ?")

    def completion_nll(self, prompt: str, completion: str) -> tuple[float, int]:
        return len(completion) * math.log(2), len(completion)

    def token_count(self, text: str) -> int:
        return len(text)


EXAMPLES = [
    Example(prompt="Q: price of red mug?\nA:", completion=" $12"),
    Example(prompt="Q: price of oak bowl?\nA:", completion=" $47"),
    Example(prompt="Q: price of blue pen?\nA:", completion=" $8"),
    Example(prompt="Q: price of tea?\nA:", completion=" $3"),
]


def test_a_model_right_on_more_items_scores_higher():
    right_on_two = StubModel({EXAMPLES[0].prompt: " $12", EXAMPLES[1].prompt: " $47"})
    right_on_none = StubModel({e.prompt: " $1" for e in EXAMPLES})
    assert score(right_on_two, EXAMPLES).exact_match == 0.5
    assert score(right_on_none, EXAMPLES).exact_match == 0.0


def test_exact_match_by_category_only_when_the_examples_name_one():
    filed = [e.model_copy(update={"category": c}) for e, c in zip(EXAMPLES, ["mug", "bowl", "pen", ""], strict=True)]
    model = StubModel({EXAMPLES[0].prompt: " $12", EXAMPLES[1].prompt: " $40", EXAMPLES[3].prompt: " $3"})
    scores = score(model, filed)
    assert scores.by_category == {"bowl": 0.0, "mug": 1.0, "other": 1.0, "pen": 0.0}
    assert scores.exact_match == 0.5
    assert score(model, EXAMPLES).by_category == {}


def test_whitespace_does_not_count_and_a_model_that_keeps_talking_is_cut_at_the_newline():
    model = StubModel(
        {
            EXAMPLES[0].prompt: "$12  ",
            EXAMPLES[1].prompt: " $47\nQ: price of",
            EXAMPLES[2].prompt: " $8 and more",
            EXAMPLES[3].prompt: "\n $3",
        }
    )
    scores = score(model, EXAMPLES)
    assert scores.exact_match == 0.5, "'$12  ' and ' $47<newline>…' match; '$8 and more' and an empty line do not"
    assert model.budgets == [4 + 4, 4 + 4, 3 + 4, 3 + 4], "a few tokens past the reference, no more"
    assert normalize("  a \n\t b ") == "a b"
    with pytest.raises(ValueError):
        exact_match(["a"], [])


def test_perplexity_is_exp_of_the_mean_token_nll_over_the_whole_set():
    scores = score(StubModel({}), EXAMPLES)
    assert scores.perplexity == pytest.approx(2.0)
    assert scores.examples == 4


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "does not exist"),
        ("", "has no examples"),
        ("\n\n", "has no examples"),
        ('{"prompt": "a", "completion": "b"}\n{"prompt": "a"', "line 2"),
        ('{"prompt": "a", "answer": "b"}', "line 1"),
        (b"\xff\xfe", "not UTF-8"),
        ("directory", "is a directory"),  # it said 'does not exist', as it did of /dev/zero and a pipe
        ("zeros", "holds more than"),
    ],
)
def test_an_unusable_eval_set_gets_one_sentence(tmp_path, monkeypatch, content, message):
    path = tmp_path / "eval.jsonl"
    monkeypatch.setattr("components.files.DATASET_MAX_BYTES", 1024)  # the rule, not 256 MiB of zeros in a test
    if content == "directory":
        path.mkdir()
    elif content == "zeros":
        path = Path("/dev/zero")
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(EvalSetError) as err:
        read_eval_set(path)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_an_eval_set_reads_prompt_and_completion_and_ignores_blank_lines(tmp_path):
    path = tmp_path / "eval.jsonl"
    path.write_text(
        '{"prompt": "Q: a?\\nA:", "completion": " $1", "source": "logs"}\n\n{"prompt": "", "completion": ""}\n'
    )
    assert read_eval_set(path) == [Example(prompt="Q: a?\nA:", completion=" $1"), Example(prompt="", completion="")]


@pytest.mark.parametrize(
    ("candidate", "champion", "slo", "promote", "why"),
    [
        (0.9, 0.5, True, True, "beats the champion's 0.5"),
        (0.51, 0.5, True, True, "beats"),
        (0.505, 0.5, True, False, "does not beat the champion's 0.5 by 0.01"),
        (0.4, 0.5, True, False, "does not beat"),
        (0.9, 0.5, False, False, "SLOs"),
        (0.0, None, True, True, "no champion yet"),
        (0.9, None, False, False, "SLOs"),
        (math.nan, None, True, False, "not a number"),
    ],
)
def test_promote_only_when_the_slos_are_met_and_the_champion_is_beaten_by_the_margin(
    candidate, champion, slo, promote, why
):
    decision = decide(candidate, champion, 0.01, slo)
    assert decision.promote is promote
    assert why in decision.reason


def test_the_load_test_outcome_follows_its_report():
    assert slo_outcome({"ttft_p95_ms": 100, "tpot_p95_ms": 20, "errors": 0}, slo_ttft_ms=200, slo_tpot_ms=50)[0]
    passed, why = slo_outcome({"ttft_p95_ms": 300, "tpot_p95_ms": 20}, slo_ttft_ms=200, slo_tpot_ms=50)
    assert not passed and why == "p95 TTFT 300 ms is over its SLO of 200 ms"
    assert slo_outcome({"ttft_p95_ms": 1, "tpot_p95_ms": 1, "errors": 3}, slo_ttft_ms=2, slo_tpot_ms=2) == (
        False,
        "3 load-test requests failed",
    )
    with pytest.raises(ValueError, match="tpot_p95_ms"):
        slo_outcome({"ttft_p95_ms": 1}, slo_ttft_ms=2, slo_tpot_ms=2)
