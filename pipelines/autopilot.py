"""The llm-autopilot pipeline as Hera objects: the WorkflowTemplate and the CronWorkflow that runs it nightly.

    main:  check ─> detect-logs ─> gate ─(trigger)─> finetune ─> loadtest ─> evaluate ─> release  onExit: on-exit
    finetune = train-with-recovery:  plan ─> train ─(Failed)─> diagnose ─> recurse (retry, replan) | give-up (abort)
                                          └─> start-deadline (beside train: deletes a gang pending at its deadline)

Heavy steps (detect-logs, loadtest, evaluate) are small DAGs `plan ─> run`: a script renders the VCJob from
pydantic models (`pipelines.vcjobs`) and the shared `vcjob` resource template creates it and waits for Volcano.
Light steps are Hera runner scripts (`pipelines.steps`, and `pipelines.steps_training` for plan and diagnose,
where the agent decides). Step inputs that share a workflow parameter's name are bound to it here, so every
task passes exactly the inputs its template declares.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from hera.workflows import DAG, CronWorkflow, Parameter, Resource, Task, WorkflowTemplate
from hera.workflows.io import Input
from hera.workflows.models import PersistentVolumeClaimVolumeSource, ValueFrom, Volume, WorkflowTemplateRef

from pipelines import steps, steps_training
from pipelines.parameters import DEFAULT_IMAGE, MODES, PARAMETERS, POLICIES, TEMPLATE_NAME

__all__ = [
    "CRON_NAME",
    "DEFAULT_IMAGE",
    "MODES",
    "PARAMETERS",
    "POLICIES",
    "SERVICE_ACCOUNT",
    "TEMPLATE_NAME",
    "build_cron_workflow",
    "build_workflow_template",
]

SERVICE_ACCOUNT = "vcpilot-workflow"  # deploy/rbac/serviceaccount.yaml
CRON_NAME = "llm-autopilot-nightly"
_LABELS = {"app.kubernetes.io/name": TEMPLATE_NAME, "app.kubernetes.io/part-of": "vcpilot"}


def _package_version() -> str:
    try:
        return version("vcpilot")
    except PackageNotFoundError:  # a checkout that is not installed
        return "unknown"


# What the compiled template records as its version: the package it was compiled from (the image tag says the rest).
TEMPLATE_VERSION = f"vcpilot-{_package_version()}"


_WORKFLOW_VALUES = {
    "workflow-name": "{{workflow.name}}",
    "workflow-uid": "{{workflow.uid}}",
    "workflow-labels": "{{workflow.labels.json}}",  # the trigger is read from them (pipelines/run_identity.py)
    "template-version": TEMPLATE_VERSION,
    "namespace": "{{workflow.namespace}}",
    **{p.name: f"{{{{workflow.parameters.{p.name}}}}}" for p in PARAMETERS if p.name},
}
# A failed resource node has no outputs, so the DAG reports the model of whichever attempt succeeded: this
# attempt's (plan fixed its path) or the recursion's. `tasks.X.status` and expr's lazy `?:` make it one
# expression; Argo v4 puts a nil placeholder for the outputs of the omitted branch, which `?:` never reads.
_MODEL_URI = (
    "tasks.train.status == 'Succeeded' ? tasks.plan.outputs.parameters['model-uri'] "
    ": tasks.recurse.outputs.parameters['model-uri']"
)


def _inputs_of(step: Callable[..., Any]) -> list[Parameter]:
    """The input parameters of a step's template, from the `Input` model its function takes."""
    (parameter,) = inspect.signature(step).parameters.values()
    model = parameter.annotation
    assert inspect.isclass(model) and issubclass(model, Input), f"{step.__name__} must take one Input model"
    return model._get_parameters()


def _arguments(step: Callable[..., Any], **values: str) -> dict[str, str]:
    """Bind every input of `step`: the given values (by Python name), else the workflow value of that name."""
    given = {name.replace("_", "-"): value for name, value in values.items()}
    arguments = {}
    for parameter in _inputs_of(step):
        name = parameter.name or ""
        value = given.pop(name, _WORKFLOW_VALUES.get(name))
        if value is None:
            raise ValueError(f"{step.__name__}: nothing binds its input {name!r}")
        arguments[name] = value
    if given:
        raise ValueError(f"{step.__name__} has no input named {', '.join(sorted(given))}")
    return arguments


