"""The Volcano Jobs of the pipeline's heavy steps, rendered from pydantic models by the steps that plan them.

Every VCJob the workflow creates is built here: names that fit Kubernetes' limits and are the same on every
render (a failed resource node has no outputs, so the plan step must know the name in advance), and the label
that ties a job to its workflow (the exit handler deletes by it). Resource templates receive these manifests as
JSON with real values — never an Argo `{{...}}` placeholder.
"""

from __future__ import annotations

import hashlib

from pydantic import BaseModel, ConfigDict, Field, field_validator

from components.names import run_name_problem
from components.tracking.adapter import (
    ATTEMPT_ENV,
    EXPERIMENT_ENV,
    JOB_ENV,
    SPOOL_ENV,
    STEP_ENV,
    STEP_WAIT_S,
    TRACKING_URI_ENV,
    WAIT_ENV,
    WORKSPACE_ENV,
)
from components.tracking.workflow_run import WorkflowRun
from components.volcano.builder import TrainingRequest, build_training_job, check_job_name
from components.volcano.models import (
    Container,
    EnvVar,
    Job,
    JobSpec,
    LifecyclePolicy,
    ObjectMeta,
    PodSpec,
    PodTemplateSpec,
    ResourceRequirements,
    TaskSpec,
    VolumeSpec,
    validate_job,
)
from components.volcano.resources import GPU, parse_quantity, scale_quantity
from pipelines.workspace import RunPaths

__all__ = [
    "DEFAULT_IMAGE",
    "LOADTEST_PORT",
    "STEP_LABEL",
    "WORKFLOW_LABEL",
    "JobContext",
    "TrainingShape",
    "build_detect_job",
    "build_evaluate_job",
    "build_loadtest_job",
    "build_training_job_for",
    "check_workflow_name",
    "job_name",
]

# Argo labels the pods of a workflow with this key; we put it on every VCJob so one selector finds them all.
WORKFLOW_LABEL = "workflows.argoproj.io/workflow"
STEP_LABEL = "vcpilot.io/step"
LOADTEST_PORT = 8000
POD_IP = "POD_IP"  # the variable the load-test server reads its address from (the downward API's status.podIP)
# The step image when a run names none: the `image` parameter's default (pipelines.parameters), kept here, free
# of Hera, for `vcpilot plan`.
DEFAULT_IMAGE = "ghcr.io/vcpilot/vcpilot:0.1.0"
# Room left for Volcano's pod suffix `-<task>-<index>` within Kubernetes' 63-character pod names.
_JOB_NAME_MAX = 45


