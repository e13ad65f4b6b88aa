"""Fixtures shared by every test scope."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fault_table import pytest_runtest_logreport, pytest_terminal_summary  # noqa: F401  (hooks, see below)
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]

# The fault matrix's table (tests/fault_table.py) is printed at the end of a session that ran any of its rows: its
# hooks are imported here, the top conftest, so that the xdist controller, which collects nothing, has them too.

# The fuzz tests (tests/fuzz/) under hypothesis: `make test` runs the `ci` profile, a fixed small set of examples
# per target drawn the same way every run (derandomize), so a red build is reproducible and the suite stays fast;
# `make fuzz` runs `fuzz` (HYPOTHESIS_PROFILE=fuzz), many random examples, keeping the failures it finds in
# .hypothesis/ so the next run tries them first. No deadline: a slow example on a busy CI machine is not a bug.
_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
settings.register_profile(
    "ci", max_examples=30, deadline=None, derandomize=True, database=None, suppress_health_check=_QUIET
)
settings.register_profile(
    "fuzz", max_examples=int(os.environ.get("FUZZ_EXAMPLES", "2000")), deadline=None, suppress_health_check=_QUIET
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


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
