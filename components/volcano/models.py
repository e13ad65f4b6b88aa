"""Pydantic models of the Volcano v1.15 objects vcpilot writes and reads: the single source of every manifest.

Field names follow the CRDs (`batch.volcano.sh_jobs.yaml`, `scheduling.volcano.sh_queues.yaml`,
`scheduling.volcano.sh_podgroups.yaml`): snake_case in Python, camelCase on the wire. Volcano's own objects
forbid unknown fields so that a typo such as `minAvaliable` is an error rather than a silently ignored key;
the Kubernetes pod side stays permissive because the pod spec is far larger than what we model.
"""

from __future__ import annotations

import functools
import json
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel

from components.durations import DurationError, parse_go_duration
from components.names import check_labels
from components.volcano.resources import check_requirements, parse_quantity
from components.volcano.validation import (
    SVC_PLUGINS,
    describe_validation_error,
    is_dns1123_subdomain,
    validate_job,
)

__all__ = [
    "Action",
    "Container",
    "Duration",
    "EnvVar",
    "Event",
    "INT64_MAX",
    "Int32",
    "Int64",
    "Job",
    "JobCondition",
    "JobPhase",
    "JobSpec",
    "JobState",
    "JobStatus",
    "LifecyclePolicy",
    "NetworkTopology",
    "ObjectMeta",
    "PartitionPolicy",
    "PersistentVolumeClaimSpec",
    "PodSpec",
    "PodTemplateSpec",
    "Quantity",
    "ResourceRequirements",
    "TaskDependency",
    "TaskSpec",
    "TaskState",
    "VolumeSpec",
    "apply_volcano_defaults",
    "Subdomain",
    "Volcano",
    "parse_job",
    "parse_manifest",
    "validate_job",
    "WholeNumber",
]

# The CRD's enum for policy events.
Event = Literal[
    "*",
    "PodPending",
    "PodRunning",
    "PodFailed",
    "PodEvicted",
    "Unknown",
    "TaskCompleted",
    "OutOfSync",
    "CommandIssued",
    "JobUpdated",
    "TaskFailed",
]
# A free string in the CRD; these are the actions Volcano's bus API defines.
Action = Literal[
    "AbortJob",
    "RestartJob",
    "RestartTask",
    "RestartPod",
    "RestartPartition",
    "TerminateJob",
    "CompleteJob",
    "ResumeJob",
    "SyncJob",
    "EnqueueJob",
    "SyncQueue",
    "OpenQueue",
    "CloseQueue",
]
JobPhase = Literal[
    "Pending",
    "Aborting",
    "Aborted",
    "Running",
    "Restarting",
    "Completing",
    "Completed",
    "Terminating",
    "Terminated",
    "Failed",
]


def _quantity(value: Any) -> str | int | float:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"{value!r} is not a quantity such as 2, 500m or 16Gi")
    parse_quantity(value)
    return value


def _subdomain(value: str) -> str:
    if not is_dns1123_subdomain(value):
        raise ValueError(f"{value!r} must be a lowercase RFC 1123 name (a-z, 0-9, '-' and '.')")
    return value


def _whole(value: Any) -> Any:
    # pydantic would read YAML's `true` as 1 and the text "2" as 2; the API server refuses both ("must be of type
    # integer"), so a quoted number or a boolean is an error here too. A float with no fraction (2.0) passes, as there.
    if isinstance(value, bool):
        raise ValueError(f"expected a whole number, got {str(value).lower()}")
    if isinstance(value, str):
        raise ValueError(f"expected a whole number, got the text {value!r} (write it without quotes)")
    if isinstance(value, float) and value.is_integer():  # 1e30 too: its bound then says what is allowed
        return int(value)
    return value


def _duration(value: Any) -> str:
    # metav1.Duration's UnmarshalJSON reads a JSON string and hands it to Go's time.ParseDuration: `timeout: 30` (a
    # number) and "10x" cannot be decoded by the API server or Volcano's controller, so neither is taken here.
    if not isinstance(value, str):
        shown = str(value).lower() if isinstance(value, bool) else repr(value)
        raise ValueError(f'{shown} is not a duration: write it as a string with its unit, e.g. "30s" or "5m"')
    try:
        parse_go_duration(value)
    except DurationError as err:
        raise ValueError(str(err)) from None
    return value


