"""`python -m components.finetune …`: a first, minimal distributed trainer with atomic, resumable checkpoints.

It trains the tiny model of `tiny.py` with torch DDP over the Volcano `pytorch` plugin's environment (gloo),
keeps the global batch as world size x micro batch x accumulation, checkpoints `step-N/` atomically (the
directory counts once `metadata.json` exists) and resumes from `VCPILOT_RESUME` or the newest complete
checkpoint. The transformers trainer of the step-programs issue replaces it behind the same command line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist

from components.finetune.tiny import batch, make_model


def _latest(directory: Path) -> Path | None:
    found = [
        (int(m.group(1)), p)
        for p in (directory.iterdir() if directory.is_dir() else [])
        if (m := re.fullmatch(r"step-(\d+)", p.name)) and (p / "metadata.json").is_file()
    ]
    return max(found)[1] if found else None


def _save(directory: Path, step: int, model: torch.nn.Module, opt: torch.optim.Optimizer, loss: float) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".step-{step}-", dir=directory))
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, tmp / "state.pt")
    (tmp / "metadata.json").write_text(json.dumps({"step": step, "loss": loss}))
    final = directory / f"step-{step}"
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; the exit code says whether it worked."""
    parser = argparse.ArgumentParser(prog="python -m components.finetune")
    parser.add_argument("--base-model", default="tiny")
    parser.add_argument("--dataset-dir", default="")
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--checkpoint-dir", type=Path, required=True)
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--checkpoint-every", type=int, default=5)
    args = parser.parse_args(argv)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if world > 1 else 0
    micro = int(os.environ.get("VCPILOT_MICRO_BATCH", "4"))
    accum = int(os.environ.get("VCPILOT_GRAD_ACCUM", "1"))
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    start = 0
    resume = Path(os.environ["VCPILOT_RESUME"]) if os.environ.get("VCPILOT_RESUME") else _latest(args.checkpoint_dir)
    if resume is not None:
        state = torch.load(resume / "state.pt")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start = json.loads((resume / "metadata.json").read_text())["step"]
    ddp = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model
    loss_value = float("nan")
    fail_at = int(os.environ.get("VCPILOT_FAIL_AT_STEP", "0"))  # a deterministic bug, for demos and tests
    for step in range(start, args.max_steps):
        if fail_at and step + 1 == fail_at:
            print(f"error: simulated bug at step {fail_at}", file=sys.stderr)
            return 3
        opt.zero_grad()
        for micro_step in range(accum):
            # Sample k of the global batch goes to rank k % world: the same data whatever the GPU count.
            x, y = batch(step * world * accum + micro_step * world + rank, micro)
            loss = torch.nn.functional.mse_loss(ddp(x), y) / accum
            loss.backward()
        opt.step()
        time.sleep(float(os.environ.get("VCPILOT_STEP_DELAY", "0")))  # lets tests and demos catch a run mid-way
        loss_value = float(loss) * accum
        if rank == 0 and (step + 1) % args.checkpoint_every == 0:
            _save(args.checkpoint_dir, step + 1, model, opt, loss_value)
        if rank == 0:
            print(json.dumps({"step": step + 1, "loss": loss_value}), flush=True)
    if rank == 0:
        args.output_dir.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), args.output_dir / "model.pt")
        summary = {"final_loss": loss_value, "steps": args.max_steps, "resumed_from": str(resume) if resume else None}
        (args.output_dir / "summary.json").write_text(json.dumps(summary))
        print(json.dumps(summary))
    if world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
