"""detect-logs from end to end: read both windows, mine templates, compare, write the report and the fine-tuning set.

The windows come from explicit sources (`--baseline`, `--current`, or a source holding `baseline/` and
`current/`), or — for a nightly run given only tonight's logs — the baseline is the window the previous run
saved in the state directory, whose template miner this run continues. State is written only after the report,
so a run that fails leaves yesterday's baseline in place.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from components.errors import InputError
from components.files import write_text
from components.logs.compare import DetectPolicy, compare
from components.logs.curate import SPLIT_FILES, Curator
from components.logs.interval import TimeWindow
from components.logs.reader import (
    MAX_LINE_BYTES,
    LogSourceError,
    Malformed,
    SourceLine,
    expand_sources,
    refuse_overwriting,
)
from components.logs.records import Entry, RequestRecord, read_entries
from components.logs.report import DetectionReport, StateInfo, build_report
from components.logs.templates import Miner, MinerSettings
from components.logs.timestamps import TimeReader, format_time
from components.logs.window import WindowBuilder, WindowSummary

__all__ = ["PREVIOUS_WINDOW", "STATE_ENV", "default_state_dir", "detect", "split_source"]

STATE_ENV = "VCPILOT_LOGS_STATE"
PREVIOUS_WINDOW = "previous-window.json"
_LOG_STATE = "log-templates.drain3"
_PROMPT_STATE = "prompt-templates.drain3"


def split_source(source: Path) -> tuple[Path | None, Path]:
    """(baseline, current) of a source: its `baseline` and `current` entries when it has both, else (None, source)."""
    baseline, current = source / "baseline", source / "current"
    if source.is_dir() and baseline.exists() and current.exists():
        return baseline, current
    return None, source


def default_state_dir() -> Path | None:
    """$VCPILOT_LOGS_STATE, else $VCPILOT_HOME/state/logs, else None (nothing is remembered between runs)."""
    if os.environ.get(STATE_ENV):
        return Path(os.environ[STATE_ENV])
    if os.environ.get("VCPILOT_HOME"):
        return Path(os.environ["VCPILOT_HOME"]) / "state" / "logs"
    return None


def _previous_window(state_dir: Path | None) -> WindowSummary | None:
    """The window the previous run saved, if its template state is there too (ids only mean something with it)."""
    if state_dir is None:
        return None
    path = state_dir / PREVIOUS_WINDOW
    if not path.is_file() or not (state_dir / _LOG_STATE).is_file():
        return None
    try:
        window = WindowSummary.model_validate_json(path.read_bytes())
    except (OSError, ValidationError) as err:
        raise LogSourceError(f"the saved window {path} cannot be read ({type(err).__name__}): delete it") from err
    return window.model_copy(update={"name": "previous run"})


def _describe(sources: Sequence[Path | str]) -> str:
    return ", ".join(str(s) for s in sources)


@dataclass
class _Target:
    """One window being mined: where its lines go, the time they must fall in, and the first and last time seen."""

    builder: WindowBuilder
    window: TimeWindow | None
    curator: Curator | None
    first: float | None = None
    last: float | None = None

    def add(self, line: SourceLine, entry: Entry, seconds: float | None) -> None:
        self.builder.add(line, entry)
        if self.curator is not None and isinstance(entry, RequestRecord) and entry.correction:
            self.curator.offer(entry)
        if seconds is not None:
            self.first = seconds if self.first is None else min(self.first, seconds)
            self.last = seconds if self.last is None else max(self.last, seconds)


def _entry_time(reader: TimeReader, line: SourceLine, entry: Entry) -> float | None:
    if entry.timestamp is not None:
        return reader.value(entry.timestamp)
    return None if line.text.lstrip().startswith("{") else reader.line(line.text)  # a wrapped JSON line: its prefix


def _mine_windows(
    sources: Sequence[Path | str],
    targets: Sequence[_Target],
    *,
    max_line_bytes: int,
) -> list[WindowSummary]:
    """Read `sources` once, each entry going to the first target whose window holds its time (or has none).

    A line without a time of its own (a stack trace's) has the time of the line before it in its file. The lines in
    no window — before their file's first time, or of a time outside every window — are counted where the
    malformed ones are: on the last target's summary.
    """
    files = expand_sources(sources)
    malformed = Malformed()
    windows = [t.window for t in targets if t.window is not None]
    # A time without a year is dated against the windows' end, or now if that is later: logs are not from the future.
    latest = min(max((w.end for w in windows), default=0.0), datetime.now(UTC).timestamp())
    reader = TimeReader(datetime.fromtimestamp(latest, UTC))
    earliest, latest_seen = float("inf"), float("-inf")  # the sources' time span, for when a window is empty
    routes = [
        (t, t.window.start if t.window else float("-inf"), t.window.end if t.window else float("inf")) for t in targets
    ]
    source, previous = "", None
    untimed = outside = 0
    for line, entry in read_entries(files, malformed, max_line_bytes=max_line_bytes):
        if not windows:
            targets[0].add(line, entry, None)
            continue
        if line.source != source:
            source, previous = line.source, None
        seconds = _entry_time(reader, line, entry)
        if seconds is None:
            seconds = previous
            if seconds is None:  # before the file's first time: in no window
                untimed += 1
                continue
        previous = seconds
        earliest, latest_seen = min(earliest, seconds), max(latest_seen, seconds)
        for target, start, end in routes:
            if start <= seconds < end:
                target.add(line, entry, seconds)
                break
        else:
            outside += 1
    seen = [earliest, latest_seen] if earliest <= latest_seen else []
    summaries = []
    for target in targets:
        summary = target.builder.finish([str(s) for s in sources], len(files))
        # Lines that cannot be read, or are in no window, have no window: the last target reports them, once.
        last = target is targets[-1]
        summary.malformed = malformed if last else Malformed()
        summary.untimed_lines, summary.outside_lines = (untimed, outside) if last else (0, 0)
        if target.window is not None:
            summary.window = str(target.window)
            summary.first_timestamp = format_time(target.first) if target.first is not None else None
            summary.last_timestamp = format_time(target.last) if target.last is not None else None
        if summary.lines == 0:
            raise LogSourceError(_empty(summary.name, sources, target.window, malformed, seen, untimed))
        summaries.append(summary)
    return summaries


def _empty(
    name: str,
    sources: Sequence[Path | str],
    window: TimeWindow | None,
    malformed: Malformed,
    seen: list[float],
    untimed: int,
) -> str:
    """Why the `name` window holds no line, in one sentence."""
    where = f"the {name} window ({_describe(sources)}"
    if window is None:
        unreadable = f" ({malformed.total} malformed lines skipped)" if malformed.total else ""
        remedy = malformed.remedy("point it at the service's logs")
        return f"{where}) holds no log lines{unreadable}: {remedy}"
    if not seen:
        return (
            f"{where}, {window}) holds no line with a time this reads (ISO 8601, syslog, Apache, epoch seconds "
            f"...; {untimed} lines without one): leave the time windows out for these logs"
        )
    return (
        f"{where}) holds no log lines in {window}: the logs run from {format_time(seen[0])} to {format_time(seen[1])}"
    )


def _target(name: str, window: TimeWindow | None, miners: tuple[Miner, Miner], curator: Curator | None) -> _Target:
    return _Target(WindowBuilder(name, log_miner=miners[0], prompt_miner=miners[1]), window, curator)


def _check_windows(
    baseline: Sequence[Path | str] | None, baseline_window: TimeWindow | None, current_window: TimeWindow | None
) -> None:
    """Refuse windows that would compare a window with itself: both are cut from the current logs."""
    if baseline_window is None or baseline:
        return
    if current_window is None:
        raise InputError(
            "--baseline-window without --baseline cuts the baseline from the current logs: give --current-window "
            "too, or the current window would hold the baseline's lines as well"
        )
    if baseline_window.overlaps(current_window):
        raise InputError(
            f"the baseline window {baseline_window} and the current window {current_window} overlap: over one log "
            "source they must not"
        )


def _events(miners: tuple[Miner, Miner]) -> dict[str, tuple[str, str]]:
    """Every template's event after the merge pass, by window key (`log:<id>` → `log:<event>`)."""
    return {
        f"{kind}:{identity}": (f"{kind}:{event}", template)
        for kind, miner in zip(("log", "prompt"), miners, strict=True)
        for identity, (event, template) in miner.events().items()
    }


def detect(
    current: Sequence[Path | str],
    report_path: Path,
    *,
    baseline: Sequence[Path | str] | None = None,
    state_dir: Path | None = None,
    policy: DetectPolicy | None = None,
    settings: MinerSettings | None = None,
    eval_fraction: float = 0.2,
    max_line_bytes: int = MAX_LINE_BYTES,
    baseline_window: TimeWindow | None = None,
    current_window: TimeWindow | None = None,
    report_option: str = "--out",
) -> DetectionReport:
    """Compare `current` with `baseline` (or the previous run's window in `state_dir`) and write the results.

    `current_window` keeps only the current lines of that time; `baseline_window` cuts the baseline from
    `baseline`, or — without it — from the current sources, in the same pass. Writes `report_path` (JSON),
    `report.md`, `train.jsonl` and `eval.jsonl` in its directory. Raises LogSourceError, one sentence, when a source
    is missing or a window holds no log lines or the report would replace one (named as `report_option`), and
    InputError when the windows overlap over one source.
    """
    policy = policy or DetectPolicy()
    _check_windows(baseline, baseline_window, current_window)
    read = expand_sources(current)  # fail on a missing source before any work
    if baseline:
        read += expand_sources(baseline)
    written = [
        report_path,
        report_path.with_name("report.md"),
        *(report_path.with_name(n) for n in SPLIT_FILES.values()),
    ]
    refuse_overwriting(read, [(path, report_option) for path in written])
    from_current = baseline_window is not None and not baseline
    previous = None if baseline or from_current else _previous_window(state_dir)
    miners = (
        Miner(settings, state_dir / _LOG_STATE if state_dir else None),
        Miner(settings, state_dir / _PROMPT_STATE if state_dir else None),
    )
    before = previous
    if baseline:
        (before,) = _mine_windows(
            baseline, [_target("baseline", baseline_window, miners, None)], max_line_bytes=max_line_bytes
        )
    curator = Curator(report_path.parent, eval_fraction)
    targets = [_target("current", current_window, miners, curator)]
    if from_current:
        targets.insert(0, _target("baseline", baseline_window, miners, None))
    try:
        mined = _mine_windows(current, targets, max_line_bytes=max_line_bytes)
    except BaseException:
        curator.discard()
        raise
    if from_current:
        before = mined[0]
    now = mined[-1]
    dataset = curator.close()
    events = _events(miners)  # the merge pass over everything both windows taught the miners
    before, now = (before.joined(events) if before else None), now.joined(events)
    verdict = compare(before, now, policy)
    report = build_report(
        verdict,
        before,
        now,
        compared_with="baseline" if baseline or from_current else "previous run" if previous else "budgets",
        dataset=dataset,
        state=StateInfo(
            dir=str(state_dir) if state_dir else None,
            templates_known=miners[0].known + miners[1].known,
            saved_window=state_dir is not None,
        ),
        policy=policy,
    )
    report.write(report_path)
    if state_dir is not None:
        _save_state(state_dir, miners, now)
    return report


def _save_state(state_dir: Path, miners: tuple[Miner, Miner], window: WindowSummary) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    for miner in miners:
        miner.save()
    write_text(state_dir / PREVIOUS_WINDOW, window.model_dump_json())