# An integer of a manifest or a config: YAML's `true` and quoted numbers refused (`_whole`).
WholeNumber = Annotated[int, BeforeValidator(_whole)]
# A Kubernetes resource quantity, kept as written ("500m", "16Gi", 2) but checked to parse.
Quantity = Annotated[str | int | float, PlainValidator(_quantity)]
_Labels = Annotated[dict[str, str], AfterValidator(check_labels)]
_Annotations = Annotated[dict[str, str], AfterValidator(functools.partial(check_labels, values=False))]
Subdomain = Annotated[str, AfterValidator(_subdomain)]
# A metav1.Duration ("30s", "1h30m", "0", "-1s"), kept as written but held to Go's time.ParseDuration; read its
# seconds with `components.durations.parse_go_duration`.
Duration = Annotated[str, PlainValidator(_duration, json_schema_input_type=str)]


class _Model(BaseModel):
    model_config = ConfigDict(defer_build=True)

    def to_dict(self) -> dict[str, Any]:
        """Return the object as Kubernetes expects it: camelCase keys, no unset fields, JSON types."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


# The integers the CRD declares `format: int32` (replicas, minAvailable, maxRetry, …): the API server refuses a
# value outside them ("cannot unmarshal number … of type int32"); 3,000,000,000 replicas is a typo, not a gang.
_INT32_MAX = 2**31 - 1
Int32 = Annotated[WholeNumber, Field(ge=-(2**31), le=_INT32_MAX)]
# The integers core/v1 declares `int64` (terminationGracePeriodSeconds): a larger one cannot be decoded either.
INT64_MAX = 2**63 - 1
Int64 = Annotated[WholeNumber, Field(ge=-(2**63), le=INT64_MAX)]


class Volcano(_Model):
    """The base of Volcano's own objects: camelCase on the wire, unknown fields refused."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class _Kube(_Model):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")


# ---- Kubernetes objects (permissive) -------------------------------------------------------------------


class ObjectMeta(_Kube):
    """The metadata of any object; fields we do not model (resourceVersion, managedFields...) are kept."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    labels: _Labels | None = None
    annotations: _Annotations | None = None
    uid: str | None = None
    owner_references: list[dict[str, Any]] | None = None
    creation_timestamp: str | None = None


class EnvVar(_Kube):
    """One environment variable of a container."""

    name: str
    value: str | None = None
    value_from: dict[str, Any] | None = None


class ResourceRequirements(_Kube):
    """Requests and limits of a container, e.g. {"cpu": "2", "nvidia.com/gpu": 1}, held to Kubernetes' rules."""

    limits: dict[str, Quantity] | None = None
    requests: dict[str, Quantity] | None = None

    @model_validator(mode="after")
    def _kubernetes_rules(self) -> ResourceRequirements:
        check_requirements(self.requests, self.limits)
        return self


class Container(_Kube):
    """A container of a pod template."""

    name: str
    image: str | None = None
    image_pull_policy: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    env: list[EnvVar] | None = None
    working_dir: str | None = None
    resources: ResourceRequirements | None = None
    volume_mounts: list[dict[str, Any]] | None = None
    ports: list[dict[str, Any]] | None = None
    restart_policy: str | None = None  # "Always" on an init container makes it a sidecar (Kubernetes >= 1.29)
    termination_message_policy: str | None = None
    liveness_probe: dict[str, Any] | None = None
    readiness_probe: dict[str, Any] | None = None
    startup_probe: dict[str, Any] | None = None


class PodSpec(_Kube):
    """The part of a pod spec vcpilot reads or writes; everything else passes through untouched."""

    containers: list[Container]
    init_containers: list[Container] | None = None
    restart_policy: str | None = None
    node_selector: _Labels | None = None
    affinity: dict[str, Any] | None = None
    tolerations: list[dict[str, Any]] | None = None
    volumes: list[dict[str, Any]] | None = None
    priority_class_name: str | None = None
    scheduler_name: str | None = None
    service_account_name: str | None = None
    termination_grace_period_seconds: Int64 | None = None
    active_deadline_seconds: WholeNumber | None = Field(default=None, ge=1, le=_INT32_MAX)
    hostname: str | None = None
    subdomain: str | None = None
    node_name: str | None = None
    dns_policy: str | None = None
    host_network: bool | None = None
    topology_spread_constraints: list[dict[str, Any]] | None = None


class PodTemplateSpec(_Kube):
    """The pod template of a task."""

    metadata: ObjectMeta | None = None
    spec: PodSpec


# ---- batch.volcano.sh/v1alpha1 Job ---------------------------------------------------------------------


