"""What the LocalCluster tests share: a clock the test moves."""

from __future__ import annotations

import pytest
from clock_kit import Clock


@pytest.fixture
def clock() -> Clock:
    return Clock()
