"""The shape of a LocalCluster: virtual nodes, queues and priority classes, read from YAML and checked whole.

A config is refused before a cluster is built from it: at least one node, node and queue names that Kubernetes
accepts and that no two entries share, sizes above zero in Kubernetes' quantity grammar, priority values a user
may give. So a refused config leaves the cluster as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from components.errors import InputError
from components.files import load_document
from components.names import check_label_key, check_label_value, check_labels, is_dns1123_subdomain
from components.volcano.models import Int32, Quantity, WholeNumber
from components.volcano.resources import GPU, PODS, check_amount, parse_quantity, quantity_value
from components.volcano.validation import describe_validation_error

__all__ = ["LocalClusterConfig", "NodeConfig", "QueueConfig", "TaintConfig", "load_config"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)


# Kubernetes' ceiling for a PriorityClass a user creates (scheduling/v1 HighestUserDefinablePriority).
HIGHEST_USER_PRIORITY = 1_000_000_000


def _object_name(value: str) -> str:
    if not is_dns1123_subdomain(value):
        raise ValueError(
            f"{value!r} is not a Kubernetes name: lower-case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit"
        )
    return value


_Name = Annotated[str, AfterValidator(_object_name)]


# More nodes than any cluster we emulate; Kubernetes supports 5,000. A typo of a billion would hang `cluster reset`.
MAX_NODES = 5000
# More GPUs than any machine holds (8 or 16 do); past 2^53 the scheduler's float accounting would lose count.
MAX_NODE_GPUS = 1024


class TaintConfig(_Strict):
    """A taint of a node, held to the API server's rules (validateNodeTaints): key, optional value, an effect."""

    key: Annotated[str, AfterValidator(check_label_key)]
    value: Annotated[str, AfterValidator(check_label_value)] = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class NodeConfig(_Strict):
    """One virtual node; `count` > 1 makes `name-0`, `name-1`, ..."""

    name: _Name
    count: WholeNumber = Field(default=1, ge=1, le=MAX_NODES)
    gpus: WholeNumber = Field(default=4, ge=0, le=MAX_NODE_GPUS)
    cpu: Quantity = "32"
    memory: Quantity = "256Gi"
    # The kubelet's --max-pods: the node's status.allocatable.pods, which Volcano's predicates hold a node to.
    pods: WholeNumber = Field(default=110, ge=1, le=2**31 - 1)
    labels: Annotated[dict[str, str], AfterValidator(check_labels)] = Field(default_factory=dict)
    taints: list[TaintConfig] = Field(default_factory=list)

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, value: str | int | float) -> str | int | float:
        if quantity_value(value) <= 0:
            raise ValueError(f"{value!r} must be greater than 0")
        return value

    def names(self) -> list[str]:
        """The names of the nodes this entry stands for."""
        return [self.name] if self.count == 1 else [f"{self.name}-{i}" for i in range(self.count)]

    def expand(self) -> list[dict[str, Any]]:
        """The concrete nodes this entry stands for."""
        names = self.names()
        allocatable = {
            GPU: float(self.gpus),
            "cpu": parse_quantity(self.cpu),
            "memory": parse_quantity(self.memory),
            PODS: float(self.pods),
        }
        return [
            {
                "name": name,
                "allocatable": allocatable,
                "labels": {"kubernetes.io/hostname": name, **self.labels},
                "taints": [taint.model_dump() for taint in self.taints],
            }
            for name in names
        ]


class QueueConfig(_Strict):
    """A queue created with the cluster."""

    name: _Name
    weight: WholeNumber = Field(default=1, ge=1, le=65535)
    capability: dict[str, Quantity] = Field(default_factory=dict)
    reclaimable: bool = True

    @field_validator("capability")
    @classmethod
    def _amounts(cls, value: dict[str, str | int | float]) -> dict[str, str | int | float]:
        # A Queue's ResourceList takes any name (pods, …): only the amounts are checked, as validate_queue.go does.
        for resource, amount in value.items():
            check_amount("capability", resource, amount)
        return value


class LocalClusterConfig(_Strict):
    """A whole LocalCluster. The `default` queue always exists, as Volcano's scheduler creates it."""

    nodes: list[NodeConfig] = Field(default_factory=lambda: [NodeConfig(name="node", count=2, gpus=4)], min_length=1)
    queues: list[QueueConfig] = Field(default_factory=list)
    # scheduling/v1 PriorityClass.value is an int32: the API server refuses -3,000,000,000
    priority_classes: dict[str, Int32] = Field(default_factory=dict, alias="priorityClasses")
    # None: no overcommit plugin, as deploy/volcano/scheduler/volcano-scheduler.conf (Volcano's own default has 1.2).
    overcommit_factor: float | None = Field(
        default=None, ge=1.0, allow_inf_nan=False, strict=True, alias="overcommitFactor"
    )

    @model_validator(mode="after")
    def _whole(self) -> LocalClusterConfig:
        if (total := sum(entry.count for entry in self.nodes)) > MAX_NODES:
            raise ValueError(f"nodes make {total:,} nodes; a LocalCluster has at most {MAX_NODES:,}")
        seen: dict[str, int] = {}
        for index, entry in enumerate(self.nodes):
            for name in entry.names():
                if name in seen:
                    raise ValueError(f"nodes[{index}] makes node {name!r}, which nodes[{seen[name]}] makes too")
                seen[name] = index
        queues = [q.name for q in self.queues]
        twice = sorted({n for n in queues if queues.count(n) > 1})
        if twice:
            raise ValueError(f"queue {twice[0]!r} is listed twice")
        for name, value in self.priority_classes.items():
            _object_name(name)
            if name.startswith("system-"):
                raise ValueError(f"priority class {name!r}: names starting with 'system-' are Kubernetes' own")
            if value > HIGHEST_USER_PRIORITY:
                raise ValueError(f"priority class {name!r} is {value}; it must be at most {HIGHEST_USER_PRIORITY}")
        return self


def load_config(path: str | Path | None) -> LocalClusterConfig:
    """Read a config file; InputError with one sentence when it is unreadable or wrong."""
    if path is None:  # built when asked for: a command that opens an existing cluster needs no config
        return LocalClusterConfig()
    data = load_document(path, "cluster config")
    try:
        return LocalClusterConfig.model_validate(data)
    except ValidationError as err:
        raise InputError(f"cluster config {path}: {describe_validation_error(err, LocalClusterConfig)}.") from None
