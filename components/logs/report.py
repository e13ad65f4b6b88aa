"""The detect report, as JSON for the pipeline and Markdown for people: the verdict, the findings and their evidence.

The gate reads `drift` and `reason`; MLflow records the top-level numbers as metrics; a person reads the
Markdown to see what changed, how sure we are (counts, test, p-value) and example lines to look at.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from components.files import write_text
from components.logs.compare import DetectPolicy, Finding, Verdict
from components.logs.curate import DatasetSummary
from components.logs.reader import Malformed
from components.logs.window import OVERFLOW_KEY, TemplateCounts, WindowSummary
from components.redact import redact
from components.untrusted import printable

__all__ = ["DetectionReport", "StateInfo", "TemplateRow", "WindowOverview", "build_report", "render_markdown"]

_TEMPLATE_ROWS = 25


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


class WindowOverview(BaseModel):
    """The headline numbers of one window."""

    name: str
    sources: list[str]
    files: int
    window: str | None = None
    first_timestamp: str | None
    last_timestamp: str | None
    log_lines: int
    log_errors: int
    log_error_rate: float | None
    requests: int
    request_errors: int
    request_error_rate: float | None
    rated_requests: int
    negative_feedback: int
    negative_share: float | None
    corrections: int
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    latency_p99_ms: float | None
    templates: int
    malformed: Malformed
    untimed_lines: int = Field(default=0, description="lines before their file's first time, in no window")
    outside_lines: int = Field(default=0, description="lines whose time falls in no window")

    @classmethod
    def of(cls, window: WindowSummary) -> WindowOverview:
        """The overview of a window summary."""
        sketch = window.latency_ms
        return cls(
            name=window.name,
            sources=window.sources,
            files=window.files,
            window=window.window,
            first_timestamp=window.first_timestamp,
            last_timestamp=window.last_timestamp,
            log_lines=window.log_lines,
            log_errors=window.log_errors,
            log_error_rate=_share(window.log_errors, window.log_lines),
            requests=window.requests,
            request_errors=window.request_errors,
            request_error_rate=_share(window.request_errors, window.requests),
            rated_requests=window.rated,
            negative_feedback=window.negative,
            negative_share=_share(window.negative, window.rated),
            corrections=window.corrections,
            latency_p50_ms=sketch.quantile(0.5),
            latency_p95_ms=sketch.quantile(0.95),
            latency_p99_ms=sketch.quantile(0.99),
            templates=len(window.templates),
            malformed=window.malformed,
            untimed_lines=window.untimed_lines,
            outside_lines=window.outside_lines,
        )


class TemplateRow(BaseModel):
    """One template of the current window beside its baseline counts."""

    key: str
    template: str
    baseline_count: int | None
    current_count: int
    current_errors: int
    current_negative: int
    current_rated: int
    current_latency_p50_ms: float | None = None
    current_latency_p95_ms: float | None = None
    baseline_latency_p95_ms: float | None = None


class StateInfo(BaseModel):
    """Where the run kept what the next run compares against."""

    dir: str | None
    templates_known: int
    saved_window: bool = Field(description="this run's window was saved as the next run's baseline")


class DetectionReport(BaseModel):
    """Everything `detect` found. `drift` and `reason` are what the pipeline's gate reads."""

    drift: bool
    trigger: bool
    reason: str
    compared_with: Literal["baseline", "previous run", "budgets"]
    lines: int
    templates: int
    new_templates: int
    findings_count: int
    malformed_lines: int
    train_examples: int
    eval_examples: int
    baseline: WindowOverview | None
    current: WindowOverview
    findings: list[Finding]
    omitted_findings: int
    top_templates: list[TemplateRow]
    dataset: DatasetSummary
    state: StateInfo
    policy: DetectPolicy

    def write(self, path: Path) -> Path:
        """Write the JSON report to `path` and the Markdown beside it as `report.md`; returns the Markdown path."""
        markdown = path.with_name("report.md")
        # ASCII JSON: quoted log text keeps its bytes, as escapes a terminal or an editor does not act on
        data = json.dumps(self.model_dump(mode="json"), indent=2, ensure_ascii=True)
        for target, text in ((path, data), (markdown, render_markdown(self))):
            write_text(target, text + "\n")
        return markdown


