"""Checkpoints in `step-N/` directories that count only once complete: written aside, then renamed into place.

A save writes the tensors and the training state into a hidden temporary directory, writes `metadata.json` last,
and renames the directory to `step-N` in one `os.replace`. A reader — `--resume auto`, or the pipeline's
agent's observation (agent/observe.py `find_checkpoint`) — therefore sees a checkpoint whole or not at all, and
a crash mid-save leaves only a temporary directory that the next run sweeps away. What makes a checkpoint
complete, and which is the latest, is defined once, without torch, in `checkpoint_layout`. The state holds everything a
run needs to continue exactly where it stopped: weights, optimizer, scheduler, RNG states, step and data position.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, ValidationError

from components.finetune.checkpoint_layout import METADATA, TEMP_PREFIX, complete, damage, digest, latest, step_dir
from components.finetune.errors import FinetuneError, why_write_failed, write_error

__all__ = [
    "CheckpointMetadata",
    "CheckpointReason",
    "Checkpointer",
    "TrainingState",
    "capture_rng",
    "restore_rng",
]

MODEL_FILE = "model.pt"
STATE_FILE = "train_state.pt"

# Why a checkpoint was written: every K steps, at the last step, or when the run was told to stop (SIGTERM).
CheckpointReason = Literal["periodic", "final", "stop-signal"]


class CheckpointMetadata(BaseModel):
    """What a checkpoint is, readable without torch: the step, the data position, and the run's fixed shape."""

    model_config = ConfigDict(frozen=True)

    step: int
    epoch: int
    offset: int
    loss: float
    global_batch: int
    world_size: int
    base_model: str
    lora: bool
    seed: int
    reason: CheckpointReason = "periodic"  # the default reads checkpoints written before the field existed
    files: dict[str, str] = {}  # SHA-256 of each tensor file (checkpoint_layout.damage); none in older checkpoints


@dataclass
class TrainingState:
    """The tensors of a checkpoint: weights (adapters only with LoRA), optimizer, scheduler and RNG states."""

    model: dict[str, torch.Tensor]
    optimizer: dict[str, Any]
    scheduler: dict[str, Any]
    rng: dict[str, Any]


class Checkpointer:
    """Saves, finds, loads and prunes the checkpoints of one run in `directory`, keeping the newest `keep`."""

    def __init__(self, directory: Path, keep: int = 3) -> None:
        self.directory = directory
        self.keep = keep

    def complete(self) -> list[tuple[int, Path]]:
        """Every complete checkpoint as (step, path), oldest first."""
        return complete(self.directory)

    def latest(self) -> Path | None:
        """The newest complete checkpoint, or None."""
        return latest(self.directory)

    def save(self, metadata: CheckpointMetadata, state: TrainingState) -> Path:
        """Write `step-N/` atomically (metadata last, then one rename) and drop checkpoints beyond the newest k.

        A full disk (or a quota, or a file-size limit) during the save removes the partial directory and raises
        NoRoom (exit EXIT_NO_ROOM), saying how much room is left: the checkpoints before it stay the latest, and the
        run resumes from them once there is room. Any other failed write raises FinetuneError.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{metadata.step}-", dir=self.directory))
        try:
            _save(state.model, tmp / MODEL_FILE)
            rest = {"optimizer": state.optimizer, "scheduler": state.scheduler, "rng": state.rng}
            _save(rest, tmp / STATE_FILE)
            files = {name: digest(tmp / name) for name in (MODEL_FILE, STATE_FILE)}
            (tmp / METADATA).write_text(metadata.model_copy(update={"files": files}).model_dump_json(indent=2) + "\n")
        except (OSError, RuntimeError) as err:  # torch.save may wrap a failed write in RuntimeError
            shutil.rmtree(tmp, ignore_errors=True)
            raise write_error(
                f"could not write the checkpoint of step {metadata.step} under {self.directory} "
                f"({why_write_failed(err)}; {self._room()}); "
                "free space there, and --resume auto continues from the previous checkpoint.",
                err,
            ) from None
        final = step_dir(self.directory, metadata.step)
        if final.exists():  # a rerun from an older checkpoint reaches this step again: the new one replaces it
            old = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{metadata.step}-old-", dir=self.directory))
            os.replace(final, old / final.name)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
        self.prune()
        return final

    def _room(self) -> str:
        """How much room the directory has left, and how much the newest complete checkpoint took."""
        free = f"{_megabytes(shutil.disk_usage(self.directory).free)} free there"
        newest = self.latest()
        if newest is None:
            return free
        size = sum(f.stat().st_size for f in newest.iterdir() if f.is_file())
        return f"{free}, {newest.name} took {_megabytes(size)}"

    def prune(self) -> None:
        """Delete complete checkpoints older than the newest `keep`."""
        for _, path in self.complete()[: -self.keep]:
            shutil.rmtree(path, ignore_errors=True)

    def sweep(self) -> None:
        """Remove temporary directories left by a save that crashed: they were never checkpoints."""
        if self.directory.is_dir():
            for child in self.directory.iterdir():
                if child.name.startswith(TEMP_PREFIX) and child.is_dir():
                    shutil.rmtree(child, ignore_errors=True)

    def read_metadata(self, path: Path) -> CheckpointMetadata:
        """The metadata of checkpoint `path`; FinetuneError when it is not a complete checkpoint of ours."""
        file = path / METADATA
        if not file.is_file():
            raise FinetuneError(f"checkpoint {path} is incomplete or missing (no {METADATA}); pick a complete step-N.")
        try:
            return CheckpointMetadata.model_validate(json.loads(file.read_text()))
        except (ValueError, ValidationError):
            raise FinetuneError(f"{file} is not a vcpilot checkpoint's metadata; pick another checkpoint.") from None

    def load(self, path: Path) -> tuple[CheckpointMetadata, TrainingState]:
        """Metadata and tensors of checkpoint `path`, on the CPU; FinetuneError when a file fails its checksum."""
        metadata = self.read_metadata(path)
        if problem := damage(path):
            raise FinetuneError(f"checkpoint {path} is damaged: {problem}; resume from an earlier step-N.")
        model = torch.load(path / MODEL_FILE, map_location="cpu", weights_only=True)
        rest = torch.load(path / STATE_FILE, map_location="cpu", weights_only=True)
        return metadata, TrainingState(model, rest["optimizer"], rest["scheduler"], rest["rng"])


def _save(value: Any, path: Path) -> None:
    """torch.save through a file of ours, so that a failed write raises OSError with its errno (ENOSPC).

    torch.save to a path raises a bare RuntimeError ("unexpected pos 576 vs 534") on a full disk.
    """
    with path.open("wb") as file:
        torch.save(value, file)


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def capture_rng() -> dict[str, Any]:
    """The state of every random generator the run may touch (python, numpy, torch CPU and CUDA)."""
    kind, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)  # type: ignore[misc]
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {  # the key array as a tensor: checkpoints load with weights_only
            "kind": kind,
            "keys": torch.from_numpy(np.asarray(keys).astype(np.int64)),
            "pos": pos,
            "gauss": (has_gauss, cached),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    """Put every generator back where `capture_rng` found it."""
    random.setstate(state["python"])
    saved = state["numpy"]
    has_gauss, cached = saved["gauss"]
    np.random.set_state((saved["kind"], saved["keys"].numpy().astype(np.uint32), saved["pos"], has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
