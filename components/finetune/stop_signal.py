"""SIGTERM, how Kubernetes asks a pod to stop, turned into a flag that the train loop reads between steps.

The kubelet ends a pod — preempted or reclaimed by Volcano, evicted, deleted, its node shutting down — by sending
SIGTERM to the container's processes and SIGKILL `terminationGracePeriodSeconds` later. The handler only sets a
flag: it may run in the middle of a backward pass or a collective, where saving is impossible. The loop looks at
the flag at each step boundary, the ranks agree on it (`Distributed.any_rank`: each pod gets its signal at its own
time, or not at all), and together they write that step's checkpoint and exit with EXIT_STOPPED (errors.py).
A second SIGTERM changes nothing; a SIGKILL during the save leaves only a temporary directory (checkpoint.py).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = ["StopSignal"]


class StopSignal:
    """Whether SIGTERM arrived while `listen` was active."""

    def __init__(self) -> None:
        self.received = False

    @contextlib.contextmanager
    def listen(self) -> Iterator[StopSignal]:
        """Catch SIGTERM until the block ends, then restore the handler there was before.

        Only the main thread may install handlers; elsewhere (training called from a worker thread) SIGTERM keeps
        its default action and `received` stays False.
        """
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = signal.signal(signal.SIGTERM, self._handle)
        try:
            yield self
        finally:
            signal.signal(signal.SIGTERM, previous)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received = True
