"""Steps templates as Argo's steps.go runs them: groups in order, the steps of a group in parallel.

A group waits for all its steps (and their exit hooks); a step that Failed or Errored without `continueOn`
fails the group — "child '<id>' failed" — and the steps template with it, so later groups never start. After
each group its steps' outputs join the scope as `steps.<name>.*` (JSON lists for looped steps).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping
from typing import Any

from pipelines.local.engine.calls import Call, Prepared
from pipelines.local.engine.dag import FAIL_FAST_MESSAGE, continues_on
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
from pipelines.local.engine.status import NodeStatus
from pipelines.local.expressions import ExpressionError, evaluate_when, substitute
from pipelines.local.workflow import WorkflowError

__all__ = ["run_steps"]

_LOOP_FIELDS = ("withItems", "withParam", "withSequence")


def run_steps(engine: NodeRunner, call: Call, prepared: Prepared) -> NodeStatus:
    """Run a steps template to its end and return its node."""
    return _Steps(engine, call, prepared).run()


class _Steps:
    def __init__(self, engine: NodeRunner, call: Call, prepared: Prepared) -> None:
        self.engine, self.state, self.call, self.prepared = engine, engine.state, call, prepared
        parallelism = prepared.template.get("parallelism")
        self.slots = threading.BoundedSemaphore(int(parallelism)) if parallelism else None
        self.fail_fast = bool(prepared.template.get("failFast"))

    def run(self) -> NodeStatus:
        call = self.call
        node = self.state.by_name(call.name) or self.state.init_node(
            call.name,
            "Steps",
            template_name=self.prepared.name,
            boundary_id=call.boundary_id,
            phase="Running",
            parents=call.parents,
            inputs=self.prepared.inputs,
            flag=call.flag,
        )
        self.node = node
        scope = dict(self.prepared.scope)
        groups = self.prepared.template.get("steps") or []
        for i, group in enumerate(groups):
            sg_name = f"{call.name}[{i}]"
            sg = self.state.by_name(sg_name) or self.state.init_node(
                sg_name,
                "StepGroup",
                template_name=None,
                boundary_id=node.id,
                phase="Running",
                parents=self._group_parents(i),
            )
            scope.update(self.engine.globals())
            self._run_group(group or [], sg, scope)
            if sg.failed_or_error:
                self._set_outbound(sg)
                self.state.mark(node, "Failed", sg.message or "")
                return node
            try:
                for step in group or []:
                    scope.update(self._step_vars(step, sg))
            except ExpressionError as err:  # a loop's result the template names is not JSON: Argo errs it
                self.state.mark(node, "Error", str(err))
                return node
        last = self.state.by_name(f"{call.name}[{len(groups) - 1}]") if groups else None
        if last is not None:
            self._set_outbound(last)
        try:
            outputs = template_outputs(self.prepared.template, scope)
        except (WorkflowError, ExpressionError) as err:
            self.state.mark(node, "Error", str(err))
            return node
        self.engine.publish(outputs)
        self.state.mark(node, "Succeeded", "", outputs)
        return node

    def _group_parents(self, index: int) -> tuple[str, ...]:
        """The first group hangs from the steps node, later ones from the previous group's outbound nodes."""
        if index == 0:
            return (self.call.name,)
        prev = self.state.by_name(f"{self.call.name}[{index - 1}]")
        if prev is None:
            return ()
        if not prev.children:
            return (prev.name,)
        names = []
        for child_id in prev.children:
            child = self.state.get(child_id)
            for out_id in self.state.outbound(child) if child else []:
                if (out := self.state.get(out_id)) is not None:
                    names.append(out.name)
        return tuple(names)

    def _set_outbound(self, sg: NodeStatus) -> None:
        outbound = [o for cid in sg.children or [] if (c := self.state.get(cid)) for o in self.state.outbound(c)]
        self.state.update(self.node, outbound_nodes=outbound or None)

    def _step_vars(self, step: Mapping[str, Any], sg: NodeStatus) -> dict[str, Any]:
        name = step["name"]
        node = self.state.by_name(f"{sg.name}.{name}")
        if node is not None:
            template = self.engine.wf.templates.get(str(step.get("template")))
            attempt = self.state.last_attempt(node)
            return {**node_vars("steps", name, attempt), **absent_outputs("steps", name, node, template)}
        prefix = f"{sg.name}.{name}("
        children = [
            c
            for cid in sg.children or []
            if (c := self.state.get(cid)) is not None and c.name.startswith(prefix) and c.type != "Skipped"
        ]
        strict = result_referenced("steps", name, self.prepared.template)
        out = aggregate_vars("steps", name, children, strict) if children else {}
        out.update({k: v for k, v in node_vars("steps", name, sg).items() if ".outputs." not in k})
        return out

    def _run_group(self, steps: list[Mapping[str, Any]], sg: NodeStatus, scope: dict[str, Any]) -> None:
        """executeStepGroup: resolve, expand, launch, wait, then decide the group's phase."""
        if sg.fulfilled:
            return
        try:
            children = [child for step in steps for child in self._expand(step, sg, scope)]
        except (WorkflowError, ExpressionError) as err:
            self.state.mark(sg, "Error", str(err))
            return
        futures = []
        launched: list[tuple[str, Mapping[str, Any]]] = []
        for child_name, step in children:
            if self.fail_fast and any(n.failed_or_error for n in self._kids(sg)):
                break
            when = step.get("when")
            if when and self.state.by_name(child_name) is None:
                try:
                    proceed = evaluate_when(str(when))
                except ExpressionError as err:
                    self._skip(child_name, step, "Error", str(err), sg)
                    self.state.mark(sg, "Error", str(err))
                    return
                if not proceed:
                    self._skip(child_name, step, "Skipped", f"when '{when}' evaluated false", sg)
                    continue
            if self.slots is not None:
                # Argo launches a group's steps in order and stops at the limit: take the slot here, not in the
                # step's thread, so that the items of a loop start in order however the threads are scheduled.
                self.slots.acquire()
                if self.fail_fast and any(n.failed_or_error for n in self._kids(sg)):
                    self.slots.release()
                    break
            launched.append((child_name, step))
            futures.append(self.engine.spawn(functools.partial(self._run_one, child_name, step, sg)))
        ran = [future.result() for future in futures]
        if self.fail_fast and (len(launched) < len(children) or not all(ran)):
            self.state.mark(sg, "Failed", FAIL_FAST_MESSAGE)
            return
        steps_by_node = dict(launched)
        for child in self._kids(sg):
            if child.failed_or_error and not continues_on(steps_by_node.get(child.name, {}), child.phase):
                self.state.mark(sg, "Failed", f"child '{child.id}' failed")
                return
        self.state.mark(sg, "Succeeded")

    def _kids(self, sg: NodeStatus) -> list[NodeStatus]:
        return [c for cid in sg.children or [] if (c := self.state.get(cid)) is not None]

    def _expand(
        self, step: Mapping[str, Any], sg: NodeStatus, scope: Mapping[str, Any]
    ) -> list[tuple[str, dict[str, Any]]]:
        """Argo's resolveReferences + expandStep for one step: (node name, resolved step) pairs."""
        name = step["name"]
        body = {k: v for k, v in step.items() if k not in ("hooks", "onExit")}
        when = body.get("when")
        if when:
            resolved_when = substitute(str(when), scope, strict=False)
            _check_resolved(name, resolved_when, when)
            if "{{" not in resolved_when and not evaluate_when(resolved_when):
                return [(f"{sg.name}.{name}", {**step, "when": resolved_when})]
        resolved = resolve_artifact_arguments(substitute_tree(drop_absent_arguments(body, scope), scope), scope)
        _check_resolved(name, resolved, body)
        items = expand_items(resolved)
        if items is None:
            return [(f"{sg.name}.{name}", {**step, **resolved})]
        if not items:
            if self.state.by_name(f"{sg.name}.{name}") is None:
                self._skip(f"{sg.name}.{name}", step, "Skipped", "Skipped, empty params", sg)
            return []
        rest = {k: v for k, v in resolved.items() if k not in _LOOP_FIELDS}
        global_scope = self.engine.globals()
        return [
            (
                f"{sg.name}.{item_name(name, i, item)}",
                {**step, **substitute_tree(rest, {**global_scope, **item_vars(item)}, strict=True)},
            )
            for i, item in enumerate(items)
        ]

    def _skip(self, node_name: str, step: Mapping[str, Any], phase: str, message: str, sg: NodeStatus) -> None:
        self.state.init_node(
            node_name,
            "Skipped",
            template_name=step.get("template"),
            boundary_id=self.node.id,
            phase=phase,
            parents=(sg.name,),
            message=message,
        )

    def _run_one(self, child_name: str, step: Mapping[str, Any], sg: NodeStatus) -> bool:
        """Run one step and its exit hook; False when failFast stopped it before it started."""
        call = Call(
            name=child_name,
            ref=step,
            arguments=step.get("arguments") or {},
            boundary_id=self.node.id,
            parents=(sg.name,),
            on_exit=self.call.on_exit,
            locals={"steps.name": step["name"]},
            depth=self.call.depth + 1,
        )
        try:  # the slot, when there is a limit, was taken when the step was launched
            if self.fail_fast and any(n.failed_or_error for n in self._kids(sg)):
                return False
            node = self.engine.execute(call)
        finally:
            if self.slots is not None:
                self.slots.release()
        scope = {**self.prepared.scope, **self.engine.globals()}
        for kid in self._kids(sg):
            scope[f"steps.{kid.display_name}.status"] = kid.phase
        self.engine.run_exit_hook(step, node, self.node.id, scope, "steps", step["name"], self.call.depth + 1)
        return True


def _check_resolved(name: str, value: Any, written: Any) -> None:
    # Only the tags the step spells: a value put in may hold `{{steps.…}}` text of its own (a failed step's
    # message in {{workflow.failures}}, a step's output), which Argo's one pass of substitution leaves as it is.
    spelt = set(unresolved_refs(written))
    missing = [tag for tag in unresolved_refs(value) if tag in spelt]
    if missing:
        raise WorkflowError(f"step {name!r} refers to {{{{{missing[0]}}}}}, which no earlier step provides.")
