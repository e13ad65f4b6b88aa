"""How a model is scored on an evaluation set: exact match of its greedy answers and perplexity of the references.

The metrics are pure functions of a `LanguageModel` — anything that can complete a prompt and say how likely a
completion is — so they are tested on stubs and used on real model directories alike (`components.evaluate.model`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from components.errors import InputError, VcpilotError
from components.finetune.records import read_records

__all__ = [
    "EvalSetError",
    "Example",
    "LanguageModel",
    "Scores",
    "exact_match",
    "normalize",
    "read_eval_set",
    "score",
]


# A ValueError too: it is raised from pydantic's validation of each line, and callers catch ValueError.
class EvalSetError(VcpilotError, ValueError):
    """The evaluation set cannot be used; the message says why in one sentence."""


class Example(BaseModel):
    """One record of an evaluation set: a prompt (or a conversation) and the reference completion."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    prompt: str = ""
    completion: str
    messages: tuple[dict[str, str], ...] = ()  # a conversation before the answer, rendered by the model scored
    category: str = ""  # what the service filed the request under (a route, an intent, a product type), if it did


class Scores(BaseModel):
    """A model's scores on one evaluation set; exact match is the headline (higher wins)."""

    model_config = ConfigDict(frozen=True)

    exact_match: float
    perplexity: float
    examples: int
    by_category: dict[str, float] = Field(default_factory=dict)  # exact match per category, when examples have one


class LanguageModel(Protocol):
    """What scoring needs from a model."""

    def complete(self, prompt: str, max_new_tokens: int) -> str:
        """The greedy completion of `prompt`, at most `max_new_tokens` tokens."""
        ...

    def completion_nll(self, prompt: str, completion: str) -> tuple[float, int]:
        """Negative log-likelihood (nats, summed) of `completion` after `prompt`, and its number of tokens."""
        ...

    def token_count(self, text: str) -> int:
        """How many tokens `text` takes."""
        ...

    def chat_prompt(self, messages: Sequence[dict[str, str]]) -> str:
        """The prompt for the answer after `messages`, as `vcpilot serve` renders a chat request to this model."""
        ...


def read_eval_set(path: str | Path) -> list[Example]:
    """The examples of an evaluation set, in any shape a training set may have (components/finetune/records.py)."""
    file = Path(path)
    if not file.exists():
        raise EvalSetError(f"the evaluation set {file} does not exist; pass --eval-set with a JSONL file")
    try:  # a directory, bytes that are not UTF-8, a pipe that never ends, a bad line: as every data set
        examples = [Example.model_validate(record) for record in read_records(file, "the evaluation set")]
    except InputError as err:
        raise EvalSetError(str(err)) from None
    if not examples:
        raise EvalSetError(f"the evaluation set {file} has no examples; it needs at least one record")
    return examples


def normalize(text: str) -> str:
    """Whitespace does not count: runs of it become one space, and none at either end."""
    return " ".join(text.split())


def exact_match(predictions: Sequence[str], references: Sequence[str]) -> float:
    """Share of predictions equal to their reference once whitespace is normalized."""
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references")
    if not references:
        raise ValueError("exact match of nothing is undefined; give at least one reference")
    hits = sum(normalize(p) == normalize(r) for p, r in zip(predictions, references, strict=True))
    return hits / len(references)


def _cut(text: str, stop: str) -> str:
    """A completion ends at the stop sequence: models that never learned to stop keep going with the next Q."""
    return text.split(stop, 1)[0] if stop else text


def score(model: LanguageModel, examples: Sequence[Example], *, stop: str = "\n", slack_tokens: int = 4) -> Scores:
    """Exact match of greedy completions (cut at `stop` unless the reference contains it) and reference perplexity.

    Each completion may run a few tokens (`slack_tokens`) past its reference, so a model that adds to a right
    answer is not counted right by truncation. Perplexity is exp of the mean per-token negative log-likelihood
    of the reference completions, over all tokens of the set.
    """
    if not examples:
        raise EvalSetError("the evaluation set has no examples")
    predictions: list[str] = []
    total_nll, total_tokens = 0.0, 0
    for number, example in enumerate(examples, start=1):
        try:
            prompt = model.chat_prompt(example.messages) if example.messages else example.prompt
        except ValueError as err:  # the model's chat template refuses the conversation
            raise EvalSetError(f"example {number} of the evaluation set: {err}") from None
        budget = model.token_count(example.completion) + slack_tokens
        text = model.complete(prompt, budget)
        predictions.append(text if stop and stop in example.completion else _cut(text, stop))
        nll, tokens = model.completion_nll(prompt, example.completion)
        total_nll, total_tokens = total_nll + nll, total_tokens + tokens
    mean_nll = total_nll / total_tokens if total_tokens else 0.0  # empty references: nothing to be perplexed by
    perplexity = math.exp(mean_nll) if mean_nll < 700 else math.inf  # past e^700 a float overflows
    return Scores(
        exact_match=exact_match(predictions, [e.completion for e in examples]),
        perplexity=perplexity,
        examples=len(examples),
        by_category=_by_category(predictions, examples),
    )


def _by_category(predictions: Sequence[str], examples: Sequence[Example]) -> dict[str, float]:
    """Exact match within each category, in name order; nothing when no example names one."""
    if not any(e.category for e in examples):
        return {}
    groups: dict[str, tuple[list[str], list[str]]] = {}
    for prediction, example in zip(predictions, examples, strict=True):
        said, meant = groups.setdefault(example.category or "other", ([], []))
        said.append(prediction)
        meant.append(example.completion)
    return {name: exact_match(*groups[name]) for name in sorted(groups)}
