"""DAG templates as Argo's dag.go runs them: enhanced `depends`, `when`, loops as TaskGroups, Omitted tasks.

The DAG's thread launches every task whose dependencies have settled (in definition order; only the targets and
their ancestors, as Argo executes each target after its dependencies and nothing else), waits for any
launched task to end, and repeats; once nothing runs, the DAG's phase is assessed like assessDAGPhase: each
target task (the leaves, unless `dag.target` names them) gets its branch phase — its own when it ran, the
first Failed/Error of its ancestors when it was Skipped or Omitted — and a failing target fails the DAG
unless the task continues on that phase. Argo assesses on every pass, but never completes a DAG while one of
its nodes runs, so waiting for quiescence gives the same phase.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any

from pipelines.local.engine.calls import Call, Prepared, exit_hook
from pipelines.local.engine.node_runner import NodeRunner
from pipelines.local.engine.scope import (
    absent_outputs,
    aggregate_vars,
    drop_absent_arguments,
    expand_items,
    item_name,
    item_vars,
    node_vars,
    resolve_artifact_arguments,
    result_referenced,
    substitute_tree,
    template_outputs,
    unresolved_refs,
)
from pipelines.local.engine.status import COMPLETED, NodeStatus
from pipelines.local.expressions import ExpressionError, depends_targets, evaluate_depends, evaluate_when, substitute
from pipelines.local.workflow import WorkflowError

__all__ = ["run_dag"]

FAIL_FAST_MESSAGE = "template has failed or errored children and failFast enabled"
_LOOP_FIELDS = ("withItems", "withParam", "withSequence")


def _settled() -> None:
    """The unit of a task that is decided without running (Omitted, Skipped, Error, or done before a resume)."""


_SETTLED: Callable[[], Any] = _settled


def run_dag(engine: NodeRunner, call: Call, prepared: Prepared) -> NodeStatus:
    """Run a DAG template to its end and return its node."""
    return _Dag(engine, call, prepared).run()


def continues_on(holder: Mapping[str, Any], phase: str) -> bool:
    """A step's or task's `continueOn` covers this failed phase."""
    cont = holder.get("continueOn") or {}
    return bool((phase == "Failed" and cont.get("failed")) or (phase == "Error" and cont.get("error")))


class _Dag:
    def __init__(self, engine: NodeRunner, call: Call, prepared: Prepared) -> None:
        self.engine, self.state, self.call, self.prepared = engine, engine.state, call, prepared
        dag = prepared.template["dag"]
        self.tasks: dict[str, dict[str, Any]] = {t["name"]: t for t in dag.get("tasks") or []}
        self.logic = {name: self._depends_logic(task) for name, task in self.tasks.items()}
        self.continue_on = {name: t["continueOn"] for name, t in self.tasks.items() if t.get("continueOn")}
        self.deps = {name: sorted(depends_targets(logic)) if logic else [] for name, logic in self.logic.items()}
        targets = str(dag.get("target") or "").split()
        self.targets = targets or sorted(n for n in self.tasks if not any(n in d for d in self.deps.values()))
        self._ancestors: dict[str, set[str]] = {}
        # Argo's executeDAG executes the targets, each after its dependencies: no other task gets a node.
        self.needed = {n for t in self.targets if t in self.tasks for n in (t, *self._ancestry(t))}
        self.fail_fast = dag.get("failFast", True) is not False
        parallelism = prepared.template.get("parallelism")
        self.slots = threading.BoundedSemaphore(int(parallelism)) if parallelism else None
        self.settled: set[str] = set()
        self.launched: set[str] = set()

    # -- the loop ------------------------------------------------------------------------------------

    def run(self) -> NodeStatus:
        call = self.call
        node = self.state.by_name(call.name) or self.state.init_node(
            call.name,
            "DAG",
            template_name=self.prepared.name,
            boundary_id=call.boundary_id,
            phase="Running",
            parents=call.parents,
            inputs=self.prepared.inputs,
            flag=call.flag,
        )
        self.node = node
        running: dict[Future[Any], str] = {}
        while True:
            if not self._tripped():
                self._launch_ready(running)
            if not running:
                break
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for future in done:
                self.settled.add(running.pop(future))
                future.result()
        return self._finish()

    def _launch_ready(self, running: dict[Future[Any], str]) -> None:
        """Launch (or decide) every task that can go now; a decided task may free an earlier one."""
        progressed = True
        while progressed:
            progressed = False
            for name in self.tasks:
                if name not in self.needed or name in self.launched or (unit := self._ready(name)) is None:
                    continue
                progressed = True
                self.launched.add(name)
                if unit is _SETTLED:
                    self.settled.add(name)
                else:
                    running[self.engine.spawn(unit)] = name

    def _tripped(self) -> bool:
        """Template-level `failFast: true`: stop launching once a child failed."""
        if not self.prepared.template.get("failFast"):
            return False
        return any(n.failed_or_error for n in self.state.nodes() if n.boundary_id == self.node.id)

    def _task_node(self, name: str) -> NodeStatus | None:
        return self.state.by_name(f"{self.call.name}.{name}")

    def _ready(self, name: str) -> Callable[[], Any] | None:
        """What to do with a task now: a unit to run, `_SETTLED` when it is decided, None to wait."""
        node = self._task_node(name)
        if node is not None and node.fulfilled and not self._hook_pending(name, node):
            return _SETTLED
        if node is None:
            if any(d not in self.settled for d in self.deps[name]):
                return None
            verdict = self._depends_verdict(name)
            if verdict is None:
                return None
            if not verdict:
                self._skip(name, "Omitted", "omitted: depends condition not met")
                return _SETTLED
        try:
            return self._resolve(name)
        except (WorkflowError, ExpressionError) as err:
            self._skip(name, "Error", str(err))
            return _SETTLED

    @staticmethod
    def _depends_logic(task: Mapping[str, Any]) -> str:
        """`depends`, or the older `dependencies` joined with &&."""
        return str(task.get("depends") or " && ".join(task.get("dependencies") or []))

    def _depends_verdict(self, name: str) -> bool | None:
        logic = self.logic[name]
        if not logic:
            return True
        statuses: dict[str, str] = {}
        for dep in self.deps[name]:
            node = self._task_node(dep)
            if node is None:
                return None
            statuses[dep] = node.phase
            if node.type == "TaskGroup":
                for i, child in enumerate(self._children(node)):
                    statuses[f"{dep}({i})"] = child.phase
        return evaluate_depends(logic, statuses, continue_on=self.continue_on)

    def _children(self, node: NodeStatus) -> list[NodeStatus]:
        return [c for cid in node.children or [] if (c := self.state.get(cid)) is not None and not c.hooked]

    def _parents(self, name: str) -> tuple[str, ...]:
        """connectDependencies: a root task hangs from the DAG, others from their dependencies' outbound nodes."""
        if not self.deps[name]:
            return (self.call.name,)
        parents: list[str] = []
        for dep in self.deps[name]:
            node = self._task_node(dep)
            for nid in self.state.outbound(node) if node else []:
                if (out := self.state.get(nid)) is not None:
                    parents.append(out.name)
        return tuple(parents)

    def _skip(
        self, name: str, phase: str, message: str, node_name: str | None = None, parents: tuple[str, ...] = ()
    ) -> None:
        """Record a task that will not run (Skipped, Omitted, or Error when it could not be resolved)."""
        node_name = node_name or f"{self.call.name}.{name}"
        existing = self.state.by_name(node_name)
        if existing is not None:
            self.state.mark(existing, phase, message)
            return
        self.state.init_node(
            node_name,
            "Skipped",
            template_name=self.tasks[name].get("template"),
            boundary_id=self.node.id,
            phase=phase,
            parents=parents or self._parents(name),
            message=message,
        )

    # -- resolving and launching a task ----------------------------------------------------------------

    def scope(self, name: str | None = None, strict: bool = True) -> dict[str, Any]:
        """The DAG's scope plus `tasks.*` of the task's ancestors (every task when `name` is None).

        `strict`: a loop's result that is not JSON, where the DAG names that result, is an ExpressionError (Argo
        errs the task that reads it, or the DAG); an exit hook's scope is not strict.
        """
        scope = dict(self.prepared.scope)
        scope.update(self.engine.globals())
        for dep in self.tasks if name is None else self._ancestry(name):
            node = self._task_node(dep)
            if node is None:
                continue
            if node.type == "TaskGroup":
                strict_here = strict and result_referenced("tasks", dep, self.prepared.template)
                scope.update(aggregate_vars("tasks", dep, self._children(node), strict_here))
            scope.update(node_vars("tasks", dep, self.state.last_attempt(node)))
            template = self.engine.wf.templates.get(str(self.tasks[dep].get("template")))
            scope.update(absent_outputs("tasks", dep, node, template))
        return scope

    def _ancestry(self, name: str) -> set[str]:
        if name not in self._ancestors:
            found: set[str] = set()
            for dep in self.deps[name]:
                found |= {dep, *self._ancestry(dep)}
            self._ancestors[name] = found
        return self._ancestors[name]

    def _resolve(self, name: str) -> Callable[[], Any]:
        """Argo's resolveDependencyReferences + expandTask; returns the unit that runs the task."""
        task = {k: v for k, v in self.tasks[name].items() if k not in ("hooks", "onExit")}
        scope = self.scope(name)
        when = task.get("when")
        if when:
            resolved_when = substitute(str(when), scope, strict=False)
            _check_resolved(name, resolved_when, when)
            # A `{{item}}` is decided per item once the loop expands; a task that does not loop has nothing to fill
            # a `{{...}}` left in with, and its `when` errs (Argo's resolveDependencyReferences).
            per_item = "{{" in resolved_when and any(task.get(f) not in (None, "", []) for f in _LOOP_FIELDS)
            if not per_item and not evaluate_when(resolved_when):
                if self._task_node(name) is None:
                    self._skip(name, "Skipped", f"when '{resolved_when}' evaluated false")
                return _SETTLED
        resolved = resolve_artifact_arguments(substitute_tree(drop_absent_arguments(task, scope), scope), scope)
        _check_resolved(name, resolved, task)
        items = expand_items(resolved)
        if items is None:
            return self._single(name, resolved)
        if not items:
            if self._task_node(name) is None:
                self._skip(name, "Skipped", "Skipped, empty params")
            return _SETTLED
        body = {k: v for k, v in resolved.items() if k not in _LOOP_FIELDS}
        global_scope = self.engine.globals()
        expanded = [
            (item_name(name, i, item), substitute_tree(body, {**global_scope, **item_vars(item)}, strict=True))
            for i, item in enumerate(items)
        ]
        return self._group(name, expanded)

    def _single(self, name: str, task: Mapping[str, Any]) -> Callable[[], Any]:
        call = Call(
            name=f"{self.call.name}.{name}",
            ref=task,
            arguments=task.get("arguments") or {},
            boundary_id=self.node.id,
            parents=() if self._task_node(name) else self._parents(name),
            on_exit=self.call.on_exit,
            locals={"tasks.name": name},
            depth=self.call.depth + 1,
        )
        return lambda: self._run_one(name, call)

    def _group(self, name: str, expanded: list[tuple[str, dict[str, Any]]]) -> Callable[[], Any]:
        group_name = f"{self.call.name}.{name}"
        group = self._task_node(name) or self.state.init_node(
            group_name,
            "TaskGroup",
            template_name=self.tasks[name].get("template"),
            boundary_id=self.node.id,
            phase="Running",
            parents=self._parents(name),
        )
        calls: list[Call] = []
        for child_name, task in expanded:
            full = f"{self.call.name}.{child_name}"
            when = task.get("when")
            if when and self.state.by_name(full) is None and not evaluate_when(str(when)):
                self._skip(name, "Skipped", f"when '{when}' evaluated false", full, (group_name,))
                continue
            calls.append(
                Call(
                    name=full,
                    ref=task,
                    arguments=task.get("arguments") or {},
                    boundary_id=self.node.id,
                    parents=(group_name,),
                    on_exit=self.call.on_exit,
                    locals={"tasks.name": child_name},
                    depth=self.call.depth + 1,
                )
            )

        def unit() -> None:
            futures = []
            for c in calls:
                if self.slots is not None:
                    # Argo launches a loop's items in order up to the limit: take the slot here, not in the item's
                    # thread, so that they start in order however the threads are scheduled.
                    self.slots.acquire()
                futures.append(self.engine.spawn(functools.partial(self._run_one, name, c, held=True)))
            for future in futures:
                future.result()
            phase = "Succeeded"
            for child in self._children(group):
                if child.failed_or_error:
                    phase = child.phase
            self.state.mark(group, phase)

        return unit

    def _run_one(self, name: str, call: Call, held: bool = False) -> None:
        """Run one task (or item) and its exit hook; `held`: its launcher took its slot already."""
        if self.slots is not None and not held:
            self.slots.acquire()
        try:
            if self._tripped():
                return  # failFast: no new children once one failed
            node = self.engine.execute(call)
        finally:
            if self.slots is not None:
                self.slots.release()
        scope = self.scope(name, strict=False)
        self.engine.run_exit_hook(self.tasks[name], node, self.node.id, scope, "tasks", name, self.call.depth + 1)

    def _hook_pending(self, name: str, node: NodeStatus) -> bool:
        """A task whose node ended before a resume but whose exit hook did not."""
        if exit_hook(self.tasks[name]) is None:
            return False
        nodes = self._children(node) if node.type == "TaskGroup" else [node]
        for n in nodes:
            hook = self.state.by_name(f"{n.name}.onExit")
            if n.completed and (hook is None or not hook.fulfilled):
                return True
        return False

    # -- assessing (assessDAGPhase) ----------------------------------------------------------------------

    def _branch(self, name: str, memo: dict[str, str]) -> str:
        if name not in memo:
            node = self._task_node(name)
            if node is None or not node.fulfilled:
                memo[name] = ""
            elif node.phase in COMPLETED:
                memo[name] = node.phase
            else:  # Skipped or Omitted: inherit the first failure of its branch
                inherited = [self._branch(d, memo) for d in self.deps[name]]
                memo[name] = next((p for p in inherited if p in ("Failed", "Error")), "Succeeded")
        return memo[name]

    def _assess(self) -> tuple[str, str | None]:
        memo: dict[str, str] = {}
        result = "Succeeded"
        for target in self.targets:
            branch = self._branch(target, memo)
            if branch == "":
                result = "Running"
                if not self.fail_fast:
                    break
            elif branch in ("Failed", "Error"):
                if continues_on(self.tasks[target], branch):
                    continue
                result = branch
                if self.fail_fast:
                    break
        if result == "Running":
            return "Failed", FAIL_FAST_MESSAGE if self._tripped() else "the DAG stopped with unreached targets"
        return result, None

    def _finish(self) -> NodeStatus:
        node = self.node
        outbound = [o for t in self.targets if (n := self._task_node(t)) is not None for o in self.state.outbound(n)]
        self.state.update(node, outbound_nodes=outbound or None)
        phase, message = self._assess()
        if phase != "Succeeded":
            self.state.mark(node, phase, message or "")
            return node
        try:
            outputs = template_outputs(self.prepared.template, self.scope())
        except (WorkflowError, ExpressionError) as err:
            self.state.mark(node, "Error", str(err))
            return node
        self.engine.publish(outputs)
        self.state.mark(node, "Succeeded", "", outputs)
        return node


def _check_resolved(name: str, value: Any, written: Any) -> None:
    # Only the tags the task spells: a value put in may hold `{{steps.…}}` text of its own (a failed step's
    # message in {{workflow.failures}}, a step's output), which Argo's one pass of substitution leaves as it is.
    spelt = set(unresolved_refs(written))
    missing = [tag for tag in unresolved_refs(value) if tag in spelt]
    if missing:
        raise WorkflowError(f"task {name!r} refers to {{{{{missing[0]}}}}}, which no ancestor task provides.")
