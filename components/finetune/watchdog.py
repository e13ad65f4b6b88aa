"""A rank that makes no progress ends itself, so a hang becomes a failed pod the pipeline can retry.

A hung rank — a peer stopped or lost in the middle of a collective, a deadlocked data loader, a GPU that no longer
answers — neither progresses nor exits, and the job would hold its GPUs until a person noticed. Each rank's train
loop calls `progressed()` after every step; a daemon thread ends the process with EXIT_STALLED once no step has
ended for `timeout_s`. The exit code tells the pipeline's diagnose step (agent/failures.py) an infrastructure fault,
never a bug: the same hang on every rank is the rule, not the sign of a deterministic crash.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable

from components.finetune.errors import EXIT_STALLED

__all__ = ["Watchdog"]


class Watchdog:
    """Exit with EXIT_STALLED when `progressed` was not called for `timeout_s` seconds (0: never)."""

    def __init__(
        self,
        timeout_s: float,
        describe: Callable[[], str],
        *,
        clock: Callable[[], float] = time.monotonic,
        exit: Callable[[int], None] = os._exit,  # a hung main thread ignores sys.exit from another thread
    ) -> None:
        self.timeout_s = timeout_s
        self._describe = describe
        self._clock = clock
        self._exit = exit
        self._last = clock()
        self._done = threading.Event()

    def progressed(self) -> None:
        """A step ended: the clock starts again."""
        self._last = self._clock()

    def expired(self) -> bool:
        """Whether the time without progress is up."""
        return self.timeout_s > 0 and self._clock() - self._last >= self.timeout_s

    def __enter__(self) -> Watchdog:
        self._last = self._clock()
        if self.timeout_s > 0:
            threading.Thread(target=self._watch, name="vcpilot-watchdog", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()

    def _watch(self) -> None:
        while not self._done.wait(min(1.0, self.timeout_s / 4)):
            if self.expired():
                print(
                    f"error: no training step ended for {self.timeout_s:g} s ({self._describe()}); "
                    f"this rank is hung, so it exits with code {EXIT_STALLED} and the job can be retried.",
                    file=sys.stderr,
                    flush=True,
                )
                self._exit(EXIT_STALLED)
                return
