"""The train loop: read it top to bottom — set up, resume, then one optimizer step after another.

Each step takes the next global batch from the data stream, runs this rank's micro-batches (gradients are
all-reduced only on the last one), and normalises the loss by the completion tokens of the *whole* global batch,
which every rank can count from the data alone. So the update is the same whatever the world size and the
accumulation, up to the order of float additions. Rank 0 alone writes checkpoints, metrics and the final model.
Periodic checkpoints stop training only while the state is copied to host memory; a thread writes the copy
(checkpoint_writer.py). Told to stop (SIGTERM on any rank, stop_signal.py), every rank stops at the same step
boundary, that step's checkpoint is written, and `train` raises `Stopped`.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from pydantic import BaseModel

from components.files import write_text
from components.finetune.checkpoint import (
    Checkpointer,
    CheckpointMetadata,
    CheckpointReason,
    TrainingState,
    capture_rng,
    restore_rng,
)
from components.finetune.checkpoint_writer import CheckpointWriter
from components.finetune.config import BatchShape, TrainConfig, resolve_batch
from components.finetune.data import (
    IGNORE,
    Batch,
    DataPosition,
    Example,
    collate,
    load_examples,
    rank_micro_batches,
    take,
    tokenize,
)
from components.finetune.distributed import Distributed
from components.finetune.errors import FinetuneError, SimulatedFailure, Stopped
from components.finetune.model import context_length, load_model, load_trainable_state, save_final, trainable_state
from components.finetune.optim import build_optimizer, build_scheduler
from components.finetune.stop_signal import StopSignal
from components.finetune.tracking import MetricsSink, open_sink
from components.finetune.watchdog import Watchdog
from components.progress import Progress, Update

__all__ = ["Summary", "train"]

SUMMARY_FILE = "summary.json"
METRICS_FILE = "metrics.jsonl"


class Summary(BaseModel):
    """What a finished run reports (and writes to `<out>/summary.json`)."""

    final_loss: float
    peak_lr: float
    steps: int
    steps_run: int
    resumed_from: str | None
    tokens_per_s: float
    step_time_s: float
    eval_loss: float | None
    world_size: int
    micro_batch: int
    grad_accum: int
    global_batch: int
    output_dir: str


def train(config: TrainConfig, dist: Distributed, env: Mapping[str, str] = os.environ) -> Summary:
    """Train as `config` says on this rank; returns the summary (its eval loss only on rank 0).

    Raises `Stopped` when SIGTERM reached any rank before the last step, once that step's checkpoint is written.
    """
    with _deterministic(dist.device), StopSignal().listen() as stop:
        return _train(config, dist, env, stop)


@contextlib.contextmanager
def _deterministic(device: torch.device) -> Iterator[None]:
    """Deterministic kernels on CPU, where they cost little: a resumed run must end on exactly the same loss."""
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(before or device.type == "cpu")
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before)


def _train(config: TrainConfig, dist: Distributed, env: Mapping[str, str], stop: StopSignal) -> Summary:
    shape = resolve_batch(dist.world_size, config.micro_batch, config.grad_accum, config.global_batch)
    records = load_examples(config.data)  # before the model loads: bad data fails in a second, not a minute
    eval_records = load_examples(config.data, "eval", required=False)
    _seed(config.seed)

    model, tokenizer = load_model(config)
    model.to(dist.device)
    length = context_length(model, config.max_length)
    examples = tokenize(records, tokenizer, length)
    optimizer = build_optimizer(model, config)
    scheduler = build_scheduler(optimizer, config)
    checkpointer = Checkpointer(config.checkpoint_dir, config.keep)
    writer = CheckpointWriter(checkpointer)
    dist.join()

    # Resume: rank 0 picks the checkpoint and tells the others, so that all ranks start from the same one.
    resumed_from = dist.broadcast(_choose_checkpoint(config, checkpointer) if dist.is_main else None)
    if isinstance(resumed_from, FinetuneError):
        raise resumed_from
    step, position, loss = 0, DataPosition(), float("nan")
    if resumed_from is not None:
        metadata, state = checkpointer.load(Path(resumed_from))
        _check_compatible(metadata, config, shape, resumed_from)
        load_trainable_state(model, state.model)
        optimizer.load_state_dict(state.optimizer)
        scheduler.load_state_dict(state.scheduler)
        restore_rng(state.rng)
        step, position, loss = metadata.step, DataPosition(metadata.epoch, metadata.offset), metadata.loss

    def save(step: int, position: DataPosition, loss: float, reason: CheckpointReason) -> float | None:
        """Rank 0 checkpoints `step-N/`, with the data position to continue from, from a snapshot in the background.

        The stop signal's is written before it returns. Waits for the write in flight first, and returns its
        seconds (None when there was none).
        """
        metadata = CheckpointMetadata(
            step=step,
            epoch=position.epoch,
            offset=position.offset,
            loss=loss,
            global_batch=shape.global_batch,
            world_size=dist.world_size,
            base_model=config.base_model,
            lora=config.lora,
            seed=config.seed,
            reason=reason,
        )
        state = TrainingState(trainable_state(model), optimizer.state_dict(), scheduler.state_dict(), capture_rng())
        return writer.save(metadata, state, background=reason != "stop-signal")

    ddp = dist.wrap(model)
    sink = open_sink(env, dist.is_main)
    sink.log_params({**config.model_dump(mode="json"), **shape.model_dump(), "resumed_from": resumed_from})
    metrics_log = _open_metrics(config.out) if dist.is_main else None
    first_step, step_times, tokens_seen, succeeded = step, [], 0, False
    # The newest step a checkpoint holds, or will once its write in flight is done (every rank knows it: saves
    # happen at fixed steps).
    checkpointed = step
    # Rank 0's steps on stderr: a bar on a terminal, a line every `log_every` steps in a pod's log or a pipe.
    progress = Progress(sys.stderr, mode=None if dist.is_main else "off")
    bar = contextlib.ExitStack()
    advance = bar.enter_context(progress.steps("step", config.max_steps))
    try:
        # No step ending for stall_timeout_s: this rank is hung and exits EXIT_STALLED (watchdog.py).
        # The write in flight ends within the watchdog's watch: a write that hangs is a hang too.
        with Watchdog(config.stall_timeout_s, lambda: f"rank {dist.rank} after step {step}") as watchdog, writer:
            while step < config.max_steps:
                # Told to stop (SIGTERM on any rank)? Then every rank stops here, at the same step: this step's
                # checkpoint is written (unless one holds it already) and no rank leaves before it is whole — nor
                # before the write in flight is.
                if dist.any_rank(stop.received):
                    if dist.is_main:
                        writer.wait()
                        if step > checkpointed:
                            save(step, position, loss, "stop-signal")
                    dist.barrier()
                    raise Stopped(step)

                if config.fail_at_step == step + 1:
                    raise SimulatedFailure(f"simulated bug at step {config.fail_at_step} (VCPILOT_FAIL_AT_STEP)")

                # One optimizer step on the next global batch.
                started = time.perf_counter()
                indices, position = take(position, shape.global_batch, len(examples), config.seed)
                loss = _optimizer_step(ddp, optimizer, scheduler, examples, indices, shape, dist, config, tokenizer)
                elapsed = time.perf_counter() - started
                step += 1

                # Record it (rank 0): loss, learning rate, throughput.
                tokens = sum(len(examples[i].input_ids) for i in indices)
                step_times.append(elapsed)
                tokens_seen += tokens
                lr = float(scheduler.get_last_lr()[0])
                record = {"loss": loss, "lr": lr, "tokens_per_s": tokens / elapsed, "step_time_s": elapsed}

                # Checkpoint every K steps and at the end (rank 0). Timed: the seconds training stood still for
                # it (the wait for the previous write, the snapshot), and the seconds the previous background
                # write took, now that it is done — the last checkpoint's own, which is waited for: the run must
                # not end before it is whole. The agent's checkpoint interval weighs both (docs/agent.md).
                if step % config.checkpoint_every == 0 or step == config.max_steps:
                    if dist.is_main:
                        began = time.perf_counter()
                        written_s = save(step, position, loss, "final" if step == config.max_steps else "periodic")
                        record["checkpoint_save_s"] = time.perf_counter() - began
                        if step == config.max_steps:
                            written_s = writer.wait()
                        if written_s is not None:
                            record["checkpoint_write_s"] = written_s
                    checkpointed = step
                _report(step, config, record, sink, metrics_log, dist, advance, every_step=progress.mode == "live")
                watchdog.progressed()
                if config.step_delay:
                    time.sleep(config.step_delay)  # lets tests and demos catch a run mid-way

        # The end (rank 0): evaluation loss on eval.jsonl, then the model for the next steps of the pipeline.
        eval_loss = None
        if dist.is_main:
            if eval_records:
                eval_examples = tokenize(eval_records, tokenizer, length)
                eval_loss = evaluate_loss(model, eval_examples, tokenizer, shape.micro_batch)
            save_final(model, tokenizer, config.out)
        succeeded = True
    finally:
        bar.close()
        if metrics_log is not None:
            metrics_log.close()
        sink.finish(succeeded)

    total_time = sum(step_times)
    summary = Summary(
        final_loss=loss,
        peak_lr=optimizer.param_groups[0]["initial_lr"],
        steps=step,
        steps_run=step - first_step,
        resumed_from=resumed_from,
        tokens_per_s=tokens_seen / total_time if total_time else 0.0,
        step_time_s=total_time / len(step_times) if step_times else 0.0,
        eval_loss=eval_loss,
        output_dir=str(config.out),
        **shape.model_dump(),
    )
    if dist.is_main:
        write_text(config.out / SUMMARY_FILE, summary.model_dump_json(indent=2) + "\n")
    return summary


def _optimizer_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    examples: Sequence[Example],
    indices: Sequence[int],
    shape: BatchShape,
    dist: Distributed,
    config: TrainConfig,
    tokenizer: Any,
) -> float:
    """One optimizer step over the global batch `indices`; returns its mean loss per completion token."""
    # Every rank counts the target tokens of the whole global batch: the loss is their mean, whoever computes it.
    targets = max(1, sum(examples[i].target_tokens for i in indices))
    micro_batches = rank_micro_batches(indices, dist.rank, dist.world_size, shape.micro_batch)
    loss_sum = torch.zeros((), device=dist.device)
    for number, micro in enumerate(micro_batches):
        batch = collate([examples[i] for i in micro], tokenizer.pad_token_id).to(dist.device)
        last = number == len(micro_batches) - 1
        with dist.sync_gradients(model, sync=last):  # all-reduce once, on the last micro-step
            loss = token_loss(model, batch, dist.device) / targets
            # DDP averages gradients over ranks; scaling by the world size turns that into the sum we want.
            (loss * dist.world_size).backward()
        loss_sum += loss.detach()
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], config.max_grad_norm)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return float(dist.sum(loss_sum))


def token_loss(model: torch.nn.Module, batch: Batch, device: torch.device) -> torch.Tensor:
    """Summed cross-entropy of every completion token given the tokens before it."""
    autocast: Any = contextlib.nullcontext()
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        autocast = torch.autocast("cuda", dtype=torch.bfloat16)
    with autocast:
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False).logits
    return F.cross_entropy(
        logits[:, :-1].flatten(0, 1).float(), batch.labels[:, 1:].flatten(), ignore_index=IGNORE, reduction="sum"
    )


@torch.no_grad()
def evaluate_loss(model: torch.nn.Module, examples: Sequence[Example], tokenizer: Any, micro_batch: int) -> float:
    """Mean loss per completion token over `examples` (the eval split), in eval mode."""
    device = next(model.parameters()).device
    model.eval()
    total, targets = 0.0, 0
    for start in range(0, len(examples), micro_batch):
        chunk = examples[start : start + micro_batch]
        total += float(token_loss(model, collate(chunk, tokenizer.pad_token_id).to(device), device))
        targets += sum(e.target_tokens for e in chunk)
    model.train()
    return total / max(1, targets)


def _seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _choose_checkpoint(config: TrainConfig, checkpointer: Checkpointer) -> str | FinetuneError | None:
    """The checkpoint to resume from (as a string, to broadcast), or the error every rank should raise."""
    checkpointer.sweep()
    latest = checkpointer.latest()
    if config.resume_mode == "auto":
        return str(latest) if latest else None
    if config.resume_mode == "path":
        path = Path(config.resume)
        try:
            checkpointer.read_metadata(path)
        except FinetuneError as err:
            return err
        return str(path)
    if latest is not None:
        return FinetuneError(
            f"checkpoint directory {config.checkpoint_dir} already holds {latest.name}; pass --resume auto to "
            f"continue that run, or choose an empty --checkpoint-dir to start fresh."
        )
    return None


def _check_compatible(metadata: CheckpointMetadata, config: TrainConfig, shape: BatchShape, path: str) -> None:
    """A resumed run must be the same run: same model, data order and global batch (the world size may change)."""
    pairs = {
        "base model": (metadata.base_model, config.base_model),
        "lora": (metadata.lora, config.lora),
        "seed": (metadata.seed, config.seed),
        "global batch": (metadata.global_batch, shape.global_batch),
    }
    for what, (theirs, mine) in pairs.items():
        if theirs != mine:
            raise FinetuneError(
                f"checkpoint {path} was written with {what} {theirs}, this run has {mine}; resume with the "
                f"same {what}, or start fresh in another --checkpoint-dir."
            )


def _open_metrics(out: Path) -> Any:
    out.mkdir(parents=True, exist_ok=True)
    return (out / METRICS_FILE).open("w", encoding="utf-8")


def _report(
    step: int,
    config: TrainConfig,
    record: dict[str, float],
    sink: MetricsSink,
    log: Any,
    dist: Distributed,
    advance: Update,
    *,
    every_step: bool = False,
) -> None:
    """Rank 0 records every step (MLflow, metrics.jsonl) and shows every `log_every`-th one (a bar: each)."""
    if not dist.is_main:
        return
    sink.log_metrics(step, record)
    log.write(json.dumps({"step": step, **record}) + "\n")
    log.flush()
    if every_step or step % config.log_every == 0 or step == config.max_steps:
        advance(
            step,
            f"loss {record['loss']:.4f}  lr {record['lr']:.2e}  "
            f"{record['tokens_per_s']:,.0f} tok/s  {record['step_time_s'] * 1000:.0f} ms/step",
        )
