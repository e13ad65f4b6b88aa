"""One sentence for each `{{...}}` tag Argo's validator fails to resolve: which template, which tag, and why.

pipelines.lint_scope decides what resolves; this module only says why something did not, from where the tag is
(a `Place`) and the scope it was looked up in.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pipelines.local.globals import WorkflowGlobals

__all__ = ["Place", "explain", "hint"]

_NODE_VARIABLES = (
    "id, status, startedAt, finishedAt, hostNodeName, ip, exitCode, outputs.result, outputs.parameters.NAME, "
    "outputs.artifacts.NAME"
)


def hint(name: str, known: Iterable[Any]) -> str:
    """` (did you mean 'x'?)` for the closest of `known`, or nothing."""
    close = difflib.get_close_matches(name, [str(k) for k in known], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


@dataclass
class Place:
    """Where a tag is: the template (and its type), and the step or task, its loop and what ran before it."""

    template: str
    kind: str  # the template's type: container, steps, dag...
    unit: str = "template"  # template, step, task, outputs or target
    node: str = ""  # the step or task
    loop: str = ""  # withItems, withParam or withSequence of that step or task
    nodes: dict[str, dict[str, Any] | None] = field(default_factory=dict)  # steps or tasks run before, their templates
    all_nodes: set[str] = field(default_factory=set)  # every step or task of the template
    same_group: set[str] = field(default_factory=set)  # the steps of this step's parallel group before it

    def __str__(self) -> str:
        head = f"template {self.template!r}" if self.template else "an inline template"
        if self.node:
            return f"{head} {self.unit} {self.node!r}"
        return head if self.unit == "template" else f"{head} {self.unit}"


def explain(key: str, scope: set[str], place: Place, known: WorkflowGlobals, declared_outputs: set[str]) -> str:
    """Why `{{key}}` is not in `scope`, in words (the caller names the place)."""
    parts, tag = key.split("."), f"{{{{{key}}}}}"
    if parts[0] == "workflow":
        return _workflow(key, tag, known, declared_outputs)
    if parts[0] == "inputs":
        return _inputs(tag, parts, scope, place)
    if parts[0] == "pod":
        if key == "pod.name":
            where = "this step or task" if place.unit in ("step", "task") else f"a {place.kind} template"
            return f"{tag} is set only where a pod runs (a container, script, resource... template), not in {where}"
        return f"{tag} is not a variable Argo sets{hint(key, ['pod.name'])}"
    if parts[0] == "item":
        return _item(tag, parts, scope, place)
    return _node(tag, parts, place)


def _workflow(key: str, tag: str, known: WorkflowGlobals, declared_outputs: set[str]) -> str:
    if key == "workflow.failures":
        if known.on_exit:
            return (
                f"{tag} is set only in the templates the onExit handler runs, and this one also runs from the"
                " entrypoint, before the workflow has failures"
            )
        return f"{tag} is set only for a spec.onExit handler, and this workflow has none"
    if key in declared_outputs:
        return f"{tag} is set once the step or task that produces it has run, and none that does runs before this"
    problem = known.problem(key)
    parameter = key.removeprefix("workflow.parameters.")
    if parameter != key:
        return problem + hint(parameter, known.params)
    if key.startswith(("workflow.labels.", "workflow.annotations.")):
        return problem  # a label or annotation by name is the workflow's to have, not a misspelt variable
    return problem + hint(key, [name for name in known.known if "{{" not in name])


def _inputs(tag: str, parts: list[str], scope: set[str], place: Place) -> str:
    if parts[1] == "parameters" and len(parts) > 2:
        declared = {k.removeprefix("inputs.parameters.") for k in scope if k.startswith("inputs.parameters.")}
        if parts[2] in declared:
            return f"{tag} is not a variable Argo sets: the input parameter is {{{{inputs.parameters.{parts[2]}}}}}"
        return f"{tag} is not declared in the template's inputs{hint('.'.join(parts[2:]), declared)}"
    if parts[1] == "artifacts" and len(parts) > 2:
        declared = {k.split(".")[2] for k in scope if k.startswith("inputs.artifacts.")}
        if parts[2] not in declared:
            return f"{tag}: the template declares no input artifact {parts[2]!r}{hint(parts[2], declared)}"
        if parts[3:] == ["path"]:
            where = "this step or task" if place.unit in ("step", "task") else f"a {place.kind} template"
            return f"{tag}: an input artifact has a path only where a pod runs, not in {where}"
        return f"{tag} is not a variable Argo sets: an input artifact gives only itself and its .path"
    return f"{tag} is not a variable Argo sets: inputs are inputs.parameters.NAME and inputs.artifacts.NAME(.path)"


def _item(tag: str, parts: list[str], scope: set[str], place: Place) -> str:
    if not place.loop:
        if place.unit in ("step", "task"):
            return f"{tag} names a loop item, and this {place.unit} has no withItems, withParam or withSequence"
        return f"{tag} names a loop item, which only the step or task that loops has: pass it in as an input parameter"
    if place.loop == "withSequence":
        return f"{tag}: withSequence's items are numbers; name the item {{{{item}}}}"
    keys = sorted(k.removeprefix("item.") for k in scope if k.startswith("item."))
    if not keys:
        return f"{tag}: the items of withItems are not maps; name the item {{{{item}}}}"
    return f"{tag}: no item of withItems has the key {'.'.join(parts[1:])!r}{hint('.'.join(parts[1:]), keys)}"


def _node(tag: str, parts: list[str], place: Place) -> str:
    label = "step" if parts[0] == "steps" else "task"
    own = {"steps": "steps", "dag": "tasks"}.get(place.kind)
    if own != parts[0]:
        if own is None:
            return (
                f"{tag} names a {label}, and a {place.kind} template has none: pass the value in as an input parameter"
            )
        return f"{tag} names a {label}, but this is a {place.kind} template: write {own}.NAME"
    if len(parts) < 3:
        return f"{tag} is not a variable Argo sets: a {label} gives {_NODE_VARIABLES}"
    node, rest = parts[1], ".".join(parts[2:])
    if node not in place.all_nodes:
        return f"{tag} refers to {label} {node!r}, which is not in this template{hint(node, place.all_nodes)}"
    if node == place.node and place.unit in ("step", "task"):
        if rest == "status":
            return f"{tag}: a task has its own status only in a DAG where it has hooks"
        return f"{tag} refers to the {label} itself, whose outputs exist only in its onExit or exit hook"
    if place.unit == "step" and node not in place.nodes:
        return f"{tag} refers to step {node!r}, which does not run before this one"
    if rest == "status":
        if place.unit == "task":
            return f"{tag}: a task sees the status of the tasks it depends on only, and it does not depend on {node!r}"
        return f"{tag}: Argo gives a task's status only to the tasks that depend on it, not to the DAG's {place.unit}"
    template = place.nodes.get(node) or {}
    name = template.get("name") or "(inline)"
    outputs = template["outputs"] if isinstance(template.get("outputs"), dict) else {}
    for key in ("parameters", "artifacts"):
        if rest.startswith(f"outputs.{key}."):
            listed = outputs.get(key)
            declared = [o.get("name") for o in listed if isinstance(o, dict)] if isinstance(listed, list) else []
            wanted = rest.removeprefix(f"outputs.{key}.")
            return f"{tag}: template {name!r} has no output {key[:-1]} {wanted!r}{hint(wanted, declared)}"
    if rest in ("outputs.result", "exitCode"):
        why = " (its containerSet has no container named 'main')" if template.get("containerSet") is not None else ""
        return f"{tag}: template {name!r} produces no {rest}{why}"
    if rest == "outputs.parameters":
        return f"{tag} is the list of a loop's outputs, and {label} {node!r} has no withItems or withParam"
    if rest == "ip":
        return f"{tag}: template {name!r} is not a daemon, so the {label} has no ip"
    return f"{tag} is not a variable Argo sets: a {label} gives {_NODE_VARIABLES}"
