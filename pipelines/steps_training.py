"""The steps of the finetune recursion, where the agent decides: plan → train → diagnose → recurse | give-up.

`plan_training` asks the agent how this attempt trains (how many GPUs, which queue, what accumulation keeps the
global batch), waiting a bounded time when nothing can start yet, and renders the attempt's VCJob; `diagnose`
asks it what a failed attempt calls for (retry from the latest complete checkpoint off the bad nodes, maybe on
fewer GPUs, or abort). Both observe the cluster with `pipelines.steps.connect_cluster`, write the decision to
`runs/<workflow>/decisions/` (and MLflow) and hand the action to the DAG as output parameters.
"""

# No `from __future__ import annotations` here: Hera reads the step functions' annotations at runtime.
from pathlib import Path
from typing import Annotated, Literal

from hera.workflows import Parameter, script
from hera.workflows.io import Input, Output

from agent.actions import Abort, Downscale, Proceed, RetryFromCheckpoint
from agent.guardrails import Guardrails
from agent.observation import PlanRequest, Throughput
from agent.observe import measured_throughput, observe
from agent.policies import decide, plan_within, select_policy
from agent.policy import Decision, Policy
from agent.records import decisions_dir, read_history, write_decision
from agent.tools import ToolContext
from components.tracking.adapter import DEFAULT_EXPERIMENT
from components.volcano.cluster import Cluster
from components.volcano.models import Job
from pipelines.steps import RUNNER, JobStepInput, connect_cluster, for_people, keep_manifest, manifest_json, tell_argo
from pipelines.training_plan import render_training_job

__all__ = [
    "DiagnoseInput",
    "Diagnosis",
    "GiveUpInput",
    "TrainingPlan",
    "TrainingPlanInput",
    "TrainingRunInput",
    "diagnose",
    "give_up",
    "plan_training",
]


# How long diagnose lets a failed attempt's remaining pods end, or their nodes turn NotReady, before it judges:
# Kubernetes' node-monitor-grace-period (40-50 s) plus taint eviction, with room (agent.observe.unsettled).
DIAGNOSE_SETTLE_S = 120.0


class TrainingRunInput(JobStepInput):
    """What plan and diagnose share: the recursion's state, the training's size and batch, the agent's policy."""

    attempt: int = 1
    gpus: int
    avoid_nodes: Annotated[list[str], Parameter(name="avoid-nodes")] = []
    resume_checkpoint: Annotated[str, Parameter(name="resume-checkpoint")] = ""
    gpus_min: Annotated[int, Parameter(name="gpus-min")] = 1
    gpus_per_pod: Annotated[int, Parameter(name="gpus-per-pod")] = 1
    global_batch: Annotated[int, Parameter(name="global-batch")]
    micro_batch: Annotated[int, Parameter(name="micro-batch")]
    fallback_queue: Annotated[str, Parameter(name="fallback-queue")] = ""
    train_max_steps: Annotated[int, Parameter(name="train-max-steps")]
    max_recovery_attempts: Annotated[int, Parameter(name="max-recovery-attempts")] = 3
    agent_policy: Annotated[Literal["rules", "llm"], Parameter(name="agent-policy")] = "rules"

    def plan_request(self) -> PlanRequest:
        """The request the agent decides on; a size the batch cannot split is a one-sentence error."""
        return PlanRequest(
            gpus=self.gpus,
            gpus_min=self.gpus_min,
            gpus_per_pod=self.gpus_per_pod,
            global_batch=self.global_batch,
            micro_batch=self.micro_batch,
            queue=self.queue,
            fallback_queue=self.fallback_queue,
            priority_class=self.priority_class,
            namespace=self.namespace,
            max_steps=self.train_max_steps,
            attempt=self.attempt,
            max_attempts=self.max_recovery_attempts,
            avoid_nodes=self.avoid_nodes,
            resume_checkpoint=self.resume_checkpoint,
        )

    @property
    def decisions(self) -> Path:
        """Where this run's decision records are."""
        return decisions_dir(self.workspace, self.workflow_name)

    def throughput(self) -> Throughput | None:
        """The speed the earlier attempts of this run measured, when MLflow has it."""
        experiment = self.mlflow_experiment or DEFAULT_EXPERIMENT
        return measured_throughput(self.mlflow_tracking_uri, experiment, self.workflow_name)

    def policy(self, cluster: Cluster | None) -> tuple[Policy, str]:
        """The policy `agent-policy` names and why another stands in; the LLM's read-only tools see `cluster`."""
        tools = None
        if self.agent_policy == "llm" and cluster is not None:
            tools = ToolContext(cluster, Guardrails.from_env(), Path(self.context().paths.checkpoints))
        return select_policy(self.agent_policy, tools_context=tools)

    def record(self, decision: Decision) -> None:
        """Keep the decision in the workspace and, when tracking is on, in MLflow."""
        write_decision(
            decision,
            self.decisions,
            run=self.workflow_run(),
            tracking_uri=self.mlflow_tracking_uri,
            experiment=self.mlflow_experiment or None,
            spool_dir=self.context().paths.tracking,
        )


# ---- plan ----------------------------------------------------------------------------------------------


