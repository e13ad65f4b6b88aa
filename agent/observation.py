"""What the agent sees when it decides: a frozen, serializable snapshot, so any decision can be replayed.

`agent.observe` fills it from a `Cluster`, the workspace and MLflow; the policies read nothing else. Times are
seconds; GPU counts are whole GPUs (`nvidia.com/gpu`).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from components.errors import InputError
from components.volcano.cluster import Event, JobInfo, NodeInfo, QueueSnapshot

__all__ = ["AttemptRecord", "CheckpointInfo", "Observation", "PlanRequest", "Throughput", "as_json", "check_names"]


_ADAPTERS: dict[type, TypeAdapter[Any]] = {}


def adapter(kind: type) -> TypeAdapter[Any]:
    """Pydantic's view of a model or of a cluster's answer (a dataclass: components.volcano.cluster), built once."""
    if kind not in _ADAPTERS:
        _ADAPTERS[kind] = TypeAdapter(kind)
    return _ADAPTERS[kind]


def as_json(value: Any, **options: Any) -> Any:
    """A model or a cluster's answer as JSON data; `options` are `model_dump`'s (include, exclude_defaults …)."""
    return adapter(type(value)).dump_python(value, mode="json", **options)


class _Frozen(BaseModel):
    # Built when first validated: most of these are only ever fields of another model (benchmarks/cli.py).
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


# Bounds of a request, far beyond any run and below what the rules can weigh: Kubernetes is tested to 5,000 nodes
# and 150,000 pods (a request of 1e9 GPUs had the rules weigh each size in turn for minutes), and a run's samples
# (steps × global batch) stay far inside a float.
MAX_GPUS = 100_000
MAX_GLOBAL_BATCH = 10**9
MAX_STEPS = 10**12


class PlanRequest(_Frozen):
    """What the run asks for: the training's size, batch and budget (the workflow's parameters)."""

    gpus: int = Field(gt=0, le=MAX_GPUS)  # wanted
    gpus_min: int = Field(default=1, gt=0)
    gpus_per_pod: int = Field(default=1, gt=0)
    global_batch: int = Field(gt=0, le=MAX_GLOBAL_BATCH)
    micro_batch: int = Field(gt=0)
    queue: str = "default"
    fallback_queue: str = ""
    priority_class: str = ""
    namespace: str = "default"
    max_steps: int = Field(default=1, gt=0, le=MAX_STEPS)
    attempt: int = Field(default=1, ge=1)
    max_attempts: int = Field(default=3, ge=1)
    avoid_nodes: list[str] = Field(default_factory=list)
    resume_checkpoint: str = ""
    # Gangs of this run deleted at their start deadline before they started (`RulesConfig.start_deadline_s`).
    replans: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _consistent(self) -> PlanRequest:
        if self.gpus_min > self.gpus:
            raise ValueError(f"gpus-min {self.gpus_min} is above gpus {self.gpus}")
        if self.gpus % self.gpus_per_pod:
            raise ValueError(f"gpus {self.gpus} is not a multiple of gpus-per-pod {self.gpus_per_pod}")
        if self.global_batch % (self.gpus * self.micro_batch):
            raise ValueError(
                f"global-batch {self.global_batch} is not a multiple of gpus × micro-batch = "
                f"{self.gpus} × {self.micro_batch}"
            )
        return self

    def check_names(self, queues: Collection[str], priority_classes: Collection[str]) -> None:
        """Refuse, in one sentence, a queue or priority class the cluster does not have (see `check_names`)."""
        check_names(self.queue, self.fallback_queue, self.priority_class, queues, priority_classes)


def check_names(
    queue: str, fallback_queue: str, priority_class: str, queues: Collection[str], priority_classes: Collection[str]
) -> None:
    """Refuse, in one sentence, a queue or priority class the cluster does not have (InputError).

    A plan into a queue that does not exist renders a VCJob the cluster refuses, minutes later; say so before.
    """
    known = ", ".join(sorted(queues)) or "none"
    if not queue:
        raise InputError(f"the queue is empty; name one of this cluster's queues: {known}")
    for what, name in (("queue", queue), ("fallback queue", fallback_queue)):
        if name and name not in queues:
            raise InputError(f"{what} {name!r} does not exist on this cluster; its queues are {known}")
    if priority_class and priority_class not in priority_classes:
        classes = ", ".join(sorted(priority_classes)) or "none"
        raise InputError(
            f"priority class {priority_class!r} does not exist on this cluster; its priority classes are "
            f"{classes} (leave it empty for none)"
        )


class CheckpointInfo(_Frozen):
    """The latest complete checkpoint (its metadata file written) and the step it holds."""

    path: str
    step: int = Field(ge=0)


class Throughput(_Frozen):
    """Measured training speed: samples per second at `gpus` GPUs (from MLflow, or the configured prior)."""

    samples_per_s: float = Field(gt=0)
    gpus: int = Field(gt=0)
    source: Literal["mlflow", "prior"] = "prior"
    checkpoint_save_s: float = Field(default=0.0, ge=0)  # how long a checkpoint stopped training; 0: unknown
    checkpoint_write_s: float = Field(default=0.0, ge=0)  # how long its write went on beside training; 0: none


class AttemptRecord(_Frozen):
    """How an earlier attempt of this training ended (read back from the decision records of this run)."""

    attempt: int = Field(ge=1)
    job: str
    gpus: int = Field(ge=0)
    outcome: str  # the job's final phase
    exit_codes: list[int] = Field(default_factory=list)  # of the pods that failed by themselves
    failed_ranks: int = 0
    ranks: int = 0
    checkpoint_step: int = 0  # the latest complete checkpoint's step when the attempt ended
    nodes: list[str] = Field(default_factory=list)  # nodes blamed for the failure


class Observation(_Frozen):
    """Everything a policy may look at, at `time` (seconds since the epoch, or a simulator's clock)."""

    time: float
    request: PlanRequest
    queue: QueueSnapshot | None = None
    fallback_queue: QueueSnapshot | None = None
    nodes: list[NodeInfo] = Field(default_factory=list)
    job: JobInfo | None = None  # the failed attempt, at diagnose time
    events: list[Event] = Field(default_factory=list)
    history: list[AttemptRecord] = Field(default_factory=list)
    checkpoint: CheckpointInfo | None = None
    throughput: Throughput | None = None
    # The cluster's run-band PriorityClasses (`agent.run_bands`), shortest bound first; none when it has none.
    run_bands: list[str] = Field(default_factory=list)
    # Names the request gives that the cluster lacks stop a job for good: Volcano admits no job into a queue that
    # does not exist, and the API server refuses every pod naming a PriorityClass that does not. The queues the
    # cluster said are not there; its PriorityClasses by name (None: they could not be read).
    missing_queues: list[str] = Field(default_factory=list)
    priority_classes: list[str] | None = None
    # Why parts are missing (the cluster unreachable, MLflow down): policies say so in their rationale.
    notes: list[str] = Field(default_factory=list)
