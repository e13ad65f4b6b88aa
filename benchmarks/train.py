"""Train-loop benchmark: step time of our training loop beside a bare torch loop on the same model and batch.

"Ours" is `components.finetune.train.train` on one rank: it draws each global batch from the data order, pads
it, normalises the loss by the batch's completion tokens, clips gradients, steps the schedule, and records
metrics every step (checkpoints only at the end, outside the timed steps). Beside the step times it times our
`Checkpointer` saving and loading the run's final checkpoint (weights, AdamW state, RNG), and the snapshot — the
copy of that state to host memory, all a periodic checkpoint stops training for (checkpoint_writer.py): the bytes
per second the agent benchmark scales to its model size (docs/agent-benchmark.md). "Bare" is the loop anyone
would write: one fixed batch, `model(..., labels=...)`, backward, AdamW step. Every example has the same length, so
both loops compute on tensors of the same shape. Rounds alternate between the two to spread the noise of a shared
machine evenly; the figure is the ratio of median step times (goal: at most 1.1). Prints one JSON document.

    python benchmarks/train.py [--steps 30] [--rounds 5] [--batch 16] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch
from goals import figure
from transformers import AutoModelForCausalLM, AutoTokenizer

from components.finetune.checkpoint import Checkpointer, TrainingState
from components.finetune.checkpoint_writer import snapshot
from components.finetune.config import TrainConfig
from components.finetune.data import collate, tokenize
from components.finetune.distributed import Distributed
from components.finetune.train import train
from components.lm.tiny import create_tiny_model

SIZES = {"tiny": {"hidden": 128, "layers": 2}, "small": {"hidden": 256, "layers": 4}}
WARMUP = 5  # first steps allocate and warm caches in both loops


def write_dataset(directory: Path, pairs: int) -> list[dict[str, str]]:
    """Fixed-width prompt/completion pairs: every sequence has the same number of tokens."""
    rows = [
        {"prompt": f"Q: price of item {i:03d}?\nA:", "completion": f" ${10 + 37 * i % 90:02d}"} for i in range(pairs)
    ]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return rows


def bare_loop(model_dir: Path, rows: list[dict[str, str]], batch: int, steps: int) -> list[float]:
    """Step times of the plain loop on one fixed batch."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model.train()
    fixed = collate(tokenize(rows[:batch], tokenizer, 128), tokenizer.pad_token_id)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95))
    times = []
    for _ in range(steps):
        started = time.perf_counter()
        out = model(input_ids=fixed.input_ids, attention_mask=fixed.attention_mask, labels=fixed.labels)
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        float(out.loss)  # read the loss, as any loop that logs it does
        times.append(time.perf_counter() - started)
    return times


def our_loop(model_dir: Path, data: Path, work: Path, batch: int, steps: int) -> list[float]:
    """Step times of `train()` as recorded in its metrics file."""
    config = TrainConfig(
        base_model=str(model_dir),
        data=data,
        out=work / "out",
        checkpoint_dir=work / "checkpoints",
        max_steps=steps,
        checkpoint_every=steps,
        micro_batch=batch,
        lr=3e-3,
        log_every=10**6,
    )
    train(config, Distributed())
    lines = (work / "out" / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["step_time_s"] for line in lines]


def time_checkpoint(checkpoints: Path, copies: Path, repeats: int = 3) -> dict[str, float]:
    """Seconds our Checkpointer takes to load, snapshot and save the run's newest checkpoint, best of `repeats`."""
    source = Checkpointer(checkpoints)
    latest = source.latest()
    assert latest is not None, "the timed run writes a final checkpoint"
    size = sum(f.stat().st_size for f in latest.iterdir())
    loads, snapshots, saves = [], [], []
    for i in range(repeats):
        started = time.perf_counter()
        metadata, state = source.load(latest)
        loads.append(time.perf_counter() - started)
        started = time.perf_counter()
        snapshot(state)
        snapshots.append(time.perf_counter() - started)
        started = time.perf_counter()
        Checkpointer(copies / str(i), keep=1).save(metadata, state)
        saves.append(time.perf_counter() - started)
    save_s, load_s, snapshot_s = min(saves), min(loads), min(snapshots)
    return {
        "bytes": size,
        "save_s": round(save_s, 4),
        "load_s": round(load_s, 4),
        "snapshot_s": round(snapshot_s, 4),
        "save_mb_per_s": round(size / save_s / 1e6, 1),
        "load_mb_per_s": round(size / load_s / 1e6, 1),
        "snapshot_mb_per_s": round(size / snapshot_s / 1e6, 1),
    }


