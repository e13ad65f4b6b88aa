"""Fixtures of the agent's integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_llm import FakeLLM, serve


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    """The scripted OpenAI-compatible server (`fake_llm`), up for one test."""
    with serve() as fake:
        yield fake