def _quantile(counts: TemplateCounts | None, q: float) -> float | None:
    return counts.latency_ms.quantile(q) if counts is not None and counts.latency_ms is not None else None


def build_report(
    verdict: Verdict,
    baseline: WindowSummary | None,
    current: WindowSummary,
    *,
    compared_with: Literal["baseline", "previous run", "budgets"],
    dataset: DatasetSummary,
    state: StateInfo,
    policy: DetectPolicy,
) -> DetectionReport:
    """Assemble the report of one detect run, every credential in what it quotes masked (`components.redact`).

    Log lines carry what a service printed — a bearer token, a key — and the report goes to MLflow as artifacts, its
    reason as a tag and into the workflow's outputs: what looks like a credential in an example line or a template
    is `***` there, as in every log we write.
    """
    before = baseline.templates if baseline else {}
    rows = sorted((c for c in current.templates.values() if c.key != OVERFLOW_KEY), key=lambda c: (-c.count, c.key))[
        :_TEMPLATE_ROWS
    ]
    new = sum(1 for key, c in current.templates.items() if c.count and not (key in before and before[key].count))
    malformed = current.malformed.total + (baseline.malformed.total if baseline else 0)
    report = DetectionReport(
        drift=verdict.trigger,
        trigger=verdict.trigger,
        reason=verdict.reason,
        compared_with=compared_with,
        lines=current.lines,
        templates=len(current.templates),
        new_templates=new if baseline is not None else 0,
        findings_count=len(verdict.findings) + verdict.omitted_findings,
        malformed_lines=malformed,
        train_examples=dataset.train_examples,
        eval_examples=dataset.eval_examples,
        baseline=WindowOverview.of(baseline) if baseline else None,
        current=WindowOverview.of(current),
        findings=verdict.findings,
        omitted_findings=verdict.omitted_findings,
        top_templates=[
            TemplateRow(
                key=c.key,
                template=c.template,
                baseline_count=before[c.key].count if c.key in before else (0 if baseline else None),
                current_count=c.count,
                current_errors=c.errors,
                current_negative=c.negative,
                current_rated=c.rated,
                current_latency_p50_ms=_quantile(c, 0.5),
                current_latency_p95_ms=_quantile(c, 0.95),
                baseline_latency_p95_ms=_quantile(before.get(c.key), 0.95),
            )
            for c in rows
        ],
        dataset=dataset,
        state=state,
        policy=policy,
    )
    return DetectionReport.model_validate(redact(report.model_dump(mode="json")))


# ---- Markdown -----------------------------------------------------------------------------------------------------


def _cell(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.1%}" if value <= 1 else f"{value:,.1f}"
    return printable(str(value).replace("\n", " ")).replace("|", "\\|")


