"""What a person sees of a run while it goes: each node's start and end as an event, and Ctrl-C as a stop.

`NodeEvents` turns the runner's status updates into one line per change of a step (plain output, for pipes
and CI logs; a terminal gets the live tree of `pipelines/local/cli.py` instead). `interrupts` makes the first
Ctrl-C (SIGINT) a `StopRequest` — the runner stops the run's pods and records it stopped — and the second one
an exit at once, with the `vcpilot resume` command either way.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from components.untrusted import printable
from pipelines.local.engine.status import parse_rfc3339
from pipelines.local.runner import StopRequest, last_line

__all__ = ["EXIT_INTERRUPTED", "NodeEvents", "interrupts", "resume_hint"]

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command Ctrl-C ended
_LEAVES = ("Pod", "Suspend", "Skipped")
_SHOWN = ("Running", "Succeeded", "Failed", "Error", "Skipped", "Omitted")
SAYING_EVERY_S = 30.0  # how often plain output reports what running steps last wrote (a line each at most)
_MARKS = {"Running": "▶", "Succeeded": "✔", "Failed": "✖", "Error": "⚠", "Skipped": "○", "Omitted": "∅"}


def resume_hint(name: str | None) -> str:
    """The line that says how to continue a stopped run."""
    return f"continue it with: vcpilot resume {name}" if name else "nothing had started yet"


class NodeEvents:
    """Calls `event(line)` once for each step that starts or ends (leaf nodes: pods, suspends, errors).

    `run_name` says the run's name once the runner has one (`StopRequest.run_name`): the first line names it.
    With `logs` (a node id to its log), `saying()` also reports, every `every_s` seconds, the last line each
    running step wrote when it changed — the plan's `waiting: …`, the trainer's steps — so that a pipe or a CI log
    shows a long step going on, not only its start and end.
    """

    def __init__(
        self,
        event: Callable[[str], None],
        run_name: Callable[[], str | None] = lambda: None,
        logs: Callable[[str], Path | None] | None = None,
        every_s: float = SAYING_EVERY_S,
    ) -> None:
        self._event = event
        self._run_name = run_name
        self._logs = logs
        self._every_s = every_s
        self._seen: dict[str, str] = {}
        self._said: dict[str, str] = {}  # node id -> the last line of its log reported
        self._status: dict[str, Any] = {}
        self._announced = False
        self._lock = threading.Lock()  # updates come from the status writer and from the step threads

    def say_running(self) -> None:
        """One line for each running step whose log's last line changed since it was last reported."""
        if self._logs is None:
            return
        with self._lock:
            for nid, node in (self._status.get("nodes") or {}).items():
                if node.get("type") != "Pod" or node.get("phase") != "Running" or not (log := self._logs(nid)):
                    continue
                line = last_line(log)
                if line and self._said.get(nid) != line:
                    self._said[nid] = line
                    self._event(f"· {node.get('displayName') or node.get('name')}: {printable(line, 160)}")

    @contextlib.contextmanager
    def saying(self) -> Iterator[None]:
        """While the block runs, `say_running` every `every_s` seconds from a thread of its own."""
        done = threading.Event()

        def loop() -> None:
            while not done.wait(self._every_s):
                self.say_running()

        thread = threading.Thread(target=loop, name="running-steps-say", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()

    def __call__(self, status: dict[str, Any]) -> None:
        """Report what changed since the last status."""
        with self._lock:
            self._status = status
            if not self._announced and (name := self._run_name()):
                self._announced = True
                self._event(f"run {name} {status.get('phase', 'Pending')}: `vcpilot runs show {name}` shows it")
            for nid, node in (status.get("nodes") or {}).items():
                phase = str(node.get("phase") or "")
                if node.get("type") not in _LEAVES or phase not in _SHOWN or self._seen.get(nid) == phase:
                    continue
                self._seen[nid] = phase
                self._event(describe(node))


def describe(node: dict[str, Any]) -> str:
    """One line for a step in its phase: `✔ train (vcjob) Succeeded in 42s: message`."""
    phase = str(node.get("phase"))
    line = f"{_MARKS.get(phase, '?')} {node.get('displayName') or node.get('name')}"
    if node.get("templateName"):
        line += f" ({node['templateName']})"
    line += f" {phase}"
    started, finished = parse_rfc3339(node.get("startedAt")), parse_rfc3339(node.get("finishedAt"))
    if started and finished and phase != "Running":
        line += f" in {int(finished - started)}s"
    if node.get("message"):
        line += f": {node['message']}"
    return line


@contextlib.contextmanager
def interrupts(stop: StopRequest) -> Iterator[None]:
    """While the block runs, SIGINT asks `stop` to stop the run; a second SIGINT exits the process at once.

    Outside the main thread (signals cannot be caught there) the block runs with Python's default handling.
    """

    def say(text: str) -> None:
        # os.write, not print: a handler that prints while the main thread prints raises "reentrant call".
        with contextlib.suppress(OSError):
            os.write(2, f"\n{text}\n".encode())

    def handler(_signum: int, _frame: FrameType | None) -> None:
        if stop.is_set():
            say(f"interrupted again: exiting now; the run's pods may still run ({resume_hint(stop.run_name)})")
            os._exit(EXIT_INTERRUPTED)
        stop.set()
        say("interrupted: stopping the run and its pods (Ctrl-C again to exit at once)")

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
