"""What Volcano's queue webhook refuses in a Queue alone, caught before a cluster holds it."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from components.names import is_dns1123_subdomain
from components.volcano.resources import check_amount, quantity_value

if TYPE_CHECKING:
    from components.volcano.scheduling_models import Queue

__all__ = ["validate_queue"]

# Volcano's annotations of the older, annotation-based queue hierarchy (scheduling/v1beta1 KubeHierarchy*).
_HIERARCHY = "volcano.sh/hierarchy"
_HIERARCHY_WEIGHTS = "volcano.sh/hierarchy-weights"


def validate_queue(queue: Queue) -> None:
    """Raise ValueError, one sentence, for what the API server or Volcano's queue webhook refuses in `queue` alone.

    v1.15's validate_queue.go: quantities (ValidateResourceQuantityValue), guarantee <= deserved <= capability, the
    hierarchy annotations; a parent that exists needs the other queues, which the cluster checks.
    """
    name = queue.metadata.name
    if not name:
        raise ValueError("metadata.name is required")
    if not is_dns1123_subdomain(name):
        raise ValueError(
            f"metadata.name {name!r} must be a lowercase RFC 1123 name (a-z, 0-9, '-' and '.', starting and ending "
            "with a letter or digit)"
        )
    spec = queue.spec
    capability, deserved = spec.capability or {}, spec.deserved or {}
    guarantee = (spec.guarantee.resource if spec.guarantee else None) or {}
    for field, amounts in (
        ("spec.capability", capability),
        ("spec.deserved", deserved),
        ("spec.guarantee.resource", guarantee),
    ):
        for resource, amount in amounts.items():
            check_amount(field, resource, amount)
    for resource, amount in guarantee.items():
        if resource not in deserved:
            raise ValueError(
                f"spec.guarantee.resource[{resource}] is {amount}, so spec.deserved[{resource}] must be set to at "
                "least that"
            )
        if quantity_value(deserved[resource]) < quantity_value(amount):
            raise ValueError(
                f"spec.deserved[{resource}] is {deserved[resource]}; it must be at least "
                f"spec.guarantee.resource[{resource}] = {amount}"
            )
    for resource, amount in deserved.items():
        if resource in capability and quantity_value(amount) > quantity_value(capability[resource]):
            raise ValueError(
                f"spec.deserved[{resource}] is {amount}; it must be at most spec.capability[{resource}] = "
                f"{capability[resource]}"
            )
    if spec.parent == name:
        raise ValueError(f"queue {name!r} names itself as its spec.parent")
    _check_hierarchy(queue.metadata.annotations or {})


def _check_hierarchy(annotations: dict[str, str]) -> None:
    hierarchy, weights = annotations.get(_HIERARCHY, ""), annotations.get(_HIERARCHY_WEIGHTS, "")
    if not hierarchy and not weights:
        return
    paths, parts = hierarchy.split("/"), weights.split("/")
    if len(paths) != len(parts):
        raise ValueError(
            f"metadata.annotations[{_HIERARCHY}] {hierarchy!r} and [{_HIERARCHY_WEIGHTS}] {weights!r} must name as "
            "many levels, separated by '/'"
        )
    for part in parts:
        try:
            weight = float(part) if part.strip() == part and "_" not in part else math.nan
        except ValueError:
            weight = math.nan
        if not weight > 0:
            raise ValueError(
                f"metadata.annotations[{_HIERARCHY_WEIGHTS}] {weights!r}: each weight must be a number greater "
                f"than 0, not {part!r}"
            )