class TrainingPlanInput(TrainingRunInput):
    """One attempt to plan: the run's settings, the model and data, and how long planning may wait."""

    base_model: Annotated[str, Parameter(name="base-model")]
    checkpoint_every: Annotated[int, Parameter(name="checkpoint-every")]
    max_plan_wait_s: Annotated[float, Parameter(name="max-plan-wait-s")] = 0

    def training_job(self, decision: Decision) -> Job | None:
        """The VCJob of this attempt at the size the agent decided; None when it decided not to train now.

        Rendered by `pipelines.training_plan`, which `vcpilot plan` calls too, without Hera.
        """
        return render_training_job(
            self.context(), decision, base_model=self.base_model, checkpoint_every=self.checkpoint_every
        )


class TrainingPlan(Output):
    """The training VCJob and the decision behind it."""

    manifest: str
    job_name: Annotated[str, Parameter(name="job-name")]
    action: Literal["proceed", "downscale"]
    gpus: int
    micro_batch: Annotated[int, Parameter(name="micro-batch")]
    grad_accum: Annotated[int, Parameter(name="grad-accum")]
    queue: str
    model_uri: Annotated[str, Parameter(name="model-uri")]
    reason: str


@script(**RUNNER)
@for_people
def plan_training(inputs: TrainingPlanInput) -> TrainingPlan:
    """Ask the agent how this attempt trains, record why, and render its VCJob with a name fixed in advance."""
    request = inputs.plan_request()
    cluster = connect_cluster()
    context = inputs.context()
    policy, fallback = inputs.policy(cluster)
    throughput = inputs.throughput() if inputs.attempt > 1 else None  # attempt 1 has measured nothing yet
    decision = plan_within(
        lambda: observe(cluster, request, checkpoints=context.paths.checkpoints, throughput=throughput),
        policy,
        inputs.max_plan_wait_s,
        fallback=fallback,
    )
    inputs.record(decision)
    action = decision.action
    job = inputs.training_job(decision)
    if job is None or not isinstance(action, Proceed | Downscale):
        why = action.reason if isinstance(action, Abort) else action.rationale
        raise ValueError(f"the agent stops this run before training: {why}")
    keep_manifest(context.paths, job.to_dict())
    resume = f", resuming from {request.resume_checkpoint}" if request.resume_checkpoint else ""
    reason = f"attempt {inputs.attempt}{resume}: {decision.summary}"
    return TrainingPlan(
        manifest=manifest_json(job.to_dict()),
        job_name=job.metadata.name or "",
        action=action.kind,
        gpus=action.gpus,
        micro_batch=action.micro_batch,
        grad_accum=action.grad_accum,
        queue=action.queue,
        model_uri=context.paths.model(inputs.attempt),
        reason=reason,
        result=reason,
    )


# ---- diagnose → recurse | give-up -----------------------------------------------------------------------


class DiagnoseInput(TrainingRunInput):
    """The failed attempt: its VCJob (named by plan, as a failed resource node has no outputs) and its size."""

    job_name: Annotated[str, Parameter(name="job-name")]


class Diagnosis(Output):
    """Retry (the next attempt's size, nodes to avoid, checkpoint) or abort, and why."""

    action: Literal["retry", "abort"]
    next_attempt: Annotated[int, Parameter(name="next-attempt")]
    gpus: int
    micro_batch: Annotated[int, Parameter(name="micro-batch")]
    grad_accum: Annotated[int, Parameter(name="grad-accum")]
    queue: str
    avoid_nodes: Annotated[list[str], Parameter(name="avoid-nodes")]
    resume_checkpoint: Annotated[str, Parameter(name="resume-checkpoint")]
    reason: str


@script(**RUNNER)
@for_people
def diagnose(inputs: DiagnoseInput) -> Diagnosis:
    """Ask the agent what the failed attempt calls for, given how the earlier ones failed; record why."""
    request = inputs.plan_request()
    cluster = connect_cluster()
    policy, fallback = inputs.policy(cluster)
    history = [h for h in read_history(inputs.decisions) if h.attempt < inputs.attempt]
    observation = observe(
        cluster,
        request,
        job_name=inputs.job_name,
        checkpoints=inputs.context().paths.checkpoints,
        history=history,
        throughput=inputs.throughput(),
        settle_s=DIAGNOSE_SETTLE_S,
    )
    decision = decide(policy, observation, "diagnose", fallback)
    inputs.record(decision)
    action = decision.action
    if isinstance(action, RetryFromCheckpoint):
        return Diagnosis(
            action="retry",
            next_attempt=inputs.attempt + 1,
            gpus=action.gpus,
            micro_batch=action.micro_batch,
            grad_accum=action.grad_accum,
            queue=action.queue,
            avoid_nodes=action.avoid_nodes,
            resume_checkpoint=action.checkpoint,
            reason=action.rationale,
            result=decision.summary,
        )
    if isinstance(action, Abort):
        return Diagnosis(
            action="abort",
            next_attempt=inputs.attempt + 1,
            gpus=request.gpus,
            micro_batch=request.micro_batch,
            grad_accum=request.global_batch // (request.gpus * request.micro_batch),
            queue=request.queue,
            avoid_nodes=request.avoid_nodes,
            resume_checkpoint=request.resume_checkpoint,
            reason=action.reason,
            result=decision.summary,
        )
    raise ValueError(f"the {decision.policy} policy answered {action.kind} to a failed attempt; only retry or abort do")


class GiveUpInput(Input):
    """Why the pipeline stops."""

    reason: str


@script(**RUNNER)
def give_up(inputs: GiveUpInput) -> Output:
    """Fail on purpose: an abort must end in a failing leaf, or Argo reports the DAG as Succeeded."""
    tell_argo(f"giving up: {inputs.reason}")
    return Output(exit_code=1, result=f"giving up: {inputs.reason}")
