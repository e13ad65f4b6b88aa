"""`vcpilot plan`: what would the pipeline's plan step do now? The agent's decision and its VCJob, submitting nothing.

It observes the current cluster (LocalCluster under VCPILOT_HOME, or a kubeconfig's), asks the chosen policy to
plan a training of the given size, and prints the decision — action, rationale, every candidate weighed — with
the VCJob that the plan step (`pipelines.steps_training.plan_training`) would render for the same parameters.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from components.entry import JsonOption, flag_name
from components.errors import EXIT_UNAVAILABLE, InputError, Unavailable, VcpilotError, explain
from components.files import dump_yaml

if TYPE_CHECKING:
    from pydantic import ValidationError

    from agent.actions import Candidate

__all__ = ["PolicyChoice", "plan_command"]

# agent.policies.POLICY_NAMES, written out so that typer shows them as the choices.
PolicyChoice = Literal["rules", "llm"]

# The request's fields (PlanRequest) and the plan step's input fields (TrainingPlanInput), which its messages may
# name, by this command's parameter names.
_PARAMS = {
    "gpus_min": "min_gpus",
    "gpus-min": "min_gpus",
    "train_max_steps": "max_steps",
    "workflow_name": "workflow",
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
    checkpoint_every: Annotated[int, typer.Option(min=1, help="Steps between checkpoints.")] = 50,
    base_model: Annotated[str, typer.Option(help="Model to fine-tune: a Hugging Face id, a path or 'tiny'.")] = "tiny",
    workflow: Annotated[
        str, typer.Option(help="The run: the VCJob is <workflow>-train-1, its checkpoints in the run's directory.")
    ] = "vcpilot-plan",
    workspace: Annotated[
        str,
        typer.Option(
            envvar="VCPILOT_WORKSPACE",
            help="Workspace of the run: the agent observes <workspace>/runs/<workflow>/checkpoints.",
        ),
    ] = "/workspace",
    workspace_pvc: Annotated[str, typer.Option(help="PVC mounted at the workspace; empty for none.")] = "",
    resume_checkpoint: Annotated[str, typer.Option(help="A step-N checkpoint the training must start from.")] = "",
    policy: Annotated[
        PolicyChoice, typer.Option(help="Who decides (llm: at VCPILOT_LLM_URL, the rules behind it).")
    ] = "rules",
    image: Annotated[
        str | None, typer.Option(help="Image of the rendered VCJob (default: the pipeline's image parameter).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Submit nothing (always so: the pipeline submits, not this command).")
    ] = True,
    json_output: JsonOption = False,
    kubeconfig: Annotated[
        str, typer.Option(envvar="VCPILOT_KUBECONFIG", help="Observe this kubeconfig's cluster, not the LocalCluster.")
    ] = "",
) -> None:
    """Show what the agent would decide for a training on the current cluster, and the VCJob it would render."""
    del dry_run  # accepted so that scripts can say so; planning never submits
    import sqlite3

    from pydantic import ValidationError

    from agent.observation import PlanRequest
    from agent.observe import observe
    from agent.policies import decide, select_policy
    from components.volcano.connect import connect
    from pipelines.run_identity import workflow_run_of
    from pipelines.training_plan import render_training_job
    from pipelines.vcjobs import DEFAULT_IMAGE, JobContext

    _check_names(workflow, workspace_pvc, image, namespace, base_model)
    _check_paths(workspace, resume_checkpoint)
    # The plan step's request and job context (pipelines.steps_training.TrainingPlanInput) for a run of attempt
    # 1 that Argo did not label, built without Hera, which that step's input is made of.
    try:
        chosen, fallback = select_policy(policy)
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
            resume_checkpoint=resume_checkpoint,
        )
    except ValidationError as err:
        raise _flag_error(err) from None
    except ValueError as err:  # the request's checks run in pydantic validators, which speak ValueError
        raise InputError(_flags_named(str(err))) from None
    context = JobContext.for_run(
        workflow_run_of(name=workflow, namespace=namespace, image=image or DEFAULT_IMAGE),
        workspace=workspace,
        workspace_pvc=workspace_pvc,
        queue=queue,
        priority_class=priority_class,
    )
    try:
        cluster = connect(kubeconfig or None)
    except VcpilotError as err:
        sentence, code = explain(err)
        raise (Unavailable if code == EXIT_UNAVAILABLE else InputError)(
            f"cannot open the cluster: {sentence}"
        ) from None
    except (OSError, sqlite3.Error) as err:  # the LocalCluster's state under VCPILOT_HOME
        raise Unavailable(f"cannot open the cluster: {err}") from None
    # A queue or priority class that is not there: an InputError naming the ones that are; a ClusterError when
    # the cluster cannot tell. Either reaches the entry point as its one sentence.
    request.check_names([q.name for q in cluster.queues()], cluster.priority_classes())
    observation = observe(cluster, request, checkpoints=context.paths.checkpoints)
    decision = decide(chosen, observation, "plan", fallback)
    try:
        job = render_training_job(context, decision, base_model=base_model, checkpoint_every=checkpoint_every)
    except ValueError as err:  # the manifest checks (components.volcano.validation) speak ValueError too
        raise InputError(_flags_named(str(err))) from None
    manifest: dict[str, Any] | None = job.to_dict() if job else None
    if json_output:
        print(json.dumps({"decision": decision.model_dump(mode="json"), "vcjob": manifest}, indent=2))
        return
    print(decision.summary)
    print(_candidates(decision.action.candidates))
    if job is None:
        print(f"\nno VCJob: the agent would {decision.action.kind}, not train now")
    else:
        print(f"\nVCJob {job.metadata.name} (not submitted):")
        print(dump_yaml(manifest).rstrip())


def _check_names(workflow: str, workspace_pvc: str, image: str | None, namespace: str, base_model: str) -> None:
    """The names the request does not check: they would reach the VCJob, refused on submit, pull or load."""
    from components.finetune.base_model import check_base_model
    from components.images import check_image
    from components.names import check_namespace, is_dns1123_subdomain
    from pipelines.vcjobs import check_workflow_name

    try:
        check_workflow_name(workflow)
    except ValueError as err:
        raise InputError(f"--workflow {err}") from None
    check_namespace(namespace, "--namespace")
    if workspace_pvc and not is_dns1123_subdomain(workspace_pvc):
        raise InputError(
            f"--workspace-pvc {workspace_pvc!r} is not a PersistentVolumeClaim name: give lower-case letters, "
            "digits, '-' and '.', at most 253 characters, or leave it empty for none"
        )
    try:
        check_base_model(base_model, "--base-model")
        if image is not None:
            check_image(image, "--image")
    except ValueError as err:
        raise InputError(str(err)) from None


def _check_paths(workspace: str, resume_checkpoint: str) -> None:
    """The run's paths, by the rules `vcpilot run` holds its parameters to (pipelines.parameters)."""
    from pipelines.workspace import check_resume_checkpoint, check_workspace

    try:
        check_workspace(workspace, "--workspace")
        check_resume_checkpoint(resume_checkpoint, "--resume-checkpoint")
    except ValueError as err:
        raise InputError(str(err)) from None


