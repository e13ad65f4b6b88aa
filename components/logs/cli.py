"""`vcpilot logs parse|detect` and the detect-logs step's command line (`python -m components.logs`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from components.logs.compare import DetectPolicy
from components.logs.detect import default_state_dir, detect, split_source
from components.logs.parse import parse_files
from components.logs.reader import LogSourceError, Malformed
from components.logs.report import DetectionReport
from components.tracking.steps import StepLog, log_step_run, report_metrics

__all__ = ["app", "detect_command", "parse_command", "step_app", "step_command", "step_log"]

app = typer.Typer(
    help="Mine log templates (Drain3) and detect drift in the service's logs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
step_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document and nothing else.")]
StateOption = Annotated[
    Path | None,
    typer.Option(
        "--state",
        help="Directory for the template miner's state and this window's summary, so the next run compares with it "
        "(default: $VCPILOT_LOGS_STATE, else $VCPILOT_HOME/state/logs, else none).",
    ),
]
Alpha = Annotated[float, typer.Option(min=1e-9, max=0.5, help="Significance of each family of tests.")]
MinSample = Annotated[int, typer.Option(min=1, help="Lines (or rated requests) each window needs for a test.")]
EvalFraction = Annotated[float, typer.Option(min=0.0, max=0.9, help="Share of corrected prompts kept for eval.")]


def _fail(message: str) -> NoReturn:
    """One sentence on stderr, exit 1."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def _skipped(malformed: Malformed) -> str:
    if not malformed.total:
        return ""
    kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(malformed.counts.items()))
    return f" ({malformed.total} malformed skipped: {kinds})"


@app.command("parse")
def parse_command(
    files: Annotated[list[Path], typer.Argument(help="Log files, directories or globs (.gz is read too).")],
    out: Annotated[Path, typer.Option("--out", help="The CSV to write: LineId, EventId, EventTemplate.")],
    state: Annotated[Path | None, typer.Option(help="A Drain3 state file to resume from and save to.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Write every line's template in Loghub's structured format, one row per input line."""
    try:
        summary = parse_files(files, out, state_file=state)
    except LogSourceError as err:
        _fail(str(err))
    except OSError as err:
        _fail(f"cannot write {err.filename or out}: {err.strerror or err}")
    if as_json:
        print(summary.model_dump_json(indent=2))
        return
    typer.echo(f"{summary.lines} lines, {summary.templates} templates → {out}{_skipped(summary.malformed)}")


def _run(
    current: list[Path],
    baseline: list[Path] | None,
    report: Path,
    state: Path | None,
    policy: DetectPolicy,
    eval_: float,
) -> DetectionReport:
    state = state or default_state_dir()
    try:
        return detect(current, report, baseline=baseline, state_dir=state, policy=policy, eval_fraction=eval_)
    except LogSourceError as err:
        _fail(str(err))
    except OSError as err:
        _fail(f"cannot write {err.filename or report}: {err.strerror or err}")


def _print(report: DetectionReport, path: Path, as_json: bool) -> None:
    if as_json:
        print(report.model_dump_json(indent=2))
        return
    typer.echo(f"{'drift' if report.drift else 'no drift'}: {report.reason}")
    typer.echo(
        f"report: {path} and {path.with_name('report.md')}; fine-tuning set: {report.train_examples} train, "
        f"{report.eval_examples} eval{_skipped(report.current.malformed)}"
    )


@app.command("detect")
def detect_command(
    current: Annotated[list[Path], typer.Option("--current", help="The window to judge (repeat for several).")],
    out: Annotated[Path, typer.Option("--out", help="Directory for report.json, report.md, train/eval.jsonl.")],
    baseline: Annotated[
        list[Path] | None,
        typer.Option("--baseline", help="The window to compare with (default: the previous run's, from --state)."),
    ] = None,
    state: StateOption = None,
    alpha: Alpha = 0.01,
    min_sample: MinSample = 30,
    eval_fraction: EvalFraction = 0.2,
    as_json: JsonFlag = False,
) -> None:
    """Compare a current window of logs with a baseline; write the report and the curated fine-tuning set."""
    policy = DetectPolicy(alpha=alpha, min_sample=min_sample)
    path = out / "report.json"
    report = _run(current, baseline or None, path, state, policy, eval_fraction)
    _print(report, path, as_json)


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


@step_app.command()
def step_command(
    source: Annotated[
        Path, typer.Option("--source", help="Logs: a file, directory or glob; one holding baseline/ and current/.")
    ],
    report: Annotated[Path, typer.Option("--report", help="The JSON report to write (report.md etc. beside it).")],
    state: StateOption = None,
    alpha: Alpha = 0.01,
    min_sample: MinSample = 30,
    eval_fraction: EvalFraction = 0.2,
    as_json: JsonFlag = False,
) -> None:
    """The detect-logs step: judge the service's logs and write the drift report the gate reads."""
    baseline, current = split_source(source)
    policy = DetectPolicy(alpha=alpha, min_sample=min_sample)
    result = _run([current], [baseline] if baseline else None, report, state, policy, eval_fraction)
    _print(result, report, as_json)
    log_step_run(step_log(result, report))  # in a workflow: a child run of its MLflow run; else nothing
