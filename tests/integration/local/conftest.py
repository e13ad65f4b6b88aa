"""Fixtures for running workflows through the local runner in a throwaway VCPILOT_HOME."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pipelines.local.runner import RunResult, run_workflow


@dataclass
class Ran:
    """A finished run, with its nodes keyed by name minus the workflow name ("" is the root, ".A", "[0].x")."""

    result: RunResult

    @property
    def phase(self) -> str:
        return self.result.phase

    @property
    def name(self) -> str:
        return self.result.name

    @property
    def nodes(self) -> dict[str, dict[str, Any]]:
        return {n["name"][len(self.name) :]: n for n in self.result.status["nodes"].values()}

    @property
    def phases(self) -> dict[str, str]:
        return {k: v["phase"] for k, v in self.nodes.items()}

    def out(self, rel: str) -> str | None:
        """outputs.result of a node."""
        return (self.nodes[rel].get("outputs") or {}).get("result")

    def param(self, rel: str, name: str) -> str | None:
        """One output parameter of a node."""
        params = (self.nodes[rel].get("outputs") or {}).get("parameters") or []
        return next((p.get("value") for p in params if p["name"] == name), None)

    def message(self, rel: str) -> str | None:
        return self.nodes[rel].get("message")


Run = Callable[..., Ran]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fresh VCPILOT_HOME for one test."""
    return tmp_path / "home"


@pytest.fixture
def run(home: Path) -> Run:
    """Run a workflow (path, YAML text or dict) to its end in the test's home."""

    def start(source: Any, params: dict[str, str] | None = None, **kw: Any) -> Ran:
        return Ran(run_workflow(source, params or {}, home=home, **kw))

    return start


@pytest.fixture
def example(shared_dir: Path) -> Callable[[str], Path]:
    """The path of an upstream Argo example by name."""

    def path(name: str) -> Path:
        return shared_dir / "argo-examples" / f"{name}.yaml"

    return path
