"""Compare a current window of logs with a baseline and decide whether the model needs work, and why.

Pure: two window summaries and a policy in, a verdict out. A change counts only when a one-sided proportion test
says it is real at the policy's significance, with a minimum sample in both windows; tests over many templates
share that significance (Bonferroni), so a window of a thousand templates does not fire by chance. Without a
baseline (a first run) the current window is held against absolute budgets instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from components.logs.stats import ProportionTest, QuantileSketch, one_proportion_test, two_proportion_test
from components.logs.window import OVERFLOW_KEY, TemplateCounts, TemplateKind, WindowSummary

__all__ = ["DetectPolicy", "Evidence", "Finding", "FindingKind", "Severity", "Verdict", "compare"]

FindingKind = Literal[
    "new_template",
    "template_rate",
    "template_error_share",
    "error_rate",
    "negative_feedback",
    "latency",
    "template_latency",
    "error_budget",
    "negative_feedback_budget",
]
Severity = Literal["trigger", "warn", "info"]
_ORDER = {"trigger": 0, "warn": 1, "info": 2}
_DOMAIN = {"log": "service log lines", "prompt": "requests"}


class DetectPolicy(BaseModel):
    """When a change is a finding, and which findings make the model need work."""

    model_config = ConfigDict(frozen=True)

    alpha: float = Field(default=0.01, gt=0, lt=1, description="significance of each family of tests")
    min_sample: int = Field(default=30, ge=1, description="lines (or rated requests) each window needs for a test")
    min_new_count: int = Field(default=5, ge=1, description="lines a new template needs to be a finding")
    rate_ratio: float = Field(default=2.0, ge=1, description="how much a template's share must grow")
    latency_ratio: float = Field(default=1.5, ge=1, description="how much a latency percentile must grow")
    max_error_rate: float = Field(default=0.05, gt=0, lt=1, description="error budget when there is no baseline")
    max_negative_share: float = Field(default=0.25, gt=0, lt=1, description="complaint budget, no baseline")
    max_findings: int = Field(default=50, ge=1, description="findings kept in the report, most important first")


class Evidence(BaseModel):
    """The numbers behind a finding: counts in both windows, and the test that says the change is real."""

    baseline_count: int | None = None
    baseline_total: int | None = None
    current_count: int
    current_total: int
    test: ProportionTest | None = None
    alpha: float | None = Field(default=None, description="the level the p-value had to beat (Bonferroni)")
    note: str = ""


class Finding(BaseModel):
    """One thing that changed, how much it matters, the evidence, and examples to look at."""

    kind: FindingKind
    severity: Severity
    summary: str
    template_key: str | None = None
    template: str | None = None
    evidence: Evidence
    examples: list[str] = Field(default_factory=list)


class Verdict(BaseModel):
    """Whether the model needs work (`trigger`), why, and every finding behind it."""

    trigger: bool
    reason: str
    compared_with: Literal["baseline", "budgets"]
    findings: list[Finding]
    omitted_findings: int = 0


def _short(template: str, limit: int = 80) -> str:
    return template if len(template) <= limit else template[: limit - 1] + "…"


def _pct(share: float) -> str:
    return f"{share:.1%}"


def _stat(test: ProportionTest) -> str:
    return f"z={test.z:.1f}, p={test.p_value:.2g}"


def _named(counts: TemplateCounts) -> str:
    return f"{counts.key} '{_short(counts.template)}'"


def _examples(counts: TemplateCounts) -> list[str]:
    return counts.failure_examples + [e for e in counts.examples if e not in counts.failure_examples]


def _tracked(window: WindowSummary) -> Iterable[TemplateCounts]:
    return (c for c in window.templates.values() if c.key != OVERFLOW_KEY)


def _finding(
    kind: FindingKind,
    severity: Severity,
    summary: str,
    counts: TemplateCounts | None,
    evidence: Evidence,
) -> Finding:
    return Finding(
        kind=kind,
        severity=severity,
        summary=summary,
        template_key=counts.key if counts else None,
        template=counts.template if counts else None,
        evidence=evidence,
        examples=_examples(counts) if counts else [],
    )


def _tested(x1: int, n1: int, x2: int, n2: int, test: ProportionTest, level: float, note: str = "") -> Evidence:
    return Evidence(
        baseline_count=x1,
        baseline_total=n1,
        current_count=x2,
        current_total=n2,
        test=test,
        alpha=level,
        note=note,
    )


def _erring(counts: TemplateCounts) -> bool:
    """Most lines of the template are errors: it is an error event."""
    return counts.errors > 0 and counts.errors * 2 >= counts.count


# ---- with a baseline --------------------------------------------------------------------------------------------


def _new_templates(baseline: WindowSummary, current: WindowSummary, policy: DetectPolicy) -> list[Finding]:
    findings = []
    for counts in _tracked(current):
        before = baseline.templates.get(counts.key)
        if (before is not None and before.count > 0) or counts.count < policy.min_new_count:
            continue
        errors = f", {counts.errors} of them errors" if counts.errors else ""
        evidence = Evidence(
            baseline_count=0,
            baseline_total=baseline.total(counts.kind),
            current_count=counts.count,
            current_total=current.total(counts.kind),
            note=f"at least {policy.min_new_count} lines make a new template a finding",
        )
        summary = f"new template {_named(counts)} appeared {counts.count} times{errors}"
        findings.append(_finding("new_template", "trigger" if _erring(counts) else "info", summary, counts, evidence))
    return findings


def _template_rates(baseline: WindowSummary, current: WindowSummary, policy: DetectPolicy) -> list[Finding]:
    tests = []
    for counts in _tracked(current):
        before = baseline.templates.get(counts.key)
        n1, n2 = baseline.total(counts.kind), current.total(counts.kind)
        if before is None or before.count == 0 or min(n1, n2) < policy.min_sample:
            continue
        tests.append((before, counts, n1, n2, two_proportion_test(before.count, n1, counts.count, n2)))
    level = policy.alpha / max(len(tests), 1)
    findings = []
    for before, counts, n1, n2, test in tests:
        if test.p_value >= level or test.current < policy.rate_ratio * test.baseline:
            continue
        summary = (
            f"template {_named(counts)} rose from {_pct(test.baseline)} to {_pct(test.current)} of "
            f"{_DOMAIN[counts.kind]} ({_stat(test)})"
        )
        evidence = _tested(before.count, n1, counts.count, n2, test, level)
        findings.append(_finding("template_rate", "trigger" if _erring(counts) else "info", summary, counts, evidence))
    return findings


def _template_errors(baseline: WindowSummary, current: WindowSummary, policy: DetectPolicy) -> list[Finding]:
    tests = []
    for counts in _tracked(current):
        before = baseline.templates.get(counts.key)
        if before is None or min(before.count, counts.count) < policy.min_sample:
            continue
        tests.append((before, counts, two_proportion_test(before.errors, before.count, counts.errors, counts.count)))
    level = policy.alpha / max(len(tests), 1)
    return [
        _finding(
            "template_error_share",
            "trigger",
            f"errors in template {_named(counts)} rose from {_pct(test.baseline)} to {_pct(test.current)} "
            f"({_stat(test)})",
            counts,
            _tested(before.errors, before.count, counts.errors, counts.count, test, level),
        )
        for before, counts, test in tests
        if test.p_value < level
    ]


def _error_rates(baseline: WindowSummary, current: WindowSummary, policy: DetectPolicy) -> list[Finding]:
    samples: dict[TemplateKind, tuple[int, int, int, int]] = {
        "log": (baseline.log_errors, baseline.log_lines, current.log_errors, current.log_lines),
        "prompt": (baseline.request_errors, baseline.requests, current.request_errors, current.requests),
    }
    tested = {kind: s for kind, s in samples.items() if min(s[1], s[3]) >= policy.min_sample}
    level = policy.alpha / max(len(tested), 1)
    findings = []
    for kind, (x1, n1, x2, n2) in tested.items():
        test = two_proportion_test(x1, n1, x2, n2)
        if test.p_value < level:
            what = "service log error rate" if kind == "log" else "request error rate (5xx)"
            summary = f"the {what} rose from {_pct(test.baseline)} to {_pct(test.current)} ({_stat(test)})"
            findings.append(_finding("error_rate", "trigger", summary, None, _tested(x1, n1, x2, n2, test, level)))
    return findings


def _negative_feedback(baseline: WindowSummary, current: WindowSummary, policy: DetectPolicy) -> list[Finding]:
    """Per prompt template against its own baseline, or the baseline's overall share when it had too few ratings."""
    tests = []
    for counts in _tracked(current):
        if counts.kind != "prompt" or counts.rated < policy.min_sample:
            continue
        before = baseline.templates.get(counts.key)
        if before is not None and before.rated >= policy.min_sample:
            x1, n1, note = before.negative, before.rated, ""
        elif baseline.rated >= policy.min_sample:
            x1, n1 = baseline.negative, baseline.rated
            note = "the template had too few ratings in the baseline: compared with the baseline's overall share"
        else:
            continue
        tests.append((counts, x1, n1, note, two_proportion_test(x1, n1, counts.negative, counts.rated)))
    overall = None
    if min(baseline.rated, current.rated) >= policy.min_sample:
        overall = two_proportion_test(baseline.negative, baseline.rated, current.negative, current.rated)
    level = policy.alpha / max(len(tests) + (overall is not None), 1)
    findings = [
        _finding(
            "negative_feedback",
            "trigger",
            f"negative feedback on template {_named(counts)} rose from {_pct(test.baseline)} to "
            f"{_pct(test.current)} of {counts.rated} rated requests ({_stat(test)})",
            counts,
            _tested(x1, n1, counts.negative, counts.rated, test, level, note),
        )
        for counts, x1, n1, note, test in tests
        if test.p_value < level
    ]
    # With a single rated template the overall share is that template's: one finding says it.
    same_as_a_template = any((c.negative, c.rated) == (current.negative, current.rated) for c, *_ in tests)
    if overall is not None and overall.p_value < level and not (same_as_a_template and findings):
        summary = (
            f"negative feedback rose from {_pct(overall.baseline)} to {_pct(overall.current)} of "
            f"{current.rated} rated requests ({_stat(overall)})"
        )
        evidence = _tested(baseline.negative, baseline.rated, current.negative, current.rated, overall, level)
        findings.append(_finding("negative_feedback", "trigger", summary, None, evidence))
    return findings


