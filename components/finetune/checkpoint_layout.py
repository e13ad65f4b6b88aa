"""Where a run's checkpoints lie and which of them count: one definition for the trainer, the agent and its tools.

A checkpoint is a directory `step-N/` that counts only once its metadata file is in it: the trainer writes that
file last and renames the whole directory into place (components/finetune/checkpoint.py), so a `step-N/` without
it is a copy or a save that never finished, and a directory named with the temporary prefix was never one. The
metadata also records the SHA-256 of every file beside it, so a checkpoint damaged after its save (a truncated
file, a disk that lost a block) is told from a good one. The latest is the complete, intact one with the highest
N. This module imports no torch, so the agent can read the layout.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from pathlib import Path

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
    """Why checkpoint `path` cannot be trusted (a file missing or not matching its recorded SHA-256), or None.

    Checkpoints written before the metadata recorded `files` carry nothing to check and count as intact.
    """
    try:
        files = json.loads((path / METADATA).read_text()).get("files") or {}
    except (OSError, ValueError, AttributeError):
        return f"its {METADATA} cannot be read"
    for name, expected in sorted(files.items()):
        file = path / name
        if not file.is_file():
            return f"{name} is missing"
        if digest(file) != expected:
            return f"{name} does not match its recorded SHA-256 (truncated or damaged)"
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
    match = _STEP.fullmatch(path.name)
    step = int(match.group(1)) if match else 0
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
        step = int(json.loads((path / METADATA).read_text()).get("step", step))
    return step