class LifecyclePolicy(Volcano):
    """What Volcano does (action) when an event happens or a pod exits with a code."""

    event: Event | None = None
    events: list[Event] | None = None
    # Free text, as in the CRD: the webhook holds an event policy's action to the user's Actions (validation.py) but
    # leaves an exitCode policy's unchecked, and the controller syncs the job for one it does not know or none.
    action: str | None = None
    exit_code: Int32 | None = None
    timeout: Duration | None = None  # how long the controller waits before it takes the action


class NetworkTopology(Volcano):
    """How far apart (in network tiers) the pods of a job or partition may be placed."""

    mode: Literal["hard", "soft"] | None = None
    highest_tier_allowed: WholeNumber | None = Field(default=None, ge=0)
    highest_tier_name: str | None = Field(default=None, max_length=253)


class PartitionPolicy(Volcano):
    """A task split into `totalPartitions` gangs of `partitionSize` pods, at least `minPartitions` of them running."""

    total_partitions: WholeNumber | None = Field(default=None, ge=0, le=_INT32_MAX)
    partition_size: WholeNumber | None = Field(default=None, ge=0, le=_INT32_MAX)
    min_partitions: WholeNumber | None = Field(default=None, ge=0, le=_INT32_MAX)
    network_topology: NetworkTopology | None = None


class TaskDependency(Volcano):
    """The tasks a task waits for (`dependsOn`): Volcano creates its pods once theirs run."""

    name: list[str] | None = None
    iteration: str | None = None  # "any" or "all" in Volcano's API; the CRD leaves it free text


class TaskSpec(Volcano):
    """A group of identical pods within a Job."""

    # Optional, as in the CRD: Volcano's mutating webhook names a task without one `default<index>`, and its name is
    # then checked as a DNS-1123 label (validation.py), like any other.
    name: str = ""
    replicas: WholeNumber = Field(default=0, ge=0, le=_INT32_MAX)
    min_available: WholeNumber | None = Field(default=None, ge=0, le=_INT32_MAX)
    template: PodTemplateSpec
    policies: list[LifecyclePolicy] | None = None
    max_retry: WholeNumber | None = Field(default=None, ge=0, le=_INT32_MAX)
    depends_on: TaskDependency | None = None
    topology_policy: Literal["none", "best-effort", "restricted", "single-numa-node"] | None = None
    partition_policy: PartitionPolicy | None = None


class VolumeResources(_Kube):
    """How much storage a claim asks for: quantities, as the CRD's pattern holds them."""

    limits: dict[str, Quantity] | None = None
    requests: dict[str, Quantity] | None = None


class PersistentVolumeClaimSpec(_Kube):
    """The claim Volcano creates for a job-level volume (`volumeClaim`); the fields we do not model pass through."""

    access_modes: list[str] | None = None
    resources: VolumeResources | None = None
    storage_class_name: str | None = None
    volume_mode: str | None = None
    volume_name: str | None = None


class VolumeSpec(Volcano):
    """A PVC mounted at `mountPath` in every container of the job: an existing one or one Volcano creates."""

    mount_path: str
    volume_claim_name: Subdomain | None = None
    volume_claim: PersistentVolumeClaimSpec | None = None


class JobSpec(Volcano):
    """The spec of a Volcano Job."""

    scheduler_name: str | None = Field(default=None, max_length=63)
    min_available: WholeNumber | None = Field(default=None, ge=0, le=_INT32_MAX)
    min_success: WholeNumber | None = Field(default=None, ge=1, le=_INT32_MAX)
    # "" is unset: Volcano's mutating webhook writes `default` for an empty queue before the CRD's pattern is checked
    queue: Annotated[Subdomain | None, BeforeValidator(lambda value: None if value == "" else value)] = None
    priority_class_name: Annotated[Subdomain, Field(max_length=253)] | None = None
    max_retry: WholeNumber | None = Field(default=None, ge=0, le=_INT32_MAX)
    ttl_seconds_after_finished: WholeNumber | None = Field(default=None, ge=0, le=_INT32_MAX)
    plugins: dict[str, list[str]] | None = None
    policies: list[LifecyclePolicy] | None = None
    tasks: list[TaskSpec] = Field(default_factory=list)
    volumes: list[VolumeSpec] | None = None
    running_estimate: Duration | None = None
    network_topology: NetworkTopology | None = None


