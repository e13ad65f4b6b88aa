"""Turns a training request (GPUs, batch sizes, image) into the Volcano Job the `pytorch` plugin expects."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from components.images import check_image
from components.names import check_labels, cut, is_dns1123_label, is_dns1123_subdomain
from components.volcano.models import (
    INT64_MAX,
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
)
from components.volcano.resources import GPU, parse_quantity
from components.volcano.validation import describe_validation_error, validate_job

__all__ = [
    "MANAGED_BY",
    "MANAGED_BY_LABEL",
    "MANAGED_BY_VALUE",
    "PYTORCH_PORT",
    "TrainingRequest",
    "build_training_job",
    "build_training_job_from",
    "check_job_name",
    "parse_request",
]

MANAGED_BY_LABEL, MANAGED_BY_VALUE = "app.kubernetes.io/managed-by", "vcpilot"
MANAGED_BY = {MANAGED_BY_LABEL: MANAGED_BY_VALUE}
PYTORCH_PORT = 23456
MASTER, WORKER = "master", "worker"
_POD_NAME_MAX = 63
# The Service the svc plugin creates is named after the job: a DNS-1035 label, so it starts with a letter.
_JOB_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# Set by vcpilot or by Volcano's pytorch plugin; a user value would silently lose or win against ours.
_RESERVED_ENV = frozenset(
    {
        "VCPILOT_MICRO_BATCH",
        "VCPILOT_GRAD_ACCUM",
        "VCPILOT_GLOBAL_BATCH",
        "VCPILOT_GPUS_PER_POD",
        "VCPILOT_RESUME",
        "MASTER_ADDR",
        "MASTER_PORT",
        "WORLD_SIZE",
        "RANK",
    }
)


def check_job_name(value: str) -> str:
    """`value` when it can name a training's VCJob; ValueError in one sentence otherwise."""
    if len(value) > 63 or not _JOB_NAME.match(value):
        raise ValueError(
            f"{value!r} must be a lowercase RFC 1123 label that starts with a letter (a-z, 0-9 and '-', "
            "at most 63 characters) because Volcano names the job's Service after it"
        )
    return value


