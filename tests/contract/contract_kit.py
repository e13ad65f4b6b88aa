"""What the contract tests share: the cluster under test with its namespace, and jobs written for both clusters.

A test describes what a job's pods do (run for a while, fail with an exit code, run until deleted) and
`Ctx.job` / `task` write it both ways into one manifest through the tests' factory (`tests/vcjob_factory.py`):
a shell command that LocalCluster runs, and the kwok annotations and labels (deploy/e2e/config/kwok.yaml) that
make kwok's fake kubelet do the same on the e2e cluster.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from vcjob_factory import vcjob, vcjob_task

from components.volcano.cluster import ClusterError

E2E_KUBECONFIG = "VCPILOT_E2E_KUBECONFIG"
KWOK_COMPLETE = "pod-complete.stage.kwok.x-k8s.io"
KWOK_FAILED = "pod-failed.stage.kwok.x-k8s.io"
FOREVER = None  # a pod that runs until its job is deleted


@dataclass
class Ctx:
    """One cluster under test with what the tests need around it."""

    cluster: Any  # LocalCluster or KubeCluster: both add fail_node/recover_node/kill_pod to the protocol
    ns: str
    kind: str  # "local" or "kube"
    residue: Callable[[str], list[str]]  # pods and PodGroups of a job that still exist
    failed_nodes: set[str] = field(default_factory=set)
    queues: list[str] = field(default_factory=list)

    @property
    def slow(self) -> float:
        """How much longer the real control plane needs than LocalCluster (kwok's delays, controller loops)."""
        return 4.0 if self.kind == "kube" else 1.0

    def job(
        self,
        name: str,
        *,
        pods: int = 1,
        gpus: int = 1,
        runs: float | None = 0.5,
        exit_code: int = 0,
        queue: str = "default",
        max_retry: int | None = None,
        policies: list[dict[str, Any]] | None = None,
        tasks: list[dict[str, Any]] | None = None,
        labels: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """A Volcano Job whose `pods` pods run `runs` seconds (None: until deleted), then exit with `exit_code`."""
        return vcjob(
            name,
            namespace=self.ns,
            labels=labels or {},
            queue=queue,
            max_retry=max_retry or 3,
            policies=policies,
            tasks=tasks or [task("main", pods, gpus=gpus, runs=runs, exit_code=exit_code)],
        )

    def queue(self, capability: dict[str, Any], **spec: Any) -> str:
        """A new queue with this capability and spec (cluster-scoped, so named uniquely and deleted after the test)."""
        name = f"capped-{uuid.uuid4().hex[:6]}"
        spec = {"weight": 1, "capability": capability, **spec}
        self.cluster.apply_queue({"metadata": {"name": name}, "spec": spec})
        self.queues.append(name)
        return name

    def fail_node(self, node: str) -> list[str]:
        """Turn a node NotReady (recovered when the test ends)."""
        self.failed_nodes.add(node)
        return list(self.cluster.fail_node(node))

    def eventually(self, what: str, check: Callable[[], Any], timeout: float = 15.0) -> Any:
        """Poll `check` until it returns something truthy; fail naming `what` after `timeout` (scaled by slow)."""
        deadline = time.monotonic() + timeout * self.slow
        while True:
            try:
                value = check()
            except ClusterError:
                value = None
            if value:
                return value
            if time.monotonic() >= deadline:
                pytest.fail(f"timed out waiting until {what}")
            time.sleep(0.1 * self.slow)

    def restarted(self, name: str, what: str, check: Callable[[Any], bool], timeout: float = 30.0) -> Any:
        """Poll the job until `check(info)` after a RestartJob; xfail on Volcano's stuck-Restarting race.

        Volcano v1.15.1 can leave a job in Restarting for good when the pods it killed vanish within
        milliseconds (kwok deletes at once): `status.terminating` keeps counting them and no later event
        re-syncs the job (docs/kubecluster.md). That is upstream's bug, not the contract's.
        """
        deadline = time.monotonic() + timeout * self.slow
        stuck_since: float | None = None
        while True:
            info = self.cluster.get(name, self.ns)
            if check(info):
                return info
            status = self.cluster.get_object(name, self.ns).get("status") or {}
            if self.kind == "kube" and info.phase == "Restarting" and not info.pods and status.get("terminating"):
                stuck_since = stuck_since or time.monotonic()
                if time.monotonic() - stuck_since > 20:
                    pytest.xfail(f"Volcano left {name} in Restarting counting {status['terminating']} gone pods")
            else:
                stuck_since = None
            if time.monotonic() >= deadline:
                pytest.fail(f"timed out waiting until {what}")
            time.sleep(0.1 * self.slow)


def task(
    name: str,
    replicas: int,
    *,
    gpus: int = 1,
    runs: float | None = 0.5,
    exit_code: int = 0,
    policies: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One task whose pods behave the same on LocalCluster (a shell command) and on kwok (stage annotations)."""
    seconds = "86400" if runs is None else f"{runs:g}"
    script = f"sleep {seconds}" + (f"; exit {exit_code}" if exit_code else "")
    annotations = {f"{KWOK_COMPLETE}/delay": f"{seconds}s"}
    labels: dict[str, str] = {}
    if exit_code:
        labels[KWOK_FAILED] = "true"
        annotations.update(
            {
                f"{KWOK_FAILED}/delay": f"{seconds}s",
                f"{KWOK_FAILED}/exit-code": str(exit_code),
                f"{KWOK_FAILED}/reason": "Error",
            }
        )
    return vcjob_task(
        name, replicas, gpus, script, metadata={"labels": labels, "annotations": annotations}, policies=policies
    )
