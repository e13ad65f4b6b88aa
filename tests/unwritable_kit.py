"""Places where no file can be created, even by root: `/proc`, and a read-only tmpfs where this may mount one.

Tests run as root here, and root passes permission bits; the file system itself must refuse. Each place is a
directory that exists (where the refused file would be made) and what the kernel says when asked to create there.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

KINDS = ("proc", "read-only tmpfs")


@dataclass(frozen=True)
class Unwritable:
    directory: Path  # exists, and refuses new files
    strerror: str  # what the kernel says when a file is created there

    def under(self, *parts: str) -> Path:
        """A path below `directory`, through a directory that does not exist (and cannot be made)."""
        return self.directory.joinpath("vcpilot-test", *parts)


def _strerror_creating_in(directory: Path) -> str:
    try:
        fd = os.open(directory / "vcpilot-test-probe", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except OSError as err:
        return str(err.strerror)
    os.close(fd)
    os.unlink(directory / "vcpilot-test-probe")
    pytest.skip(f"{directory} takes new files on this machine")


@contextlib.contextmanager
def unwritable_place(kind: str, tmp_path: Path) -> Iterator[Unwritable]:
    """`/proc`, or a tmpfs mounted read-only under `tmp_path` (skipped where mounting is not permitted)."""
    if kind == "proc":
        yield Unwritable(Path("/proc"), _strerror_creating_in(Path("/proc")))
        return
    mount = tmp_path / "read-only"
    mount.mkdir()
    try:
        made = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "none", str(mount)], capture_output=True)
    except OSError as err:  # no mount(8)
        pytest.skip(f"cannot mount a read-only tmpfs here: {err}")
    if made.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {made.stderr.decode(errors='replace').strip()}")
    try:
        yield Unwritable(mount, _strerror_creating_in(mount))
    finally:
        subprocess.run(["umount", str(mount)], check=True)
