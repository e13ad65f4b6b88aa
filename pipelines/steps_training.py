"""The steps of the finetune recursion, where the agent decides: plan → train → diagnose → recurse | give-up.

Beside train, `start_deadline` watches the attempt's gang: one still pending at the plan's start deadline is
deleted (nothing ran, nothing is lost), so train fails and diagnose answers `replan` — plan again, neither a
failure nor a retry of the budget — at most `RulesConfig.max_replans` times a run.

`plan_training` asks the agent how this attempt trains (how many GPUs, which queue, what accumulation keeps the
global batch), waiting a bounded time when nothing can start yet, and renders the attempt's VCJob; `diagnose`
asks it what a failed attempt calls for (retry from the latest complete checkpoint off the bad nodes, maybe on
fewer GPUs, or abort). Both observe the cluster with `pipelines.steps.connect_cluster`, write the decision to
`runs/<workflow>/decisions/` (and MLflow) and hand the action to the DAG as output parameters.
"""

# No `from __future__ import annotations` here: Hera reads the step functions' annotations at runtime.
import time
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
from agent.policy_rules import RulesConfig
from agent.records import decisions_dir, read_history, write_decision
from agent.tools import ToolContext
from components.tracking.adapter import DEFAULT_EXPERIMENT
from components.volcano.cluster import Cluster, ClusterError, JobNotFound
from components.volcano.models import Job
from pipelines.steps import RUNNER, JobStepInput, connect_cluster, for_people, keep_manifest, manifest_json, tell_argo
from pipelines.training_plan import render_training_job

__all__ = [
    "DiagnoseInput",
    "Diagnosis",
    "GiveUpInput",
    "StartDeadline",
    "StartDeadlineInput",
    "TrainingPlan",
    "TrainingPlanInput",
    "TrainingRunInput",
    "diagnose",
    "give_up",
    "plan_training",
    "start_deadline",
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
    # Attempts deleted at their start deadline so far: each took an attempt number but is not a failure.
    replans: int = 0

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
            max_attempts=self.max_recovery_attempts + self.replans,
            avoid_nodes=self.avoid_nodes,
            resume_checkpoint=self.resume_checkpoint,
            replans=self.replans,
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
    # Why this attempt is planned again (the last one's gang did not start in time); empty on a first plan.
    replan_reason: Annotated[str, Parameter(name="replan-reason")] = ""

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
    start_deadline_s: Annotated[float, Parameter(name="start-deadline-s")]
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
        say=lambda line: print(line, flush=True),
    )
    if inputs.replan_reason:
        why = f"{inputs.replan_reason}; {decision.action.rationale}"
        decision = decision.model_copy(update={"action": decision.action.model_copy(update={"rationale": why})})
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
        start_deadline_s=RulesConfig().start_deadline_s(action, request, inputs.replans),
        reason=reason,
        result=reason,
    )


# ---- start-deadline, beside train --------------------------------------------------------------------


class StartDeadlineInput(Input):
    """The attempt's VCJob and how long its gang may stay pending (0: as long as it takes)."""

    job_name: Annotated[str, Parameter(name="job-name")]
    namespace: str = "default"
    queue: str
    start_deadline_s: Annotated[float, Parameter(name="start-deadline-s")]


class StartDeadline(Output):
    """`started` (or `finished`, `unwatched`: train decides) or `expired`: the pending job was deleted, and why."""

    outcome: Literal["started", "expired", "unwatched"]
    reason: str


@script(**RUNNER)
@for_people
def start_deadline(inputs: StartDeadlineInput) -> StartDeadline:
    """Watch the attempt until its gang starts; delete it if it is still pending at the deadline."""
    if inputs.start_deadline_s <= 0:
        return _verdict("unwatched", "no start deadline: waiting as long as the gang takes")
    cluster = connect_cluster()
    if cluster is None:
        return _verdict("unwatched", "the cluster cannot be read: train waits for the job")
    began = time.monotonic()
    poll_s = min(10.0, inputs.start_deadline_s / 20)
    while True:
        try:
            phase = cluster.get(inputs.job_name, inputs.namespace).phase
        except JobNotFound:  # deleted by someone else; train fails on its own
            return _verdict("unwatched", f"{inputs.job_name} is gone")
        except ClusterError as err:
            return _verdict("unwatched", f"the cluster cannot be read ({err}): train waits")
        waited = time.monotonic() - began
        if phase != "Pending":  # Running or past it: the gang started (or Volcano ended it), train judges
            return _verdict("started", f"{phase} after {_minutes(waited)} min")
        if waited >= inputs.start_deadline_s:
            cluster.delete(inputs.job_name, inputs.namespace, missing_ok=True)
            reason = f"pending {_minutes(waited)} min in queue {inputs.queue}, re-planned"
            tell_argo(reason)
            return _verdict("expired", reason)
        time.sleep(poll_s)


