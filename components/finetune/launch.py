"""Several GPUs in one pod: re-launch the trainer under torchrun, one process per GPU.

Volcano's `pytorch` plugin starts one process per pod and counts pods in WORLD_SIZE and RANK. A pod that holds
several GPUs hands those to torchrun as the node count and node rank; torchrun then starts one trainer per GPU
with WORLD_SIZE, RANK and LOCAL_RANK recomputed, so that the world size counts GPUs as the global batch does.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

__all__ = ["torchrun_command"]


def torchrun_command(env: Mapping[str, str], argv: list[str]) -> list[str] | None:
    """The torchrun command line for this pod, or None when one process suffices (or torchrun already ran us)."""
    per_pod = int(env.get("VCPILOT_GPUS_PER_POD") or 1)
    if per_pod <= 1 or "LOCAL_RANK" in env:
        return None
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nnodes={env.get('WORLD_SIZE') or 1}",
        f"--node-rank={env.get('RANK') or 0}",
        f"--nproc-per-node={per_pod}",
        f"--master-addr={env.get('MASTER_ADDR') or '127.0.0.1'}",
        f"--master-port={env.get('MASTER_PORT') or '29500'}",
        "-m",
        "components.finetune",
        *argv,
    ]
