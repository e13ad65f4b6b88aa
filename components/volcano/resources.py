"""Kubernetes resource quantities and the API server's rules for them, so scheduling math needs no client library."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal
from types import MappingProxyType
from typing import Any

from components.names import QUALIFIED_NAME, is_dns1123_subdomain

__all__ = [
    "EMPTY",
    "GPU",
    "PODS",
    "Resources",
    "add",
    "check_amount",
    "check_requirements",
    "check_resource_name",
    "fits",
    "is_extended_resource",
    "is_native_resource",
    "parse_quantity",
    "parse_resources",
    "quantity_value",
    "scale_quantity",
    "sub",
    "total",
]

# An empty read-only mapping: the default of a record's mapping field (records are NamedTuples, which share defaults).
EMPTY: Mapping[str, Any] = MappingProxyType({})

GPU = "nvidia.com/gpu"
# A node's status.allocatable.pods: how many pods its kubelet runs (--max-pods, 110 by default).
PODS = "pods"

# A resource vector: resource name -> amount (cpu in cores, memory in bytes, devices as counts).
Resources = dict[str, float]

_SUFFIXES = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
# Kubernetes' grammar (apimachinery's resource.Quantity): a signed decimal number, then one binary-SI suffix, one
# decimal-SI suffix or one integer exponent. Nothing else: no spaces, no unit after an exponent ("1e3Ki").
_QUANTITY = re.compile(
    r"([+-]?(?:\d+\.?\d*|\.\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE]([+-]?\d+))?",
    re.ASCII,  # Kubernetes' digits are 0-9: `１` (fullwidth) is no quantity, though Python's \d and Decimal take it
)
_EXAMPLES = "a number such as 2, 500m or 16Gi"
# Container resources a name without a domain may be (core/v1 standardContainerResources, hugepages-<size>).
_STANDARD = ("cpu", "memory", "ephemeral-storage")


def quantity_value(value: str | int | float) -> Decimal:
    """The exact value of a Kubernetes quantity ("500m", "16Gi", 2); ValueError names the bad value."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"quantity {value!r} is not {_EXAMPLES}")
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"quantity {value!r} is not {_EXAMPLES}")
        return Decimal(str(value))
    match = _QUANTITY.fullmatch(value)
    if not match:
        raise ValueError(f"quantity {value!r} is not {_EXAMPLES}")
    number, suffix, exponent = match.groups()
    if exponent is not None:
        if abs(int(exponent)) > 1000:  # what no cluster holds, and Decimal would spend a while on
            raise ValueError(f"quantity {value!r} is out of range")
        return Decimal(number).scaleb(int(exponent))
    return Decimal(number) * _SUFFIXES[suffix or ""]


def parse_quantity(value: str | int | float) -> float:
    """Turn a Kubernetes quantity ("500m", "16Gi", 2) into a number; ValueError names the bad value."""
    number = float(quantity_value(value))
    if not math.isfinite(number):  # within Decimal's range, beyond a float's: no cluster has that much of anything
        raise ValueError(f"quantity {value!r} is out of range")
    return number


def scale_quantity(value: str, factor: int) -> str:
    """`value` times a whole `factor`, in the same unit ("1500m" × 2 = "3000m", "16Gi" × 2 = "32Gi")."""
    match = _QUANTITY.fullmatch(value.strip())
    if not match:
        raise ValueError(f"quantity {value!r} is not {_EXAMPLES}")
    number = (quantity_value(value.strip()) if match.group(3) is not None else Decimal(match.group(1))) * factor
    digits = format(number.normalize(), "f") if number != number.to_integral() else str(int(number))
    return f"{digits}{match.group(2) or ''}"


def is_native_resource(name: str) -> bool:
    """Kubernetes' own resources: a name without a domain, or in the kubernetes.io domain (may be overcommitted)."""
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource(name: str) -> bool:
    """A resource a device plugin or an operator advertises (`nvidia.com/gpu`): whole units, never overcommitted."""
    return not is_native_resource(name) and not name.startswith("requests.")


def check_resource_name(name: str) -> None:
    """Refuse a container resource name the API server would (validateContainerResourceName), in one sentence."""
    if "/" not in name:
        if name in _STANDARD or (name.startswith("hugepages-") and len(name) > len("hugepages-")):
            return
        raise ValueError(
            f"resource {name!r} is not a container resource: use cpu, memory, ephemeral-storage, hugepages-<size> "
            "or a domain-qualified name such as nvidia.com/gpu"
        )
    prefix, _, short = name.partition("/")
    if not is_dns1123_subdomain(prefix) or not re.fullmatch(QUALIFIED_NAME, short) or "/" in short:
        raise ValueError(f"resource {name!r} must be <domain>/<name>, such as nvidia.com/gpu")
    if is_native_resource(name):
        raise ValueError(f"resource {name!r} is in the kubernetes.io domain, which has no such container resource")


