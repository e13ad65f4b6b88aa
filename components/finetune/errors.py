"""The two ways a fine-tuning run ends early on purpose: a mistake a person can fix, and the simulated bug."""

from __future__ import annotations

__all__ = ["FinetuneError", "SimulatedFailure"]


class FinetuneError(Exception):
    """Bad input (missing data, a global batch that does not divide, a foreign checkpoint): one sentence."""


class SimulatedFailure(Exception):
    """`VCPILOT_FAIL_AT_STEP` reached: the same crash on every rank, so the pipeline can tell bugs from faults."""
