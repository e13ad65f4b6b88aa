"""The pictures a reviewer looks at in MLflow: PNGs drawn with matplotlib from the steps' own records.

Each function takes what a step wrote (loss series, request records, reports) and writes one PNG at `path`,
returning it. Nothing here reads MLflow or the cluster: the review step gathers the data, these draw it. Figures
are drawn on matplotlib's object-oriented `Figure` (no pyplot, no global state, no display needed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from components.loadtest.metrics import Slo
from components.loadtest.records import RequestRecord

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "AttemptLoss",
    "Began",
    "plot_latency_cdfs",
    "plot_log_windows",
    "plot_scores",
    "plot_throughput",
    "plot_training_loss",
]

_DPI = 100

Began = Literal["start", "resume", "downscale", "restart"]  # how a training attempt began


class AttemptLoss(BaseModel):
    """One training attempt's loss over optimizer steps, and how it began."""

    model_config = ConfigDict(frozen=True)

    attempt: int = Field(ge=1)
    steps: tuple[int, ...]
    losses: tuple[float, ...]
    gpus: int = Field(default=0, ge=0)
    began: Began = "start"
    resumed_from_step: int | None = None


def _figure(width: float = 7.0, height: float = 4.0) -> tuple[Figure, Axes]:
    from matplotlib.figure import Figure  # imported here: matplotlib takes a second to import

    figure = Figure(figsize=(width, height), dpi=_DPI, layout="constrained")
    return figure, figure.add_subplot()


def _save(figure: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png")
    return path


def plot_training_loss(attempts: Sequence[AttemptLoss], path: Path) -> Path:
    """Loss over steps, one line per attempt; each later attempt's first step marked with how it began."""
    figure, ax = _figure()
    for attempt in attempts:
        label = f"attempt {attempt.attempt}" + (f" ({attempt.gpus} GPUs)" if attempt.gpus else "")
        (line,) = ax.plot(attempt.steps, attempt.losses, marker=".", label=label)
        if attempt.attempt > 1 and attempt.steps:
            at = attempt.resumed_from_step if attempt.resumed_from_step is not None else attempt.steps[0]
            ax.axvline(at, color=line.get_color(), linestyle="--", linewidth=1)
            ax.annotate(
                attempt.began,
                (at, 1.0),
                xycoords=("data", "axes fraction"),
                rotation=90,
                va="top",
                ha="right",
                fontsize=8,
                color=line.get_color(),
            )
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    ax.set(title="Training loss", xlabel="optimizer step", ylabel="loss")
    if attempts:
        ax.legend(loc="upper right", fontsize=8)
    ax.grid(alpha=0.3)
    return _save(figure, path)


def _cdf(ax: Axes, values: Sequence[float], slo_ms: float | None, title: str) -> None:
    ordered = sorted(values)
    n = len(ordered)
    ax.step(ordered, [(i + 1) / n for i in range(n)], where="post")
    if slo_ms is not None:
        ax.axvline(slo_ms, color="tab:red", linestyle="--", label=f"SLO {slo_ms:g} ms")
        ax.legend(loc="lower right", fontsize=8)
    ax.set(title=title, xlabel="ms", ylabel="share of requests", ylim=(0, 1.02))
    ax.grid(alpha=0.3)


def plot_latency_cdfs(records: Sequence[RequestRecord], slo: Slo, path: Path) -> Path:
    """The CDFs of TTFT and TPOT over completed requests, side by side, with the SLO lines."""
    from matplotlib.figure import Figure

    done = [r for r in records if r.ok]
    figure = Figure(figsize=(10.0, 4.0), dpi=_DPI, layout="constrained")
    left, right = figure.subplots(1, 2)
    _cdf(left, [r.ttft_ms for r in done], slo.ttft_ms, f"TTFT ({len(done)} requests)")
    _cdf(right, [r.tpot_ms for r in done if r.output_tokens > 1], slo.tpot_ms, "TPOT")
    return _save(figure, path)


def plot_throughput(records: Sequence[RequestRecord], slo: Slo, path: Path, bin_s: float = 1.0) -> Path:
    """Completed requests, those within the SLO (goodput) and errors per second, over the run's time."""
    figure, ax = _figure()
    end = max((r.start_s + r.latency_ms / 1000 for r in records), default=0.0)
    bins = max(1, int(end / bin_s) + 1)
    completed, good, failed = [0.0] * bins, [0.0] * bins, [0.0] * bins
    for record in records:
        index = min(bins - 1, int((record.start_s + record.latency_ms / 1000) / bin_s))
        if record.ok:
            completed[index] += 1 / bin_s
            good[index] += (1 / bin_s) if slo.met_by(record) else 0.0
        else:
            failed[index] += 1 / bin_s
    times = [i * bin_s for i in range(bins)]
    ax.plot(times, completed, label="throughput (completed/s)")
    ax.plot(times, good, label="goodput (within SLO/s)")
    if any(failed):
        ax.plot(times, failed, label="errors/s", color="tab:red")
    ax.set(title="Throughput and goodput", xlabel="seconds into the test", ylabel="requests per second")
    ax.legend(loc="upper right", fontsize=8)
    ax.grid(alpha=0.3)
    return _save(figure, path)


def plot_scores(candidate: Mapping[str, float], champion: Mapping[str, float] | None, path: Path) -> Path:
    """Candidate and champion side by side per category (one bar pair each; the champion's missing: none yet)."""
    figure, ax = _figure(width=max(5.0, 1.2 * len(candidate) + 2))
    names = list(candidate)
    width = 0.4
    ax.bar([i - width / 2 for i in range(len(names))], [candidate[n] for n in names], width, label="candidate")
    if champion:
        ax.bar(
            [i + width / 2 for i in range(len(names))], [champion.get(n, 0.0) for n in names], width, label="champion"
        )
    ax.set_xticks(range(len(names)), names, rotation=20, ha="right")
    ax.set(title="Candidate vs champion", ylabel="exact match", ylim=(0, 1.05))
    ax.legend(loc="upper right", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return _save(figure, path)


def plot_log_windows(grew: Sequence[tuple[str, int, int]], error_share: tuple[float, float], path: Path) -> Path:
    """The templates that grew most (baseline vs current count), and the error share of both windows."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(11.0, 4.5), dpi=_DPI, layout="constrained")
    templates, shares = figure.subplots(1, 2, width_ratios=(3, 1))
    labels = [_short(t) for t, _, _ in grew]
    rows = range(len(grew))
    templates.barh([r + 0.2 for r in rows], [before for _, before, _ in grew], 0.4, label="baseline")
    templates.barh([r - 0.2 for r in rows], [after for _, _, after in grew], 0.4, label="current")
    templates.set_yticks(list(rows), labels, fontsize=7)
    templates.invert_yaxis()
    templates.set(title="Templates that grew", xlabel="lines")
    templates.legend(loc="lower right", fontsize=8)
    shares.bar(["baseline", "current"], error_share, color=["tab:blue", "tab:orange"])
    shares.set(title="Error share", ylim=(0, max(0.05, *error_share) * 1.2))
    return _save(figure, path)


def _short(template: str, limit: int = 60) -> str:
    return template if len(template) <= limit else template[: limit - 1] + "…"