# core/v1 IsIntegerResourceName's standard names: counts (a ResourceQuota's, a Queue's) held in whole units.
_COUNTED = frozenset(
    {
        "pods",
        "services",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    }
)


def check_amount(field: str, name: str, amount: str | int | float) -> None:
    """core/v1 ValidateResourceQuantityValue, one sentence: no negative amount; devices and counts in whole units."""
    value = quantity_value(amount)
    if value < 0:
        raise ValueError(f"{field}[{name}] is {amount}; it must be greater than or equal to 0")
    if (is_extended_resource(name) or name in _COUNTED) and value != value.to_integral_value():
        raise ValueError(f"{field}[{name}] is {amount}; {name} must be a whole number")


def _check_huge_pages(field: str, name: str, amount: str | int | float) -> None:
    """validateResourceQuantityHugePageValue: a page size in the name, a whole number of pages in the amount."""
    size = name.removeprefix("hugepages-")
    try:
        page = quantity_value(size)
    except ValueError:
        page = Decimal(0)
    if page <= 0:
        raise ValueError(f"resource {name!r} must name a page size, such as hugepages-2Mi")
    if quantity_value(amount) % page:
        raise ValueError(f"{field}[{name}] is {amount}; it must be a whole number of {size} pages")


def check_requirements(
    requests: Mapping[str, str | int | float] | None, limits: Mapping[str, str | int | float] | None
) -> None:
    """Refuse what Kubernetes' API server refuses in a container's requests and limits, in one sentence.

    The rules of core/v1 `ValidateResourceRequirements`: a known or domain-qualified name; no negative amount;
    extended resources (`nvidia.com/gpu`) in whole units, and — as they cannot be overcommitted — a request only
    with an equal limit; any other request at most its limit. A limit alone is fine: the request defaults to it.
    """
    limits, requests = dict(limits or {}), dict(requests or {})
    for field, amounts in (("limits", limits), ("requests", requests)):
        for name, amount in amounts.items():
            check_resource_name(name)
            check_amount(field, name, amount)
            if name.startswith("hugepages-"):
                _check_huge_pages(field, name, amount)
    for name, amount in requests.items():
        overcommit = is_native_resource(name) and not name.startswith("hugepages-")
        if name not in limits:
            if not overcommit:
                raise ValueError(
                    f"requests[{name}] needs limits[{name}] too, equal to it ({name} cannot be overcommitted)"
                )
            continue
        request, limit = quantity_value(amount), quantity_value(limits[name])
        if not overcommit and request != limit:
            raise ValueError(f"requests[{name}] is {amount}; it must be equal to the {name} limit of {limits[name]}")
        if request > limit:
            raise ValueError(f"requests[{name}] is {amount}; it must be at most the {name} limit of {limits[name]}")
    # ValidateResourceRequirements' last rule: "HugePages require cpu or memory"
    names = {*limits, *requests}
    if any(name.startswith("hugepages-") for name in names) and not {"cpu", "memory"} & names:
        raise ValueError("a container asking for hugepages must ask for cpu or memory too")


def parse_resources(raw: Mapping[str, str | int | float] | None) -> Resources:
    """Parse a resource list ({"cpu": "2", "nvidia.com/gpu": 1}) into a vector."""
    return {name: parse_quantity(amount) for name, amount in (raw or {}).items()}


def add(a: Mapping[str, float], b: Mapping[str, float]) -> Resources:
    """Element-wise sum of two vectors."""
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0.0) + amount
    return out


def sub(a: Mapping[str, float], b: Mapping[str, float]) -> Resources:
    """Element-wise difference a - b."""
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0.0) - amount
    return out


def total(vectors: Iterable[Mapping[str, float]]) -> Resources:
    """Sum of many vectors."""
    out: Resources = {}
    for vector in vectors:
        for name, amount in vector.items():
            out[name] = out.get(name, 0.0) + amount
    return out


def fits(request: Mapping[str, float], free: Mapping[str, float], *, unlimited_missing: bool = False) -> bool:
    """True when every requested amount is available in `free`.

    A resource absent from `free` counts as zero, or as unlimited with `unlimited_missing`
    (how Volcano reads a queue capability that does not mention a resource).
    """
    for name, amount in request.items():
        if amount <= 0:
            continue
        if name not in free:
            if unlimited_missing:
                continue
            return False
        if amount > free[name] + 1e-9:
            return False
    return True
