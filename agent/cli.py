"""`vcpilot plan`: what would the agent do now? Its decision and the VCJob it would submit, submitting nothing.

It observes the current cluster (LocalCluster under VCPILOT_HOME), asks the chosen policy to plan a training of
the given size, and prints the decision — action, rationale, every candidate weighed — with the rendered VCJob.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
import yaml
from pydantic import ValidationError

from agent.actions import Candidate, Downscale, Proceed
from agent.observation import PlanRequest
from agent.observe import observe
from agent.policies import POLICY_NAMES, decide, select_policy
from agent.policy import Decision
from components.volcano.builder import TrainingRequest, build_training_job
from components.volcano.cluster import ClusterError
from components.volcano.connect import connect
from components.volcano.validation import describe_validation_error

__all__ = ["plan_command", "render_job"]

DEFAULT_IMAGE = "ghcr.io/vcpilot/vcpilot:0.1.0"
# PlanRequest's field names as this command's flags, for error messages.
_FLAGS = {
    "gpus_min": "min-gpus",
    "gpus-min": "min-gpus",
    "gpus_per_pod": "gpus-per-pod",
    "global_batch": "global-batch",
    "micro_batch": "micro-batch",
    "max_steps": "max-steps",
    "fallback_queue": "fallback-queue",
    "priority_class": "priority-class",
}


def plan_command(
    gpus: Annotated[int, typer.Option(help="GPUs wanted.")] = 4,
    min_gpus: Annotated[int, typer.Option(help="Fewest GPUs worth training on.")] = 1,
    gpus_per_pod: Annotated[int, typer.Option(help="GPUs per training pod.")] = 1,
    global_batch: Annotated[int, typer.Option(help="Samples per optimizer step, kept whatever the size.")] = 32,
    micro_batch: Annotated[int, typer.Option(help="Samples per GPU per forward pass.")] = 4,
    queue: Annotated[str, typer.Option(help="Volcano queue to train in.")] = "default",
    fallback_queue: Annotated[str, typer.Option(help="Queue the agent may move to when the first is crowded.")] = "",
    priority_class: Annotated[str, typer.Option(help="PriorityClass of the pods; empty for none.")] = "",
    namespace: Annotated[str, typer.Option(help="Namespace of the job.")] = "default",
    max_steps: Annotated[int, typer.Option(help="Optimizer steps of the whole training.")] = 200,
    checkpoints: Annotated[
        Path | None, typer.Option(help="Checkpoint directory: the work left starts at its latest step-N.")
    ] = None,
    policy: Annotated[str, typer.Option(help=f"Who decides: {' or '.join(POLICY_NAMES)} (llm: VCPILOT_LLM_URL).")] = (
        "rules"
    ),
    name: Annotated[str, typer.Option(help="Name of the rendered VCJob.")] = "vcpilot-plan",
    image: Annotated[str, typer.Option(help="Image of the rendered VCJob.")] = DEFAULT_IMAGE,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Submit nothing (always so: the pipeline submits, not this command).")
    ] = True,
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON document and nothing else.")] = False,
    kubeconfig: Annotated[
        str, typer.Option(envvar="VCPILOT_KUBECONFIG", help="Observe this kubeconfig's cluster, not the LocalCluster.")
    ] = "",
) -> None:
    """Show what the agent would decide for a training on the current cluster, and the VCJob it would render."""
    del dry_run  # accepted so that scripts can say so; planning never submits
    try:
        request = PlanRequest(
            gpus=gpus,
            gpus_min=min_gpus,
            gpus_per_pod=gpus_per_pod,
            global_batch=global_batch,
            micro_batch=micro_batch,
            queue=queue,
            fallback_queue=fallback_queue,
            priority_class=priority_class,
            namespace=namespace,
            max_steps=max_steps,
        )
        chosen, fallback = select_policy(policy)
    except ValidationError as err:
        _fail(_flag_error(err), 2)
    except ValueError as err:
        _fail(str(err), 2)
    try:
        cluster = connect(kubeconfig or None)
    except (ValueError, ClusterError, OSError, sqlite3.Error) as err:
        _fail(f"cannot open the cluster: {err}", 1)
    observation = observe(cluster, request, checkpoints=str(checkpoints) if checkpoints else None)
    decision = decide(chosen, observation, "plan", fallback)
    try:
        job = render_job(decision, name=name, image=image)
    except ValueError as err:
        _fail(str(err), 2)
    if json_output:
        print(json.dumps({"decision": decision.model_dump(mode="json"), "vcjob": job}, indent=2))
        return
    print(decision.summary)
    print(_candidates(decision.action.candidates))
    if job is None:
        print(f"\nno VCJob: the agent would {decision.action.kind}, not train now")
    else:
        print(f"\nVCJob {name} (not submitted):")
        print(yaml.safe_dump(job, sort_keys=False).rstrip())


def render_job(decision: Decision, *, name: str, image: str) -> dict[str, Any] | None:
    """The training VCJob a Proceed or Downscale would submit (None for other actions); ValueError when invalid."""
    action = decision.action
    if not isinstance(action, Proceed | Downscale):
        return None
    observation = decision.observation
    request = observation.request
    checkpoint = observation.checkpoint.path if observation.checkpoint else request.resume_checkpoint
    job = build_training_job(
        TrainingRequest(
            name=name,
            namespace=request.namespace,
            image=image,
            command=["python", "-m", "components.finetune"],
            args=["--max-steps", str(request.max_steps)],
            total_gpus=action.gpus,
            gpus_per_pod=request.gpus_per_pod,
            micro_batch=action.micro_batch,
            grad_accum=action.grad_accum,
            global_batch=action.global_batch,
            queue=action.queue,
            priority_class=action.priority_class or None,
            avoid_nodes=request.avoid_nodes,
            resume_checkpoint=checkpoint or None,
        )
    )
    return job.to_dict()


def _candidates(candidates: list[Candidate]) -> str:
    if not candidates:
        return "(no candidates weighed)"
    rows = [("gpus", "queue", "accum", "wait", "train", "finish", "note")]
    for c in candidates:
        timing = (f"{c.wait_s:.0f}s", f"{c.run_s:.0f}s", f"{c.finish_s:.0f}s") if c.feasible else ("-", "-", "never")
        rows.append((str(c.gpus), c.queue, str(c.grad_accum), *timing, c.note))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[-1]]) for row in rows
    )


def _flag_error(err: ValidationError) -> str:
    """A request error in the words of the flags (`--min-gpus`, not gpus_min)."""
    message = describe_validation_error(err, PlanRequest)
    for field, flag in _FLAGS.items():
        message = message.replace(field, f"--{flag}")
    return message


def _fail(message: str, code: int) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)
