"""Where Kubernetes lets a pod land, apart from resources: taints and tolerations, required node affinity.

The scheduler's predicates (`components.volcano.scheduler`) and the agent's reading of the nodes (`agent.capacity`,
`agent.pending`) apply the same rules; here apart from the scheduler's session, so that the agent can ask them
without importing the scheduler (`vcpilot plan` on a cluster with no waiting gang runs no session).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["BLOCKING_EFFECTS", "affinity_allows", "tolerates"]

# The taint effects that keep a new pod off a node (PreferNoSchedule only steers).
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, str]) -> bool:
    """True when one of the pod's tolerations matches the taint (Kubernetes' rules)."""
    for tol in tolerations:
        if tol.get("effect") and tol["effect"] != taint.get("effect"):
            continue
        operator = tol.get("operator") or "Equal"
        if not tol.get("key"):
            if operator == "Exists":  # an empty key with Exists tolerates every taint
                return True
            continue
        if tol["key"] != taint.get("key"):
            continue
        if operator == "Exists" or (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def affinity_allows(affinity: Mapping[str, Any] | None, name: str, labels: Mapping[str, str]) -> bool:
    """True when the pod's required node affinity lets it on the node `name` with `labels` (or it has none)."""
    node_affinity = (affinity or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if not required:
        return True
    return any(_term_matches(term, name, labels) for term in required.get("nodeSelectorTerms") or [])


def _term_matches(term: Mapping[str, Any], name: str, labels: Mapping[str, str]) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:  # Kubernetes: an empty term matches no node
        return False
    return all(_expression_matches(e, labels) for e in expressions) and all(
        _expression_matches(f, {"metadata.name": name}) for f in fields
    )


def _expression_matches(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator = expression.get("key", ""), expression.get("operator", "")
    values = [str(v) for v in expression.get("values") or []]
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if operator == "NotIn":  # a node without the label is "not in" the values
        return labels.get(key) not in values
    if key not in labels:
        return False
    if operator == "In":
        return labels[key] in values
    if operator in ("Gt", "Lt") and len(values) == 1:
        try:
            have, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False
