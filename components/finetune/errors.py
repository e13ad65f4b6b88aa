"""The ways a fine-tuning run ends early on purpose: a mistake a person can fix, the simulated bug, a stop signal."""

from __future__ import annotations

import errno
import re

from components.errors import VcpilotError

__all__ = [
    "EXIT_NO_ROOM",
    "EXIT_SIMULATED_BUG",
    "EXIT_STALLED",
    "EXIT_STOPPED",
    "FinetuneError",
    "NoRoom",
    "SimulatedFailure",
    "Stopped",
    "why_write_failed",
    "write_error",
]

# The exit code of a trainer that stopped on SIGTERM after writing its checkpoint: 128 + SIGTERM, what a shell
# reports for a process SIGTERM ended. Non-zero, so Kubernetes and Volcano count the pod Failed, never Succeeded;
# the pipeline's diagnose step (agent/failures.py) reads it as "told to stop from outside", never as a bug.
EXIT_STOPPED = 143
# The exit code of the simulated bug (VCPILOT_FAIL_AT_STEP): the same on every rank, which is what diagnose reads as a
# bug. Like EXIT_STOPPED it is a code of the training pod's protocol with the scheduler, not one of components.errors.
EXIT_SIMULATED_BUG = 3
# The exit code of a rank whose watchdog found no step ending within --stall-timeout (watchdog.py): 124, what
# timeout(1) reports. Diagnose reads it as a hang, an infrastructure fault, however many ranks report it.
EXIT_STALLED = 124
# The exit code of a trainer that found no room to write a checkpoint or the model (a full disk, a used-up quota, a
# file-size limit): 28, ENOSPC's number. Diagnose reads it as "the checkpoint volume is full", neither a bug nor a
# node's fault: a retry would fail the same way until someone frees space, so the run stops and says so.
EXIT_NO_ROOM = 28


class FinetuneError(VcpilotError):
    """Bad input (missing data, a global batch that does not divide, a foreign checkpoint): one sentence."""


class NoRoom(FinetuneError):
    """No room to write a checkpoint or the model: the partial write is removed; exits EXIT_NO_ROOM."""

    exit_code = EXIT_NO_ROOM


# The errors that mean "no room": the OS's numbers, found on an OSError or in the text that torch and safetensors
# wrap them in ("I/O error: No space left on device (os error 28)").
_NO_ROOM = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EFBIG: "a file reached the size limit",
}


def _errno(err: BaseException | None) -> tuple[int | None, BaseException | None]:
    """The OS's error number on `err` or in its text, else on the error it was raised while handling; and its error.

    torch.save into a file raises RuntimeError("unexpected pos …") while handling the file's OSError(ENOSPC).
    """
    if err is None:
        return None, None
    code = err.errno if isinstance(err, OSError) else None
    if code is None and (found := re.search(r"os error (\d+)", str(err))):
        code = int(found.group(1))
    return (code, err) if code is not None else _errno(err.__cause__ or err.__context__)


def why_write_failed(err: BaseException) -> str:
    """Why a save failed, for the sentence that reports it: `the disk is full (…)` when that is the cause."""
    code, carrier = _errno(err)
    return f"{_NO_ROOM[code]}: {carrier}" if code in _NO_ROOM else str(err)


def write_error(sentence: str, err: BaseException) -> FinetuneError:
    """The error a failed write raises with `sentence`: NoRoom when `err` says there was no room."""
    return NoRoom(sentence) if _errno(err)[0] in _NO_ROOM else FinetuneError(sentence)


# SimulatedFailure and Stopped are no VcpilotError: they are how the trainer ends on purpose, each with the exit code
# of its own (EXIT_SIMULATED_BUG, EXIT_STOPPED) that the pipeline's diagnose step reads.


class SimulatedFailure(Exception):
    """`VCPILOT_FAIL_AT_STEP` reached: the same crash on every rank, so the pipeline can tell bugs from faults."""


class Stopped(Exception):
    """Every rank stopped at the same step on SIGTERM, after a checkpoint of that step was written."""

    def __init__(self, step: int) -> None:
        saved = "its checkpoint is written" if step else "nothing was trained yet"
        super().__init__(f"stopped on SIGTERM at step {step}; {saved}, and --resume auto continues from there")
        self.step = step