def _grown(
    before: QuantileSketch, now: QuantileSketch, policy: DetectPolicy, quantiles: tuple[tuple[str, float], ...]
) -> list[str]:
    """The percentiles that grew by at least `latency_ratio`, as `p95 100 → 300 ms (×3.0)`."""
    grown = []
    for name, q in quantiles:
        was, is_ = before.quantile(q) or 0.0, now.quantile(q) or 0.0
        if was > 0 and is_ >= policy.latency_ratio * was:
            grown.append(f"{name} {was:.0f} → {is_:.0f} ms (×{is_ / was:.1f})")
    return grown


def _latency(baseline: WindowSummary, current: WindowSummary, policy: DetectPolicy) -> list[Finding]:
    before, now = baseline.latency_ms, current.latency_ms
    if min(before.count, now.count) < policy.min_sample:
        return []
    grown = _grown(before, now, policy, (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)))
    if not grown:
        return []
    evidence = Evidence(
        baseline_count=before.count,
        baseline_total=before.count,
        current_count=now.count,
        current_total=now.count,
        note=f"percentiles within 1% (quantile sketch); a finding from ×{policy.latency_ratio:g}",
    )
    return [_finding("latency", "warn", f"request latency grew: {', '.join(grown)}", None, evidence)]


def _template_latency(baseline: WindowSummary, current: WindowSummary, policy: DetectPolicy) -> list[Finding]:
    """Per template, p50 or p95 grown by `latency_ratio`: one kind of request slowed while the rest did not."""
    findings = []
    for counts in _tracked(current):
        before = baseline.templates.get(counts.key)
        was_sketch = before.latency_ms if before is not None else None
        now_sketch = counts.latency_ms
        if was_sketch is None or now_sketch is None or min(was_sketch.count, now_sketch.count) < policy.min_sample:
            continue
        grown = _grown(was_sketch, now_sketch, policy, (("p50", 0.5), ("p95", 0.95)))
        if not grown:
            continue
        evidence = Evidence(
            baseline_count=was_sketch.count,
            baseline_total=was_sketch.count,
            current_count=now_sketch.count,
            current_total=now_sketch.count,
            note=f"lines with a latency; percentiles within 1% (sketch); a finding from ×{policy.latency_ratio:g}",
        )
        summary = f"latency of template {_named(counts)} grew: {', '.join(grown)}"
        findings.append(_finding("template_latency", "warn", summary, counts, evidence))
    return findings


