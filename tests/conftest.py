"""Fixtures shared by every test scope."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The `../shared` data directory next to the checkout (CRD schemas, Argo examples, datasets).

    A user's clone has none, so tests that need it skip; CI sets VCPILOT_REQUIRE_SHARED=1 to fail instead.
    """
    path = ROOT.parent / "shared"
    if not path.is_dir():
        reason = f"{path} is missing: these tests need the shared schemas and datasets next to the checkout"
        if os.environ.get("VCPILOT_REQUIRE_SHARED") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return path
