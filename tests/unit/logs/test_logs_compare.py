"""What counts as drift: tested changes with a minimum sample, never a raw threshold; budgets without a baseline."""

from __future__ import annotations

from typing import Any

from components.logs.compare import DetectPolicy, compare
from components.logs.window import TemplateCounts, WindowSummary


def prompt(key: str, count: int, *, negative: int = 0, positive: int = 0, errors: int = 0) -> TemplateCounts:
    return TemplateCounts(
        key=f"prompt:{key}",
        kind="prompt",
        template=f"question {key} <*>",
        count=count,
        negative=negative,
        positive=positive,
        errors=errors,
        examples=[f"requests.jsonl:{key}: question {key} 1"],
    )


def log(key: str, count: int, *, errors: int = 0) -> TemplateCounts:
    return TemplateCounts(key=f"log:{key}", kind="log", template=f"event {key} <*>", count=count, errors=errors)


def window(name: str, *templates: TemplateCounts, **totals: Any) -> WindowSummary:
    summary = WindowSummary(name=name, templates={t.key: t for t in templates})
    summary.requests = sum(t.count for t in templates if t.kind == "prompt")
    summary.request_errors = sum(t.errors for t in templates if t.kind == "prompt")
    summary.log_lines = sum(t.count for t in templates if t.kind == "log")
    summary.log_errors = sum(t.errors for t in templates if t.kind == "log")
    summary.negative = sum(t.negative for t in templates)
    summary.positive = sum(t.positive for t in templates)
    for field, value in totals.items():
        setattr(summary, field, value)
    return summary


def test_a_significant_rise_of_negative_feedback_on_a_template_triggers_with_its_evidence() -> None:
    before = window("baseline", prompt("1", 100, negative=20, positive=80), prompt("2", 100, negative=20, positive=80))
    now = window("current", prompt("1", 100, negative=60, positive=40), prompt("2", 100, negative=20, positive=80))
    verdict = compare(before, now)
    assert verdict.trigger
    first = verdict.findings[0]
    assert (first.kind, first.template_key) == ("negative_feedback", "prompt:1")
    assert first.evidence.baseline_count == 20 and first.evidence.current_count == 60
    assert first.evidence.test is not None and first.evidence.test.p_value < first.evidence.alpha  # type: ignore[operator]
    assert verdict.reason.startswith("negative feedback on template prompt:1 'question 1 <*>' rose from 20.0% to 60.0%")
    assert first.examples == ["requests.jsonl:1: question 1 1"]


def test_a_huge_share_on_a_small_sample_is_not_a_finding() -> None:
    before = window("baseline", prompt("1", 100, negative=5, positive=95))
    now = window("current", prompt("1", 100, negative=4, positive=1))  # 80% negative, but only 5 ratings
    verdict = compare(before, now)
    assert not verdict.trigger and verdict.findings == []


def test_many_templates_share_the_significance() -> None:
    # 10% -> 20% on 200 ratings has p = 0.0026: a finding alone, noise among 20 tested templates.
    alone = compare(
        window("baseline", prompt("1", 200, negative=20, positive=180)),
        window("current", prompt("1", 200, negative=40, positive=160)),
    )
    assert alone.trigger
    crowd_before = [prompt(str(i), 200, negative=20, positive=180) for i in range(20)]
    crowd_now = [prompt("0", 200, negative=40, positive=160)] + crowd_before[1:]
    crowded = compare(window("baseline", *crowd_before), window("current", *crowd_now))
    assert not any(f.template_key == "prompt:0" for f in crowded.findings)


def test_a_new_error_template_triggers_and_a_new_quiet_one_is_only_reported() -> None:
    before = window("baseline", log("1", 500))
    now = window("current", log("1", 500), log("2", 40, errors=40), log("3", 12), log("4", 2, errors=2))
    verdict = compare(before, now)
    by_key = {f.template_key: f for f in verdict.findings if f.kind == "new_template"}
    assert by_key["log:2"].severity == "trigger" and by_key["log:3"].severity == "info"
    assert "log:4" not in by_key  # under min_new_count
    assert "new template log:2 'event 2 <*>' appeared 40 times, 40 of them errors" in verdict.reason


def test_an_error_template_that_became_frequent_triggers() -> None:
    before = window("baseline", log("1", 990), log("2", 10, errors=10))
    now = window("current", log("1", 900), log("2", 100, errors=100))
    kinds = {(f.kind, f.template_key, f.severity) for f in compare(before, now).findings}
    assert ("template_rate", "log:2", "trigger") in kinds
    assert ("error_rate", None, "trigger") in kinds


def test_errors_within_a_template_that_jumped_trigger() -> None:
    before = window("baseline", prompt("1", 400, errors=4))
    now = window("current", prompt("1", 400, errors=40))
    finding = next(f for f in compare(before, now).findings if f.kind == "template_error_share")
    assert finding.severity == "trigger" and "errors in template prompt:1" in finding.summary


def test_slower_requests_are_a_warning_not_a_trigger() -> None:
    before, now = window("baseline", prompt("1", 100)), window("current", prompt("1", 100))
    for i in range(100):
        before.latency_ms.add(100 + i)
        now.latency_ms.add(300 + 3 * i)
    verdict = compare(before, now)
    assert not verdict.trigger
    assert [(f.kind, f.severity) for f in verdict.findings] == [("latency", "warn")]
    assert "p95" in verdict.findings[0].summary


def test_without_a_baseline_the_budgets_decide() -> None:
    failing = window("current", log("1", 160), log("2", 40, errors=40))
    verdict = compare(None, failing)
    assert verdict.trigger and verdict.compared_with == "budgets"
    assert verdict.reason.startswith("20.0% of service log lines are errors (40 of 200), above the 5% budget")
    calm = compare(None, window("current", log("1", 195), log("2", 5, errors=5)))
    assert not calm.trigger and calm.reason.startswith("no significant change against the budgets (no baseline yet)")


def test_a_window_too_small_to_judge_says_so() -> None:
    verdict = compare(window("baseline", log("1", 10)), window("current", log("1", 3, errors=3)))
    assert not verdict.trigger and "fewer than the minimum sample of 30" in verdict.reason


def test_the_report_keeps_the_most_important_findings() -> None:
    before = window("baseline", log("0", 1000))
    now = window("current", log("0", 1000), *[log(str(i), 10) for i in range(1, 30)], log("99", 50, errors=50))
    verdict = compare(before, now, DetectPolicy(max_findings=5))
    assert len(verdict.findings) == 5 and verdict.omitted_findings == 26  # 29 quiet new templates, 2 triggers
    assert [(f.kind, f.template_key) for f in verdict.findings[:2]] == [
        ("error_rate", None),
        ("new_template", "log:99"),
    ]
    assert all(f.severity == "info" for f in verdict.findings[2:])
