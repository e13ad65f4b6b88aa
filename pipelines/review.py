"""The review of one workflow run: its pictures and a `summary.md` a person reads, made from the workspace.

The exit handler (`pipelines.steps.finalize`) calls `write_review` before it closes the parent MLflow run, which
then carries `review/` as artifacts. Everything here reads the steps' own files (`RunPaths`), never MLflow, so the
review is complete even when tracking was down for the whole night; a step that did not run leaves its part out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.actions import Abort, Downscale, Proceed, RetryFromCheckpoint
from agent.policy import Decision
from components.files import write_text
from components.loadtest.metrics import Slo
from components.loadtest.records import RequestRecord
from components.logs.report import DetectionReport
from components.tracking import plots
from pipelines.workspace import RunPaths

__all__ = ["Review", "attempt_losses", "read_decisions", "write_review"]

_GREW = 8  # templates shown in the log-window picture


class Review(BaseModel):
    """What `write_review` made: the directory, the pictures in it, the summary's text."""

    model_config = ConfigDict(frozen=True)

    directory: str
    pictures: list[str] = Field(default_factory=list)
    summary: str


def _json(path: str | Path) -> dict[str, Any] | None:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _model(path: str | Path, model: type[Any]) -> Any:
    data = _json(path)
    try:
        return None if data is None else model.model_validate(data)
    except ValidationError:
        return None


def read_decisions(paths: RunPaths) -> list[Decision]:
    """The run's decisions in the order they were made (plan, then diagnose, per attempt); unreadable ones skipped."""
    found = [_model(path, Decision) for path in sorted((Path(paths.run) / "decisions").glob("*.json"))]
    decisions = [d for d in found if d is not None]
    order = {"plan": 0, "diagnose": 1}
    return sorted(decisions, key=lambda d: (d.observation.request.attempt, order.get(d.stage, 2)))


def attempt_losses(paths: RunPaths, decisions: Sequence[Decision]) -> list[plots.AttemptLoss]:
    """Each training attempt's loss from its `metrics.jsonl`, with its size and how it began (from its plan)."""
    plans = {d.observation.request.attempt: d for d in decisions if d.stage == "plan"}
    attempts = []
    for attempt in sorted(plans):
        rows = _lines(Path(paths.model(attempt)) / "metrics.jsonl")
        if not rows:
            continue
        plan = plans[attempt]
        action, checkpoint = plan.action, plan.observation.checkpoint
        began: plots.Began = "downscale" if isinstance(action, Downscale) else "resume" if checkpoint else "start"
        attempts.append(
            plots.AttemptLoss(
                attempt=attempt,
                steps=tuple(int(row["step"]) for row in rows),
                losses=tuple(float(row["loss"]) for row in rows),
                gpus=action.gpus if isinstance(action, Proceed | Downscale | RetryFromCheckpoint) else 0,
                began=began if attempt > 1 else "start",
                resumed_from_step=checkpoint.step if checkpoint else None,
            )
        )
    return attempts