# One decoder layer of a 7 B model (Llama 2's: hidden 4096, MLP 11008): the tensor sizes the agent benchmark scales the
# snapshot to. Per byte a snapshot of such tensors is slower than of the `small` model's (fresh memory is paged in
# as it is copied; the small tensors' stay in cache), so the stall is scaled from these.
LAYER_7B = {"q": (4096, 4096), "k": (4096, 4096), "v": (4096, 4096), "o": (4096, 4096), "gate": (11008, 4096)}
LAYER_7B |= {"up": (11008, 4096), "down": (4096, 11008), "norm_1": (4096,), "norm_2": (4096,)}


def time_snapshot_7b_layer(repeats: int = 3) -> dict[str, float]:
    """Seconds our snapshot takes for a 7 B decoder layer's fp32 weights and AdamW state (2.4 GB), best of `repeats`.

    Into the buffers of the snapshot before, as from a run's second checkpoint on (`kept`); the first one's too.
    """
    model = {name: torch.randn(shape) for name, shape in LAYER_7B.items()}
    moments = {
        i: {"step": torch.tensor(1.0), "exp_avg": torch.randn(t.shape), "exp_avg_sq": torch.rand(t.shape)}
        for i, t in enumerate(model.values())
    }
    state = TrainingState(model, {"state": moments, "param_groups": []}, {}, {})
    size = 3 * sum(t.numel() * t.element_size() for t in model.values())
    kept: dict = {}
    started = time.perf_counter()
    snapshot(state, kept)
    first_s = time.perf_counter() - started
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        snapshot(state, kept)
        times.append(time.perf_counter() - started)
    return {
        "bytes": size,
        "first_s": round(first_s, 3),
        "snapshot_s": round(min(times), 3),
        "first_mb_per_s": round(size / first_s / 1e6, 1),
        "snapshot_mb_per_s": round(size / min(times) / 1e6, 1),
    }


def summarize(times: list[float]) -> dict[str, float]:
    ms = sorted(t * 1000 for t in times)
    return {
        "median_ms": round(statistics.median(ms), 2),
        "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 2),
        "mean_ms": round(statistics.fmean(ms), 2),
    }


def bench_size(name: str, root: Path, args: argparse.Namespace) -> dict[str, object]:
    model_dir = create_tiny_model(root / name / "model", **SIZES[name])
    data = root / name / "data"
    rows = write_dataset(data, pairs=4 * args.batch)
    ours: list[float] = []
    bare: list[float] = []
    per_round = []
    for round_ in range(args.rounds):
        bare_times = bare_loop(model_dir, rows, args.batch, args.steps)[WARMUP:]
        our_times = our_loop(model_dir, data, root / name / f"run-{round_}", args.batch, args.steps)[WARMUP:]
        per_round.append(round(statistics.median(our_times) / statistics.median(bare_times), 3))
        bare += bare_times
        ours += our_times
    params = sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(model_dir).parameters())
    tokens = len(tokenize(rows[:1], AutoTokenizer.from_pretrained(model_dir), 128)[0].input_ids)
    checkpoint = time_checkpoint(root / name / "run-0" / "checkpoints", root / name / "copies")
    ours_s, bare_s = summarize(ours), summarize(bare)
    ratio = ours_s["median_ms"] / bare_s["median_ms"]
    return {
        "model": {"size": name, "parameters": params, **SIZES[name]},
        "batch": {"sequences": args.batch, "tokens_per_sequence": tokens},
        "steps_timed": len(ours),
        "ours": ours_s,
        "bare": bare_s,
        "ratio_median": round(ratio, 3),
        "ratio_per_round": per_round,  # the spread shows how much a shared machine moved the figure
        "meets_goal": ratio <= 1.1,
        "checkpoint": checkpoint,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    with tempfile.TemporaryDirectory(prefix="vcpilot-bench-train-") as tmp:
        results = [bench_size(name, Path(tmp), args) for name in args.sizes]
    layer = time_snapshot_7b_layer()
    print(
        json.dumps(
            {
                "benchmark": "train-loop",
                "goal": "ratio_median <= 1.1",
                "threads": args.threads,
                "results": results,
                "snapshot_7b_layer": layer,
                "figures": [
                    figure(
                        f"train: step time, {r['model']['size']} model",
                        r["ratio_median"],
                        "<=",
                        1.1,
                        unit="x",
                        baseline="a bare torch loop",
                    )
                    for r in results
                ],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