# ---- without a baseline -----------------------------------------------------------------------------------------


def _budgets(current: WindowSummary, policy: DetectPolicy) -> list[Finding]:
    checks: list[tuple[FindingKind, str, int, int, float]] = [
        ("error_budget", "service log lines are errors", current.log_errors, current.log_lines, policy.max_error_rate),
        ("error_budget", "requests failed (5xx)", current.request_errors, current.requests, policy.max_error_rate),
        (
            "negative_feedback_budget",
            "rated requests got negative feedback",
            current.negative,
            current.rated,
            policy.max_negative_share,
        ),
    ]
    tested = [check for check in checks if check[3] >= policy.min_sample]
    level = policy.alpha / max(len(tested), 1)
    findings = []
    for kind, what, x, n, budget in tested:
        test = one_proportion_test(x, n, budget)
        if test.p_value < level:
            summary = f"{_pct(test.current)} of {what} ({x} of {n}), above the {budget:.0%} budget ({_stat(test)})"
            evidence = Evidence(current_count=x, current_total=n, test=test, alpha=level, note="no baseline window")
            findings.append(_finding(kind, "trigger", summary, None, evidence))
    return findings


# ---- the verdict ------------------------------------------------------------------------------------------------


def _quiet_reason(baseline: WindowSummary | None, current: WindowSummary, policy: DetectPolicy) -> str:
    if current.lines < policy.min_sample:
        return (
            f"no drift found, but the current window holds only {current.lines} lines, fewer than the minimum "
            f"sample of {policy.min_sample}"
        )
    parts = [f"{len(current.templates)} templates"]
    if current.log_lines:
        parts.append(f"log error rate {_pct(current.log_errors / current.log_lines)}")
    if current.requests:
        parts.append(f"request error rate {_pct(current.request_errors / current.requests)}")
    if current.rated:
        parts.append(f"negative feedback {_pct(current.negative / current.rated)}")
    against = "against the baseline" if baseline is not None else "against the budgets (no baseline yet)"
    return f"no significant change {against}: {', '.join(parts)}"


