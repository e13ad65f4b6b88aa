"""The run's place in the job: rank, world size and device, from the env Volcano's `pytorch` plugin (or torchrun) sets.

Volcano's plugin starts one process per pod with MASTER_ADDR, MASTER_PORT, WORLD_SIZE (pods) and RANK; a pod with
several GPUs runs one process per GPU under torchrun (`launch.py`), which sets LOCAL_RANK as well.
Without WORLD_SIZE the run is a single process and torch.distributed is never initialised.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from components.finetune.errors import FinetuneError

__all__ = ["Distributed", "distributed_from_env"]


@dataclass(frozen=True)
class Distributed:
    """The process's rank among `world_size`, the device it computes on, and where the ranks meet."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    master: str = ""  # host:port of rank 0's rendezvous

    def join(self, timeout_s: float = 600.0) -> None:
        """Form the process group with the other ranks (gloo on CPU, nccl on GPUs); nothing to do alone.

        Join only once the model is loaded: transformers writes files only on rank 0 of a formed group, which
        would leave the other ranks' freshly built `tiny` model half written.
        """
        if self.active and not dist.is_initialized():
            dist.init_process_group(
                "nccl" if self.device.type == "cuda" else "gloo",
                init_method=f"tcp://{self.master}",
                rank=self.rank,
                world_size=self.world_size,
                timeout=datetime.timedelta(seconds=timeout_s),
            )

    @property
    def is_main(self) -> bool:
        """Rank 0 alone writes checkpoints, metrics and the final model."""
        return self.rank == 0

    @property
    def active(self) -> bool:
        """Whether there are other ranks to talk to."""
        return self.world_size > 1

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """The model in DistributedDataParallel when there are other ranks, else as it is."""
        if not self.active:
            return model
        ids = [self.device.index] if self.device.type == "cuda" else None
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)

    @contextlib.contextmanager
    def sync_gradients(self, model: torch.nn.Module, sync: bool) -> Iterator[None]:
        """Let backward all-reduce gradients only when `sync` (the last micro-step): the others accumulate locally."""
        if sync or not isinstance(model, torch.nn.parallel.DistributedDataParallel):
            yield
        else:
            with model.no_sync():
                yield

    @property
    def joined(self) -> bool:
        """Whether the process group is formed (collectives work)."""
        return dist.is_available() and dist.is_initialized()

    def barrier(self) -> None:
        """Wait until every rank gets here."""
        if self.active:
            dist.barrier()

    def sum(self, value: torch.Tensor) -> torch.Tensor:
        """`value` summed over all ranks."""
        if self.active:
            dist.all_reduce(value, op=dist.ReduceOp.SUM)
        return value

    def any_rank(self, flag: bool) -> bool:
        """Whether `flag` is set on any rank; every rank gets the same answer (one all-reduce of one number)."""
        if not self.active:
            return flag
        value = torch.tensor([float(flag)], device=self.device)
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return bool(value.item())

    def broadcast(self, value: Any) -> Any:
        """Rank 0's `value`, on every rank (so all ranks agree on, say, which checkpoint to resume)."""
        if not self.active:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def close(self) -> None:
        """Leave the process group."""
        if self.active and dist.is_initialized():
            dist.destroy_process_group()


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "")
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise FinetuneError(f"environment variable {name}={raw!r} is not an integer; fix the launcher.") from None


def distributed_from_env(env: Mapping[str, str]) -> Distributed:
    """The calling process's place in the job the env describes; a single process without WORLD_SIZE."""
    world, rank, local_rank = _int(env, "WORLD_SIZE", 1), _int(env, "RANK", 0), _int(env, "LOCAL_RANK", 0)
    if world < 1 or not 0 <= rank < world:
        raise FinetuneError(f"RANK {rank} is not within WORLD_SIZE {world}; the launcher set them wrongly.")
    cuda = torch.cuda.is_available()
    if cuda and not 0 <= local_rank < torch.cuda.device_count():
        raise FinetuneError(
            f"LOCAL_RANK {local_rank} has no GPU: this node has {torch.cuda.device_count()}; start at most one rank"
            " per GPU (nproc_per_node = the pod's nvidia.com/gpu)."
        )
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    missing = [name for name in ("MASTER_ADDR", "MASTER_PORT") if not env.get(name)]
    if world > 1 and missing:
        raise FinetuneError(f"WORLD_SIZE is {world} but {' and '.join(missing)} is not set; run under a launcher.")
    master = f"{env.get('MASTER_ADDR', '')}:{env.get('MASTER_PORT', '')}"
    return Distributed(rank=rank, world_size=world, local_rank=local_rank, device=device, master=master)
