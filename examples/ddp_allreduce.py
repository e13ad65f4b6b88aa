"""A tiny torch DDP training run (gloo) that reads Volcano's pytorch-plugin environment, as a real job would.

Run it under LocalCluster with the `pytorch` plugin: every pod gets MASTER_ADDR, MASTER_PORT, WORLD_SIZE and
RANK. Rank 0 writes a JSON summary to the path given as the first argument.
"""

import json
import os
import sys

import torch
import torch.distributed as dist


def main(out_path: str, steps: int = 5) -> None:
    """Train a linear model with DDP for a few steps and check every rank ends with the same weights."""
    dist.init_process_group("gloo")  # reads MASTER_ADDR / MASTER_PORT / WORLD_SIZE / RANK
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1234 + rank)  # each rank sees its own shard
    loss = torch.tensor(0.0)
    for _ in range(steps):
        x = torch.randn(16, 8, generator=gen)
        y = x.sum(dim=1, keepdim=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()  # DDP all-reduces gradients here
        opt.step()
    weights = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.zeros_like(weights) for _ in range(world)]
    dist.all_gather(gathered, weights)
    in_sync = all(torch.equal(gathered[0], w) for w in gathered)
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump({"world_size": world, "final_loss": float(loss), "weights_in_sync": in_sync}, f)
    dist.destroy_process_group()
    if not in_sync:
        sys.exit(3)


if __name__ == "__main__":
    main(sys.argv[1], int(os.environ.get("STEPS", "5")))