def _task_outputs(task: str, *names: str) -> list[Parameter]:
    """DAG outputs that hoist task `task`'s output parameters of the same names."""
    return [
        Parameter(name=name, value_from=ValueFrom(parameter=f"{{{{tasks.{task}.outputs.parameters.{name}}}}}"))
        for name in names
    ]


def _vcjob() -> Resource:
    """Create a Volcano Job from a rendered manifest and wait until Volcano finishes it."""
    return Resource(
        name="vcjob",
        inputs=[Parameter(name="manifest", description="The VCJob as JSON, rendered by a plan step")],
        action="create",
        manifest="{{inputs.parameters.manifest}}",
        set_owner_reference=True,
        success_condition="status.state.phase == Completed",
        failure_condition="status.state.phase in (Failed,Aborted,Terminated)",
        outputs=[
            Parameter(name="job-name", value_from=ValueFrom(json_path="{.metadata.name}")),
            Parameter(name="phase", value_from=ValueFrom(json_path="{.status.state.phase}")),
        ],
    )


def _job_step(name: str, plan: Callable[..., Any], vcjob: Resource, inputs: tuple[str, ...] = ()) -> DAG:
    """A heavy step: `plan` renders the VCJob, `run` creates it; outputs the job's name and report path."""
    own = {input_name: f"{{{{inputs.parameters.{input_name}}}}}" for input_name in inputs}
    with DAG(
        name=name,
        inputs=[Parameter(name=input_name) for input_name in inputs] or None,
        outputs=_task_outputs("plan", "job-name", "report"),
    ) as dag:
        plan(name="plan", arguments=_arguments(plan, **own))
        vcjob(
            name="run", depends="plan.Succeeded", arguments={"manifest": "{{tasks.plan.outputs.parameters.manifest}}"}
        )
    return dag


def _train_with_recovery(vcjob: Resource) -> DAG:
    """One training attempt; on failure diagnose it, then recurse with attempt + 1 or end in a failing leaf.

    start-deadline runs beside train: a gang still pending at the plan's deadline is deleted, train fails, and
    diagnose (which waits for start-deadline's verdict) answers `replan`, so the recursion plans again.
    """
    # Every attempt plans from the GPUs the run asks for: a retry downscaled off a dead node may scale back up
    # once the node is back, and the plan respects the nodes the diagnosis says to avoid.
    state = ("attempt", "avoid-nodes", "resume-checkpoint", "replans", "replan-reason")
    own = {name: f"{{{{inputs.parameters.{name}}}}}" for name in state}
    diagnosis = "{{tasks.diagnose.outputs.parameters.%s}}"
    with DAG(
        name="train-with-recovery",
        inputs=[Parameter(name=name) for name in state],
        outputs=[Parameter(name="model-uri", value_from=ValueFrom(expression=_MODEL_URI))],
    ) as dag:
        plan = steps_training.plan_training
        plan(name="plan", arguments=_arguments(plan, **own, gpus="{{workflow.parameters.gpus-wanted}}"))
        vcjob(
            name="train", depends="plan.Succeeded", arguments={"manifest": "{{tasks.plan.outputs.parameters.manifest}}"}
        )
        steps_training.start_deadline(
            name="start-deadline",
            depends="plan.Succeeded",
            arguments=_arguments(
                steps_training.start_deadline,
                job_name="{{tasks.plan.outputs.parameters.job-name}}",
                queue="{{tasks.plan.outputs.parameters.queue}}",
                start_deadline_s="{{tasks.plan.outputs.parameters.start-deadline-s}}",
            ),
        )
        steps_training.diagnose(
            name="diagnose",
            depends="train.Failed && start-deadline.Succeeded",
            arguments=_arguments(
                steps_training.diagnose,
                job_name="{{tasks.plan.outputs.parameters.job-name}}",
                # The size this attempt trained at (the agent may have downscaled it), not the one asked for.
                gpus="{{tasks.plan.outputs.parameters.gpus}}",
                attempt=own["attempt"],
                avoid_nodes=own["avoid-nodes"],
                resume_checkpoint=own["resume-checkpoint"],
                replans=own["replans"],
                start_outcome="{{tasks.start-deadline.outputs.parameters.outcome}}",
                start_reason="{{tasks.start-deadline.outputs.parameters.reason}}",
            ),
        )
        Task(
            name="recurse",
            template="train-with-recovery",
            depends="diagnose.Succeeded",
            when=f"'{diagnosis % 'action'}' != 'abort'",
            arguments={
                "attempt": diagnosis % "next-attempt",
                "avoid-nodes": diagnosis % "avoid-nodes",
                "resume-checkpoint": diagnosis % "resume-checkpoint",
                "replans": diagnosis % "replans",
                "replan-reason": diagnosis % "replan-reason",
            },
        )
        steps_training.give_up(
            name="give-up",
            depends="diagnose.Succeeded",
            when=f"'{diagnosis % 'action'}' == 'abort'",
            arguments=_arguments(steps_training.give_up, reason=diagnosis % "reason"),
        )
    return dag


