"""Kubernetes resource quantities as plain numbers, so scheduling math needs no client library."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from decimal import Decimal

__all__ = ["GPU", "Resources", "add", "fits", "parse_quantity", "parse_resources", "scale_quantity", "sub", "total"]

GPU = "nvidia.com/gpu"

# A resource vector: resource name -> amount (cpu in cores, memory in bytes, devices as counts).
Resources = dict[str, float]

_SUFFIXES = {
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "": 1.0,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")


def parse_quantity(value: str | int | float) -> float:
    """Turn a Kubernetes quantity ("500m", "16Gi", 2) into a number; ValueError names the bad value."""
    if isinstance(value, bool):
        raise ValueError(f"quantity {value!r} is not a number such as 2, 500m or 16Gi")
    if isinstance(value, int | float):
        return float(value)
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise ValueError(f"quantity {value!r} is not a number such as 2, 500m or 16Gi")
    return float(match.group(1)) * _SUFFIXES[match.group(2) or ""]


def scale_quantity(value: str, factor: int) -> str:
    """`value` times a whole `factor`, in the same unit ("1500m" × 2 = "3000m", "16Gi" × 2 = "32Gi")."""
    match = _QUANTITY.match(value.strip())
    if not match:
        raise ValueError(f"quantity {value!r} is not a number such as 2, 500m or 16Gi")
    number = Decimal(match.group(1)) * factor
    digits = format(number.normalize(), "f") if number != number.to_integral() else str(int(number))
    return f"{digits}{match.group(2) or ''}"


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
