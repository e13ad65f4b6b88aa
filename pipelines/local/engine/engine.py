"""The scheduler of nodes: Argo's executeTemplate — inputs, substitution, retries, hooks, leaves — and the run.

Where Argo's controller re-evaluates the whole workflow on every event, the local engine runs each DAG, steps
template and leaf in its own thread and blocks where Argo would requeue; node names, IDs, phases, messages and
the order of decisions follow Argo v4.1.2 (workflow/controller/operator.go). Simplifications:

- a reference to a task/step output that does not exist errors the node, where Argo would wait forever;
- `timeout`/`activeDeadlineSeconds` apply to leaf templates only (Argo's validator refuses them elsewhere);
- lifecycle hooks other than `exit` (those with an `expression`) are refused when the workflow loads;
- `retryPolicy: OnTransientError` never retries (a local process has no transient Kubernetes errors);
- `terminate()` is `argo terminate` (nothing more runs, exit handlers neither) recorded at once: the status
  written is the one of the moment of the stop, so that `resume` continues from there.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipelines.local.engine.calls import Call, Prepared, exit_hook
from pipelines.local.engine.container_set import Report, run_container_set
from pipelines.local.engine.dag import run_dag
from pipelines.local.engine.executors import (
    DEADLINE_MESSAGE,
    SHUTDOWN_MESSAGE,
    STOPPED_MESSAGE,
    LeafContext,
    LeafResult,
    ProcessTable,
    mark_paths,
    run_container,
    run_script,
    run_suspend,
)
from pipelines.local.engine.http_template import run_http
from pipelines.local.engine.locks import Lock, holding, locks_of
from pipelines.local.engine.resources import ObjectCluster, OwnedObject, run_resource
from pipelines.local.engine.resume_marker import read_request
from pipelines.local.engine.retry import run_retries
from pipelines.local.engine.scope import artifact_local, resolve_artifact_arguments, substitute_tree
from pipelines.local.engine.status import (
    ARTIFACT_MARK,
    TOO_MANY_NODES,
    Inputs,
    NodeStatus,
    Outputs,
    Parameter,
    RunState,
    node_id,
    now_rfc3339,
    parse_rfc3339,
)
from pipelines.local.engine.steps import run_steps
from pipelines.local.expressions import ExpressionError, evaluate_expr, substitute
from pipelines.local.govalues import go_json, go_parameters_json, go_quote
from pipelines.local.workflow import (
    SCHEDULED_TIME,
    Workflow,
    WorkflowError,
    parse_duration,
    stringify,
    template_type,
)

__all__ = ["Engine"]

# Argo's entry-node phase -> workflow phase.
# Argo's maxAllowedStackDepth (workflow/controller/controller.go): a template nested this deep (recursion that
# never ends, most often) is an Error node with its message, instead of a run that never ends.
MAX_STACK_DEPTH = 100
MAX_DEPTH_MESSAGE = (
    "Maximum recursion depth exceeded. See "
    "https://argo-workflows.readthedocs.io/en/release-4.1/scaling/#maximum-recursion-depth"
)
# Argo's util/strftime.FormatChars: {{workflow.creationTimestamp.<char>}} for these, Python's strftime alike (L:
# milliseconds, always .000 for a creation time in whole seconds).
_STRFTIME_CHARS = "BbmAadHIMSYypZzL"
WORKFLOW_PHASE = {"Succeeded": "Succeeded", "Skipped": "Succeeded", "Omitted": "Succeeded", "Failed": "Failed"}
ClusterSession = Callable[[], contextlib.AbstractContextManager[ObjectCluster]]
# Argo's GetNodeType for the templates that make no Pod node (a template with a retryStrategy makes a Retry node).
_NODE_TYPES = {"dag": "DAG", "steps": "Steps", "suspend": "Suspend", "http": "HTTP"}


def _no_semaphores(name: str, key: str) -> int:
    raise WorkflowError(f"a semaphore's ConfigMap {name!r} cannot be read: this run has no files beside it.")


class Engine:
    """Runs one workflow: the entrypoint, then the exit handler, recording every node in `state`."""

    def __init__(
        self,
        workflow: Workflow,
        state: RunState,
        *,
        run_dir: Path,
        cwd: str,
        env: Mapping[str, str],
        cluster: ClusterSession,
        own: Callable[[OwnedObject], None],
        semaphore_limit: Callable[[str, str], int] | None = None,
    ) -> None:
        self.wf = workflow
        self.locks_dir = run_dir.parent.parent / "locks"  # VCPILOT_HOME/locks: shared by the machine's runs
        self.semaphore_limit = semaphore_limit or _no_semaphores
        self.state = state
        self.run_dir = run_dir
        self.cwd = cwd
        self.env = dict(env)
        self.cluster = cluster
        self.own = own
        self.cancel = threading.Event()  # set when the workflow's activeDeadlineSeconds has passed
        self.never = threading.Event()  # the cancel event of exit-handler nodes: set only by a stop
        self.stopped = threading.Event()  # set by terminate(): no node starts any more
        self.table = ProcessTable()
        parallelism = workflow.spec.get("parallelism")
        self._pods = threading.BoundedSemaphore(int(parallelism)) if parallelism else None
        self._started: dict[str, float] = {}
        self.runtime: dict[str, str] = {"workflow.status": "Running"}
        self._static = self._static_globals()

    # -- the run ----------------------------------------------------------------------------------------

    def run(self) -> None:
        """Run the entrypoint and the exit handler; leaves the final phase in `state`."""
        status = self.state.status
        if not status.started_at:
            self.state.set_workflow(started_at=now_rfc3339())
        timer = self._deadline_timer()
        try:
            self._run_locked()
        finally:
            if timer is not None:
                timer.cancel()

    def _run_locked(self) -> None:
        """Run under the workflow's own locks (`spec.synchronization`), Pending with Argo's message until held."""
        try:
            locks = self._locks(self.wf.spec.get("synchronization"), "spec.synchronization", self.globals())
        except (WorkflowError, ExpressionError) as err:  # Argo's markWorkflowFailed
            message = f"Failed to acquire the synchronization lock. {err}"
            self.state.set_workflow(phase="Failed", message=message, finished_at=now_rfc3339())
            return
        wait = holding(
            self.locks_dir,
            locks,
            lambda message: self.state.set_workflow(phase="Pending", message=message),
            lambda: self.stopped.is_set() or self.cancel.is_set(),
        )
        with wait as held:
            if not held:  # a stop has recorded the workflow already
                if not self.stopped.is_set():
                    self.state.set_workflow(phase="Failed", message=DEADLINE_MESSAGE, finished_at=now_rfc3339())
                return
            self._run()

    def _run(self) -> None:
        self.state.set_workflow(phase="Running", finished_at=None, message=None)
        root = self.execute(
            Call(name=self.wf.name, ref={"template": self.wf.spec["entrypoint"]}, arguments=self.wf.arguments)
        )
        phase = WORKFLOW_PHASE.get(root.phase, "Error")
        message = root.message
        if self.state.overflowed:  # as Argo errs a workflow its status cannot hold any more
            phase, message = "Error", f"{TOO_MANY_NODES}."
        self.runtime["workflow.status"] = phase
        self.runtime["workflow.failures"] = self._failures()
        hook = None if self.stopped.is_set() else self._workflow_exit_hook()
        if hook is not None:
            call = Call(name=f"{self.wf.name}.onExit", ref=hook, on_exit=True, hooked=True)
            try:
                args = substitute_tree(hook.get("arguments") or {}, self.globals())
                exit_node = self.execute(replace(call, arguments=args))
            except ExpressionError as err:
                exit_node = self.error_node(call, hook.get("template"), str(err))
            if phase == "Succeeded" and exit_node.failed_or_error:
                phase, message = exit_node.phase, exit_node.message
        self.state.set_workflow(phase=phase, message=message, finished_at=now_rfc3339())

    def _workflow_exit_hook(self) -> Mapping[str, Any] | None:
        spec = self.wf.spec
        if spec.get("onExit"):
            return {"template": spec["onExit"]}
        hook = (spec.get("hooks") or {}).get("exit")
        return hook if isinstance(hook, Mapping) else None

    def _deadline_timer(self) -> threading.Timer | None:
        seconds = self.wf.spec.get("activeDeadlineSeconds")
        if seconds in (None, ""):
            return None
        started = parse_rfc3339(self.state.status.started_at) or time.time()
        left = max(0.0, started + float(seconds) - time.time())
        if left > threading.TIMEOUT_MAX:  # past what a timer can wait (292 years): it never comes in this run
            return None
        timer = threading.Timer(left, self._expire)
        timer.daemon = True
        timer.start()
        return timer

    def terminate(self) -> None:
        """Stop the run as `argo terminate` does, and record it now: every node still going Failed, and the workflow.

        The status is frozen at this moment (`RunState.freeze`): the threads that unwind afterwards change
        nothing on disk, and `resume` runs the stopped leaves again. The caller stops the run's jobs.
        """
        with self.state.lock:
            if self.stopped.is_set():
                return
            self.stopped.set()
            for node in self.state.nodes():
                if not node.fulfilled:
                    leaf = node.type in ("Pod", "Suspend")
                    self.state.mark(node, "Failed", SHUTDOWN_MESSAGE if leaf else STOPPED_MESSAGE)
            self.state.set_workflow(phase="Failed", message=STOPPED_MESSAGE, finished_at=now_rfc3339())
            self.state.document["spec"]["shutdown"] = "Terminate"  # where Argo records a stop
            self.state.freeze()
        self.cancel.set()
        self.never.set()
        self.table.shut(SHUTDOWN_MESSAGE)

    def _expire(self) -> None:
        self.cancel.set()
        self.table.expire(DEADLINE_MESSAGE)  # a step that starts in this moment too

    def _failures(self) -> str:
        # `{{workflow.failures}}` as Argo sets it: the failed nodes' JSON (fields in its struct's order, `null` for
        # none), quoted once more as a Go string literal (strconv.Quote), so that its quotes survive substitution.
        failed = [
            "{"
            + ",".join(
                f'"{key}":{go_json(value)}'
                for key, value in (
                    ("displayName", n.display_name),
                    ("message", n.message or ""),
                    ("templateName", n.template_name or ""),
                    ("phase", n.phase),
                    ("podName", self.pod_name(n.name, n.template_name)),
                    ("finishedAt", n.finished_at),
                )
            )
            + "}"
            for n in self.state.nodes()
            if n.failed_or_error
        ]
        return go_quote("[" + ",".join(failed) + "]" if failed else "null")

    # -- scopes ---------------------------------------------------------------------------------------

    def _static_globals(self) -> dict[str, Any]:
        wf = self.wf
        out: dict[str, Any] = {
            "workflow.name": wf.name,
            "workflow.namespace": wf.namespace,
            "workflow.uid": wf.uid,
            "workflow.mainEntrypoint": wf.spec.get("entrypoint", ""),
            "workflow.serviceAccountName": wf.spec.get("serviceAccountName", ""),
            "workflow.creationTimestamp": wf.created_at,
            "workflow.creationTimestamp.RFC3339": wf.created_at,
            # each of these as Argo v4's setGlobalParameters sets it (encoding/json; the bare forms are deprecated)
            "workflow.parameters": go_parameters_json(wf.arguments.get("parameters") or []),
            "workflow.parameters.json": go_parameters_json(wf.arguments.get("parameters") or []),
            "workflow.labels": go_json(wf.labels),
            "workflow.labels.json": go_json(wf.labels),
            "workflow.annotations": go_json(wf.annotations),
            "workflow.annotations.json": go_json(wf.annotations),
        }
        if SCHEDULED_TIME in wf.annotations:  # a CronWorkflow's run
            out["workflow.scheduledTime"] = wf.annotations[SCHEDULED_TIME]
        created = datetime.strptime(wf.created_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        out["workflow.creationTimestamp.s"] = str(int(created.timestamp()))
        for char in _STRFTIME_CHARS:  # {{workflow.creationTimestamp.<char>}}, Argo's util/strftime.FormatChars
            out[f"workflow.creationTimestamp.{char}"] = ".000" if char == "L" else created.strftime(f"%{char}")
        if wf.spec.get("priority") is not None:
            out["workflow.priority"] = str(wf.spec["priority"])
        out.update({f"workflow.parameters.{k}": v for k, v in wf.parameters.items()})
        out.update({f"workflow.labels.{k}": v for k, v in wf.labels.items()})
        out.update({f"workflow.annotations.{k}": v for k, v in wf.annotations.items()})
        return out

    def globals(self) -> dict[str, Any]:
        """The workflow-wide variables as of now (status, failures and global outputs change during the run)."""
        out = dict(self._static)
        out.update(self.runtime)
        started = parse_rfc3339(self.state.status.started_at)
        out["workflow.duration"] = f"{(time.time() - started) if started else 0.0:f}"
        for p in (self.state.status.outputs.parameters or []) if self.state.status.outputs else []:
            if p.value is not None:
                out[f"workflow.outputs.parameters.{p.name}"] = p.value
        for a in (self.state.status.outputs.artifacts or []) if self.state.status.outputs else []:
            out[f"workflow.outputs.artifacts.{a.name}"] = a.reference
        return out

    def pod_name(self, node_name: str, template_name: str | None) -> str:
        """Argo's v2 pod name: `<workflow>-<template>-<fnv32a(node name)>`."""
        if node_name == self.wf.name:
            return node_name
        suffix = node_id(self.wf.name, node_name).rsplit("-", 1)[-1]  # known before the node is: {{pod.name}}
        # A template a templateRef reached is named `<workflowtemplate>.<template>`; Argo's pod takes the template's.
        prefix = f"{self.wf.name}-{template_name.rsplit('.', 1)[-1]}" if template_name else self.wf.name
        return f"{prefix[:243]}-{suffix}"

    # -- executeTemplate --------------------------------------------------------------------------------

    def execute(self, call: Call) -> NodeStatus:
        """Run the template a call names, or return its node when it already ran (a resumed run)."""
        node = self.state.by_name(call.name)
        if node is not None and node.fulfilled:
            return node
        template_name = call.ref.get("template")
        if call.depth >= MAX_STACK_DEPTH:  # Argo's executeTemplate: the node is an Error, its parents fail with it
            return self.error_node(call, template_name, MAX_DEPTH_MESSAGE)
        try:
            template = self.wf.template(call.ref)
            prepared = self.prepare(template, call)
            # Held by the node a template's call makes: a retry's attempts run under their Retry node's locks.
            sync = None if call.retried else prepared.template.get("synchronization")
            locks = self._locks(sync, f"template {prepared.name!r} synchronization")
        except (WorkflowError, ExpressionError) as err:
            return self.error_node(call, template_name, str(err))
        with self._locked(call, prepared, locks) as ended:
            if ended is not None:
                return ended
            try:
                if prepared.template.get("retryStrategy") is not None and not call.retried:
                    return run_retries(self, call, prepared)
                return self.run_template(call, prepared)
            except (WorkflowError, ExpressionError) as err:
                return self.error_node(call, template_name, str(err))
            except Exception as err:  # a bug must end the node, not hang the workflow
                return self.error_node(call, template_name, f"internal error: {type(err).__name__}: {err}")

    def _locks(self, sync: Any, where: str, scope: Mapping[str, Any] | None = None) -> list[Lock]:
        """The locks a `synchronization` asks for, its `{{...}}` substituted where `scope` is given."""
        if not sync:
            return []
        if scope is not None:
            sync = substitute_tree(sync, scope, strict=True)
        return locks_of(sync, self.wf.namespace, where, self.semaphore_limit)

    @contextlib.contextmanager
    def _locked(self, call: Call, prepared: Prepared, locks: list[Lock]) -> Iterator[NodeStatus | None]:
        """Hold a template's locks while its node runs: None once held, or the node when the wait ended first.

        While a lock is not free the node waits Pending with Argo's message (made now if it was not there yet).
        """
        waiting: list[NodeStatus] = []

        def wait(message: str) -> None:
            node = self.state.by_name(call.name)
            if node is None:
                kind = (
                    "Retry"
                    if prepared.template.get("retryStrategy") is not None
                    else _NODE_TYPES.get(str(template_type(prepared.template)), "Pod")
                )
                node = self.state.init_node(
                    call.name,
                    kind,
                    template_name=prepared.name,
                    boundary_id=call.boundary_id,
                    phase="Pending",
                    parents=call.parents,
                    message=message,
                    inputs=prepared.inputs,
                    flag=call.flag,
                )
            else:
                self.state.update(node, message=message)
            waiting[:] = [node]

        def give_up() -> bool:
            return self.stopped.is_set() or (self.cancel.is_set() and not call.on_exit)

        with holding(self.locks_dir, locks, wait, give_up) as held:
            if not held:
                node = waiting[0]
                if not self.stopped.is_set():  # a stop has marked it already
                    self.state.mark(node, "Failed", DEADLINE_MESSAGE)
                yield node
                return
            if waiting:
                self.state.update(waiting[0], message=None)
            yield None

    def error_node(self, call: Call, template_name: str | None, message: str) -> NodeStatus:
        """Argo's initializeNodeOrMarkError: an existing node becomes Error, else a Skipped-type Error node."""
        node = self.state.by_name(call.name)
        if node is None:
            return self.state.init_node(
                call.name,
                "Skipped",
                template_name=template_name,
                boundary_id=call.boundary_id,
                phase="Error",
                parents=call.parents,
                message=message,
                flag=call.flag,
            )
        self.state.mark(node, "Error", message)
        return node

    def prepare(self, template: dict[str, Any], call: Call) -> Prepared:
        """Argo's ProcessArgs + SubstituteParams: bind inputs to arguments and substitute what is known."""
        if template_type(template) in ("container", "script", "containerSet"):
            template = mark_paths(template, self.wf.spec)  # before values arrive: only the template's own paths move
        base = self.globals()
        base.update(call.locals)
        base["node.name"] = call.name
        if call.retried or template.get("retryStrategy") is None:  # a retried template learns its pod per attempt
            base["pod.name"] = self.pod_name(call.name, template.get("name"))
        supplied = {p.get("name"): p for p in (call.arguments or {}).get("parameters") or []}
        params: list[Parameter] = []
        for spec in (template.get("inputs") or {}).get("parameters") or []:
            name = spec["name"]
            value = spec.get("value", spec.get("default"))
            arg = supplied.get(name)
            if arg is not None and arg.get("value") is not None:
                value = arg["value"]
            if value is None:
                raise WorkflowError(f"inputs.parameters.{name} was not supplied.")
            text = stringify(value)
            if "{{" in text:
                text = substitute(text, base, strict=False)
            # kept on the node, not enforced: Argo's controller runs a step whose input is outside its enum
            enum = [stringify(e) for e in spec.get("enum") or []]
            default = spec.get("default")
            params.append(
                Parameter(
                    name=name, value=text, default=None if default is None else stringify(default), enum=enum or None
                )
            )
        scope = dict(base)
        for p in params:
            scope[f"inputs.parameters.{p.name}"] = p.value
        scope["inputs.parameters"] = go_parameters_json(p.dump() for p in params)
        for out in (template.get("outputs") or {}).get("parameters") or []:
            path = (out.get("valueFrom") or {}).get("path")
            if path:
                scope[f"outputs.parameters.{out['name']}.path"] = path
        for out in (template.get("outputs") or {}).get("artifacts") or []:
            if out.get("path"):
                scope[f"outputs.artifacts.{out['name']}.path"] = out["path"]
        wanted = (template.get("inputs") or {}).get("artifacts")
        artifacts = self._input_artifacts(template, call, scope) if wanted else None
        body = substitute_tree(template, scope, skip=("inputs",))
        if artifacts is not None:
            body["inputs"] = {**body["inputs"], "artifacts": artifacts}
        return Prepared(body, Inputs(parameters=params) if params else None, scope)

    def _input_artifacts(self, template: Mapping[str, Any], call: Call, scope: dict[str, Any]) -> list[dict[str, Any]]:
        """Argo's ProcessArgs for artifacts: each input takes its argument's source, else its own.

        The loader let through only `raw` sources and references to artifacts the run keeps (`from`, substituted
        by the caller); the executor writes or copies them where the template reads them (`_source`).
        """
        supplied = {a.get("name"): a for a in (call.arguments or {}).get("artifacts") or []}
        artifacts = []
        for spec in template["inputs"]["artifacts"]:
            name = spec["name"]
            given = supplied.get(name) or {}
            scope[f"inputs.artifacts.{name}.path"] = spec.get("path")
            if given.get("from") is not None:
                local = self.run_dir / artifact_local(given["from"], f"artifact argument {name!r}")
                source = (local / str(given.get("subPath") or "")).resolve()
                if not source.is_relative_to(self.run_dir.resolve()):
                    raise WorkflowError(f"artifact argument {name!r} points outside the run's directory.")
                scope[f"inputs.artifacts.{name}"] = f"{ARTIFACT_MARK}{source.relative_to(self.run_dir.resolve())}"
                artifacts.append({**spec, "_source": str(source)})
                continue
            raw = given.get("raw") or spec.get("raw")
            if raw is None:
                if spec.get("optional"):
                    continue
                raise WorkflowError(f"inputs.artifacts.{name} was not supplied.")
            data = substitute(stringify(raw.get("data") or ""), scope, strict=False)
            if template_type(template) in ("steps", "dag"):
                # Its steps may pass it on (`from: "{{inputs.artifacts.NAME}}"`): Argo's scope holds the raw
                # artifact itself; the run keeps its data where a reference can copy it from.
                kept = self.run_dir / "nodes" / node_id(self.wf.name, call.name) / ".raw-inputs" / name
                kept.parent.mkdir(parents=True, exist_ok=True)
                kept.write_text(data)
                scope[f"inputs.artifacts.{name}"] = f"{ARTIFACT_MARK}{kept.relative_to(self.run_dir)}"
            artifacts.append({**spec, "raw": {"data": data}})
        return artifacts

    def run_template(self, call: Call, prepared: Prepared) -> NodeStatus:
        """Dispatch on the template's kind (no retry wrapper)."""
        kind = template_type(prepared.template)
        if kind == "dag":
            return run_dag(self, call, prepared)
        if kind == "steps":
            return run_steps(self, call, prepared)
        return self._leaf(call, prepared, str(kind))

    # -- leaves ------------------------------------------------------------------------------------------

    def _leaf(self, call: Call, prepared: Prepared, kind: str) -> NodeStatus:
        node = self.state.by_name(call.name)
        if node is None:
            node = self.state.init_node(
                call.name,
                {"suspend": "Suspend", "http": "HTTP"}.get(kind, "Pod"),
                template_name=prepared.name,
                boundary_id=call.boundary_id,
                phase="Pending",
                parents=call.parents,
                inputs=prepared.inputs,
                flag=call.flag,
            )
            self._started[node.id] = time.time()
        if self.stopped.is_set():
            self.state.mark(node, "Failed", SHUTDOWN_MESSAGE)
            return node
        if self.cancel.is_set() and not call.on_exit:
            self.state.mark(node, "Failed", DEADLINE_MESSAGE)
            return node
        with self._pod_slot(kind not in ("suspend", "http")):
            if self.stopped.is_set():
                result = LeafResult("Failed", SHUTDOWN_MESSAGE)
            elif self.cancel.is_set() and not call.on_exit:
                result = LeafResult("Failed", DEADLINE_MESSAGE)
            else:
                self.state.mark(node, "Running")
                if node.type == "Pod":  # Argo records the Kubernetes node a pod ran on; a local pod runs here
                    self.state.update(node, host_node_name=socket.gethostname())
                result = self._run_leaf(kind, node, call, prepared)
        self.state.mark(node, result.phase, result.message or "", result.outputs)
        self.publish(result.outputs)
        return node

    @contextlib.contextmanager
    def _pod_slot(self, counts: bool) -> Iterator[None]:
        if self._pods is None or not counts:
            yield
            return
        with self._pods:
            yield

    def _run_leaf(self, kind: str, node: NodeStatus, call: Call, prepared: Prepared) -> LeafResult:
        template = prepared.template
        cancel = self.never if call.on_exit else self.cancel
        if kind == "suspend":
            started = self._started.get(node.id) or parse_rfc3339(node.started_at) or time.time()
            if (template.get("suspend") or {}).get("duration") in (None, ""):
                self.state.update(node, message=f"suspended: vcpilot resume {self.wf.name} resumes it")
            return run_suspend(template, started, cancel, functools.partial(read_request, self.run_dir))
        if kind == "http":
            return run_http(template, cancel)
        key = "activeDeadlineSeconds" if template.get("activeDeadlineSeconds") is not None else "timeout"
        deadline = template.get(key)
        try:
            deadline_s = (
                None if deadline in (None, "") else parse_duration(deadline, f"template {prepared.name!r} {key}")
            )
        except WorkflowError as err:
            return LeafResult("Error", str(err))
        if kind == "resource":
            with self.cluster() as cluster:
                return run_resource(
                    template,
                    cluster=cluster,
                    uid=self.wf.uid,
                    node_id=node.id,
                    namespace=self.wf.namespace,
                    cancel=cancel,
                    deadline_s=deadline_s,
                    own=self.own,
                )
        node_dir = self.run_dir / "nodes" / node.id
        shutil.rmtree(node_dir, ignore_errors=True)
        env = {
            **self.env,
            "ARGO_POD_NAME": self.pod_name(node.name, node.template_name),
            "ARGO_NODE_ID": node.id,
            "ARGO_CONTAINER_NAME": "main",
            "ARGO_WORKFLOW_NAME": self.wf.name,
        }
        ctx = LeafContext(node.id, node_dir, self.cwd, env, deadline_s)
        exempt = call.on_exit
        if kind == "containerSet":
            return run_container_set(template, ctx, self.table, exempt, self._containers(node, template))
        if kind == "script":
            return run_script(template, ctx, self.table, exempt)
        return run_container(template, ctx, self.table, exempt)

    def _containers(self, pod: NodeStatus, template: Mapping[str, Any]) -> Report:
        """A containerSet pod's Container nodes, Pending and linked as its graph (executeContainerSet); their report."""
        containers = template["containerSet"]["containers"]
        nodes: dict[str, NodeStatus] = {}
        for container in containers:
            name = f"{pod.name}.{container['name']}"
            node = self.state.by_name(name)
            if node is None:
                node = self.state.init_node(
                    name, "Container", template_name=pod.template_name, boundary_id=pod.id, phase="Pending"
                )
            else:  # a resumed pod runs again from the start
                self.state.update(node, phase="Pending", message=None, finished_at=None)
            nodes[container["name"]] = node
        for container in containers:
            child = nodes[container["name"]].name
            for parent in container.get("dependencies") or [None]:
                self.state.add_child(pod.name if parent is None else f"{pod.name}.{parent}", child)

        def report(container: str, phase: str, message: str | None) -> None:
            self.state.mark(nodes[container], phase, None if phase == "Running" else message or "")

        return report

    def publish(self, outputs: Outputs | None) -> None:
        """Argo's addOutputsToGlobalScope: parameters and artifacts with a `globalName` become workflow outputs."""
        for p in (outputs.parameters or []) if outputs else []:
            if p.global_name and p.value is not None:
                self.state.set_global_output(p.global_name, p.value)
        for a in (outputs.artifacts or []) if outputs else []:
            if a.global_name:
                self.state.set_global_artifact(a.global_name, a)

    # -- hooks ---------------------------------------------------------------------------------------------

    def run_exit_hook(
        self,
        holder: Mapping[str, Any],
        node: NodeStatus,
        boundary_id: str,
        scope: Mapping[str, Any],
        prefix: str,
        name: str,
        depth: int = 1,
    ) -> NodeStatus | None:
        """Run a step's or task's exit hook (`hooks.exit` or `onExit`) once its node completed."""
        hook = exit_hook(holder)
        if hook is None or not node.completed:
            return None
        local = dict(scope)
        local[f"{prefix}.{name}.status"] = node.phase
        if hook.get("expression") and not evaluate_expr(str(hook["expression"]), local):
            return None
        outputs = node.outputs or Outputs()
        for p in outputs.parameters or []:
            local[f"{prefix}.{name}.outputs.parameters.{p.name}"] = p.value or ""
        if outputs.result is not None:
            local[f"{prefix}.{name}.outputs.result"] = outputs.result
        for a in outputs.artifacts or []:
            local[f"{prefix}.{name}.outputs.artifacts.{a.name}"] = a.reference
        args = resolve_artifact_arguments({"arguments": substitute_tree(hook.get("arguments") or {}, local)}, local)
        args = args["arguments"]
        return self.execute(
            Call(
                name=f"{node.name}.onExit",
                ref=hook,
                arguments=args,
                boundary_id=boundary_id,
                parents=(node.name,),
                on_exit=True,
                hooked=True,
                depth=depth,
            )
        )

    def spawn(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run `fn` in a new thread; nested templates block, so a bounded pool could deadlock."""
        future: Future[Any] = Future()

        def target() -> None:
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as err:
                    future.set_exception(err)

        threading.Thread(target=target, daemon=True).start()
        return future
