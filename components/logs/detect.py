"""detect-logs from end to end: read both windows, mine templates, compare, write the report and the fine-tuning set.

The windows come from explicit sources (`--baseline`, `--current`, or a source holding `baseline/` and
`current/`), or — for a nightly run given only tonight's logs — the baseline is the window the previous run
saved in the state directory, whose template miner this run continues. State is written only after the report,
so a run that fails leaves yesterday's baseline in place.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from components.files import write_text
from components.logs.compare import DetectPolicy, compare
from components.logs.curate import Curator
from components.logs.reader import MAX_LINE_BYTES, LogSourceError, Malformed, expand_sources
from components.logs.records import RequestRecord, read_entries
from components.logs.report import DetectionReport, StateInfo, build_report
from components.logs.templates import Miner, MinerSettings
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


def _mine_window(
    name: str,
    sources: Sequence[Path | str],
    miners: tuple[Miner, Miner],
    *,
    curator: Curator | None,
    max_line_bytes: int,
) -> WindowSummary:
    files = expand_sources(sources)
    malformed = Malformed()
    builder = WindowBuilder(name, log_miner=miners[0], prompt_miner=miners[1], malformed=malformed)
    for line, entry in read_entries(files, malformed, max_line_bytes=max_line_bytes):
        builder.add(line, entry)
        if curator is not None and isinstance(entry, RequestRecord) and entry.correction:
            curator.offer(entry)
    summary = builder.finish([str(s) for s in sources], len(files))
    if summary.lines == 0:
        unreadable = f" ({malformed.total} malformed lines skipped)" if malformed.total else ""
        raise LogSourceError(
            f"the {name} window ({_describe(sources)}) holds no log lines{unreadable}: point it at the service's logs"
        )
    return summary


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
) -> DetectionReport:
    """Compare `current` with `baseline` (or the previous run's window in `state_dir`) and write the results.

    Writes `report_path` (JSON), `report.md`, `train.jsonl` and `eval.jsonl` in its directory. Raises
    LogSourceError, one sentence, when a source is missing or a window holds no log lines.
    """
    policy = policy or DetectPolicy()
    expand_sources(current)  # fail on a missing source before any work
    if baseline:
        expand_sources(baseline)
    previous = None if baseline else _previous_window(state_dir)
    miners = (
        Miner(settings, state_dir / _LOG_STATE if state_dir else None),
        Miner(settings, state_dir / _PROMPT_STATE if state_dir else None),
    )
    before = previous
    if baseline:
        before = _mine_window("baseline", baseline, miners, curator=None, max_line_bytes=max_line_bytes)
    curator = Curator(report_path.parent, eval_fraction)
    try:
        now = _mine_window("current", current, miners, curator=curator, max_line_bytes=max_line_bytes)
    except BaseException:
        curator.discard()
        raise
    dataset = curator.close()
    verdict = compare(before, now, policy)
    report = build_report(
        verdict,
        before,
        now,
        compared_with="baseline" if baseline else "previous run" if previous else "budgets",
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