def _candidates(candidates: list[Candidate]) -> str:
    if not candidates:
        return "(no candidates weighed)"
    rows = [("gpus", "queue", "accum", "wait", "train", "finish", "note")]
    for c in candidates:
        estimated = c.feasible or c.wait_s > 0  # a candidate ruled out, not impossible, keeps its estimate
        timing = (f"{c.wait_s:.0f}s", f"{c.run_s:.0f}s", f"{c.finish_s:.0f}s") if estimated else ("-", "-", "never")
        rows.append((str(c.gpus), c.queue, str(c.grad_accum), *timing, c.note))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[-1]]) for row in rows
    )


def _flag_error(err: ValidationError) -> InputError:
    """A request error in the words of the options (`--min-gpus`, not gpus_min), without a colon after them."""
    from agent.observation import PlanRequest
    from components.volcano.validation import describe_validation_error

    message = describe_validation_error(err, PlanRequest)
    field, sep, detail = message.partition(": ")
    flag = flag_name(_PARAMS.get(field, field)) if sep else None
    if flag is None:
        return InputError(_flags_named(message))
    if detail.startswith("value must"):
        return InputError(f"{flag} {detail.removeprefix('value ')}")
    return InputError(f"{flag} is invalid ({detail})")


def _flags_named(message: str) -> str:
    """A check's sentence about the request's fields with each field named as its option (`--min-gpus 4`)."""
    import re

    def option(match: re.Match[str]) -> str:
        return flag_name(_PARAMS.get(match[0], match[0].replace("-", "_"))) or match[0]

    # A compound name (gpus-min, max_steps), or a plain one right before its number (gpus 2) or a product (gpus × …).
    return re.sub(r"(?<![\w-])(?:[a-z]+(?:[_-][a-z]+)+|[a-z]+(?= -?\d| × ))(?![\w-])", option, message)
