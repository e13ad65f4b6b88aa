"""The scenarios of `vcpilot run`: what each changes (the logs, the pods' environment, a fault it injects).

Apart from `pipelines.autopilot_run`, which runs them, so that `vcpilot run --help` can list them without importing
the runner, the cluster and Hera.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SCENARIOS", "Scenario"]


@dataclass(frozen=True)
class Scenario:
    """What a scenario changes: the logs it writes, the environment of the pods, a fault it injects."""

    description: str
    drift: bool = True
    env: Mapping[str, str] = field(default_factory=dict)
    fault: Callable[[Path, str, Path, threading.Event], None] | None = None


def _during_training(fault: str) -> Callable[[Path, str, Path, threading.Event], None]:
    """A fault injected once attempt 1 has written a checkpoint.

    `node` fails the node its master runs on (recovered when the run ends); `pod` SIGKILLs the master pod, as
    an out-of-memory kill would.
    """

    def inject(home: Path, run: str, workspace: Path, stop: threading.Event) -> None:
        from components.finetune.checkpoint_layout import latest
        from components.volcano.cluster import ClusterError
        from components.volcano.cluster_local import LocalCluster

        cluster = LocalCluster(home)  # its own connection: SQLite connections stay in their thread
        checkpoints = workspace / "runs" / run / "checkpoints"
        failed: str | None = None
        done = False
        while not stop.wait(0.1):
            if done or latest(checkpoints) is None:
                continue
            with contextlib.suppress(ClusterError):
                running = [p for p in cluster.get(f"{run}-train-1").pods if p.phase == "Running" and p.node]
                if running and fault == "node":
                    failed = running[0].node
                    cluster.fail_node(failed or "")
                    done = True
                elif running:
                    cluster.kill_pod(running[0].name)
                    done = True
        if failed:
            cluster.recover_node(failed)

    return inject


SCENARIOS: dict[str, Scenario] = {
    "drift": Scenario("the logs drift: fine-tune, load-test, evaluate, release"),
    "no-drift": Scenario("the logs are clean: the gate stops the run early", drift=False),
    "node-failure": Scenario(
        "a node dies during training: diagnose retries from the latest checkpoint on the healthy node",
        env={"VCPILOT_STEP_DELAY": "0.3"},
        fault=_during_training("node"),
    ),
    "pod-kill": Scenario(
        "a training pod is killed: diagnose retries from the latest checkpoint",
        env={"VCPILOT_STEP_DELAY": "0.3"},
        fault=_during_training("pod"),
    ),
    "code-bug": Scenario(
        "training crashes identically on every rank: diagnose aborts, the run fails",
        env={"VCPILOT_FAIL_AT_STEP": "3"},
    ),
}