class JobContext(BaseModel):
    """What every heavy step's VCJob shares: where it runs, which image, queue and workspace, which MLflow."""

    model_config = ConfigDict(frozen=True)

    workflow: str
    namespace: str = "default"
    workspace: str
    # The workflow run's MLflow identity (components.tracking.runs.WorkflowRun), which every pod records under.
    workflow_uid: str = ""
    trigger: str = ""
    argo_url: str = ""
    template_version: str = ""
    workspace_pvc: str = ""
    image: str = Field(min_length=1)
    queue: str = "default"
    priority_class: str = ""
    mlflow_tracking_uri: str = ""
    mlflow_experiment: str = ""
    # What a pod gets per GPU it uses; a pod without a GPU (detect, the load-test client) gets one share.
    cpu_per_gpu: str = "4"
    memory_per_gpu: str = "16Gi"
    # The account of the heavy pods, whose guard (pipelines/guard.py) deletes the job once the workflow has
    # ended; empty: no guard (LocalCluster, or a job made outside a workflow).
    job_service_account: str = ""

    @field_validator("cpu_per_gpu", "memory_per_gpu")
    @classmethod
    def _positive_quantity(cls, value: str) -> str:
        if parse_quantity(value) <= 0:
            raise ValueError(f"{value!r} must be a quantity greater than 0, such as 4, 1500m or 16Gi")
        return value

    @classmethod
    def for_run(cls, run: WorkflowRun, **settings: str) -> JobContext:
        """The context of `run`'s jobs: who the run is from `run` (as MLflow records it), the rest from `settings`."""
        return cls(
            workflow=run.name,
            namespace=run.namespace,
            workflow_uid=run.uid,
            trigger=run.trigger,
            argo_url=run.argo_url,
            template_version=run.template_version,
            image=run.image,
            **settings,
        )

    def share(self, gpus: int) -> tuple[str, str]:
        """CPU and memory of a pod that uses `gpus` GPUs (one share at least)."""
        return scale_quantity(self.cpu_per_gpu, max(gpus, 1)), scale_quantity(self.memory_per_gpu, max(gpus, 1))

    @property
    def paths(self) -> RunPaths:
        """The workspace layout of this run."""
        return RunPaths(workspace=self.workspace, workflow=self.workflow)

    def labels(self, step: str) -> dict[str, str]:
        """Labels of a step's VCJob: the workflow's (for cleanup) and the step's (for people)."""
        return {WORKFLOW_LABEL: self.workflow, STEP_LABEL: step}

    def workflow_run(self) -> WorkflowRun:
        """The workflow run this job belongs to, as its MLflow parent run records it."""
        return WorkflowRun(
            name=self.workflow,
            uid=self.workflow_uid,
            namespace=self.namespace,
            argo_url=self.argo_url,
            trigger=self.trigger,
            template_version=self.template_version,
            image=self.image,
        )

    def env(self, step: str = "", attempt: int = 1) -> dict[str, str]:
        """Environment every step program gets: the workspace, MLflow, its workflow run and its spool directory.

        With `step`, also the step, the attempt and the VCJob's name, which the step's MLflow run is tagged with.
        """
        env = {**self.workflow_run().env(), WORKSPACE_ENV: self.workspace, SPOOL_ENV: self.paths.tracking}
        if self.mlflow_tracking_uri:
            env.update({TRACKING_URI_ENV: self.mlflow_tracking_uri, WAIT_ENV: str(STEP_WAIT_S)})
        if self.mlflow_experiment:
            env[EXPERIMENT_ENV] = self.mlflow_experiment
        if step:
            suffix = f"{step}-{attempt}" if step == "train" else step
            env.update({STEP_ENV: step, ATTEMPT_ENV: str(attempt), JOB_ENV: job_name(self.workflow, suffix)})
        return env

    def volumes(self) -> list[VolumeSpec] | None:
        """Volcano's job-level volume: the workspace PVC mounted at the workspace path in every container."""
        if not self.workspace_pvc:
            return None
        return [VolumeSpec(mount_path=self.workspace, volume_claim_name=self.workspace_pvc)]


class TrainingShape(BaseModel):
    """How one training attempt uses the cluster (decided by plan, later by the agent)."""

    model_config = ConfigDict(frozen=True)

    attempt: int = Field(ge=1)
    gpus: int = Field(gt=0)
    gpus_per_pod: int = Field(gt=0)
    micro_batch: int = Field(gt=0)
    grad_accum: int = Field(gt=0)
    global_batch: int = Field(gt=0)
    queue: str
    avoid_nodes: list[str] = Field(default_factory=list)
    resume_checkpoint: str = ""


def job_name(workflow: str, suffix: str) -> str:
    """`<workflow>-<suffix>`, shortened with a stable hash when it would leave no room for pod names."""
    name = f"{workflow}-{suffix}"
    if len(name) <= _JOB_NAME_MAX:
        return name
    digest = hashlib.sha256(workflow.encode()).hexdigest()[:6]
    keep = _JOB_NAME_MAX - len(suffix) - len(digest) - 2
    return f"{workflow[:keep].rstrip('-.')}-{digest}-{suffix}"


def check_workflow_name(workflow: str) -> str:
    """`workflow` when its steps' VCJobs can be named after it (`job_name`); ValueError in one sentence otherwise.

    Argo takes `a.b` or `1abc` as a workflow's name; the VCJob `a.b-train-1` cannot carry it (its Service needs a
    DNS-1035 label), so the run would fail at its plan step; and a name Argo refuses (`run_name_problem`: one too long
    to be a label value) is refused too, though `job_name` would shorten it.
    """
    try:
        check_job_name(job_name(workflow, "train-1"))
    except ValueError as err:
        raise ValueError(f"{workflow!r} cannot name the training's VCJob: {err}") from None
    problem = run_name_problem(workflow)
    if problem:
        raise ValueError(problem.rstrip("."))
    return workflow


