"""Progress of long work, for people: a live Rich display on a terminal, one plain line per event anywhere else.

Every command that runs longer than a couple of seconds reports through one `Progress`: the first champion's
training, fine-tuning steps, a workflow's nodes, the load test, log parsing. On a terminal a spinner, a bar or
a tree stays live at the bottom and events print above it; when the stream is a pipe or a file (a CI log,
`| tee`) each event is one plain line, `[H:MM:SS] message` (time since the start), so that nothing sits silent
for minutes. `--json` commands report on stderr (`Progress.for_command(json_output=True)`), so stdout keeps one
JSON document. `VCPILOT_PROGRESS=live|plain|off` overrides the choice.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO, Literal

from rich.console import Console, RenderableType
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress
from rich.spinner import Spinner
from rich.text import Text

__all__ = ["MODES", "Mode", "Progress", "Update"]

Mode = Literal["live", "plain", "off"]
MODES: tuple[Mode, ...] = ("live", "plain", "off")
Update = Callable[..., None]


def _mode_for(stream: IO[str]) -> Mode:
    chosen = os.environ.get("VCPILOT_PROGRESS", "").strip().lower()
    if chosen in MODES:
        return chosen  # type: ignore[return-value]  # checked against MODES just above
    isatty = getattr(stream, "isatty", None)
    return "live" if isatty is not None and isatty() else "plain"


class Progress:
    """Where one command reports its progress: `event` lines, a `status` spinner, a `steps` bar, a `display`.

    Thread-safe: a run's watcher thread and its main thread may report at once. `clock` is injectable for tests.
    """

    def __init__(
        self,
        stream: IO[str] | None = None,
        *,
        mode: Mode | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream: IO[str] = stream if stream is not None else sys.stderr
        self.mode: Mode = mode or _mode_for(self.stream)
        self._clock = clock
        self._started = clock()
        self._lock = threading.Lock()
        self.console = Console(file=self.stream, highlight=False) if self.mode == "live" else None
        self._live_active = False

    @classmethod
    def for_command(cls, json_output: bool = False) -> Progress:
        """The reporter of a CLI command: on stdout, or on stderr when stdout carries `--json`."""
        return cls(sys.stderr if json_output else sys.stdout)

    @classmethod
    def off(cls) -> Progress:
        """A reporter that says nothing (library calls, tests)."""
        return cls(sys.stderr, mode="off")

    # -- one line per event -----------------------------------------------------------------------------

    def event(self, message: str) -> None:
        """One thing happened: a line above the live display, or a plain timestamped line."""
        if self.mode == "off":
            return
        with self._lock:
            if self.console is not None:
                self.console.print(Text(message), soft_wrap=True)  # a Live display keeps itself below
                return
            elapsed = max(0, int(self._clock() - self._started))
            hours, rest = divmod(elapsed, 3600)
            self.stream.write(f"[{hours}:{rest // 60:02d}:{rest % 60:02d}] {message}\n")
            self.stream.flush()

    # -- something live at the bottom -----------------------------------------------------------------

    @contextlib.contextmanager
    def display(self, initial: RenderableType) -> Iterator[Callable[[RenderableType], None]]:
        """Keep a renderable (a tree, a table) live on a terminal; yields `update(renderable)`.

        Elsewhere nothing is drawn and `update` does nothing: report what changes with `event`.
        """
        if self.console is None or self._live_active:  # Rich allows one live display at a time
            yield lambda _renderable: None
            return
        self._live_active = True
        try:
            with Live(initial, console=self.console, refresh_per_second=8, transient=True) as live:
                yield live.update
        finally:
            self._live_active = False

    @contextlib.contextmanager
    def status(self, message: str) -> Iterator[Callable[[str], None]]:
        """A spinner saying `message` while the block runs; yields `update(text)` for what it is doing now.

        In plain mode `message` is one line at the start and every update one line more: the caller decides
        how often it has something to say (a training run every tenth step, not every step).
        """
        if self.console is None or self._live_active:
            self.event(message)

            def plain(text: str) -> None:
                self.event(f"{message}: {text}")

            yield plain
            return
        spinner = Spinner("dots", Text(message))
        with self.display(spinner):

            def live(text: str) -> None:
                spinner.update(text=Text(f"{message}: {text}"))

            yield live

    @contextlib.contextmanager
    def steps(
        self, description: str, total: int | None, *, every_s: float = 0.0
    ) -> Iterator[Callable[[int, str], None]]:
        """A bar of `total` steps; yields `advance(done, info)` with the number done so far.

        In plain mode each call is one line `description done/total  info`, at most one every `every_s`
        seconds (the last step always shows).
        """
        if self.mode == "off":

            def nothing(_done: int, _info: str = "") -> None:
                return None

            yield nothing
            return
        if self.console is None or self._live_active:
            last = [float("-inf")]

            def plain(done: int, info: str = "") -> None:
                now = self._clock()
                if done != total and now - last[0] < every_s:
                    return
                last[0] = now
                of = f"/{total}" if total else ""
                self.event(f"{description} {done}{of}" + (f"  {info}" if info else ""))

            yield plain
            return
        bar = RichProgress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[info]}"),
            console=self.console,
            transient=True,
        )
        task = bar.add_task(description, total=total, info="")
        self._live_active = True
        try:
            with bar:

                def live(done: int, info: str = "") -> None:
                    bar.update(task, completed=done, info=info)

                yield live
        finally:
            self._live_active = False
