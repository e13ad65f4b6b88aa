"""What Volcano's queue webhook refuses in a Queue alone, caught before a cluster holds it."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from components.names import is_dns1123_subdomain
from components.volcano.resources import check_amount, quantity_value

if TYPE_CHECKING:
    from collections.abc import Mapping

    from components.volcano.scheduling_models import Queue

__all__ = ["MAX_QUEUE_DEPTH", "validate_queue", "validate_queue_tree"]

# The webhook's --max-queue-depth default: a queue under root at most this many levels down.
MAX_QUEUE_DEPTH = 5

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


def validate_queue_tree(queue: Queue, others: Mapping[str, Queue]) -> None:
    """Raise ValueError, one sentence, for what the queue webhook refuses of `queue` among the `others` by name.

    validateHierarchicalQueue and validateHierarchicalQueueResources: its parent exists, the tree is at most
    MAX_QUEUE_DEPTH deep, no capability above its nearest ancestor's that sets it, none below a child's.
    """
    name, spec = queue.metadata.name, queue.spec
    ancestors: list[Queue] = []
    parent = spec.parent
    while parent and parent != "root":
        if len(ancestors) + 1 >= MAX_QUEUE_DEPTH:
            raise ValueError(
                f"it would sit more than {MAX_QUEUE_DEPTH} queues deep under root; Volcano allows {MAX_QUEUE_DEPTH}"
            )
        next_up = others.get(parent)
        if next_up is None:
            raise ValueError(f"its spec.parent {parent!r} does not exist; create that queue first")
        ancestors.append(next_up)
        parent = next_up.spec.parent
    for resource, amount in (spec.capability or {}).items():
        for ancestor in ancestors:  # findNearestAncestorCapability: the nearest one that sets it above 0
            above = (ancestor.spec.capability or {}).get(resource)
            if above is None or quantity_value(above) <= 0:
                continue
            if quantity_value(amount) > quantity_value(above):
                raise ValueError(
                    f"spec.capability[{resource}] is {amount}, above the {above} of its ancestor queue "
                    f"{ancestor.metadata.name!r}"
                )
            break
    for child in others.values():
        if child.spec.parent != name:
            continue
        for resource, amount in (child.spec.capability or {}).items():
            own = (spec.capability or {}).get(resource)
            if own is not None and quantity_value(own) > 0 and quantity_value(amount) > quantity_value(own):
                raise ValueError(
                    f"spec.capability[{resource}] is {own}, below the {amount} of its child queue "
                    f"{child.metadata.name!r}"
                )
