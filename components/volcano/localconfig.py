"""The shape of a LocalCluster: virtual nodes, queues and priority classes, read from YAML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from components.errors import InputError
from components.volcano.resources import GPU, parse_quantity

__all__ = ["DEFAULT_CONFIG", "LocalClusterConfig", "NodeConfig", "QueueConfig", "load_config"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class NodeConfig(_Strict):
    """One virtual node; `count` > 1 makes `name-0`, `name-1`, ..."""

    name: str
    count: int = Field(default=1, ge=1)
    gpus: int = Field(default=4, ge=0)
    cpu: str | int = "32"
    memory: str = "256Gi"
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[dict[str, str]] = Field(default_factory=list)

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, value: str | int) -> str | int:
        parse_quantity(value)
        return value

    def expand(self) -> list[dict[str, Any]]:
        """The concrete nodes this entry stands for."""
        names = [self.name] if self.count == 1 else [f"{self.name}-{i}" for i in range(self.count)]
        allocatable = {GPU: float(self.gpus), "cpu": parse_quantity(self.cpu), "memory": parse_quantity(self.memory)}
        return [
            {
                "name": name,
                "allocatable": allocatable,
                "labels": {"kubernetes.io/hostname": name, **self.labels},
                "taints": self.taints,
            }
            for name in names
        ]


class QueueConfig(_Strict):
    """A queue created with the cluster."""

    name: str
    weight: int = Field(default=1, ge=1)
    capability: dict[str, str | int] = Field(default_factory=dict)
    reclaimable: bool = True


class LocalClusterConfig(_Strict):
    """A whole LocalCluster. The `default` queue always exists, as Volcano's scheduler creates it."""

    nodes: list[NodeConfig] = Field(default_factory=lambda: [NodeConfig(name="node", count=2, gpus=4)])
    queues: list[QueueConfig] = Field(default_factory=list)
    priority_classes: dict[str, int] = Field(default_factory=dict, alias="priorityClasses")
    overcommit_factor: float = Field(default=1.2, ge=1.0, alias="overcommitFactor")

    @model_validator(mode="after")
    def _nodes(self) -> LocalClusterConfig:
        # A cluster of no nodes, or two of one name, cannot be stored: the database refused it after the reset.
        if not self.nodes:
            raise ValueError("nodes must list at least one node, e.g. [{name: node, count: 2, gpus: 4}]")
        names = [node["name"] for entry in self.nodes for node in entry.expand()]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"node names must be unique; {', '.join(twice)} appear more than once")
        return self


DEFAULT_CONFIG = LocalClusterConfig()


def load_config(path: str | Path | None) -> LocalClusterConfig:
    """Read a config file; ValueError with one sentence when it is unreadable or wrong."""
    if path is None:
        return DEFAULT_CONFIG
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except OSError as err:
        raise InputError(f"cannot read cluster config {path}: {err.strerror}") from None
    except UnicodeDecodeError as err:
        raise InputError(f"cluster config {path} is not UTF-8 text (byte {err.start}): save it as UTF-8 YAML") from None
    except yaml.YAMLError as err:
        raise InputError(f"cluster config {path} is not valid YAML: {str(err).splitlines()[0]}") from None
    try:
        return LocalClusterConfig.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        raise InputError(f"cluster config {path}: {where + ': ' if where else ''}{message}") from None
