"""Pydantic models of Volcano's scheduling.volcano.sh/v1beta1 Queue and PodGroup, on models.py's base and rules."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from components.volcano.models import Int32, ObjectMeta, Quantity, Subdomain, Volcano, WholeNumber, parse_manifest

__all__ = [
    "ExtendCluster",
    "NodeGroupAffinity",
    "PodGroup",
    "PodGroupPhase",
    "PodGroupSpec",
    "PodGroupStatus",
    "Queue",
    "QueueAffinity",
    "QueueGuarantee",
    "QueueSpec",
    "QueueState",
    "QueueStatus",
    "parse_podgroup",
    "parse_queue",
]

QueueState = Literal["Open", "Closed", "Closing", "Unknown"]
PodGroupPhase = Literal["Pending", "Running", "Unknown", "Inqueue", "Completed"]


class QueueGuarantee(Volcano):
    """The resources reserved for a Queue whatever the other queues use."""

    resource: dict[str, Quantity] | None = None


class NodeGroupAffinity(Volcano):
    """The node groups a queue's pods must (required) or would rather (preferred) land in, or avoid."""

    required_during_scheduling_ignored_during_execution: list[str] | None = None
    preferred_during_scheduling_ignored_during_execution: list[str] | None = None


class QueueAffinity(Volcano):
    """Where a queue's pods go, by node group (the nodegroup plugin's labels)."""

    node_group_affinity: NodeGroupAffinity | None = None
    node_group_anti_affinity: NodeGroupAffinity | None = None


class ExtendCluster(Volcano):
    """A cluster a queue's jobs may be dispatched to (multi-cluster scheduling)."""

    name: str | None = None
    weight: Int32 | None = None
    capacity: dict[str, Quantity] | None = None


class QueueSpec(Volcano):
    """How much of the cluster a Queue may use and how it shares it."""

    # 0 is unset: Volcano's mutating webhook (mutate_queue.go) writes 1 before the CRD's minimum of 1 is checked, and
    # LocalCluster reads it as 1; a negative weight is refused.
    weight: WholeNumber | None = Field(default=None, ge=0, le=65535)
    capability: dict[str, Quantity] | None = None
    # strict: the API server refuses "yes", "true" and 1 ("must be of type boolean"); pydantic would read them as true
    reclaimable: Annotated[bool, Field(strict=True)] | None = None
    deserved: dict[str, Quantity] | None = None
    guarantee: QueueGuarantee | None = None
    parent: Annotated[Subdomain, Field(max_length=253)] | None = None
    priority: WholeNumber | None = Field(default=None, ge=0)
    affinity: QueueAffinity | None = None
    extend_clusters: list[ExtendCluster] | None = None
    type: str | None = Field(default=None, max_length=253)
    dequeue_strategy: Literal["fifo", "traverse"] | None = None


class QueueStatus(Volcano):
    """A Queue's state; since v1.11 only `state` and `allocated` are kept current: count PodGroups."""

    model_config = ConfigDict(extra="allow")

    state: QueueState | None = None
    allocated: dict[str, Quantity] | None = None
    pending: WholeNumber | None = None
    running: WholeNumber | None = None
    inqueue: WholeNumber | None = None
    unknown: WholeNumber | None = None
    completed: WholeNumber | None = None
    reservation: dict[str, Any] | None = None


class Queue(Volcano):
    """A cluster-scoped Volcano Queue."""

    api_version: Literal["scheduling.volcano.sh/v1beta1"] = "scheduling.volcano.sh/v1beta1"
    kind: Literal["Queue"] = "Queue"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: QueueSpec = Field(default_factory=QueueSpec)
    status: QueueStatus | None = None


class PodGroupSpec(Volcano):
    """The gang a PodGroup stands for: how many pods must start together, in which queue."""

    min_member: WholeNumber | None = Field(default=None, ge=0)
    min_task_member: dict[str, WholeNumber] | None = None
    queue: Annotated[Subdomain, Field(max_length=253)] | None = None
    priority_class_name: str | None = Field(default=None, max_length=253)
    min_resources: dict[str, Quantity] | None = None
    network_topology: dict[str, Any] | None = None
    sub_group_policy: list[dict[str, Any]] | None = None


class PodGroupStatus(Volcano):
    """Where the scheduler has got with a PodGroup."""

    model_config = ConfigDict(extra="allow")

    phase: PodGroupPhase | None = None
    conditions: list[dict[str, Any]] | None = None
    running: WholeNumber | None = Field(default=None, ge=0)
    succeeded: WholeNumber | None = Field(default=None, ge=0)
    failed: WholeNumber | None = Field(default=None, ge=0)


class PodGroup(Volcano):
    """A Volcano PodGroup; the Job controller creates one per Job."""

    api_version: Literal["scheduling.volcano.sh/v1beta1"] = "scheduling.volcano.sh/v1beta1"
    kind: Literal["PodGroup"] = "PodGroup"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodGroupSpec = Field(default_factory=PodGroupSpec)
    status: PodGroupStatus | None = None


def parse_queue(data: dict[str, Any] | str) -> Queue:
    """Read a Queue from a dict or YAML/JSON text; ValueError says in one sentence what is wrong."""
    return parse_manifest(Queue, data, "Queue")


def parse_podgroup(data: dict[str, Any] | str) -> PodGroup:
    """Read a PodGroup from a dict or YAML/JSON text; ValueError says in one sentence what is wrong."""
    return parse_manifest(PodGroup, data, "PodGroup")
