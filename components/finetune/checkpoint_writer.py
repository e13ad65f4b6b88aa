"""Periodic checkpoints written beside training: the GPUs wait only while the state is copied to host memory.

A 7 B model's checkpoint takes a minute or more to write, and a synchronous save holds the whole gang meanwhile. As
PyTorch DCP's `async_save` and Megatron's asynchronous checkpointing do, a periodic save here takes a snapshot — a
copy of every tensor in host memory, taken between two steps — and a background thread writes that snapshot with
the usual atomic `Checkpointer.save`, while training goes on. At most one write is in flight: the next checkpoint
waits for the previous one first, and a write that failed (a full disk: NoRoom) raises its own error in the
training thread then, so the run ends with the exit code a synchronous save would have given. The final and the
stop-signal checkpoints are written and waited for: the process must not end before they are whole. A process killed
mid-write leaves a temporary directory that the next run sweeps, and the previous checkpoint stays the latest.
"""

from __future__ import annotations

import copy
import threading
import time
from types import TracebackType
from typing import Any

import torch

from components.finetune.checkpoint import Checkpointer, CheckpointMetadata, TrainingState

__all__ = ["CheckpointWriter", "snapshot"]


def snapshot(state: TrainingState, kept: dict[tuple[Any, ...], torch.Tensor] | None = None) -> TrainingState:
    """A copy of `state` in host memory that later training steps cannot change.

    Tensors that share memory (tied embeddings) share it in the copy too, so the checkpoint holds them once, as a
    save of the live state does. `kept` holds the host buffers of the snapshot before, by the tensor each copied:
    copied into again, they cost no allocation — fresh memory is paged in as it is written, which more than halves
    the speed on a large model's tensors (`benchmarks/train.py`'s `snapshot_7b_layer`). It is safe once that
    snapshot's write has ended, and `kept` is left holding this snapshot's buffers.
    """
    copies: dict[tuple[Any, ...], torch.Tensor] = {}
    old = kept if kept is not None else {}
    copied = TrainingState(
        _copy(state.model, copies, old),
        _copy(state.optimizer, copies, old),
        _copy(state.scheduler, copies, old),
        _copy(state.rng, copies, old),
    )
    if kept is not None:  # this snapshot's buffers only: those of a tensor gone since are freed
        kept.clear()
        kept.update(copies)
    return copied


def _copy(value: Any, copies: dict[tuple[Any, ...], torch.Tensor], kept: dict[tuple[Any, ...], torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        storage = (value.device, value.untyped_storage().data_ptr())
        view = (*storage, value.storage_offset(), value.shape, value.stride(), value.dtype)
        if view not in copies:
            buffer = kept.get(view)
            copies[view] = buffer.copy_(value.detach()) if buffer is not None else value.detach().to("cpu", copy=True)
        return copies[view]
    if isinstance(value, dict):
        copied = copy.copy(value)  # the same kind of dict, with its attributes: a model's state dict has `_metadata`
        for key, item in value.items():
            copied[key] = _copy(item, copies, kept)
        return copied
    if type(value) in (list, tuple):
        return type(value)(_copy(item, copies, kept) for item in value)
    return copy.deepcopy(value)


class CheckpointWriter:
    """Rank 0's checkpoint saves: in the background (a snapshot) or in the foreground, one write at a time."""

    def __init__(self, checkpointer: Checkpointer) -> None:
        self.checkpointer = checkpointer
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._write_s = 0.0
        self._buffers: dict[tuple[Any, ...], torch.Tensor] = {}  # the last snapshot's host memory, copied into again

    def save(self, metadata: CheckpointMetadata, state: TrainingState, *, background: bool) -> float | None:
        """Wait for the write in flight, then write `state`: a snapshot of it on a thread, or it, waiting.

        Returns the seconds the write waited for took, None when there was none; raises its error if it failed.
        """
        written_s = self.wait()
        if not background:
            self.checkpointer.save(metadata, state)
            return written_s
        self._thread = threading.Thread(
            target=self._write, args=(metadata, snapshot(state, self._buffers)), name="vcpilot-checkpoint", daemon=True
        )
        self._thread.start()
        return written_s

    def wait(self) -> float | None:
        """Wait for the write in flight: its seconds, None when there was none; raises the error it failed with."""
        if self._thread is None:
            return None
        self._thread.join()
        self._thread = None
        error, self._error = self._error, None
        if error is not None:
            raise error
        return self._write_s

    def _write(self, metadata: CheckpointMetadata, state: TrainingState) -> None:
        began = time.perf_counter()
        try:
            self.checkpointer.save(metadata, state)
        except BaseException as err:  # raised in the training thread by `wait`, whatever it is
            self._error = err
        self._write_s = time.perf_counter() - began

    def __enter__(self) -> CheckpointWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        # Training ended with an error of its own: let the write in flight finish, and report that error, not the
        # write's. Otherwise nothing is in flight: the last checkpoint of a run was waited for where it was taken.
        if kind is None:
            self.wait()
        elif self._thread is not None:
            self._thread.join()
