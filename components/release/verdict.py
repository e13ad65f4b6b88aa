"""Why a model version was or was not promoted: the scores and load-test figures, the bars, and the sentence.

The release step decides (pipelines/rules.py `decide_release`); this module records what it decided from, so a
version in the registry says on its own what it scored and why it became champion or did not. `Scores` are the
evaluate report's scores and perplexities and the load-test figures the decision used (p95 TTFT and TPOT,
goodput, errors); `Bars` the SLOs and the margin over the champion. `describe` turns them into the version's
description, the failed checks first: "Not promoted: p95 TTFT 900 ms > SLO 500 ms; exact match 0.82 vs …".
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from components.errors import InputError
from components.tracking.adapter import TAG_LIMIT
from components.untrusted import loads_json

__all__ = [
    "Bars",
    "Scores",
    "Verdict",
    "checks",
    "describe",
    "read_scores",
    "verdict_tags",
]

METRIC_PREFIX = "vcpilot.metric."  # one tag per number, also logged as a metric of the release run
BAR_PREFIX = "vcpilot.bar."
PROMOTED_TAG, REASON_TAG = "vcpilot.promoted", "vcpilot.reason"
METRIC_NAME_TAG, COMPARED_WITH_TAG = "vcpilot.metric_name", "vcpilot.compared_with"


class Scores(BaseModel):
    """The numbers a release decision is made from; None where the report did not give one."""

    model_config = ConfigDict(frozen=True)

    metric: str = "score"
    candidate_score: float | None = None
    champion_score: float | None = None
    candidate_perplexity: float | None = None
    champion_perplexity: float | None = None
    champion_version: str | None = None  # the version the candidate was compared with
    ttft_p95_ms: float | None = None
    tpot_p95_ms: float | None = None
    goodput_rps: float | None = None
    errors: int | None = None
    requests: int | None = None

    def numbers(self) -> dict[str, float]:
        """The figures as metrics: every number that is known."""
        return {
            name: float(value)
            for name, value in self.model_dump(exclude={"metric", "champion_version"}).items()
            if value is not None
        }


class Bars(BaseModel):
    """What the candidate had to clear: the latency SLOs and the margin over the champion (None: not applied).

    Checked as the commands that take them (`evaluate`, `release register`) parse their options: an SLO of inf, nan,
    0 or less ms, or a margin of inf or nan, judges nothing.
    """

    model_config = ConfigDict(frozen=True, allow_inf_nan=False)

    slo_ttft_ms: float | None = Field(default=None, gt=0)
    slo_tpot_ms: float | None = Field(default=None, gt=0)
    margin: float | None = None


class Verdict(BaseModel):
    """Whether a version was promoted, why (the release rule's sentence), and the numbers it was decided from."""

    model_config = ConfigDict(frozen=True)

    promoted: bool = True
    reason: str = ""
    scores: Scores = Scores()
    bars: Bars = Bars()


def _report(path: Path, what: str) -> dict[str, Any]:
    if not path.is_file():
        missing = "is not a file" if path.exists() else "does not exist"
        raise InputError(f"the {what} report {path} {missing}; pass the file the {what} step wrote")
    try:
        data = loads_json(path.read_text())
    except ValueError:  # not UTF-8, not JSON, or nested too deeply to read
        raise InputError(f"the {what} report {path} is not JSON; pass the file the {what} step wrote") from None
    if not isinstance(data, dict):
        raise InputError(f"the {what} report {path} is not a JSON object; pass the file the {what} step wrote")
    return data


def _number(data: dict[str, Any], key: str, path: Path, what: str, *, whole: bool = False) -> float | None:
    """A finite number (a whole one if `whole`): Python's JSON reads NaN and Infinity, which judge nothing."""
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        kind = "a number"
    elif not math.isfinite(value):
        kind = "a finite number"
    elif whole and (value < 0 or value != int(value)):
        kind = "a whole number of 0 or more"
    else:
        return float(value)
    raise InputError(f"the {what} report {path} has {key} {value!r}, which is not {kind}")


def read_scores(evaluation: Path | None = None, loadtest: Path | None = None) -> Scores:
    """The scores of the evaluate report and the figures of the load-test report (either may be absent)."""
    fields: dict[str, Any] = {}
    if evaluation is not None:
        data = _report(evaluation, "evaluate")
        names = ("candidate_score", "champion_score", "candidate_perplexity", "champion_perplexity")
        fields |= {name: _number(data, name, evaluation, "evaluate") for name in names}
        fields["metric"] = str(data.get("metric") or "score")
        if data.get("champion_version") is not None:
            fields["champion_version"] = str(data["champion_version"])
    if loadtest is not None:
        data = _report(loadtest, "loadtest")
        for name in ("ttft_p95_ms", "tpot_p95_ms", "goodput_rps"):
            fields[name] = _number(data, name, loadtest, "loadtest")
        for name in ("errors", "requests"):
            count = _number(data, name, loadtest, "loadtest", whole=True)
            fields[name] = None if count is None else int(count)
    return Scores(**fields)


def _g(value: float) -> str:
    """A figure as people read it: 0.82, 210, 3.1e-05 — never 0.8200000001."""
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"


def checks(scores: Scores, bars: Bars) -> list[tuple[bool, str]]:
    """Each bar the candidate met or missed, as (met, phrase): the score first, then latency and errors."""
    found: list[tuple[bool, str]] = []
    metric, candidate, champion = scores.metric.replace("_", " "), scores.candidate_score, scores.champion_score
    if candidate is not None and champion is None:
        found.append((True, f"{metric} {_g(candidate)} with no champion to beat"))
    elif candidate is not None and champion is not None:
        margin = bars.margin or 0.0
        met = candidate >= champion + margin  # the release rule's own comparison, so they never disagree
        gain = f"{candidate - champion:+.2f} {'≥' if met else '<'} margin {margin:.2f}"
        found.append((met, f"{metric} {_g(candidate)} vs champion {_g(champion)} ({gain})"))
    for name, measured, slo in (
        ("TTFT", scores.ttft_p95_ms, bars.slo_ttft_ms),
        ("TPOT", scores.tpot_p95_ms, bars.slo_tpot_ms),
    ):
        if measured is None:
            continue
        if slo is None:
            found.append((True, f"p95 {name} {_g(measured)} ms"))
        else:
            met = measured <= slo
            found.append((met, f"p95 {name} {_g(measured)} ms {'≤' if met else '>'} SLO {_g(slo)} ms"))
    if scores.errors is not None:
        of = f" of {scores.requests}" if scores.requests is not None else ""
        found.append((scores.errors == 0, f"{scores.errors}{of} load-test requests failed"))
    return found


def describe(verdict: Verdict) -> str:
    """The version's description: promoted or not, and the numbers that decided it, the missed bars first."""
    head = "Promoted" if verdict.promoted else "Not promoted"
    found = checks(verdict.scores, verdict.bars)
    if not found:
        why = verdict.reason or (
            "registered without an evaluation or a load test" if verdict.promoted else "registered with --no-promote"
        )
        return f"{head}: {why}."
    ordered = [phrase for met, phrase in found if not met] + [phrase for met, phrase in found if met]
    sentence = f"{head}: {'; '.join(ordered)}."
    if not verdict.promoted and all(met for met, _ in found):  # nothing missed: the reason is elsewhere
        reason = (verdict.reason or "registered with --no-promote").rstrip(".")
        sentence += f" {reason[:1].upper()}{reason[1:]}."
    return sentence


def verdict_tags(verdict: Verdict) -> dict[str, str]:
    """The verdict as version tags: promoted, the reason, every number, every bar."""
    tags = {PROMOTED_TAG: str(verdict.promoted).lower(), METRIC_NAME_TAG: verdict.scores.metric}
    if verdict.reason:
        tags[REASON_TAG] = verdict.reason[:TAG_LIMIT]
    if verdict.scores.champion_version:
        tags[COMPARED_WITH_TAG] = verdict.scores.champion_version
    tags |= {f"{METRIC_PREFIX}{name}": f"{value:g}" for name, value in sorted(verdict.scores.numbers().items())}
    bars = verdict.bars.model_dump(exclude_none=True)
    tags |= {f"{BAR_PREFIX}{name}": f"{value:g}" for name, value in sorted(bars.items())}
    return tags
