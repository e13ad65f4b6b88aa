"""`vcpilot finetune` and `python -m components.finetune`: one command for people and for training pods.

People write `--data` and `--out`; the pipeline's VCJob writes `--dataset-dir` and `--output-dir` and passes the
batch shape in the env (VCPILOT_MICRO_BATCH, VCPILOT_GRAD_ACCUM, VCPILOT_GLOBAL_BATCH) and, on a retry, the
checkpoint to continue from (VCPILOT_RESUME, which wins over --resume). Pods resume on their own (__main__ adds
`--resume auto`), so a pod that Volcano restarts continues instead of failing. Bad input ends with one sentence
and exit code 1, as in every step program (components/errors.py); the simulated bug of VCPILOT_FAIL_AT_STEP with
exit code 3 (EXIT_SIMULATED_BUG); SIGTERM (a pod being preempted, evicted or deleted) with a checkpoint of the step
every rank stopped at and exit code 143 (EXIT_STOPPED); a rank with no step ending for --stall-timeout seconds (hung)
with exit code 124 (EXIT_STALLED).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from components.entry import JsonOption, given_options, new_app, option_error
from components.finetune.errors import EXIT_SIMULATED_BUG, EXIT_STOPPED, FinetuneError, SimulatedFailure, Stopped

if TYPE_CHECKING:
    from components.finetune.config import TrainConfig

__all__ = ["app", "finetune_command"]


def finetune_command(
    data: Annotated[Path, typer.Option("--data", "--dataset-dir", help="Directory with train.jsonl (and eval.jsonl).")],
    out: Annotated[Path, typer.Option("--out", "--output-dir", help="Where the trained model is written.")],
    max_steps: Annotated[int, typer.Option(help="Optimizer steps to train in all (a resumed run counts on).")],
    checkpoint_every: Annotated[int, typer.Option(help="Steps between checkpoints.")] = 50,
    checkpoint_dir: Annotated[
        Path | None, typer.Option(help="Where step-N/ checkpoints go (default: <out>-checkpoints, beside the model).")
    ] = None,
    resume: Annotated[
        str, typer.Option(help="'none' starts fresh, 'auto' continues from the newest checkpoint, or a step-N path.")
    ] = "none",
    keep: Annotated[int, typer.Option(help="How many of the newest checkpoints to keep.")] = 3,
    base_model: Annotated[
        str, typer.Option(help="A model directory, a Hugging Face id, or 'tiny' (built from scratch).")
    ] = "tiny",
    micro_batch: Annotated[int, typer.Option(envvar="VCPILOT_MICRO_BATCH", help="Sequences per forward pass.")] = 4,
    grad_accum: Annotated[
        int | None,
        typer.Option(
            envvar="VCPILOT_GRAD_ACCUM", help="Micro-steps per optimizer step (default: from the global batch)."
        ),
    ] = None,
    global_batch: Annotated[
        int | None,
        typer.Option(
            envvar="VCPILOT_GLOBAL_BATCH", help="Sequences per optimizer step = ranks x micro x accumulation."
        ),
    ] = None,
    lr: Annotated[
        float | None,
        typer.Option(
            envvar="VCPILOT_LR",
            help="Peak learning rate (default: 3e-3 under 20M parameters, else 2e-4 LoRA, 2e-5 full).",
        ),
    ] = None,
    warmup_steps: Annotated[int | None, typer.Option(help="Warm-up steps (default: a tenth, at most 100).")] = None,
    weight_decay: Annotated[float, typer.Option(help="AdamW weight decay of matrices.")] = 0.0,
    lora: Annotated[bool, typer.Option("--lora", help="Train LoRA adapters instead of every weight.")] = False,
    lora_r: Annotated[int, typer.Option(help="LoRA rank.")] = 8,
    lora_alpha: Annotated[int, typer.Option(help="LoRA alpha (the adapters are scaled by alpha / r).")] = 16,
    lora_target: Annotated[
        list[str] | None, typer.Option(help="Module names to adapt (repeatable; default: q_proj and v_proj).")
    ] = None,
    max_length: Annotated[int | None, typer.Option(help="Longest sequence in tokens (default: the model's).")] = None,
    seed: Annotated[
        int, typer.Option(min=0, max=2**32 - 1, help="Seed of the initial weights of 'tiny' and of the data order.")
    ] = 0,
    log_every: Annotated[int, typer.Option(help="Print progress every this many steps.")] = 10,
    json_output: JsonOption = False,
    step_delay: Annotated[float, typer.Option(envvar="VCPILOT_STEP_DELAY", hidden=True)] = 0.0,
    fail_at_step: Annotated[int, typer.Option(envvar="VCPILOT_FAIL_AT_STEP", hidden=True)] = 0,
    stall_timeout: Annotated[
        float,
        typer.Option(
            envvar="VCPILOT_STALL_TIMEOUT",
            help="Seconds without a training step ending after which a rank counts as hung and exits 124 (0: never).",
        ),
    ] = 900.0,
) -> None:
    """Fine-tune a causal LM on prompt/completion pairs, checkpointing as it goes; rank 0 writes the model."""
    from pydantic import ValidationError

    from components.files import check_output_dir, refuse_overwriting
    from components.finetune.base_model import TINY
    from components.finetune.config import LORA_TARGETS, TrainConfig

    if not lora and (given := given_options("lora_r", "lora_alpha", "lora_target")):
        # else they are dropped without a word, and every weight is trained
        raise FinetuneError(f"{given[0]} shapes LoRA adapters; add --lora, or leave it out")
    checkpoint_dir = checkpoint_dir or out.with_name(f"{out.name}-checkpoints")  # beside the model, not in it
    check_output_dir(out, "--out")
    check_output_dir(checkpoint_dir, "--checkpoint-dir")
    # A model directory as the base: writing the fine-tuned model there would replace it (its weights, its config).
    # 'tiny' is built in memory, never read from a directory of that name.
    read = [(data, "the dataset")] + ([(base_model, "the base model")] if base_model != TINY else [])
    refuse_overwriting(read, [(out, "--out"), (checkpoint_dir, "--checkpoint-dir")])
    resume = os.environ.get("VCPILOT_RESUME") or resume  # the pipeline's say wins
    if not resume:  # '' would read the working directory as a checkpoint
        raise FinetuneError("--resume is empty; give none, auto or the path of a step-N checkpoint")
    try:
        config = TrainConfig(
            base_model=base_model,
            data=data,
            out=out,
            checkpoint_dir=checkpoint_dir,
            max_steps=max_steps,
            checkpoint_every=checkpoint_every,
            keep=keep,
            resume=resume,
            micro_batch=micro_batch,
            grad_accum=grad_accum,
            global_batch=global_batch,
            lr=lr,
            warmup_steps=warmup_steps,
            weight_decay=weight_decay,
            lora=lora,
            lora_r=lora_r,
            lora_alpha=lora_alpha,
            lora_targets=tuple(lora_target) if lora_target else LORA_TARGETS,
            max_length=max_length,
            seed=seed,
            log_every=log_every,
            step_delay=step_delay,
            fail_at_step=fail_at_step,
            stall_timeout_s=stall_timeout,
        )
    except ValidationError as err:
        raise FinetuneError(
            str(option_error(err, {"lora_targets": "lora_target", "stall_timeout_s": "stall_timeout"}))
        ) from None
    _run(config, json_output)


def _run(config: TrainConfig, json_output: bool) -> None:
    from components.finetune.distributed import distributed_from_env  # imported here: torch takes seconds
    from components.finetune.train import train

    dist = distributed_from_env(os.environ)  # a FinetuneError here or in train ends as every VcpilotError does
    try:
        summary = train(config, dist)
    except SimulatedFailure as err:
        if dist.active and dist.joined:
            # Every rank fails at the same step. They leave together, at once: the scheduler must see the same
            # exit code from every pod, and a rank still shutting down would be killed first, which the
            # pipeline's diagnose step would take for an infrastructure fault rather than a bug.
            dist.barrier()
            print(f"error: {err}", file=sys.stderr, flush=True)
            os._exit(EXIT_SIMULATED_BUG)
        print(f"error: {err}", file=sys.stderr, flush=True)
        raise typer.Exit(EXIT_SIMULATED_BUG) from None
    except Stopped as err:
        # Not an error, but not a success either: a pod that exits 0 would count Succeeded, its job Completed.
        typer.echo(str(err), err=True)
        raise typer.Exit(EXIT_STOPPED) from None
    finally:
        dist.close()
    if not dist.is_main:
        return
    if json_output:
        typer.echo(summary.model_dump_json())
        return
    resumed = f", resumed from {summary.resumed_from}" if summary.resumed_from else ""
    typer.echo(
        f"trained {summary.steps_run} steps to step {summary.steps}{resumed}: final loss {summary.final_loss:.4f}, "
        f"{summary.tokens_per_s:,.0f} tokens/s; model written to {summary.output_dir}"
    )


app = new_app()
app.command()(finetune_command)
