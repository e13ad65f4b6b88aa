"""Launch `python -m components.finetune` as real ranks — what Volcano's pytorch plugin starts in each pod."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from net_kit import free_port

ROOT = Path(__file__).resolve().parents[3]
PAIRS = [(f"Q: price of item {i}?\nA:", f" ${10 + 7 * i % 80}") for i in range(12)]


def write_dataset(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps({"prompt": p, "completion": c}) + "\n" for p, c in PAIRS)
    (directory / "train.jsonl").write_text(lines)
    (directory / "eval.jsonl").write_text(lines)
    return directory


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 prompt/completion pairs (eval = train: the task is memorisation)."""
    return write_dataset(tmp_path_factory.mktemp("data"))


@dataclass
class Run:
    """The ranks of one training job, and where they write."""

    procs: list[subprocess.Popen[str]]
    out: Path
    checkpoints: Path

    def wait(self, timeout: float = 240) -> list[int]:
        return [proc.wait(timeout=timeout) for proc in self.procs]

    def metrics(self) -> list[dict[str, float]]:
        file = self.out / "metrics.jsonl"
        return [json.loads(line) for line in file.read_text().splitlines()] if file.is_file() else []

    def summary(self) -> dict[str, object]:
        return json.loads((self.out / "summary.json").read_text())

    def stderr(self, rank: int = 0) -> str:
        assert self.procs[rank].stderr is not None
        return self.procs[rank].stderr.read()


Launch = Callable[..., Run]


@pytest.fixture(scope="module")
def launch() -> Iterator[Launch]:
    """Start `world` ranks of the trainer with the pipeline's flags and env; every rank is killed at teardown."""
    started: list[subprocess.Popen[str]] = []

    def start(world: int, data: Path, out: Path, checkpoints: Path, *args: str, **env: str) -> Run:
        port = str(free_port())
        procs = []
        for rank in range(world):
            rank_env = {
                **os.environ,
                "OMP_NUM_THREADS": "1",  # two ranks on two cores; also keeps float results reproducible
                "MLFLOW_TRACKING_URI": "",
                "VCPILOT_RESUME": "",
                "WORLD_SIZE": str(world),
                "RANK": str(rank),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": port,
                **env,
            }
            command = [sys.executable, "-m", "components.finetune", "--dataset-dir", str(data)]
            command += ["--output-dir", str(out), "--checkpoint-dir", str(checkpoints), "--json", *args]
            proc = subprocess.Popen(
                command, cwd=ROOT, env=rank_env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            procs.append(proc)
            started.append(proc)
        return Run(procs, out, checkpoints)

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