class TrainingRequest(BaseModel):
    """What a fine-tuning run needs from the cluster; invalid values raise a one-sentence ValueError."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    namespace: str = "default"
    image: str = Field(min_length=1)
    command: list[str] = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    total_gpus: int = Field(gt=0)
    gpus_per_pod: int = Field(default=1, gt=0)
    micro_batch: int = Field(gt=0)
    grad_accum: int = Field(gt=0)
    global_batch: int = Field(gt=0)
    queue: str = "default"
    priority_class: str | None = None
    avoid_nodes: list[str] = Field(default_factory=list)
    resume_checkpoint: str | None = Field(default=None, min_length=1)
    labels: dict[str, str] = Field(default_factory=dict)
    cpu_per_pod: str = "2"
    memory_per_pod: str = "8Gi"
    max_retry: int = 3
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0)
    # Between SIGTERM and SIGKILL the trainer finishes its step and writes a checkpoint (components.finetune):
    # this must exceed the longest step plus one save, minutes for a model of billions of parameters. Kubernetes
    # stores it as an int64, and refuses a larger number.
    termination_grace_period_s: int = Field(default=300, ge=0, le=INT64_MAX)

    def __init__(self, **data: Any) -> None:
        # Keyword construction reports like parse_request: one sentence, not pydantic's report.
        try:
            super().__init__(**data)
        except ValidationError as err:
            raise ValueError(describe_validation_error(err, type(self))) from None

    @property
    def pods(self) -> int:
        """Number of pods: one per `gpus_per_pod` GPUs."""
        return self.total_gpus // self.gpus_per_pod

    @field_validator(
        "total_gpus",
        "gpus_per_pod",
        "micro_batch",
        "grad_accum",
        "global_batch",
        "max_retry",
        "ttl_seconds_after_finished",
        "termination_grace_period_s",
        mode="before",
    )
    @classmethod
    def _not_bool(cls, value: Any) -> Any:
        # pydantic reads True as 1; a flag where a count belongs is a mistake worth naming.
        if isinstance(value, bool):
            raise ValueError(f"expected a whole number, got {value!r}")
        return value

    @field_validator("name")
    @classmethod
    def _job_name(cls, value: str) -> str:
        return check_job_name(value)

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        return check_image(value, "the image")

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if not is_dns1123_label(value):
            raise ValueError(f"{value!r} is not a namespace name (a-z, 0-9 and '-', at most 63 characters)")
        return value

    @field_validator("queue", "priority_class")
    @classmethod
    def _object_name(cls, value: str | None) -> str | None:
        if value is not None and not is_dns1123_subdomain(value):
            raise ValueError(f"{value!r} must be a lowercase RFC 1123 name (a-z, 0-9, '-' and '.')")
        return value

    @field_validator("resume_checkpoint")
    @classmethod
    def _checkpoint_path(cls, value: str | None) -> str | None:
        # It becomes the pods' VCPILOT_RESUME: a path, whoever asked for it (a flag, an LLM, an MCP client).
        if value is not None and (len(value) > 4096 or any(ord(c) < 0x20 or ord(c) == 0x7F for c in value)):
            raise ValueError("must be a path of at most 4096 characters without control characters")
        return value

    @field_validator("cpu_per_pod", "memory_per_pod")
    @classmethod
    def _positive_quantity(cls, value: str) -> str:
        if parse_quantity(value) <= 0:
            raise ValueError(f"{value!r} must be greater than 0")
        return value

    @field_validator("max_retry")
    @classmethod
    def _max_retry(cls, value: int) -> int:
        if value < 1:
            raise ValueError(f"must be at least 1, got {value} (Volcano's webhook turns 0 into its default of 3)")
        return value

    @field_validator("avoid_nodes")
    @classmethod
    def _node_names(cls, value: list[str]) -> list[str]:
        for node in value:
            if not is_dns1123_subdomain(node):  # what the API server takes as a node's name
                raise ValueError(
                    f"node name {cut(node)!r} must be a lowercase RFC 1123 name (a-z, 0-9, '-' and '.', at most 253 "
                    "characters)"
                )
        return list(dict.fromkeys(value))

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        check_labels(value)
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if key in _RESERVED_ENV:
                raise ValueError(f"{key} is set by vcpilot or Volcano's pytorch plugin; remove it from env")
            if not key or "=" in key:
                raise ValueError(f"{key!r} is not an environment variable name")
        return value

    @model_validator(mode="after")
    def _layout(self) -> TrainingRequest:
        if self.total_gpus % self.gpus_per_pod:
            raise ValueError(
                f"total_gpus {self.total_gpus} is not a multiple of gpus_per_pod {self.gpus_per_pod}; "
                "every pod gets the same number of GPUs"
            )
        product = self.total_gpus * self.micro_batch * self.grad_accum
        if product != self.global_batch:
            raise ValueError(
                f"global_batch {self.global_batch} must equal total_gpus × micro_batch × grad_accum, but "
                f"{self.total_gpus} × {self.micro_batch} × {self.grad_accum} = {product}; change micro_batch "
                "or grad_accum"
            )
        longest = max(_pod_names(self.name, self.pods), key=len)
        if len(longest) > _POD_NAME_MAX:
            room = _POD_NAME_MAX - (len(longest) - len(self.name))
            raise ValueError(
                f"pod name {longest!r} would be {len(longest)} characters, over Kubernetes' limit of "
                f"{_POD_NAME_MAX}; shorten name to at most {room} characters"
            )
        return self


def _pod_names(job: str, pods: int) -> list[str]:
    """Return the names Volcano gives the first and last pods: `<job>-<task>-<index>`."""
    names = [f"{job}-{MASTER}-0"]
    if pods > 1:
        names.append(f"{job}-{WORKER}-{pods - 2}")
    return names


def parse_request(data: dict[str, Any]) -> TrainingRequest:
    """Validate a request given as a dict; ValueError says in one sentence what is wrong."""
    if not isinstance(data, dict):
        raise ValueError(f"a training request must be a mapping of fields, got {type(data).__name__}")
    try:
        return TrainingRequest.model_validate(data)
    except ValidationError as err:
        raise ValueError(describe_validation_error(err, TrainingRequest)) from None


def build_training_job_from(data: dict[str, Any]) -> Job:
    """Validate a request given as a dict and build its Job; ValueError on the first problem."""
    return build_training_job(parse_request(data))


def build_training_job(request: TrainingRequest) -> Job:
    """Render the Volcano Job for a distributed PyTorch run: task `master` ×1 and `worker` ×(pods - 1).

    Every pod must be up for training to start (minAvailable = all pods), a failed or evicted pod restarts the
    whole job (from the latest checkpoint, up to maxRetry times), and the job completes when master does.
    """
    labels = {**request.labels, **MANAGED_BY}
    tasks = [_task(request, MASTER, 1, labels, [LifecyclePolicy(event="TaskCompleted", action="CompleteJob")])]
    if request.pods > 1:
        tasks.append(_task(request, WORKER, request.pods - 1, labels, None))
    job = Job(
        metadata=ObjectMeta(name=request.name, namespace=request.namespace, labels=labels),
        spec=JobSpec(
            scheduler_name="volcano",
            queue=request.queue,
            priority_class_name=request.priority_class,
            min_available=request.pods,
            max_retry=request.max_retry,
            ttl_seconds_after_finished=request.ttl_seconds_after_finished,
            plugins={
                "pytorch": [f"--master={MASTER}", f"--worker={WORKER}", f"--port={PYTORCH_PORT}"],
                "svc": [],
                "env": [],
            },
            # restartPolicy Never makes a crashed trainer a PodFailed event, so RestartJob actually fires.
            policies=[
                LifecyclePolicy(event="PodEvicted", action="RestartJob"),
                LifecyclePolicy(event="PodFailed", action="RestartJob"),
            ],
            tasks=tasks,
        ),
    )
    validate_job(job)
    return job


def _task(
    request: TrainingRequest,
    name: str,
    replicas: int,
    labels: dict[str, str],
    policies: list[LifecyclePolicy] | None,
) -> TaskSpec:
    amounts: dict[str, str | int | float] = {
        "cpu": request.cpu_per_pod,
        "memory": request.memory_per_pod,
        GPU: request.gpus_per_pod,
    }
    container = Container(
        name="trainer",
        image=request.image,
        command=list(request.command),
        args=list(request.args) or None,
        env=_env(request),
        resources=ResourceRequirements(requests=dict(amounts), limits=dict(amounts)),
    )
    spec = PodSpec(
        containers=[container],
        restart_policy="Never",
        priority_class_name=request.priority_class,
        affinity=_avoid(request.avoid_nodes),
        termination_grace_period_seconds=request.termination_grace_period_s,
    )
    return TaskSpec(
        name=name,
        replicas=replicas,
        min_available=replicas,
        template=PodTemplateSpec(metadata=ObjectMeta(labels=dict(labels)), spec=spec),
        policies=policies,
    )


def _env(request: TrainingRequest) -> list[EnvVar]:
    env = [EnvVar(name=key, value=value) for key, value in request.env.items()]
    env += [
        EnvVar(name="VCPILOT_MICRO_BATCH", value=str(request.micro_batch)),
        EnvVar(name="VCPILOT_GRAD_ACCUM", value=str(request.grad_accum)),
        EnvVar(name="VCPILOT_GLOBAL_BATCH", value=str(request.global_batch)),
        EnvVar(name="VCPILOT_GPUS_PER_POD", value=str(request.gpus_per_pod)),
    ]
    if request.resume_checkpoint:
        env.append(EnvVar(name="VCPILOT_RESUME", value=request.resume_checkpoint))
    return env


def _avoid(nodes: list[str]) -> dict[str, Any] | None:
    """Node affinity that keeps pods off `nodes` (hosts that failed an earlier attempt)."""
    if not nodes:
        return None
    expression = {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": list(nodes)}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expression]}]
            }
        }
    }
