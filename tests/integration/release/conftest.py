"""Fixtures of the release tests (the MLflow server they share is in tests/integration/conftest.py)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    """A directory with a few files: the registry does not care what model it is."""
    path = tmp_path / "model"
    path.mkdir()
    (path / "config.json").write_text("{}")
    (path / "weights.bin").write_bytes(bytes(range(256)))
    return path


@pytest.fixture
def closed_url() -> str:
    """The URL of a loopback port nothing listens on: an MLflow that is down."""
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Two test workers on two cores: torch threads beyond one per worker only fight each other."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
