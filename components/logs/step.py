"""The detect-logs step: judge a window of the service's logs against a baseline and write the drift report.

What `vcpilot logs detect|step` and the detect VCJob (`python -m components.logs`) run; the report, report.md and
the curated fine-tuning set are written by `components.logs.detect`, the step's MLflow record here.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from components.files import check_output
from components.logs.compare import DetectPolicy
from components.logs.detect import default_state_dir, detect, split_source
from components.logs.interval import TimeWindow
from components.logs.reader import unwritable
from components.logs.report import DetectionReport
from components.tracking.steps import StepLog, log_step_run, report_metrics

__all__ = ["Windows", "run_detect", "run_step", "step_log"]

Windows = tuple[TimeWindow | None, TimeWindow | None]
"""The time windows of the baseline and of the current logs; None keeps every line."""


def run_detect(
    current: list[Path],
    report: Path,
    *,
    baseline: list[Path] | None,
    state: Path | None,
    policy: DetectPolicy,
    eval_: float,
    windows: Windows = (None, None),
    report_option: str = "--report",
) -> DetectionReport:
    """Compare `current` with `baseline` (default: the previous run's, kept in `state`) and write the report.

    `windows` (baseline, current) cut them by time (`detect`). A log source that cannot be used raises
    LogSourceError, a report that cannot be written InputError; `report_option` names the report's option.
    """
    check_output(report, "report")  # before the fine-tuning set beside it is written
    state = state or default_state_dir()
    try:
        return detect(
            current,
            report,
            baseline=baseline,
            state_dir=state,
            policy=policy,
            eval_fraction=eval_,
            baseline_window=windows[0],
            current_window=windows[1],
            report_option=report_option,
        )
    except OSError as err:
        raise unwritable(err, report) from None


def run_step(
    source: Path,
    report: Path,
    *,
    state: Path | None,
    policy: DetectPolicy,
    eval_: float,
    windows: Windows = (None, None),
) -> DetectionReport:
    """The pipeline's step: `source` holds baseline/ and current/ (or only the current window); record the result."""
    baseline, current = split_source(source)
    earlier = [baseline] if baseline else None
    result = run_detect([current], report, baseline=earlier, state=state, policy=policy, eval_=eval_, windows=windows)
    log_step_run(step_log(result, report))  # in a workflow: a child run of its MLflow run; else nothing
    return result


def step_log(report: DetectionReport, path: Path) -> StepLog:
    """What the detect-logs step records in its MLflow child run: finding counts, the trigger, the report files."""
    metrics = report_metrics(report.model_dump(), keys=_COUNTS)
    metrics.update({f"findings.{kind}": n for kind, n in Counter(f.kind for f in report.findings).items()})
    metrics.update({f"findings.{level}": n for level, n in Counter(f.severity for f in report.findings).items()})
    for window in (report.baseline, report.current):
        if window is not None:
            rates = report_metrics(window.model_dump(), keys=("log_error_rate", "negative_share", "latency_p95_ms"))
            metrics.update({f"{window.name}.{key}": value for key, value in rates.items()})
    return StepLog(
        step="detect-logs",
        metrics=metrics,
        params={key: str(value) for key, value in report.policy.model_dump().items()},
        tags={"trigger": str(report.trigger).lower(), "reason": report.reason, "compared_with": report.compared_with},
        artifacts=(path, path.with_name("report.md")),
    )


_COUNTS = (
    "drift",
    "trigger",
    "lines",
    "templates",
    "new_templates",
    "findings_count",
    "omitted_findings",
    "malformed_lines",
    "train_examples",
    "eval_examples",
)