def _verdict(outcome: Literal["started", "expired", "unwatched"], reason: str) -> StartDeadline:
    """The step's answer; its reason is its result too, so the run's tree says what the watch saw."""
    return StartDeadline(outcome=outcome, reason=reason, result=reason)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f}" if seconds >= 60 else f"{seconds / 60:.1f}"


# ---- diagnose → recurse | give-up -----------------------------------------------------------------------


class DiagnoseInput(TrainingRunInput):
    """The failed attempt: its VCJob (named by plan, as a failed resource node has no outputs) and its size."""

    job_name: Annotated[str, Parameter(name="job-name")]
    # What start-deadline saw: `expired` means train failed because its pending job was deleted on purpose.
    start_outcome: Annotated[str, Parameter(name="start-outcome")] = ""
    start_reason: Annotated[str, Parameter(name="start-reason")] = ""


class Diagnosis(Output):
    """Retry (the next attempt's size, nodes to avoid, checkpoint), replan (the gang never started) or abort."""

    action: Literal["retry", "replan", "abort"]
    next_attempt: Annotated[int, Parameter(name="next-attempt")]
    gpus: int
    micro_batch: Annotated[int, Parameter(name="micro-batch")]
    grad_accum: Annotated[int, Parameter(name="grad-accum")]
    queue: str
    avoid_nodes: Annotated[list[str], Parameter(name="avoid-nodes")]
    resume_checkpoint: Annotated[str, Parameter(name="resume-checkpoint")]
    replans: int
    replan_reason: Annotated[str, Parameter(name="replan-reason")] = ""
    reason: str


@script(**RUNNER)
@for_people
def diagnose(inputs: DiagnoseInput) -> Diagnosis:
    """Ask the agent what the failed attempt calls for, given how the earlier ones failed; record why.

    An attempt start-deadline deleted before it started is no failure: it is planned again from where it was
    (same checkpoint, same nodes avoided) without asking the policy, and the next plan records why.
    """
    request = inputs.plan_request()
    if inputs.start_outcome == "expired":
        reason = inputs.start_reason
        return _as_requested(inputs, "replan", inputs.replans + 1, reason, reason, replan_reason=reason)
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
            replans=inputs.replans,
            reason=action.rationale,
            result=decision.summary,
        )
    if isinstance(action, Abort):
        return _as_requested(inputs, "abort", inputs.replans, action.reason, decision.summary)
    raise ValueError(f"the {decision.policy} policy answered {action.kind} to a failed attempt; only retry or abort do")


def _as_requested(
    inputs: DiagnoseInput,
    action: Literal["replan", "abort"],
    replans: int,
    reason: str,
    result: str,
    replan_reason: str = "",
) -> Diagnosis:
    """A diagnosis that leaves the attempt's shape as the run asked for it (an abort, or a re-plan)."""
    request = inputs.plan_request()
    return Diagnosis(
        action=action,
        next_attempt=inputs.attempt + 1,
        gpus=request.gpus,
        micro_batch=request.micro_batch,
        grad_accum=request.global_batch // (request.gpus * request.micro_batch),
        queue=request.queue,
        avoid_nodes=request.avoid_nodes,
        resume_checkpoint=request.resume_checkpoint,
        replans=replans,
        replan_reason=replan_reason,
        reason=reason,
        result=result,
    )


class GiveUpInput(Input):
    """Why the pipeline stops."""

    reason: str


@script(**RUNNER)
def give_up(inputs: GiveUpInput) -> Output:
    """Fail on purpose: an abort must end in a failing leaf, or Argo reports the DAG as Succeeded."""
    tell_argo(f"giving up: {inputs.reason}")
    return Output(exit_code=1, result=f"giving up: {inputs.reason}")
