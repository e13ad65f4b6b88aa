"""The VCJob of the training attempt the agent decided on: the one rendering the plan step and `vcpilot plan` share.

It imports no Hera, so that `vcpilot plan` shows what the plan step (`pipelines.steps_training.plan_training`)
would submit without paying for Hera's models at start-up (about 1 s; benchmarks/cli.py). The size, queue,
priority class and accumulation come from the decision, the rest of the attempt (its number, pod size, steps,
nodes to avoid, checkpoint) from the request the agent decided on, so nothing the decision rests on is read from
anywhere else.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from agent.actions import Downscale, Proceed
from agent.policy import Decision
from components.volcano.models import Job
from pipelines.vcjobs import JobContext, TrainingShape, build_training_job_for

__all__ = ["render_training_job"]


def render_training_job(
    context: JobContext, decision: Decision, *, base_model: str, checkpoint_every: int
) -> Job | None:
    """The VCJob of this attempt at the size the agent decided; None when it decided not to train now."""
    action = decision.action
    if not isinstance(action, Proceed | Downscale):
        return None
    request = decision.observation.request
    shape = TrainingShape(
        attempt=request.attempt,
        gpus=action.gpus,
        gpus_per_pod=request.gpus_per_pod,
        micro_batch=action.micro_batch,
        grad_accum=action.grad_accum,
        global_batch=action.global_batch,
        queue=action.queue,
        avoid_nodes=request.avoid_nodes,
        resume_checkpoint=request.resume_checkpoint,
    )
    context = context.model_copy(update={"queue": action.queue, "priority_class": action.priority_class})
    return build_training_job_for(
        context,
        shape,
        base_model=base_model,
        # The fine-tuning set is the one detect-logs curated from corrected requests, next to its report.
        dataset_dir=str(PurePosixPath(context.paths.detect_report).parent),
        max_steps=request.max_steps,
        # The agent's interval for this size and fault rate when it chose one, else the run's parameter.
        checkpoint_every=action.checkpoint_every or checkpoint_every,
    )
