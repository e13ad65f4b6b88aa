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


def _during_training(fault: str, attempts: int = 1) -> Callable[[Path, str, Path, threading.Event], None]:
    """A fault injected into each of the first `attempts` training attempts once it has written a checkpoint.

    `node` fails the node the attempt's first running pod is on; that node comes back Ready once the next attempt
    runs, as a flaky node does (the agent must keep avoiding it); the last one failed comes back when the run ends.
    `pod` SIGKILLs that pod, as an out-of-memory kill would.
    """

    def inject(home: Path, run: str, workspace: Path, stop: threading.Event) -> None:
        from components.finetune.checkpoint_layout import latest, recorded_step
        from components.volcano.cluster import ClusterError
        from components.volcano.cluster_local import LocalCluster

        cluster = LocalCluster(home)  # its own connection: SQLite connections stay in their thread
        checkpoints = workspace / "runs" / run / "checkpoints"
        attempt, passed, down = 1, -1, ""  # passed: the newest step when the last fault struck
        while attempt <= attempts and not stop.wait(0.1):
            with contextlib.suppress(ClusterError):
                running = [p for p in cluster.get(f"{run}-train-{attempt}").pods if p.phase == "Running" and p.node]
                if running and down:
                    cluster.recover_node(down)
                    down = ""
                newest = latest(checkpoints)
                # A checkpoint newer than the last fault's is this attempt's own: it lost at most one interval.
                if not running or newest is None or recorded_step(newest) <= passed:
                    continue
                if fault == "node":
                    down = running[0].node or ""
                    cluster.fail_node(down)
                else:
                    cluster.kill_pod(running[0].name)
                passed = recorded_step(latest(checkpoints) or newest)
                attempt += 1
        stop.wait()
        if down:
            cluster.recover_node(down)

    return inject


SCENARIOS: dict[str, Scenario] = {
    "drift": Scenario("the logs drift: fine-tune, load-test, evaluate, release"),
    "no-drift": Scenario("the logs are clean: the gate stops the run early", drift=False),
    "node-failure": Scenario(
        "a node dies during training: diagnose retries from the latest checkpoint on the healthy node",
        env={"VCPILOT_STEP_DELAY": "0.3"},
        fault=_during_training("node"),
    ),
    "node-failure-again": Scenario(
        "a node dies during training, comes back, and a node of the retry dies too: diagnose retries off both, "
        "on fewer GPUs with the global batch kept when the rest cannot hold the job, or aborts when no GPU is left",
        env={"VCPILOT_STEP_DELAY": "0.3"},
        fault=_during_training("node", attempts=2),
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