def build_training_job_for(
    context: JobContext,
    shape: TrainingShape,
    *,
    base_model: str,
    dataset_dir: str,
    max_steps: int,
    checkpoint_every: int,
) -> Job:
    """The VCJob of one training attempt: the pytorch layout from the builder, plus the workspace volume."""
    paths = context.paths
    cpu, memory = context.share(shape.gpus_per_pod)
    request = TrainingRequest(
        name=job_name(context.workflow, f"train-{shape.attempt}"),
        namespace=context.namespace,
        image=context.image,
        command=["python", "-m", "components.finetune"],
        args=[
            *("--base-model", base_model),
            *("--dataset-dir", dataset_dir),
            *("--output-dir", paths.model(shape.attempt)),
            *("--checkpoint-dir", paths.checkpoints),
            *("--max-steps", str(max_steps)),
            *("--checkpoint-every", str(checkpoint_every)),
        ],
        env=context.env("train", shape.attempt),
        total_gpus=shape.gpus,
        gpus_per_pod=shape.gpus_per_pod,
        cpu_per_pod=cpu,
        memory_per_pod=memory,
        micro_batch=shape.micro_batch,
        grad_accum=shape.grad_accum,
        global_batch=shape.global_batch,
        queue=shape.queue,
        priority_class=context.priority_class or None,
        avoid_nodes=shape.avoid_nodes,
        resume_checkpoint=shape.resume_checkpoint or None,
        labels=context.labels("train"),
        # The first fault ends the attempt (Volcano fails a job whose retryCount reaches maxRetry), so that
        # diagnose, not a blind restart, chooses the checkpoint, the nodes to avoid and the size of the retry.
        max_retry=1,
    )
    job = build_training_job(request)
    job.spec.volumes = context.volumes()
    guard(context, job)
    validate_job(job)
    return job


def build_detect_job(
    context: JobContext, *, log_source: str, baseline_window: str = "", current_window: str = ""
) -> Job:
    """One pod that mines the service's logs (cut to the time windows given) and writes a drift report."""
    # Drain3's templates and yesterday's window live in the workspace, so a nightly run compares with the last.
    args = [
        "--source",
        log_source,
        "--report",
        context.paths.detect_report,
        "--state",
        f"{context.workspace}/state/logs",
    ]
    for option, window in (("--baseline-window", baseline_window), ("--current-window", current_window)):
        if window:
            args += [option, window]
    detect = _container(context, "detect", "components.logs", args)
    return _job(context, "detect", [_task(context, "detect", detect)], min_available=1)


def build_loadtest_job(
    context: JobContext, *, model_uri: str, slo_ttft_ms: float, slo_tpot_ms: float, requests: int = 20
) -> Job:
    """One gang of two tasks, `server` and `client`: both start together or neither does.

    The client finds the server through `VC_SERVER_HOSTS` (the `svc` and `env` plugins set it on a real
    cluster and on LocalCluster alike); the job completes when the client does. A server that dies mid-test
    does not end the job: the client counts the requests that failed and writes its report, and the release
    step's gate refuses on them (Volcano looks at a task's own policies first, then at the job's). A failed
    client ends the job, else the server would serve forever.
    """
    # The server listens on its pod's address, which the client finds in VC_SERVER_HOSTS: on a cluster that is
    # the pod's own network; on LocalCluster every pod has an address of its own on loopback, so two load tests at
    # once (two runs on one machine) do not share a port.
    server = _container(
        context,
        "server",
        "components.serving",
        ["--model", model_uri, "--host", f"$({POD_IP})", "--port", str(LOADTEST_PORT)],
        step="loadtest",
        gpus=1,
        env=[EnvVar(name=POD_IP, value_from={"fieldRef": {"fieldPath": "status.podIP"}})],
    )
    client = _container(
        context,
        "client",
        "components.loadtest",
        [
            *("--port", str(LOADTEST_PORT)),
            *("--slo-ttft-ms", _number(slo_ttft_ms)),
            *("--slo-tpot-ms", _number(slo_tpot_ms)),
            *("--requests", str(requests)),
            *("--report", context.paths.loadtest_report),
        ],
        step="loadtest",
    )
    tasks = [
        _task(context, "server", server),
        _task(
            context,
            "client",
            client,
            [
                LifecyclePolicy(event="TaskCompleted", action="CompleteJob"),
                LifecyclePolicy(event="PodFailed", action="TerminateJob"),
            ],
        ),
    ]
    return _job(
        context,
        "loadtest",
        tasks,
        min_available=2,
        plugins={"svc": [], "env": []},
        policies=[LifecyclePolicy(event="PodEvicted", action="RestartJob")],
    )