def _table(header: list[str], rows: list[list[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return lines + [""]


def _windows(report: DetectionReport) -> list[str]:
    windows = [w for w in (report.baseline, report.current) if w is not None]
    fields = [
        ("time window", "window"),
        ("lines of service logs", "log_lines"),
        ("log error rate", "log_error_rate"),
        ("requests", "requests"),
        ("request error rate (5xx)", "request_error_rate"),
        ("rated requests", "rated_requests"),
        ("negative feedback share", "negative_share"),
        ("corrections", "corrections"),
        ("latency p50 (ms)", "latency_p50_ms"),
        ("latency p95 (ms)", "latency_p95_ms"),
        ("latency p99 (ms)", "latency_p99_ms"),
        ("templates", "templates"),
        ("malformed lines", None),
        ("lines before the first time (in no window)", "untimed_lines"),
        ("lines outside the time windows", "outside_lines"),
    ]
    if all(w.window is None for w in windows):  # nothing was cut by time: no line can be in no window
        fields = [f for f in fields if f[1] not in ("untimed_lines", "outside_lines")]
    rows: list[list[object]] = []
    for label, name in fields:
        values = [w.malformed.total if name is None else getattr(w, name) for w in windows]
        if name and name.startswith("latency"):
            values = [f"{v:,.0f}" if v is not None else None for v in values]
        rows.append([label, *values])
    rows.append(["sources", *[", ".join(w.sources) for w in windows]])
    return ["## Windows", "", *_table(["", *[w.name for w in windows]], rows)]


def _finding(finding: Finding) -> list[str]:
    ev = finding.evidence
    lines = [f"### {finding.severity}: {finding.kind.replace('_', ' ')}", "", printable(finding.summary) + ".", ""]
    if finding.template:
        lines += [f"Template `{finding.template_key}`: `{printable(finding.template)}`", ""]
    facts = []
    if ev.baseline_count is not None:
        facts.append(f"baseline {ev.baseline_count} of {ev.baseline_total}")
    facts.append(f"current {ev.current_count} of {ev.current_total}")
    if ev.test:
        facts.append(f"{ev.test.test}: z = {ev.test.z:.2f}, p = {ev.test.p_value:.3g} < {ev.alpha:.3g}")
    note = f" {ev.note[:1].upper()}{ev.note[1:]}." if ev.note else ""
    lines += [f"Evidence: {'; '.join(facts)}.{note}", ""]
    if finding.examples:
        # quoted log lines: escaped, so no ANSI sequence, bidi override or stray fence acts on the reader
        lines += ["```text", *(printable(e).replace("```", "\\x60\\x60\\x60") for e in finding.examples), "```", ""]
    return lines


def render_markdown(report: DetectionReport) -> str:
    """The report as Markdown for people."""
    verdict = "the model needs work" if report.trigger else "no action needed"
    lines = [
        "# Log drift report",
        "",
        f"**Verdict: {verdict}** (compared with the {report.compared_with}): {report.reason}.",
        "",
        *_windows(report),
        "## Findings",
        "",
    ]
    if not report.findings:
        lines += ["None.", ""]
    for finding in report.findings:
        lines += _finding(finding)
    if report.omitted_findings:
        lines += [f"… and {report.omitted_findings} less important findings, left out.", ""]
    lines += ["## Most frequent templates (current window)", ""]
    lines += _table(
        ["template id", "template", "baseline", "current", "errors", "negative / rated", "latency p50 / p95 (ms)"],
        [
            [t.key, f"`{t.template}`", t.baseline_count, t.current_count, t.current_errors, _rated(t), _latency(t)]
            for t in report.top_templates
        ],
    )
    lines += _malformed(report)
    data = report.dataset
    lines += [
        "## Fine-tuning set",
        "",
        f"{data.train_examples} train and {data.eval_examples} eval examples from {data.corrections} corrected "
        f"requests ({data.duplicates} duplicate prompts dropped, {data.rejected} rejected as instructions or "
        f"oversized): `{data.train}`, `{data.eval}`.",
        "",
        "## Policy",
        "",
        "```json",
        json.dumps(report.policy.model_dump(), indent=2),
        "```",
    ]
    return "\n".join(lines)


def _rated(row: TemplateRow) -> str:
    return f"{row.current_negative} / {row.current_rated}" if row.current_rated else "–"


def _latency(row: TemplateRow) -> str:
    if row.current_latency_p50_ms is None or row.current_latency_p95_ms is None:
        return "–"
    return f"{row.current_latency_p50_ms:,.0f} / {row.current_latency_p95_ms:,.0f}"


def _malformed(report: DetectionReport) -> list[str]:
    windows = [w for w in (report.baseline, report.current) if w is not None]
    kinds = sorted({kind for w in windows for kind in w.malformed.counts})
    if not kinds:
        return ["## Malformed lines", "", "None.", ""]
    rows: list[list[object]] = []
    for kind in kinds:
        examples = [e for w in windows for e in w.malformed.examples.get(kind, [])][:3]
        rows.append([kind, *[w.malformed.counts.get(kind, 0) for w in windows], "<br>".join(examples)])
    return ["## Malformed lines", "", *_table(["kind", *[w.name for w in windows], "examples"], rows)]
