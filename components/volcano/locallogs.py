"""The logs LocalCluster's pods leave on disk: one file per run of a pod, found and put in the order they ran.

A pod's process writes `logs/<namespace>/<job>/<pod>.run<generation>-<suffix>.log`, the suffix the job's tag (from
its uid) and a random part; a restarted job (a new generation) or a restarted pod leaves a new file beside the old
ones, and so does a job deleted and submitted again under the same name, whose runs its tag tells apart. Directory
order and modification times alone do not say which ran first, so runs are ordered by generation, then pod (numbers
compared as numbers: `w-2` before `w-10`), then the time the file was last written.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from components.volcano.localstate import job_tag

__all__ = ["Follower", "PodLog", "pod_logs", "tail_lines", "whole_lines"]

_RUN = re.compile(r"^(?P<pod>.+)\.run(?P<generation>\d+)-(?P<suffix>[0-9a-f]+)$")
_RANDOM = 6  # hex digits of a run's suffix after its job's tag (a suffix of only these was written before tags)


@dataclass(frozen=True)
class PodLog:
    """One run of one pod: its log file, the pod, and the job generation it belonged to."""

    pod: str
    generation: int
    path: Path
    modified: float  # seconds since the epoch, when the file was last written

    @property
    def run(self) -> str:
        """The run's name, as in the file name: `<pod>.run<generation>-<suffix>`."""
        return self.path.stem

    def read(self, start: int = 0) -> bytes:
        """The file's bytes from `start` on (what a follower has not printed yet)."""
        with open(self.path, "rb") as handle:
            handle.seek(start)
            return handle.read()


def _natural(name: str) -> tuple[tuple[int, str], ...]:
    return tuple((int(part), "") if part.isdigit() else (0, part) for part in re.split(r"(\d+)", name) if part)


def pod_logs(directory: Path, pod: str | None = None, uid: str | None = None) -> list[PodLog]:
    """The runs logged under a job's directory, in the order they ran.

    Only `pod`'s when given; only those of the job `uid` when given (not an earlier job of the same name).
    """
    runs: list[PodLog] = []
    for path in directory.glob("*.log") if directory.is_dir() else ():
        match = _RUN.match(path.stem)
        name, generation = (match["pod"], int(match["generation"])) if match else (path.stem, 0)
        if pod is not None and name != pod:
            continue
        suffix = match["suffix"] if match else ""
        if uid is not None and len(suffix) > _RANDOM and not suffix.startswith(job_tag(uid)):
            continue
        try:
            modified = path.stat().st_mtime
        except OSError:  # removed since the listing (a reset or a TTL ran meanwhile)
            continue
        runs.append(PodLog(name, generation, path, modified))
    return sorted(runs, key=lambda r: (r.generation, _natural(r.pod), r.modified, r.path.name))


def tail_lines(text: str, count: int | None) -> str:
    """The last `count` lines of `text` (all of it when `count` is None), as `kubectl logs --tail` shows them."""
    if count is None:
        return text
    if count <= 0:
        return ""
    lines = text.splitlines(keepends=True)
    return "".join(lines[-count:])


def whole_lines(chunk: bytes, final: bool) -> bytes:
    """The part of `chunk` a follower may print now: up to its last newline, or all of it once the job ended.

    A line half written waits for its end, so a multi-byte character is never split across two prints.
    """
    return chunk if final else chunk[: chunk.rfind(b"\n") + 1]


class Follower:
    """Prints log files as they grow (`logs --follow`): what each gained since it was last shown.

    The first time a file is shown only its last `tail` lines are (all when None); a line half written waits for
    its end unless the file is `final` (its writer is done); `header` is printed whenever the output switches to
    another file, as `tail -f` does for several.
    """

    def __init__(self, tail: int | None, write: Callable[[str], object] | None = None) -> None:
        self.tail = tail
        self._write = write  # None: sys.stdout as it is when printing (a test may have replaced it)
        self._shown: dict[Path, int] = {}  # bytes of each file printed (or skipped by the tail) so far
        self._current: Path | None = None

    def show(self, path: Path, header: str, final: bool) -> None:
        """Print what `path` gained since the last call (nothing when it is missing or unchanged)."""
        first = path not in self._shown
        try:
            with open(path, "rb") as handle:
                handle.seek(self._shown.get(path, 0))
                chunk = whole_lines(handle.read(), final)
        except FileNotFoundError:
            return
        self._shown[path] = self._shown.get(path, 0) + len(chunk)
        text = chunk.decode(errors="replace")
        if first:
            text = tail_lines(text, self.tail)
        if not text:
            return
        write = self._write or sys.stdout.write
        if path != self._current:
            write(f"{header}\n")
            self._current = path
        write(text if text.endswith("\n") or not final else text + "\n")
        if self._write is None:
            sys.stdout.flush()