def build_evaluate_job(
    context: JobContext, *, model_uri: str, base_model: str, registered_model: str, eval_set: str
) -> Job:
    """One GPU pod that scores the candidate and the registered model's champion on the same evaluation set."""
    evaluate = _container(
        context,
        "evaluate",
        "components.evaluate",
        [
            *("--candidate", model_uri),
            *("--base-model", base_model),
            *("--registered-model", registered_model),
            *("--eval-set", eval_set),
            *("--report", context.paths.evaluate_report),
        ],
        gpus=1,
    )
    return _job(context, "evaluate", [_task(context, "evaluate", evaluate)], min_available=1)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _container(
    context: JobContext,
    name: str,
    module: str,
    args: list[str],
    *,
    step: str = "",
    gpus: int = 0,
    env: list[EnvVar] | None = None,
) -> Container:
    """A container that runs `python -m <module> <args>` with the step's environment, `env`, and its node share."""
    cpu, memory = context.share(gpus)
    amounts: dict[str, str | int | float] = {"cpu": cpu, "memory": memory}
    if gpus:
        amounts[GPU] = gpus
    return Container(
        name=name,
        image=context.image,
        command=["python", "-m", module],
        args=args,
        env=[*(EnvVar(name=key, value=value) for key, value in context.env(step or name).items()), *(env or [])],
        resources=ResourceRequirements(requests=dict(amounts), limits=dict(amounts)),
    )


def _task(
    context: JobContext, name: str, container: Container, policies: list[LifecyclePolicy] | None = None
) -> TaskSpec:
    # restartPolicy Never turns a crash into a PodFailed event that the job's policies act on.
    spec = PodSpec(containers=[container], restart_policy="Never", priority_class_name=context.priority_class or None)
    return TaskSpec(
        name=name,
        replicas=1,
        min_available=1,
        template=PodTemplateSpec(spec=spec),
        policies=policies,
    )


def _job(
    context: JobContext,
    step: str,
    tasks: list[TaskSpec],
    *,
    min_available: int,
    plugins: dict[str, list[str]] | None = None,
    policies: list[LifecyclePolicy] | None = None,
) -> Job:
    # schedulerName, queue, minAvailable and maxRetry are explicit: a cluster without Volcano's admission
    # webhook fills in no defaults.
    labels = context.labels(step)
    for task in tasks:
        task.template.metadata = ObjectMeta(labels=dict(labels))
    job = Job(
        metadata=ObjectMeta(name=job_name(context.workflow, step), namespace=context.namespace, labels=labels),
        spec=JobSpec(
            scheduler_name="volcano",
            queue=context.queue,
            priority_class_name=context.priority_class or None,
            min_available=min_available,
            max_retry=3,
            plugins=plugins,
            policies=policies or [LifecyclePolicy(event="PodEvicted", action="RestartJob")],
            tasks=tasks,
            volumes=context.volumes(),
        ),
    )
    guard(context, job)
    validate_job(job)
    return job


def guard(context: JobContext, job: Job) -> None:
    """Give every pod of `job` the sidecar that deletes it when the workflow ends (see pipelines/guard.py)."""
    if not context.job_service_account:
        return
    env = [
        EnvVar(name="VCPILOT_WORKFLOW", value=context.workflow),
        EnvVar(name="VCPILOT_JOB", value=job.metadata.name),
        EnvVar(name="VCPILOT_NAMESPACE", value_from={"fieldRef": {"fieldPath": "metadata.namespace"}}),
        *(EnvVar(name=k, value=v) for k, v in context.env().items() if k.startswith("MLFLOW_")),
    ]
    amounts: dict[str, str | int | float] = {"cpu": "10m", "memory": "128Mi"}
    sidecar = Container(
        name="guard",
        image=context.image,
        command=["python", "-m", "pipelines.guard"],
        env=env,
        resources=ResourceRequirements(requests=amounts, limits={"memory": "512Mi"}),
        restart_policy="Always",  # a native sidecar: Kubernetes stops it when the main container ends
    )
    for task in job.spec.tasks:
        spec = task.template.spec
        spec.init_containers = [*(spec.init_containers or []), sidecar]
        spec.service_account_name = context.job_service_account
