"""Fixtures of the release tests (the MLflow server they use is tests/integration/conftest.py's)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    """A directory with a few files: the registry does not care what model it is."""
    path = tmp_path / "model"
    path.mkdir()
    (path / "config.json").write_text("{}")
    (path / "weights.bin").write_bytes(bytes(range(256)))
    return path


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Two test workers on two cores: torch threads beyond one per worker only fight each other."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
