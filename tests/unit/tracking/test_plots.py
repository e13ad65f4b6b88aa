"""The review's pictures: real PNGs, drawn from the steps' records, showing what they claim (SLO lines, attempts)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from components.loadtest.metrics import Slo
from components.loadtest.records import RequestRecord
from components.tracking.plots import (
    AttemptLoss,
    plot_latency_cdfs,
    plot_log_windows,
    plot_scores,
    plot_throughput,
    plot_training_loss,
)

PNG = b"\x89PNG\r\n\x1a\n"
ORANGE = np.array([0xFF, 0x7F, 0x0E]) / 255  # the second series (tab:orange)
RED = np.array([0xD6, 0x27, 0x28]) / 255  # matplotlib's tab:red, the SLO lines and errors


def _records(n: int = 40, failed: int = 0) -> list[RequestRecord]:
    ok = [
        RequestRecord(index=i, start_s=i * 0.1, ttft_ms=50 + i, latency_ms=200 + 5 * i, output_tokens=8)
        for i in range(n)
    ]
    bad = [RequestRecord(index=n + i, start_s=i * 0.2, error="connection refused") for i in range(failed)]
    return ok + bad


def _has(path: Path, colour: np.ndarray) -> bool:
    pixels = imread(path)[..., :3]
    return bool((np.abs(pixels - colour).max(axis=-1) < 0.02).sum() > 20)


def _png(path: Path) -> Path:
    assert path.read_bytes()[:8] == PNG
    assert path.stat().st_size > 5_000
    return path


def test_training_loss_draws_every_attempt_and_marks_the_resume(tmp_path: Path) -> None:
    first = AttemptLoss(attempt=1, steps=(1, 2, 3, 4, 5, 6), losses=(3.0, 2.6, 2.3, 2.1, 2.0, 1.9), gpus=4)
    retry = AttemptLoss(
        attempt=2, steps=(5, 6, 7, 8), losses=(2.0, 1.9, 1.8, 1.7), gpus=2, began="downscale", resumed_from_step=4
    )
    one = _png(plot_training_loss([first], tmp_path / "one.png"))
    two = _png(plot_training_loss([first, retry], tmp_path / "two.png"))
    assert one.read_bytes() != two.read_bytes()
    assert _has(two, ORANGE)  # the second attempt's colour
    assert not _has(one, ORANGE)


def test_latency_cdfs_show_the_slo_lines_only_when_there_are_slos(tmp_path: Path) -> None:
    with_slo = _png(plot_latency_cdfs(_records(), Slo(ttft_ms=80, tpot_ms=30), tmp_path / "slo.png"))
    without = _png(plot_latency_cdfs(_records(), Slo(), tmp_path / "none.png"))
    assert _has(with_slo, RED)
    assert not _has(without, RED)


def test_throughput_shows_errors_when_requests_failed(tmp_path: Path) -> None:
    slo = Slo(ttft_ms=60)
    clean = _png(plot_throughput(_records(), slo, tmp_path / "clean.png"))
    failing = _png(plot_throughput(_records(failed=10), slo, tmp_path / "failing.png"))
    assert not _has(clean, RED)
    assert _has(failing, RED)


@pytest.mark.parametrize("champion", [None, {"refund": 0.5, "shipping": 0.75}])
def test_scores_draw_the_champion_beside_the_candidate_when_there_is_one(
    tmp_path: Path, champion: dict[str, float] | None
) -> None:
    path = _png(plot_scores({"refund": 0.8, "shipping": 0.7}, champion, tmp_path / "scores.png"))
    assert _has(path, ORANGE) == (champion is not None)


def test_log_windows_draw_long_templates_and_the_error_share(tmp_path: Path) -> None:
    grew = [("payment <*> declined by gateway " + "x" * 80, 3, 40), ("user <*> logged in", 100, 120)]
    path = _png(plot_log_windows(grew, (0.01, 0.12), tmp_path / "logs.png"))
    assert _has(path, ORANGE)  # the current window's bars
    assert path.read_bytes() != plot_log_windows(grew[:1], (0.01, 0.12), tmp_path / "one.png").read_bytes()
