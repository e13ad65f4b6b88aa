"""`vcpilot logs parse|detect|step` and `python -m components.logs`: one app for people and for the detect pod.

The pod's spelling, `python -m components.logs --source PATH --report FILE [--state DIR]`, is `step` (the command
that runs when none is named): it judges the logs at PATH (comparing `PATH/baseline` with `PATH/current` when both
exist) and writes the report the pipeline's gate reads. The work is in components/logs/step.py and detect.py;
exit codes are every step program's (components/errors.py) and say whether it worked, not whether the logs drifted.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from components.entry import JsonOption, new_app
from components.errors import InputError

if TYPE_CHECKING:
    from components.logs.interval import TimeWindow
    from components.logs.reader import Malformed
    from components.logs.refine import TemplateRefiner
    from components.logs.report import DetectionReport

__all__ = ["app", "detect_command", "parse_command", "step_command"]

app = new_app(help="Mine log templates (Drain3) and detect drift in the service's logs.")

JsonFlag = JsonOption
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
BaselineWindow = Annotated[
    str | None,
    typer.Option(
        "--baseline-window",
        metavar="START/END",
        help="Cut the baseline to this time (without --baseline: from the current logs, one log source): "
        "2026-11-01T00:00/2026-11-02T00:00, START/P1D, now-48h/now-24h.",
    ),
]
CurrentWindow = Annotated[
    str | None,
    typer.Option(
        "--current-window",
        metavar="START/END",
        help="Cut the current window to this time: as --baseline-window, or 24h.",
    ),
]


def _skipped(malformed: Malformed) -> str:
    if not malformed.total:
        return ""
    return f" ({malformed.total} malformed skipped: {malformed.describe()})"


@app.command("parse")
def parse_command(
    files: Annotated[
        list[Path], typer.Argument(help="Log files, directories or globs (.gz is read too); - for standard input.")
    ],
    out: Annotated[
        Path,
        typer.Option("--out", help="The CSV to write: LineId, Source, Content, EventId, EventTemplate, ParameterList."),
    ],
    state: Annotated[Path | None, typer.Option(help="A Drain3 state file to resume from and save to.")] = None,
    llm_refine: Annotated[
        bool,
        typer.Option(
            "--llm-refine",
            help="Ask the LLM at VCPILOT_LLM_URL (VCPILOT_LLM_MODEL) to mark the variables of each template, once per "
            "template; the mined template stands when it cannot.",
        ),
    ] = False,
    llm_cache: Annotated[
        Path | None,
        typer.Option(
            "--llm-cache",
            help="The LLM's answers per template, kept between runs (default: llm-templates.json in "
            "$VCPILOT_LOGS_STATE, else $VCPILOT_HOME/state/logs, else none).",
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Write every line's template in Loghub's structured format, one row per input line."""
    from components.files import check_output
    from components.logs.parse import parse_files
    from components.logs.reader import unwritable
    from components.progress import Progress

    check_output(out, "--out")
    if state is not None:
        check_output(state, "--state")
    if llm_cache is not None:
        if not llm_refine:  # it was dropped without a word, as if the cache had been kept
            raise InputError("--llm-cache keeps --llm-refine's answers; add --llm-refine, or leave it out")
        check_output(llm_cache, "--llm-cache")
    refiner = _refiner(llm_cache) if llm_refine else None
    try:
        # Big inputs take minutes: a count on a terminal, a line every few seconds in a pipe (stderr with --json).
        with Progress.for_command(as_json).steps("lines parsed", None, every_s=5) as advance:
            summary = parse_files(files, out, state_file=state, on_lines=lambda n: advance(n, ""), refiner=refiner)
    except OSError as err:
        raise unwritable(err, out) from None
    if as_json:
        print(summary.model_dump_json(indent=2))
        return
    typer.echo(f"{summary.lines} lines, {summary.templates} templates → {out}{_skipped(summary.malformed)}")
    if summary.refine is not None:
        done = summary.refine
        typer.echo(f"LLM refinement: {done.asked} asked, {done.cached} from the cache, {done.changed} changed")
        if done.problem:
            typer.echo(f"LLM refinement stopped: {done.problem}; the other templates are as mined", err=True)