def _importance(finding: Finding) -> tuple[int, float, int]:
    """Triggers first, then the strongest evidence, then the most lines."""
    test = finding.evidence.test
    return _ORDER[finding.severity], test.p_value if test else 1.0, -finding.evidence.current_count


def compare(baseline: WindowSummary | None, current: WindowSummary, policy: DetectPolicy | None = None) -> Verdict:
    """The verdict on `current` against `baseline` (or against the policy's budgets when there is none)."""
    policy = policy or DetectPolicy()
    if baseline is None:
        findings = _budgets(current, policy)
    else:
        findings = [
            *_new_templates(baseline, current, policy),
            *_template_rates(baseline, current, policy),
            *_template_errors(baseline, current, policy),
            *_error_rates(baseline, current, policy),
            *_negative_feedback(baseline, current, policy),
            *_latency(baseline, current, policy),
            *_template_latency(baseline, current, policy),
        ]
    findings.sort(key=_importance)
    kept = findings[: policy.max_findings]
    triggers = [f for f in findings if f.severity == "trigger"]
    if triggers:
        reason = "; ".join(f.summary for f in triggers[:3])
        if len(triggers) > 3:
            reason += f"; and {len(triggers) - 3} more"
    else:
        reason = _quiet_reason(baseline, current, policy)
    return Verdict(
        trigger=bool(triggers),
        reason=reason,
        compared_with="budgets" if baseline is None else "baseline",
        findings=kept,
        omitted_findings=len(findings) - len(kept),
    )
