"""A containerSet template's pod: its containers side by side in one node directory, each after its dependencies.

As Argo v4.1.2 runs one (controller/container_set_template.go, argoexec's emissary, operator.go): every container
of the set is a main container; one starts when each of its `dependencies` exited 0 — a dependency that did not
makes it exit 64 (the emissary's own error) without running; `containerSet.retryStrategy` reruns a failing
container's command up to `retries` times in all, `duration` apart (wait.Backoff). The first main container to
exit non-zero ends the pod: those still running are killed ("Pod Failed whilst container running"), and the pod
fails with the first failure in the set's order ("b: Error (exit code 2)"). Only the container named `main`
gives the pod its `outputs.result`, exit code and outputs (files on the shared volumes are everyone's). Each
container is a node of type Container, `<pod>.<name>`, its state told through `report`.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pipelines.local.engine.executors import LeafContext, LeafResult, ProcessTable, _Running, run_container
from pipelines.local.engine.status import Outputs
from pipelines.local.workflow import parse_duration

__all__ = ["POD_FAILED_MESSAGE", "Report", "run_container_set"]

POD_FAILED_MESSAGE = "Pod Failed whilst container running"
EMISSARY_ERROR = 64  # argoexec's exit code when the emissary itself fails, not the command

Report = Callable[[str, str, "str | None"], None]


@dataclass
class _PodTable(ProcessTable):
    """The pod's own processes, also held in the run's table (a stop or deadline still ends them)."""

    run: ProcessTable = field(default_factory=ProcessTable)

    def add(self, proc: subprocess.Popen[bytes], exempt: bool) -> _Running:
        entry = self.run.add(proc, exempt)
        with self._lock:
            self._entries[proc.pid] = entry
            if self._shut is not None:
                entry.kill(self._shut)
        return entry

    def remove(self, entry: _Running) -> None:
        self.run.remove(entry)
        super().remove(entry)


def _backoff(template: Mapping[str, Any]) -> tuple[int, float]:
    """(attempts, seconds between them) of `containerSet.retryStrategy`: one attempt without it."""
    strategy = (template.get("containerSet") or {}).get("retryStrategy") or {}
    retries = strategy.get("retries")
    attempts = max(1, int(str(retries))) if retries not in (None, "") else 1
    duration = strategy.get("duration")
    return attempts, parse_duration(duration, "containerSet.retryStrategy.duration") if duration else 0.0


def run_container_set(
    template: Mapping[str, Any], ctx: LeafContext, table: ProcessTable, exempt: bool, report: Report
) -> LeafResult:
    """Run the set's containers as their graph says, in `ctx.node_dir`; the pod's result."""
    spec = template["containerSet"]
    containers: list[Mapping[str, Any]] = list(spec["containers"])
    shared = list(spec.get("volumeMounts") or [])
    try:
        attempts, pause_s = _backoff(template)
    except ValueError as err:
        return LeafResult("Error", str(err))
    pod = _PodTable(run=table)
    results: dict[str, LeafResult] = {}
    ended = {str(c["name"]): threading.Event() for c in containers}
    failed = threading.Event()

    def one(container: Mapping[str, Any]) -> None:
        name = str(container["name"])
        try:
            results[name] = _container(container, name)
        finally:
            result = results.get(name) or LeafResult("Error", f"{name}: internal error")
            results[name] = result
            if result.phase != "Succeeded":
                failed.set()
                pod.kill_all(POD_FAILED_MESSAGE, exempt_too=True)
            report(name, result.phase, result.message)
            ended[name].set()

    def _container(container: Mapping[str, Any], name: str) -> LeafResult:
        for dependency in container.get("dependencies") or []:
            ended[str(dependency)].wait()
            done = results[str(dependency)]
            if done.phase != "Succeeded":
                code = done.outputs.exit_code if done.outputs and done.outputs.exit_code else EMISSARY_ERROR
                why = f"dependency {dependency!r} exited with non-zero code: {code}"
                return LeafResult("Error", f"{name}: Error (exit code {EMISSARY_ERROR}): {why}")
        if failed.is_set():
            return LeafResult("Failed", POD_FAILED_MESSAGE)
        report(name, "Running", None)
        own = {**container, "volumeMounts": [*(container.get("volumeMounts") or []), *shared]}
        leaf: dict[str, Any] = {"name": template.get("name"), "container": own}
        if name == "main":  # only main's outputs are saved (the emissary's saveParameter/saveArtifact)
            leaf.update({key: template[key] for key in ("inputs", "outputs") if key in template})
        own_ctx = replace(ctx, container=name, env={**ctx.env, "ARGO_CONTAINER_NAME": name})
        result = run_container(leaf, own_ctx, pod, exempt)
        for _ in range(attempts - 1):
            if result.phase == "Succeeded" or failed.is_set() or (result.message or "") == POD_FAILED_MESSAGE:
                break
            time.sleep(pause_s)
            result = run_container(leaf, own_ctx, pod, exempt)
        if failed.is_set() and result.phase != "Succeeded" and not (result.message or "").startswith(f"{name}:"):
            return LeafResult("Failed", POD_FAILED_MESSAGE, result.outputs)
        return result

    threads = [threading.Thread(target=one, args=(c,), daemon=True) for c in containers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    main = results.get("main")
    outputs = main.outputs if main is not None else None
    for container in containers:  # the first failure in the set's order, as inferFailedReason ranks main ones
        result = results[str(container["name"])]
        if result.phase != "Succeeded" and result.message != POD_FAILED_MESSAGE:
            return LeafResult("Failed", result.message, outputs or Outputs())
    if any(r.phase != "Succeeded" for r in results.values()):
        return LeafResult("Failed", POD_FAILED_MESSAGE, outputs)
    return LeafResult("Succeeded", None, outputs)