def _lines(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file that have a step and a loss (a torn last line is skipped)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return []
    rows = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and "step" in row and "loss" in row:
            rows.append(row)
    return rows


def _records(path: Path) -> list[RequestRecord]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    records = []
    for line in lines:
        try:
            records.append(RequestRecord.model_validate_json(line))
        except ValidationError:
            continue
    return records


def _grew(detect: DetectionReport) -> list[tuple[str, int, int]]:
    rows = sorted(detect.top_templates, key=lambda r: r.current_count - (r.baseline_count or 0), reverse=True)
    return [(r.template, r.baseline_count or 0, r.current_count) for r in rows[:_GREW]]


def write_review(paths: RunPaths, status: str, *, links: dict[str, str] | None = None) -> Review:
    """Draw the run's pictures and write `summary.md` into `<run>/review/`; what is missing is left out."""
    out = Path(paths.run) / "review"
    decisions = read_decisions(paths)
    detect = _model(paths.detect_report, DetectionReport)
    loadtest = _json(paths.loadtest_report)
    evaluation = _json(paths.evaluate_report)  # a dict: its model lives beside torch (components.evaluate)
    release = _json(paths.release_record)
    pictures: list[Path] = []
    if losses := attempt_losses(paths, decisions):
        pictures.append(plots.plot_training_loss(losses, out / "training_loss.png"))
    records = _records(Path(paths.loadtest_report).with_name("records.jsonl"))
    if records and loadtest is not None:
        slo = Slo(ttft_ms=loadtest.get("slo_ttft_ms"), tpot_ms=loadtest.get("slo_tpot_ms"))
        pictures.append(plots.plot_latency_cdfs(records, slo, out / "latency_cdf.png"))
        pictures.append(plots.plot_throughput(records, slo, out / "throughput.png"))
    if evaluation is not None:
        candidate = evaluation.get("candidate_by_category") or {"all": evaluation.get("candidate_score", 0.0)}
        champion = evaluation.get("champion_by_category") or (
            {"all": evaluation["champion_score"]} if evaluation.get("champion_score") is not None else None
        )
        pictures.append(plots.plot_scores(candidate, champion, out / "scores.png"))
    if detect is not None and detect.top_templates:
        before = detect.baseline.log_error_rate if detect.baseline else None
        shares = (before or 0.0, detect.current.log_error_rate or 0.0)
        pictures.append(plots.plot_log_windows(_grew(detect), shares, out / "log_windows.png"))
    text = summary_markdown(
        paths.workflow, status, detect, decisions, loadtest, evaluation, release, [p.name for p in pictures], links
    )
    write_text(out / "summary.md", text)
    return Review(directory=str(out), pictures=[str(p) for p in pictures], summary=text)


def summary_markdown(
    workflow: str,
    status: str,
    detect: DetectionReport | None,
    decisions: Sequence[Decision],
    loadtest: dict[str, Any] | None,
    evaluation: dict[str, Any] | None,
    release: dict[str, Any] | None,
    pictures: Sequence[str],
    links: dict[str, str] | None = None,
) -> str:
    """The review a person would write: the outcome, why, the numbers that decided it, where to look."""
    lines = [f"# {workflow}: {status}", "", f"**Outcome.** {_outcome(status, detect, decisions, release)}", ""]
    lines += ["## Why", ""]
    if detect is not None:
        lines.append(f"- **Logs.** {detect.reason} ({detect.lines} lines, {detect.new_templates} new templates).")
    for decision in decisions:
        attempt = decision.observation.request.attempt
        said = decision.summary.removeprefix(f"{decision.stage}: ")
        lines.append(f"- **{decision.stage.capitalize()}, attempt {attempt}.** {said}")
    if loadtest is not None:
        lines.append(f"- **Load test.** {loadtest.get('slo_reason') or 'no SLO verdict'}.")
    if evaluation is not None:
        lines.append(f"- **Evaluation.** {evaluation.get('reason') or _scores(evaluation)}")
    if release is not None:
        lines.append(f"- **Release.** {release.get('reason', '')}")
    lines += ["", "## Numbers", "", "| what | value |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in _numbers(detect, loadtest, evaluation)]
    lines += ["", "## Where to look", ""]
    lines += [f"- {name}: {target}" for name, target in (links or {}).items()]
    lines += [f"- the run's files: `runs/{workflow}/` in the workspace (reports, decisions, manifests, review)"]
    lines += [f"- ![{name}]({name})" for name in pictures]
    return "\n".join(lines).rstrip() + "\n"


def _outcome(
    status: str, detect: DetectionReport | None, decisions: Sequence[Decision], release: dict[str, Any] | None
) -> str:
    if release is not None and release.get("released"):
        version = (release.get("version") or {}).get("version", "?")
        return f"released {release.get('registered_model', 'the model')} version {version} as champion."
    if release is not None:
        return f"not released: {release.get('reason', 'no reason recorded')}."
    if detect is not None and not detect.trigger:
        return f"nothing to do: {detect.reason}."
    if decisions and isinstance(last := decisions[-1].action, Abort):
        return f"stopped by the agent: {last.reason}"
    return f"the workflow ended {status} before a release decision."


def _scores(evaluation: dict[str, Any]) -> str:
    champion = evaluation.get("champion_score")
    versus = f" vs the champion's {champion:.3f}" if isinstance(champion, int | float) else ""
    return f"candidate exact match {evaluation.get('candidate_score', 0.0):.3f}{versus}."


def _numbers(
    detect: DetectionReport | None, loadtest: dict[str, Any] | None, evaluation: dict[str, Any] | None
) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    if detect is not None:
        rows.append(("error share (current window)", _share(detect.current.log_error_rate)))
        if detect.baseline is not None:
            rows.append(("error share (baseline window)", _share(detect.baseline.log_error_rate)))
        rows.append(("training examples curated", str(detect.train_examples)))
    if loadtest is not None:
        for key, label in (("ttft_p95_ms", "p95 TTFT"), ("tpot_p95_ms", "p95 TPOT"), ("e2el_p95_ms", "p95 E2E")):
            if isinstance(loadtest.get(key), int | float):
                slo = loadtest.get(f"slo_{key.split('_')[0]}_ms")
                rows.append((label, f"{loadtest[key]:.1f} ms" + (f" (SLO {slo:g} ms)" if slo else "")))
        for key, label in (("output_throughput_tps", "output tokens/s"), ("goodput_rps", "goodput (req/s)")):
            if isinstance(loadtest.get(key), int | float):
                rows.append((label, f"{loadtest[key]:.2f}"))
        rows.append(("errors", f"{loadtest.get('errors', 0)} of {loadtest.get('requests', 0)} requests"))
    if evaluation is not None:
        for side in ("candidate", "champion"):
            value = evaluation.get(f"{side}_score")
            if isinstance(value, int | float):
                version = evaluation.get("champion_version") if side == "champion" else None
                rows.append((f"{side} exact match" + (f" (version {version})" if version else ""), f"{value:.3f}"))
    return rows


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"
