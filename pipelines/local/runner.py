"""The local runner's entry points: run a compiled Argo workflow here, resume a killed run, delete a run.

A run lives in `VCPILOT_HOME/runs/<workflow-name>/`: `status.json` (the Workflow with its Argo-shaped status,
rewritten atomically as nodes change) and `nodes/<node-id>/` (each leaf's `main.log`, script and `/tmp`).
`resume` reloads status.json after the runner died: nodes that ended keep their outputs and do not run
again, leaves that were running start over (a resource node re-attaches to the job it created).

A run given a `StopRequest` stops when it is set (Ctrl-C in the CLI), as `argo terminate` stops a workflow:
its processes are killed, the jobs it created that still run are deleted (their pods stop), and status.json
says `Failed`, "Stopped with strategy 'Terminate'", with `spec.shutdown: Terminate`. `resume` continues such
a run like a killed one: the stopped leaves run again.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from components.files import lock_within
from components.volcano.cluster import ClusterError
from components.volcano.cluster_local import LocalCluster, default_home
from pipelines.local import TRIGGER_LABEL
from pipelines.local.beside import directory_of, semaphore_limits
from pipelines.local.engine.engine import Engine
from pipelines.local.engine.executors import SHUTDOWN_MESSAGE, STDERR_TAIL, STOPPED_MESSAGE, kill_stale
from pipelines.local.engine.resources import ObjectCluster, OwnedObject, job_finished
from pipelines.local.engine.resume_marker import missing_output, supplied_outputs, write_request
from pipelines.local.engine.status import RunState, WorkflowStatus, now_rfc3339
from pipelines.local.workflow import Workflow, WorkflowError, check_run_name, load_workflow

__all__ = [
    "FailedStep",
    "Interrupted",
    "RunResult",
    "StopRequest",
    "WorkflowError",
    "delete_run",
    "is_running",
    "last_line",
    "resume",
    "run_workflow",
    "step_reason",
]

OnUpdate = Callable[[dict[str, Any]], None]
_FINISHED = ("Succeeded", "Failed", "Error")


class StopRequest:
    """Asks a run to stop; safe to `set` from a signal handler. The run writes its name here once it has one."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.run_name: str | None = None
        self.run_dir: Path | None = None  # runs/<name>, where each step's log is (the live display reads them)

    def set(self) -> None:
        """Ask the run to stop (it stops within a fraction of a second)."""
        self._event.set()

    def is_set(self) -> bool:
        """Whether a stop was asked for."""
        return self._event.is_set()

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a stop; whether one was asked for."""
        return self._event.wait(timeout)


class RunBusy(WorkflowError):
    """Another process runs the run now (it holds the run's lock)."""


class Interrupted(Exception):  # noqa: N818 - a stop, not an error: what the CLI exits 130 for
    """A stop was asked for before the workflow started (e.g. while the first champion trained)."""


@dataclass(frozen=True)
class RunResult:
    """How a run ended: its name, the workflow phase and the Argo-shaped `status`; `stopped` by a StopRequest."""

    name: str
    phase: str
    status: dict[str, Any]
    home: Path
    stopped: bool = False
    resumed: tuple[str, ...] = ()  # the suspended steps a `resume` asked the run's live runner to resume

    @property
    def nodes(self) -> dict[str, dict[str, Any]]:
        """`status.nodes` keyed by node name."""
        return {n["name"]: n for n in (self.status.get("nodes") or {}).values()}

    def node_dir(self, node_id: str) -> Path:
        """Where a leaf node's files (main.log, /tmp) are."""
        return self.home / "runs" / self.name / "nodes" / node_id

    def failed_steps(self) -> list[FailedStep]:
        """The steps (leaf nodes) that failed, in the order they started, each with its reason and its log."""
        found = []
        for node in sorted(self.status.get("nodes", {}).values(), key=lambda n: str(n.get("startedAt") or "~")):
            if node.get("type") != "Pod" or node.get("phase") not in ("Failed", "Error"):
                continue
            node_dir = self.node_dir(str(node.get("id")))
            log = node_dir / "main.log"
            found.append(
                FailedStep(
                    name=str(node.get("displayName") or node.get("name")),
                    template=str(node.get("templateName") or ""),
                    phase=str(node["phase"]),
                    message=str(node.get("message") or ""),
                    reason=step_reason(node_dir),
                    log=log if log.is_file() else None,
                )
            )
        return found


@dataclass(frozen=True)
class FailedStep:
    """A step that failed: Argo's message, the last line of its output (usually the sentence that says why)."""

    name: str
    template: str
    phase: str
    message: str
    reason: str
    log: Path | None


def step_reason(node_dir: Path) -> str:
    """Why a step ended, as it said: the last line it wrote to stderr, else the last line of its log."""
    return last_line(node_dir / STDERR_TAIL) or last_line(node_dir / "main.log")


def last_line(log: Path) -> str:
    """The last non-empty line of a log ("" when there is none): a step's last words are usually why it ended."""
    try:
        with open(log, "rb") as file:
            file.seek(max(0, file.seek(0, 2) - 4096))  # the end is enough, however long the log
            lines = [line.strip() for line in file.read().decode(errors="replace").splitlines()]
    except OSError:
        return ""
    return next((line for line in reversed(lines) if line), "")


def run_workflow(
    path_or_dict: str | Path | Mapping[str, Any],
    params: Mapping[str, str] | None = None,
    *,
    home: str | Path | None = None,
    cluster: Any = None,
    name: str | None = None,
    on_update: OnUpdate | None = None,
    stop: StopRequest | None = None,
    check: Callable[[Workflow], None] | None = None,
    entrypoint: str | None = None,
) -> RunResult:
    """Run a Workflow/WorkflowTemplate (file, YAML text or dict) to its end or its stop; WorkflowError on bad input.

    `check` refuses (WorkflowError) a workflow before anything of the run exists: the parameter rules a
    template's declarations cannot say (types, sizes), known to whoever starts it. `entrypoint` replaces the
    workflow's (`argo submit --entrypoint`).
    """
    home_path = _home(home)
    workflow = load_workflow(path_or_dict, params or {}, name=name, entrypoint=entrypoint)
    if check is not None:
        check(workflow)
    workflow.labels.setdefault(TRIGGER_LABEL, "local")  # Argo's controller labels its workflows too
    run_dir = home_path / "runs" / workflow.name
    if (run_dir / "status.json").exists():
        raise WorkflowError(f"a run named {workflow.name!r} already exists in {run_dir.parent}; resume or delete it.")
    beside = directory_of(path_or_dict)  # where a semaphore's ConfigMap is read, at each try for the lock
    local = {"cwd": os.getcwd(), "owned": [], **({"beside": str(beside.resolve())} if beside is not None else {})}
    document = {**workflow.document(), "local": local}
    with _exclusive(run_dir, workflow.name):
        if stop is not None:
            stop.run_name, stop.run_dir = workflow.name, run_dir
        state = RunState(run_dir / "status.json", document, on_update=on_update)
        return _drive(workflow, state, home_path, cluster, stop)


def read_run_record(home: Path, name: str, action: str) -> dict[str, Any]:
    """A run's status.json as the runner wrote it; WorkflowError in one sentence when it is missing or damaged.

    `action` ends the damaged record's sentence ("the run cannot be resumed"). A record of another shape (a list,
    a status that is not an object…) is refused here, not met as an AttributeError by whatever reads it next.
    """
    path = home / "runs" / check_run_name(name) / "status.json"
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise WorkflowError(f"there is no run named {name!r} in {home / 'runs'}.") from None
    except (ValueError, OSError) as err:
        why = "is not valid JSON" if isinstance(err, ValueError) else f"cannot be read ({err.strerror or err})"
        raise WorkflowError(f"{path} {why}; {action}.") from None
    shaped = isinstance(document, dict) and all(isinstance(document.get(k), dict) for k in ("metadata", "spec"))
    try:
        if shaped:
            WorkflowStatus.model_validate(document.get("status") or {})  # what RunState reads it as
    except ValidationError:
        shaped = False
    if not shaped:
        raise WorkflowError(f"{path} is not a run's record (a Workflow with its metadata, spec and status); {action}.")
    return dict(document)


def resume(
    name: str,
    *,
    home: str | Path | None = None,
    cluster: Any = None,
    on_update: OnUpdate | None = None,
    stop: StopRequest | None = None,
    outputs: Mapping[str, str] | None = None,
) -> RunResult:
    """Continue a run whose runner died or was stopped, and resume its suspended steps (`argo resume`).

    Suspended steps end Succeeded, their supplied output parameters from `outputs`, else their defaults (a step
    with an output that has neither is refused before anything changes). When the run's runner still runs, it
    is only asked to resume them: the result says which (`resumed`). A run that ended is returned as it is.
    """
    home_path = _home(home)
    path = home_path / "runs" / check_run_name(name) / "status.json"
    document = read_run_record(home_path, name, "the run cannot be resumed")
    status = document.get("status") or {}
    stopped = bool((document.get("spec") or {}).get("shutdown"))
    if status.get("phase") in _FINISHED and not stopped:
        if outputs:
            ended = status["phase"]
            raise WorkflowError(f"run {name!r} has ended ({ended}); no step of it waits for output parameters.")
        return RunResult(name, status["phase"], status, home_path)
    suspended = _suspended(Workflow.from_document(document), status, dict(outputs or {}), stopped)
    if suspended:
        write_request(path.parent, outputs or {})
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(_exclusive(path.parent, name))
        except RunBusy:
            if suspended:  # its runner goes on and takes the request
                return RunResult(
                    name, str(status.get("phase") or "Running"), status, home_path, resumed=tuple(suspended)
                )
            held.enter_context(_exclusive(path.parent, name, _LOCK_GRACE_S))  # a runner killed a moment ago
        document["spec"].pop("shutdown", None)
        if stop is not None:
            stop.run_name, stop.run_dir = name, path.parent
        state = RunState(path, document, on_update=on_update)
        for node in state.nodes():
            if stopped and node.phase == "Failed" and node.message in (SHUTDOWN_MESSAGE, STOPPED_MESSAGE):
                state.update(node, phase="Running", message=None, finished_at=None)  # the stop ended it
            elif node.fulfilled:
                continue
            if node.type == "Pod":
                node_dir = path.parent / "nodes" / node.id
                kill_stale(node_dir)
                shutil.rmtree(node_dir, ignore_errors=True)
                state.forget(node)
            elif node.type != "Suspend":
                state.mark(node, "Running")
        return _drive(Workflow.from_document(document), state, home_path, cluster, stop)


def _suspended(workflow: Workflow, status: Mapping[str, Any], outputs: dict[str, str], stopped: bool) -> list[str]:
    """The display names of the run's suspended steps (and those a stop ended); WorkflowError if `outputs` cannot.

    As `argo resume` (OverrideOutputParametersWithDefault) and `argo node set`: every supplied output of a
    suspended step needs a value or a default, and every value given must be one a suspended step expects.
    """
    nodes = [n for n in (status.get("nodes") or {}).values() if isinstance(n, dict)]
    stop_ended = (SHUTDOWN_MESSAGE, STOPPED_MESSAGE) if stopped else ()
    waiting = [
        n
        for n in nodes
        if n.get("type") == "Suspend" and (n.get("phase") in ("Pending", "Running") or n.get("message") in stop_ended)
    ]
    expected: set[str] = set()
    for node in waiting:
        template = workflow.templates.get(str(node.get("templateName")), {})
        expected.update(param for param, _ in supplied_outputs(template))
        if (missing := missing_output(template, outputs)) is not None:
            shown = node.get("displayName") or node.get("name")
            raise WorkflowError(
                f"step {shown!r} has output parameter {missing!r} to be supplied and no default: "
                f"give it with --output-parameter {missing}=VALUE."
            )
    if unexpected := sorted(set(outputs) - expected):
        raise WorkflowError(f"no suspended step of the run has a supplied output parameter {unexpected[0]!r}.")
    return [str(n.get("displayName") or n.get("name")) for n in waiting]


def delete_run(name: str, *, home: str | Path | None = None, cluster: Any = None) -> None:
    """Delete a run's directory and the jobs it created with `setOwnerReference: true`."""
    home_path = _home(home)
    run_dir = home_path / "runs" / check_run_name(name)
    try:
        document = json.loads((run_dir / "status.json").read_text())
    except FileNotFoundError:
        raise WorkflowError(f"there is no run named {name!r} in {home_path / 'runs'}.") from None
    except ValueError:  # a damaged record is deleted too; which jobs it owned cannot be read from it
        document = {}
    local = document.get("local") if isinstance(document, dict) else None
    listed = local.get("owned") if isinstance(local, dict) else None
    owned = [o for o in listed or [] if isinstance(o, dict) and isinstance(o.get("name"), str)]
    with _exclusive(run_dir, name, _LOCK_GRACE_S):
        if owned:
            with _session(home_path, cluster)() as c:
                for obj in owned:
                    with contextlib.suppress(ClusterError):
                        c.delete(obj["name"], obj.get("namespace") or "default", missing_ok=True)
        shutil.rmtree(run_dir, ignore_errors=True)


def is_running(name: str, *, home: str | Path | None = None) -> bool:
    """Whether a runner holds the run's lock now (a run left `Running` by a killed runner is not running)."""
    lock_path = _home(home) / "runs" / check_run_name(name) / "runner.lock"
    if not lock_path.is_file():
        return False
    with open(lock_path, "a") as lock:  # "a": probing must not truncate or create anything; closing unlocks
        return not lock_within(lock.fileno(), 0.0)


# A pod's log filter is a fork of the runner (components.volcano.localpods): for the instant before it closes the
# descriptors it inherited, it holds the run's lock too, so a runner killed just then leaves its lock held that long.
_LOCK_GRACE_S = 2.0


@contextlib.contextmanager
def _exclusive(run_dir: Path, name: str, grace_s: float = 0.0) -> Iterator[None]:
    """Hold the run's lock file: one runner per run; a killed runner's lock goes with its process.

    `grace_s`: how long to wait for a lock that a runner killed a moment ago may still leave held.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "runner.lock", "w") as lock:
        if not lock_within(lock.fileno(), grace_s):
            raise RunBusy(f"run {name!r} is still running in another process; wait for it or stop it.")
        yield


def _home(home: str | Path | None) -> Path:
    return Path(home).resolve() if home else default_home()


def _session(home: Path, cluster: Any) -> Callable[[], contextlib.AbstractContextManager[ObjectCluster]]:
    """Cluster access for one resource node: LocalCluster's SQLite connection belongs to one thread."""

    @contextlib.contextmanager
    def local() -> Iterator[ObjectCluster]:
        session = LocalCluster(cluster.home if isinstance(cluster, LocalCluster) else home)
        try:
            yield session
        finally:
            session.close()

    @contextlib.contextmanager
    def shared() -> Iterator[ObjectCluster]:
        yield cluster

    return local if cluster is None or isinstance(cluster, LocalCluster) else shared


def _drive(workflow: Workflow, state: RunState, home: Path, cluster: Any, stop: StopRequest | None) -> RunResult:
    run_dir = state.path.parent
    local = state.document.setdefault("local", {})
    owned: list[OwnedObject] = local.setdefault("owned", [])

    def own(obj: OwnedObject) -> None:
        with state.lock:
            if obj not in owned:
                owned.append(obj)
        state.write()  # before the job exists, so that delete_run always knows about it

    engine = Engine(
        workflow,
        state,
        run_dir=run_dir,
        cwd=str(local.get("cwd") or os.getcwd()),
        env={"VCPILOT_HOME": str(home)},
        cluster=_session(home, cluster),
        own=own,
        semaphore_limit=semaphore_limits(Path(local["beside"]) if isinstance(local.get("beside"), str) else None),
    )
    ended = threading.Event()
    if stop is not None:

        def watch() -> None:
            while not ended.is_set():
                if stop.wait(0.1):
                    engine.terminate()
                    return

        threading.Thread(target=watch, name="stop-watcher", daemon=True).start()
    try:
        engine.run()
    except Exception as err:  # the engine records node errors itself; this is the last line of defence
        state.set_workflow(
            phase="Error", message=f"internal error: {type(err).__name__}: {err}", finished_at=now_rfc3339()
        )
    finally:
        ended.set()
        engine.table.kill_all("the runner stopped", exempt_too=True)  # e.g. Ctrl-C: leave no orphans
        if engine.stopped.is_set():
            _stop_jobs(owned, home, cluster)
        status = state.close()
    return RunResult(workflow.name, status.get("phase", "Error"), status, home, engine.stopped.is_set())


def _stop_jobs(owned: list[OwnedObject], home: Path, cluster: Any) -> None:
    """Delete the run's jobs that still run, so that their pods stop; `resume` creates them again."""
    with _session(home, cluster)() as c:
        for obj in list(owned):
            name, namespace = obj["name"], obj.get("namespace") or "default"
            with contextlib.suppress(ClusterError):
                if not job_finished(c.get_object(name, namespace)):
                    c.delete(name, namespace, missing_ok=True)
