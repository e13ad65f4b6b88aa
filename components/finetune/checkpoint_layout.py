"""Where a run's checkpoints lie and which of them count: one definition for the trainer, the agent and its tools.

A checkpoint is a directory `step-N/` that counts only once its metadata file is in it: the trainer writes that
file last and renames the whole directory into place (components/finetune/checkpoint.py), so a `step-N/` without
it is a copy or a save that never finished, and a directory named with the temporary prefix was never one. The
metadata also records the SHA-256 of every file beside it, so a checkpoint damaged after its save (a truncated
file, a disk that lost a block) is told from a good one. The latest is the complete, intact one with the highest
N. This module imports no torch, so the agent can read the layout.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

__all__ = ["METADATA", "TEMP_PREFIX", "complete", "damage", "digest", "latest", "recorded_step", "step_dir"]

METADATA = "metadata.json"  # the completion marker, written last: a step-N/ without it is not a checkpoint
TEMP_PREFIX = ".tmp-step-"  # where a save is written before its rename
_STEP = re.compile(r"step-(\d+)")


def step_dir(directory: Path, step: int) -> Path:
    """The directory of the checkpoint of `step` under `directory`."""
    return directory / f"step-{step}"


def complete(directory: Path) -> list[tuple[int, Path]]:
    """Every complete checkpoint under `directory` as (N, path), oldest first; none when it is not a directory."""
    if not directory.is_dir():
        return []
    found = []
    for child in directory.iterdir():
        match = _STEP.fullmatch(child.name)
        if match and (child / METADATA).is_file():
            found.append((int(match.group(1)), child))
    return sorted(found)


def digest(file: Path) -> str:
    """The SHA-256 of a file, in hex: what the metadata records for each file of a checkpoint."""
    sha = hashlib.sha256()
    with file.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            sha.update(chunk)
    return sha.hexdigest()


def damage(path: Path) -> str | None:
    """Why checkpoint `path` cannot be trusted (bad metadata, a file missing or not matching its SHA-256), or None.

    Checkpoints written before the metadata recorded `files` carry nothing to check and count as intact. A file
    named outside the checkpoint (an absolute path, '..', a symlink out) is not read: the metadata is written by a
    training pod, and no checkpoint of ours names one.
    """
    metadata = _metadata(path)
    if metadata is None:
        return f"its {METADATA} cannot be read"
    if "step" in metadata and _step(metadata) is None:
        return f"its {METADATA} records a step that is not a whole number of 0 or more"
    files = metadata.get("files", {})
    if not isinstance(files, dict):
        return f"its {METADATA} does not map each file to its SHA-256"
    for name, expected in sorted(files.items()):
        file = _inside(path, name)
        if file is None:
            return f"{name!r} lies outside the checkpoint"
        if not file.is_file():
            return f"{name} is missing"
        try:
            if digest(file) != expected:
                return f"{name} does not match its recorded SHA-256 (truncated or damaged)"
        except OSError:
            return f"{name} cannot be read"
    return None


def latest(directory: Path) -> Path | None:
    """The newest complete checkpoint under `directory` whose files match their checksums, or None.

    A damaged newest checkpoint is passed over for the one before it: resuming from it would fail or, worse,
    continue from weights that are not the ones saved.
    """
    for _, path in reversed(complete(directory)):
        if damage(path) is None:
            return path
    return None


def recorded_step(path: Path) -> int:
    """The step the metadata of checkpoint `path` names; the N of its name when the file cannot say."""
    step = _step(_metadata(path) or {})
    if step is not None:
        return step
    match = _STEP.fullmatch(path.name)
    return int(match.group(1)) if match else 0


def _step(metadata: dict[str, Any]) -> int | None:
    """The step `metadata` records; None when it records none, or not a whole number (1e999, "7", true)."""
    step = metadata.get("step")
    return step if type(step) is int and step >= 0 else None


def _metadata(path: Path) -> dict[str, Any] | None:
    """The metadata of checkpoint `path` as a JSON object; None when it is unreadable or not one.

    A training pod writes it, so it may be anything: nested past the parser's recursion limit, too.
    """
    try:
        metadata = json.loads((path / METADATA).read_text())
    except (OSError, ValueError, RecursionError):
        return None
    return metadata if isinstance(metadata, dict) else None


def _inside(path: Path, name: str) -> Path | None:
    """File `name` of checkpoint `path`, symlinks resolved; None when it lies outside the checkpoint."""
    try:
        file = (path / name).resolve()
        root = path.resolve()
    except (OSError, RuntimeError, ValueError):  # a symlink loop (RuntimeError before Python 3.13), a NUL byte
        return None
    return file if file.is_relative_to(root) else None