def _refiner(cache: Path | None) -> TemplateRefiner:
    from components.llm import LLMEndpoint
    from components.logs.detect import default_state_dir
    from components.logs.refine import TemplateRefiner

    endpoint = LLMEndpoint.from_env(otherwise="leave --llm-refine out")
    state = default_state_dir()
    return TemplateRefiner(endpoint, cache or (state / "llm-templates.json" if state else None))


def _windows(baseline: str | None, current: str | None) -> tuple[TimeWindow | None, TimeWindow | None]:
    """Both windows read against one `now`, so `now-48h/now-24h` and `24h` meet exactly."""
    from datetime import UTC, datetime

    from components.logs.interval import parse_window

    now = datetime.now(UTC)
    return (
        parse_window(baseline, now, option="--baseline-window") if baseline else None,
        parse_window(current, now, option="--current-window") if current else None,
    )


def _in_no_window(report: DetectionReport) -> str:
    windows = [w for w in (report.baseline, report.current) if w is not None]
    untimed, outside = (sum(getattr(w, name) for w in windows) for name in ("untimed_lines", "outside_lines"))
    if not untimed and not outside:
        return ""
    return f"; in no window: {untimed} lines before their file's first time, {outside} of a time outside the windows"


def _print(report: DetectionReport, path: Path, as_json: bool) -> None:
    if as_json:
        print(report.model_dump_json(indent=2))
        return
    typer.echo(f"{'drift' if report.drift else 'no drift'}: {report.reason}")
    typer.echo(
        f"report: {path} and {path.with_name('report.md')}; fine-tuning set: {report.train_examples} train, "
        f"{report.eval_examples} eval{_skipped(report.current.malformed)}{_in_no_window(report)}"
    )


def _check_state(state: Path | None) -> None:
    from components.files import check_output_dir

    if state is not None:
        check_output_dir(state, "--state")


@app.command("detect")
def detect_command(
    current: Annotated[list[Path], typer.Option("--current", help="The window to judge (repeat for several).")],
    out: Annotated[Path, typer.Option("--out", help="Directory for report.json, report.md, train/eval.jsonl.")],
    baseline: Annotated[
        list[Path] | None,
        typer.Option("--baseline", help="The window to compare with (default: the previous run's, from --state)."),
    ] = None,
    state: StateOption = None,
    baseline_window: BaselineWindow = None,
    current_window: CurrentWindow = None,
    alpha: Alpha = 0.01,
    min_sample: MinSample = 30,
    eval_fraction: EvalFraction = 0.2,
    as_json: JsonFlag = False,
) -> None:
    """Compare a current window of logs with a baseline; write the report and the curated fine-tuning set."""
    from components.files import check_output_dir
    from components.logs.compare import DetectPolicy
    from components.logs.step import run_detect

    check_output_dir(out, "--out")
    _check_state(state)
    windows = _windows(baseline_window, current_window)
    policy = DetectPolicy(alpha=alpha, min_sample=min_sample)
    path = out / "report.json"
    report = run_detect(
        current,
        path,
        baseline=baseline or None,
        state=state,
        policy=policy,
        eval_=eval_fraction,
        windows=windows,
        report_option="--out",
    )
    _print(report, path, as_json)


@app.command("step")
def step_command(
    source: Annotated[
        Path, typer.Option("--source", help="Logs: a file, directory or glob; one holding baseline/ and current/.")
    ],
    report: Annotated[Path, typer.Option("--report", help="The JSON report to write (report.md etc. beside it).")],
    state: StateOption = None,
    baseline_window: BaselineWindow = None,
    current_window: CurrentWindow = None,
    alpha: Alpha = 0.01,
    min_sample: MinSample = 30,
    eval_fraction: EvalFraction = 0.2,
    as_json: JsonFlag = False,
) -> None:
    """The detect-logs step: judge the service's logs and write the drift report the gate reads."""
    from components.files import check_output
    from components.logs.compare import DetectPolicy
    from components.logs.step import run_step

    check_output(report, "--report")
    _check_state(state)
    windows = _windows(baseline_window, current_window)
    policy = DetectPolicy(alpha=alpha, min_sample=min_sample)
    result = run_step(source, report, state=state, policy=policy, eval_=eval_fraction, windows=windows)
    _print(result, report, as_json)
