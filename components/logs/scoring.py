"""Loghub-2.0's four parsing metrics, so our figures mean what the published ones mean.

The definitions follow Loghub-2.0's evaluator (Jiang et al., "A Large-scale Evaluation for Log Parsing
Techniques: How Far are We?", ISSTA 2024): lines are grouped by their *template text*, on both sides, and

- grouping accuracy (GA): the share of lines whose true group is exactly one predicted group;
- F1 of grouping (FGA): precision = correctly grouped templates / predicted groups, recall = the same over
  true groups;
- parsing accuracy (PA): the share of lines whose predicted template equals their true template, character for
  character;
- F1 of templates (FTA): a predicted group is right when every line in it has the true template it predicts
  (text identical); precision over predicted groups, recall over true ones.

Ground-truth lines without a template (empty) are left out, as Loghub-2.0 drops its null templates.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from pydantic import BaseModel

__all__ = ["ParsingScores", "grouping_accuracy", "score_parsing"]


class ParsingScores(BaseModel):
    """The four Loghub-2.0 metrics of one parse, each in [0, 1], with the counts they come from."""

    lines: int
    true_templates: int
    predicted_templates: int
    grouping_accuracy: float
    parsing_accuracy: float
    f1_grouping: float
    f1_templates: float


def _f1(correct: int, predicted: int, true: int) -> float:
    precision = correct / predicted if predicted else 0.0
    recall = correct / true if true else 0.0
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def score_parsing(truth: Sequence[str], predicted: Sequence[str]) -> ParsingScores:
    """Score predicted templates against true ones, line by line (same order, same count)."""
    if len(truth) != len(predicted):
        raise ValueError(f"{len(truth)} true templates but {len(predicted)} predicted ones: the line counts differ")
    pairs = [(t, p) for t, p in zip(truth, predicted, strict=True) if t]
    true_sizes = Counter(t for t, _ in pairs)
    predicted_sizes = Counter(p for _, p in pairs)
    # For each true template, which predicted templates its lines got (and the other way round).
    predicted_of: dict[str, set[str]] = defaultdict(set)
    truth_of: dict[str, set[str]] = defaultdict(set)
    for t, p in pairs:
        predicted_of[t].add(p)
        truth_of[p].add(t)
    grouped_lines = grouped_templates = 0
    for t, ps in predicted_of.items():
        if len(ps) == 1 and predicted_sizes[next(iter(ps))] == true_sizes[t]:
            grouped_lines += true_sizes[t]
            grouped_templates += 1
    right_templates = sum(1 for p, ts in truth_of.items() if ts == {p})
    lines = len(pairs)
    return ParsingScores(
        lines=lines,
        true_templates=len(true_sizes),
        predicted_templates=len(predicted_sizes),
        grouping_accuracy=grouped_lines / lines if lines else 0.0,
        parsing_accuracy=sum(t == p for t, p in pairs) / lines if lines else 0.0,
        f1_grouping=_f1(grouped_templates, len(predicted_sizes), len(true_sizes)),
        f1_templates=_f1(right_templates, len(predicted_sizes), len(true_sizes)),
    )


def grouping_accuracy(truth: Sequence[str], predicted: Sequence[str]) -> float:
    """Loghub's grouping accuracy: the share of lines whose true group is exactly one predicted group.

    `truth` and `predicted` are any group labels (event ids or template texts), one per line.
    """
    if len(truth) != len(predicted):
        raise ValueError(f"{len(truth)} true events but {len(predicted)} predicted ones: the line counts differ")
    return score_parsing(truth, predicted).grouping_accuracy if truth else 0.0