class JobState(Volcano):
    """The phase of a Job and why it got there."""

    model_config = ConfigDict(extra="allow")

    phase: JobPhase | None = None
    reason: str | None = None
    message: str | None = None
    last_transition_time: str | None = None


class TaskState(Volcano):
    """Pod counts of one task by pod phase, e.g. {"Running": 3, "Pending": 1}."""

    model_config = ConfigDict(extra="allow")

    phase: dict[str, WholeNumber] | None = None


class JobCondition(Volcano):
    """One entry of a Job's phase history."""

    model_config = ConfigDict(extra="allow")

    status: str
    last_transition_time: str | None = None


class JobStatus(Volcano):
    """What the Volcano controller reports about a Job (extra fields allowed: the controller writes it)."""

    model_config = ConfigDict(extra="allow")

    state: JobState | None = None
    min_available: WholeNumber | None = None
    task_status_count: dict[str, TaskState] | None = None
    pending: WholeNumber | None = None
    running: WholeNumber | None = None
    succeeded: WholeNumber | None = None
    failed: WholeNumber | None = None
    terminating: WholeNumber | None = None
    unknown: WholeNumber | None = None
    version: WholeNumber | None = None
    retry_count: WholeNumber | None = None
    running_duration: Duration | None = None
    controlled_resources: dict[str, str] | None = None
    conditions: list[JobCondition] | None = None


class Job(Volcano):
    """A Volcano Job (`vcjob`): tasks of pods that Volcano gang-schedules and restarts by policy."""

    api_version: Literal["batch.volcano.sh/v1alpha1"] = "batch.volcano.sh/v1alpha1"
    kind: Literal["Job"] = "Job"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: JobSpec
    status: JobStatus | None = None


# ---- parsing -------------------------------------------------------------------------------------------

_M = TypeVar("_M", bound=BaseModel)


def _load_text(text: str, what: str) -> Any:
    import yaml  # imported here: a manifest given as a dict (every one LocalCluster reads back) needs none

    from components import kubeyaml

    try:
        return json.loads(text) if text.lstrip().startswith("{") else kubeyaml.load(text)
    except RecursionError:
        where, problem = "its start", "it nests its values too deeply to be read"
    except json.JSONDecodeError as err:
        where, problem = f"line {err.lineno}, column {err.colno}", err.msg
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        problem = err.problem or err.context or "cannot be read"
    except yaml.YAMLError as err:
        where, problem = "somewhere", " ".join(str(err).split())
    raise ValueError(f"the {what} manifest is not valid YAML or JSON at {where}: {problem}")


def parse_manifest(model: type[_M], data: dict[str, Any] | str, what: str) -> _M:
    """Read `model` from a dict or YAML/JSON text; ValueError says in one sentence what is wrong and where."""
    if isinstance(data, str):
        data = _load_text(data, what)
    if not isinstance(data, dict):
        raise ValueError(f"a {what} manifest must be a mapping of fields, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise ValueError(describe_validation_error(err, model)) from None


def parse_job(data: dict[str, Any] | str) -> Job:
    """Read a Job from a dict or YAML/JSON text; ValueError says in one sentence what is wrong and where."""
    return parse_manifest(Job, data, "Job")


def apply_volcano_defaults(job: Job) -> Job:
    """Return a copy of `job` with the defaults Volcano's mutating webhook fills in.

    Note that Volcano treats 0 as unset: `maxRetry: 0` becomes 3 and `minAvailable: 0` becomes the sum
    of the tasks' minAvailable.
    """
    job = job.model_copy(deep=True)
    spec = job.spec
    spec.queue = spec.queue or "default"
    spec.scheduler_name = spec.scheduler_name or "volcano"
    spec.max_retry = spec.max_retry or 3
    for index, task in enumerate(spec.tasks):
        task.name = task.name or f"default{index}"
        if task.min_available is None:
            partition = task.partition_policy
            if partition is not None and (partition.min_partitions or 0) > 0:
                task.min_available = (partition.min_partitions or 0) * (partition.partition_size or 1)
            else:
                task.min_available = task.replicas
        task.max_retry = task.max_retry or 3
    if not spec.min_available:
        spec.min_available = sum(task.min_available or 0 for task in spec.tasks)
    if spec.plugins is not None and SVC_PLUGINS & spec.plugins.keys():
        spec.plugins.setdefault("svc", [])
    if spec.plugins is not None and "mpi" in spec.plugins:
        spec.plugins.setdefault("ssh", [])
    return job
