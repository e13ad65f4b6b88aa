"""Several GPUs in one pod: run the trainer under torchrun, one process per GPU, and exit as one trainer would.

Volcano's `pytorch` plugin starts one process per pod and counts pods in WORLD_SIZE and RANK. A pod that holds
several GPUs hands those to torchrun as the node count and node rank; torchrun then starts one trainer per GPU
with WORLD_SIZE, RANK and LOCAL_RANK recomputed, so that the world size counts GPUs as the global batch does.

torchrun is the pod's main process, so the kubelet's SIGTERM reaches it alone; it passes the signal on to the
trainers, which checkpoint and exit EXIT_STOPPED, and then exits 1 itself. `run_torchrun` gives the pod the exit
code a single trainer would have: EXIT_STOPPED, also when the stop came from another pod's trainers, and
EXIT_NO_ROOM when a trainer found no room for its checkpoint.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping

from components.finetune.errors import EXIT_NO_ROOM, EXIT_STOPPED

__all__ = ["run_torchrun", "torchrun_args"]

# torchrun sends SIGKILL to trainers still running this long after it passed SIGTERM on (its default is 30 s).
# The pod's terminationGracePeriodSeconds is the limit that counts, so torchrun's own is out of the way.
_SHUTDOWN_TIMEOUT_S = str(24 * 3600)


def torchrun_args(env: Mapping[str, str], argv: list[str]) -> list[str] | None:
    """The arguments of torchrun for this pod, or None when one process suffices (or torchrun already ran us)."""
    per_pod = int(env.get("VCPILOT_GPUS_PER_POD") or 1)
    if per_pod <= 1 or "LOCAL_RANK" in env:
        return None
    return [
        f"--nnodes={env.get('WORLD_SIZE') or 1}",
        f"--node-rank={env.get('RANK') or 0}",
        f"--nproc-per-node={per_pod}",
        f"--master-addr={env.get('MASTER_ADDR') or '127.0.0.1'}",
        f"--master-port={env.get('MASTER_PORT') or '29500'}",
        "-m",
        "components.finetune",
        *argv,
    ]


def run_torchrun(args: list[str]) -> int:
    """Run torchrun in this process with `args`; the pod's exit code (EXIT_STOPPED, EXIT_NO_ROOM as a trainer's)."""
    os.environ.setdefault("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", _SHUTDOWN_TIMEOUT_S)
    from torch.distributed.elastic.multiprocessing import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun

    try:
        torchrun(args)
    except SignalException as err:
        if err.sigval != signal.SIGTERM:
            raise
        return EXIT_STOPPED  # this pod was told to stop, and torchrun stopped its trainers
    except ChildFailedError as err:
        codes = {failure.exitcode for failure in err.failures.values()}
        if EXIT_NO_ROOM in codes:
            return EXIT_NO_ROOM  # a trainer found no room for its checkpoint: diagnose must read that, not 1
        if codes - {EXIT_STOPPED}:
            raise
        return EXIT_STOPPED  # another pod was told to stop, and this pod's trainers stopped with it
    return 0