def _main() -> DAG:
    """The chain; heavy steps are referenced by template name and defined after it, so the file reads top-down."""
    model_uri = "{{tasks.finetune.outputs.parameters.model-uri}}"
    with DAG(name="main") as dag:
        # Argo runs a submission whatever its values (it does not hold them to the enums): check them first.
        steps.check_parameters(name="check-parameters", arguments={"parameters": "{{workflow.parameters.json}}"})
        Task(name="detect-logs", template="detect-logs", depends="check-parameters.Succeeded")
        steps.gate(
            name="gate",
            depends="detect-logs.Succeeded",
            arguments=_arguments(steps.gate, report="{{tasks.detect-logs.outputs.parameters.report}}"),
        )
        Task(
            name="finetune",
            template="train-with-recovery",
            depends="gate.Succeeded",
            when="'{{tasks.gate.outputs.parameters.trigger}}' == 'true'",
            arguments={
                "attempt": "1",
                "avoid-nodes": "[]",
                "resume-checkpoint": "{{workflow.parameters.resume-checkpoint}}",
                "replans": "0",
                "replan-reason": "",
            },
        )
        Task(name="loadtest", template="loadtest", depends="finetune.Succeeded", arguments={"model-uri": model_uri})
        Task(name="evaluate", template="evaluate", depends="loadtest.Succeeded", arguments={"model-uri": model_uri})
        steps.release(
            name="release",
            depends="evaluate.Succeeded",
            arguments=_arguments(
                steps.release,
                model_uri=model_uri,
                loadtest_report="{{tasks.loadtest.outputs.parameters.report}}",
                evaluate_report="{{tasks.evaluate.outputs.parameters.report}}",
            ),
        )
    return dag


def build_workflow_template() -> WorkflowTemplate:
    """The `llm-autopilot` WorkflowTemplate: detect → gate → finetune → loadtest → evaluate → release."""
    with WorkflowTemplate(
        name=TEMPLATE_NAME,
        labels=_LABELS,
        annotations={
            "workflows.argoproj.io/description": (
                "Reads the service's logs, fine-tunes the model on Volcano when they drift (recovering from "
                "infrastructure faults), load-tests and evaluates the candidate, and releases it in MLflow."
            ),
        },
        entrypoint="main",
        on_exit="on-exit",
        # deploy/rbac/: exactly what the steps do (VCJobs in this namespace, reads of pods, queues and nodes).
        service_account_name=SERVICE_ACCOUNT,
        arguments=list(PARAMETERS),
        volumes=[
            Volume(
                name=steps.WORKSPACE_VOLUME,
                persistent_volume_claim=PersistentVolumeClaimVolumeSource(
                    claim_name="{{workflow.parameters.workspace-pvc}}"
                ),
            )
        ],
    ) as template:
        _main()
        with DAG(name="on-exit"):  # a DAG so that the script gets {{workflow.status}} as a plain argument
            steps.finalize(name="finalize", arguments=_arguments(steps.finalize, workflow_status="{{workflow.status}}"))
        vcjob = _vcjob()  # one resource template for every VCJob: create, then wait for Volcano's verdict
        _job_step("detect-logs", steps.plan_detect, vcjob)
        _train_with_recovery(vcjob)
        _job_step("loadtest", steps.plan_loadtest, vcjob, inputs=("model-uri",))
        _job_step("evaluate", steps.plan_evaluate, vcjob, inputs=("model-uri",))
    return template


def build_cron_workflow() -> CronWorkflow:
    """`llm-autopilot-nightly`: runs the template at 02:00 UTC, never two at once, with its default parameters."""
    return CronWorkflow(
        name=CRON_NAME,
        labels=_LABELS,
        schedules=["0 2 * * *"],
        timezone="UTC",
        concurrency_policy="Forbid",
        # A run missed by more than an hour (controller down) is skipped rather than started late in the day.
        starting_deadline_seconds=3600,
        successful_jobs_history_limit=7,
        failed_jobs_history_limit=7,
        workflow_template_ref=WorkflowTemplateRef(name=TEMPLATE_NAME),
    )
