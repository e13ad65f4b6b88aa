"""The watchdog ends a rank that stops making progress, and only that: steps that keep ending keep it quiet."""

from __future__ import annotations

import threading
import time

from components.finetune.errors import EXIT_STALLED
from components.finetune.watchdog import Watchdog


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_no_progress_for_the_timeout_exits_with_exit_stalled_and_progress_resets_the_clock(capsys) -> None:
    clock, exited = Clock(), threading.Event()
    codes: list[int] = []

    def exit(code: int) -> None:
        codes.append(code)
        exited.set()

    with Watchdog(0.2, lambda: "rank 1 after step 7", clock=clock, exit=exit) as watchdog:
        clock.now = 0.15
        watchdog.progressed()
        clock.now = 0.3  # 0.15 s since the last step: not yet
        assert not watchdog.expired()
        time.sleep(0.2)
        assert codes == []
        clock.now = 0.36
        assert exited.wait(5)
    assert codes == [EXIT_STALLED]
    err = capsys.readouterr().err
    assert err == (
        "error: no training step ended for 0.2 s (rank 1 after step 7); this rank is hung, so it exits with code "
        "124 and the job can be retried.\n"
    )


def test_a_timeout_of_zero_never_fires() -> None:
    clock = Clock()
    with Watchdog(0, lambda: "", clock=clock, exit=lambda code: None) as watchdog:
        clock.now = 1e9
        assert not watchdog.expired()
