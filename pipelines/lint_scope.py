"""Which `{{...}}` tags each template may name: the scopes Argo v4.1.2's validator builds (workflow/validate).

Argo walks the templates from the entrypoint, then the onExit handler, then every template not reached yet, and
checks each template once, on its first visit: a container, script, resource... template whole, a steps or DAG
template in its steps or tasks, its DAG target and its outputs. A tag starting with item., steps., inputs.,
outputs., pod., workflow. or tasks. must then name a variable of that scope (anything else, `{{node.name}}`,
`{{retries}}` and expressions `{{=...}}` are not checked) — "failed to resolve {{...}}" otherwise. The scope:

- inputs.parameters.NAME and inputs.artifacts.NAME the template declares, inputs.artifacts.NAME.path in a
  template that runs a pod, pod.name in one that starts a pod; outputs.* always;
- item, item.KEY (withItems maps), item.* (withParam) in the step or task that loops (in a steps template, also
  in the steps after it: Argo never clears them);
- steps.NAME.status from the step itself on, and, once it has run, id, startedAt, finishedAt, hostNodeName,
  ip (daemons), outputs.result and exitCode (a template with a main container), outputs.parameters.NAME,
  outputs.artifacts.NAME, outputs.parameters (loops); a DAG task sees those of every task, and the status of the
  tasks it depends on (and of hooked tasks); a step or task with an exit hook sees its own outputs;
- the workflow's variables (pipelines.local.globals): workflow.failures only once the entrypoint's templates
  are checked and only with a spec.onExit, a global output only once a step or task that produces it is.

One deliberate difference: a step that names another step of its own parallel group is refused (Argo's validator
lets it through; at run time the group's outputs are not there yet and the step fails). A templateRef's template
is not in the file, so whatever it might give is taken.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from pipelines.lint_explain import Place, explain
from pipelines.lint_tags import is_parameter, lookup_key, placeholder, strings, substitute, tags
from pipelines.lint_when import ancestors, task_dependencies, topological
from pipelines.local.globals import WorkflowGlobals
from pipelines.local.workflow import stringify

__all__ = ["scope_findings"]

_CHECKED = ("item.", "steps.", "inputs.", "outputs.", "pod.", "workflow.", "tasks.")  # GlobalVarValid...Prefix
_TOLERATED = (  # resolveAllVariables lets these prefixes through unresolved
    "outputs.",
    "workflow.creationTimestamp",
    "workflow.scheduledTime",
    "workflow.duration",
    "tasks.name",
    "steps.name",
    "node.name",
)
_ANY_ITEM, _ANY_PARAMETER, _ANY_ARTIFACT = "item.*", "workflow.outputs.parameters.*", "workflow.outputs.artifacts.*"
_OPAQUE = "\0"  # marks a step or task whose template is not in the file: `\0steps.a.` takes any steps.a.X
_TYPES = ("container", "containerSet", "steps", "dag", "script", "resource", "data", "suspend", "http", "plugin")
_POD = ("container", "containerSet", "script", "resource", "data")
_LEAF = (*_POD, "http", "plugin")
# How deep the walk follows the templates a template calls; deeper ones are checked when the walk reaches them
# from the top (Argo's controller runs no deeper than 100 either: maxAllowedStackDepth).
_MAX_DEPTH = 100
_RETRIES = ("retries", "lastRetry.exitCode", "lastRetry.status", "lastRetry.duration", "lastRetry.message")
Finding = tuple[str, str]


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _type(template: dict[str, Any]) -> str:
    return next((key for key in _TYPES if template.get(key) is not None), "")


def _has_output(template: dict[str, Any]) -> bool:
    """Argo's HasOutput: a main container's stdout and exit code (outputs.result, exitCode)."""
    if _type(template) == "containerSet":
        return any(_dict(c).get("name") == "main" for c in _list(_dict(template["containerSet"]).get("containers")))
    return _type(template) in ("container", "script", "data", "http", "plugin")


def _loops(call: dict[str, Any]) -> bool:
    return bool(call.get("withItems")) or bool(call.get("withParam"))


def _exit_hook(call: dict[str, Any]) -> bool:
    return "exit" in _dict(call.get("hooks")) or bool(call.get("onExit"))


@dataclass(frozen=True)
class _Template:
    """A template as Argo holds it on a visit: where it is, and the substitutions already made in its text."""

    node: dict[str, Any]
    path: str
    passes: tuple[Mapping[str, str], ...] = ()

    @property
    def name(self) -> str:
        return _str(self.node.get("name"))

    def text(self, value: str) -> str:
        for values in self.passes:
            value = substitute(value, values)
        return value


def scope_findings(spec: dict[str, Any], path: str, known: WorkflowGlobals) -> list[Finding]:
    """Every tag in the templates of `spec` (a WorkflowSpec at `path`) that Argo's validator cannot resolve."""
    walk = _Walk(spec, path, known)
    walk.run()
    return [(where, message) for (where, _), message in walk.found.items()]


class _Walk:
    """Argo's walk of one workflow's templates, collecting what it fails to resolve instead of stopping."""

    def __init__(self, spec: dict[str, Any], path: str, known: WorkflowGlobals) -> None:
        self.spec, self.path, self.known = spec, path, known
        self.templates: dict[str, _Template] = {}
        for i, template in reversed(list(enumerate(_list(spec.get("templates"))))):
            if isinstance(template, dict) and isinstance(template.get("name"), str):
                self.templates[template["name"]] = _Template(template, f"{path}.templates[{i}]")
        self.globals: dict[str, str] = {key: placeholder() if v is None else v for key, v in known.values.items()}
        self.visited: set[str] = set()  # Argo's tctx.results: a template is checked on its first visit only
        self.depth = 0
        self.produced: dict[int, set[str]] = {}
        self.found: dict[tuple[str, str], str] = {}
        self.declared_outputs = {key for key in known.known if key.startswith("workflow.outputs.")}
        self.all_produced = set().union(*(_declared_globals(t.node) for t in self.templates.values()))
        # A templateRef's template may produce any global output: take them all.
        self.any_output = any(
            "templateRef" in _dict(call) for t in self.templates.values() for call in self.calls(t.node)
        )

    def run(self) -> None:
        arguments = _dict(self.spec.get("arguments"))
        entrypoint, on_exit = _str(self.spec.get("entrypoint")), _str(self.spec.get("onExit"))
        if entrypoint:  # a WorkflowTemplate's entrypoint gets made-up arguments, a Workflow's its own
            self.visit({"template": entrypoint}, "", None if self.known.alone else arguments)
        if on_exit:
            self.globals["workflow.failures"] = placeholder()
            for template in self.templates.values():
                for artifact in _list(_dict(template.node.get("outputs")).get("artifacts")):
                    if is_parameter(_str(_dict(artifact).get("globalName"))):
                        self.globals[_ANY_ARTIFACT] = "true"
            self.visit({"template": on_exit}, "", arguments)
        for name in list(self.templates):
            self.visit({"template": name}, "", None)

    @staticmethod
    def calls(template: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """The steps and DAG tasks of a template, with their hooks' calls."""
        nodes = [s for group in _list(template.get("steps")) for s in _list(group)]
        for node in map(_dict, nodes + _list(_dict(template.get("dag")).get("tasks"))):
            yield node
            yield from map(_dict, _dict(node.get("hooks")).values())

    def callee(self, call: dict[str, Any], path: str, parent: _Template | None) -> _Template | None:
        """The template a step or task runs; None when it is not in the file (a templateRef, a missing name)."""
        if call.get("templateRef") is not None:
            return None
        if isinstance(call.get("inline"), dict):
            return _Template(call["inline"], f"{path}.inline", parent.passes if parent else ())
        return self.templates.get(_str(call.get("template")))

    def visit(
        self, call: dict[str, Any], path: str, arguments: dict[str, Any] | None, parent: _Template | None = None
    ) -> _Template | None:
        """Argo's validateTemplateHolder: `arguments` None stands for the made-up ones (FakeArguments)."""
        template = self.callee(call, path, parent)
        if template is not None and self.depth < _MAX_DEPTH:
            self.depth += 1
            self.check_template(template, arguments)
            self.depth -= 1
        return template

    def check_template(self, template: _Template, arguments: dict[str, Any] | None) -> None:
        """Argo's validateTemplate, on the template's first visit: its scope, its substitutions, then its tags."""
        if template.name in self.visited:
            return
        self.visited.add(template.name)
        node, kind = template.node, _type(template.node)
        inputs, outputs = _dict(node.get("inputs")), _dict(node.get("outputs"))
        params = [_dict(p) for p in _list(inputs.get("parameters"))]
        scope = {f"inputs.parameters.{_str(p.get('name'))}" for p in params}
        if params:
            scope.add("inputs.parameters")
        for artifact in map(_dict, _list(inputs.get("artifacts"))):
            scope.add(f"inputs.artifacts.{_str(artifact.get('name'))}")
            if kind in _LEAF:
                scope.add(f"inputs.artifacts.{_str(artifact.get('name'))}.path")
        first = dict(self.globals)  # ProcessArgs: the workflow's and the pod's variables, then the inputs
        if kind in _POD:
            scope.add("pod.name")
            first["pod.name"] = placeholder()
        if node.get("retryStrategy") is not None:
            first.update({key: placeholder() for key in _RETRIES})
        second, rewritten, brought = self.input_values(template, params, arguments, first)
        processed = replace(template, passes=(*template.passes, first, second))
        scope |= set(self.globals)
        where = Place(template.name, kind)
        for at, text, name in brought:  # Argo checks a value where it lands: the input's value, where it is used
            if kind in _LEAF or f"inputs.parameters.{name}" in repr(node):
                self.check(processed, text, at, scope, where)
        if kind == "steps":
            where = self.steps(processed, scope, where)
        elif kind == "dag":
            where = self.dag(processed, scope, where)
        else:
            self.check(processed, node, template.path, scope, where, rewritten)
        self.check(processed, outputs, f"{template.path}.outputs", scope, replace(where, unit="outputs"))

    def input_values(
        self, template: _Template, params: list[dict[str, Any]], arguments: dict[str, Any] | None, first: dict[str, str]
    ) -> tuple[dict[str, str], dict[str, Any], list[tuple[str, str, str]]]:
        """ProcessArgs: the second pass's values (inputs, artifact and output paths), what it rewrote, what it brought.

        The arguments replace an input's value (the made-up ones replace every input, and every input artifact but
        its name, path and mode): what they replace is not checked. What the workflow's arguments bring is, where it
        is written: (that place, the text, the input it is for).
        """
        node, path = template.node, template.path
        second = {**first, "inputs.parameters": placeholder()}
        rewritten: dict[str, Any] = {}
        brought: list[tuple[str, str, str]] = []
        given = {
            _str(_dict(a).get("name")): (k, _dict(a)) for k, a in enumerate(_list(_dict(arguments).get("parameters")))
        }
        for i, param in enumerate(params):
            name, at = _str(param.get("name")), f"{path}.inputs.parameters[{i}]"
            value = param.get("default") if param.get("value") is None else param.get("value")
            if arguments is None or name in given:
                rewritten.update({f"{at}.value": None, f"{at}.valueFrom": None})
                value = placeholder() if arguments is None else given[name][1].get("value")
                if arguments is not None and value is not None:
                    brought.append(
                        (f"{self.path}.arguments.parameters[{given[name][0]}].value", stringify(value), name)
                    )
                    value = placeholder()
            if value is not None:
                second[f"inputs.parameters.{name}"] = substitute(template.text(stringify(value)), first)
        passed = {_str(_dict(a).get("name")): _dict(a) for a in _list(_dict(arguments).get("artifacts"))}
        for i, artifact in enumerate(map(_dict, _list(_dict(node.get("inputs")).get("artifacts")))):
            name = _str(artifact.get("name"))
            if arguments is None or name in passed:
                kept = {key: artifact[key] for key in ("path", "mode", "recurseMode") if key in artifact}
                rewritten[f"{path}.inputs.artifacts[{i}]"] = {**passed.get(name, {"name": name}), **kept}
        for key in ("inputs", "outputs"):
            for artifact in map(_dict, _list(_dict(node.get(key)).get("artifacts"))):
                if _str(artifact.get("path")):
                    second[f"{key}.artifacts.{_str(artifact.get('name'))}.path"] = artifact["path"]
        for param in map(_dict, _list(_dict(node.get("outputs")).get("parameters"))):
            if _str(_dict(param.get("valueFrom")).get("path")):
                second[f"outputs.parameters.{_str(param.get('name'))}.path"] = param["valueFrom"]["path"]
        return second, rewritten, brought

    def steps(self, template: _Template, scope: set[str], where: Place) -> Place:
        """Argo's validateSteps: each step sees what the steps before it gave (and the loops before it set)."""
        names = {template.text(_str(_dict(s).get("name"))) for g in _list(template.node["steps"]) for s in _list(g)}
        nodes: dict[str, _Template | None] = {}
        for g, group in enumerate(_list(template.node["steps"])):
            earlier: set[str] = set()
            for j, step in enumerate(_list(group)):
                if not isinstance(step, dict):
                    continue
                path, name = f"{template.path}.steps[{g}][{j}]", template.text(_str(step.get("name")))
                scope.add(f"steps.{name}.status")
                loop = self.items(template, step, scope)
                callee = self.visit(step, path, None, template)
                if _exit_hook(step):
                    self.outputs(scope, callee, "steps", name, aggregate=False)
                step_scope = scope | self.inline_inputs(step)
                here = replace(where, unit="step", node=name, loop=loop, nodes=_nodes(nodes), all_nodes=names)
                self.check(template, step, path, step_scope, replace(here, same_group=set(earlier)))
                self.outputs(scope, callee, "steps", name, aggregate=_loops(step))
                nodes[name] = callee
                earlier.add(name)
        return replace(where, nodes=_nodes(nodes), all_nodes=names)

    def dag(self, template: _Template, scope: set[str], where: Place) -> Place:
        """Argo's validateDAG: a task sees every task's outputs, and the status of those it depends on."""
        dag = _dict(template.node["dag"])
        tasks = {
            template.text(_str(_dict(t).get("name"))): (i, _dict(t)) for i, t in enumerate(_list(dag.get("tasks")))
        }
        graph = {name: task_dependencies(task, set(tasks)) for name, (_, task) in tasks.items()}
        order = topological(graph)
        if order is None:  # a cycle: Argo stops at it (pipelines.lint_rules reports it)
            return where
        above = {name: ancestors(name, graph) for name in tasks}
        callees: dict[str, _Template | None] = {}
        unknown = self.all_produced - self.globals.keys()  # global outputs not known yet: only those can be added
        made = {
            name: self.produces(self.callee(task, "", template)) if unknown else set()
            for name, (_, task) in tasks.items()
        }
        for name in order:
            # Argo takes the tasks in an order of its map's choosing: the global outputs of a task that need not
            # run after this one may be known already.
            for other in tasks:
                if other != name and name not in above[other]:
                    for key in made[other]:
                        self.globals.setdefault(key, placeholder())
            callee = self.visit(tasks[name][1], f"{template.path}.dag.tasks[{tasks[name][0]}]", None, template)
            callees[name] = callee
            self.outputs(scope, callee, "tasks", name, aggregate=_loops(tasks[name][1]))
        where = replace(where, nodes=_nodes(callees), all_nodes=set(tasks))
        self.check(template, dag.get("target"), f"{template.path}.dag.target", scope, replace(where, unit="target"))
        hooked = {name for name, (_, task) in tasks.items() if isinstance(task.get("hooks"), dict)}
        for name in order:
            i, task = tasks[name]
            if name in hooked:
                scope.add(f"tasks.{name}.status")
            task_scope = (
                scope | {f"tasks.{h}.status" for h in hooked if name not in above[h]} | self.inline_inputs(task)
            )
            for ancestor in above[name]:
                self.outputs(task_scope, callees[ancestor], "tasks", ancestor, _loops(tasks[ancestor][1]), True)
            loop = self.items(template, task, task_scope)
            here = replace(where, unit="task", node=name, loop=loop)
            self.check(template, task, f"{template.path}.dag.tasks[{i}]", task_scope, here)
        return where

    def produces(self, template: _Template | None) -> set[str]:
        """The global outputs a template and all it runs may set (by a fixed globalName); worked out once."""
        if template is None:
            return set()
        if id(template.node) not in self.produced:
            found: set[str] = set()
            todo: list[_Template | None] = [template]
            seen: set[int] = set()
            while todo:
                current = todo.pop()
                if current is not None and id(current.node) not in seen:
                    seen.add(id(current.node))
                    found |= _declared_globals(current.node)
                    todo.extend(self.callee(call, "", current) for call in self.calls(current.node))
            self.produced[id(template.node)] = found
        return self.produced[id(template.node)]

    def items(self, template: _Template, call: dict[str, Any], scope: set[str]) -> str:
        """Argo's addItemsToScope: the item variables of a loop, into `scope`; the loop's kind."""
        if _list(call.get("withItems")):
            for item in call["withItems"]:
                if isinstance(item, dict):
                    scope.update(f"item.{template.text(str(key))}" for key in item)
                elif isinstance(item, list):
                    scope.update(f"item.[{i}]" for i in range(len(item)))
                elif item is not None:
                    scope.add("item")
            return "withItems"
        if _str(call.get("withParam")):
            scope.update(("item", _ANY_ITEM))
            return "withParam"
        if call.get("withSequence") is not None:
            scope.add("item")
            return "withSequence"
        return ""

    @staticmethod
    def inline_inputs(call: dict[str, Any]) -> set[str]:
        inputs = _dict(_dict(call.get("inline")).get("inputs"))
        return {f"inputs.parameters.{_str(_dict(p).get('name'))}" for p in _list(inputs.get("parameters"))}

    def outputs(
        self, scope: set[str], template: _Template | None, kind: str, name: str, aggregate: bool, ancestor: bool = False
    ) -> None:
        """Argo's addOutputsToScope: what a step or task that has run gives, and the global outputs it sets."""
        ref = f"{kind}.{name}"
        scope.update(f"{ref}.{key}" for key in ("id", "startedAt", "finishedAt", "hostNodeName"))
        if ancestor:
            scope.add(f"{ref}.status")
        if template is None:
            scope.add(f"{_OPAQUE}{ref}.")
            return
        node = template.node
        if node.get("daemon") is True:
            scope.add(f"{ref}.ip")
        if _has_output(node):
            scope.update((f"{ref}.outputs.result", f"{ref}.exitCode"))
        for key, anything in (("parameters", _ANY_PARAMETER), ("artifacts", _ANY_ARTIFACT)):
            for output in map(_dict, _list(_dict(node.get("outputs")).get(key))):
                scope.add(f"{ref}.outputs.{key}.{_str(output.get('name'))}")
                global_name = template.text(_str(output.get("globalName")))
                if global_name and is_parameter(global_name):
                    scope.add(anything)
                elif global_name:
                    scope.add(f"workflow.outputs.{key}.{global_name}")
                    self.globals.setdefault(f"workflow.outputs.{key}.{global_name}", placeholder())
        if aggregate:
            scope.add(f"{ref}.outputs.parameters")
            if _type(node) in ("script", "containerSet"):
                scope.update((f"{ref}.outputs.result", f"{ref}.exitCode"))

    def check(
        self,
        template: _Template,
        value: Any,
        path: str,
        scope: set[str],
        where: Place,
        rewritten: Mapping[str, Any] | None = None,
    ) -> None:
        """Argo's resolveAllVariables over `value` (part of `template`) after its substitutions."""
        texts = []
        every = [(at, template.text(text)) for at, text in strings(value, path, rewritten or {})]
        for index, (at, text) in enumerate(every):
            found = tags(text)
            if found is None:  # a `{{` never closed: Argo's scan runs on into what follows it (the unit's JSON)
                if not any("}}" in later for _, later in every[index + 1 :]):  # fasttemplate finds no end tag
                    opened = text[_unclosed(text) :]
                    shown = opened if len(opened) <= 60 else f"{opened[:57]}..."
                    self.found[(at, "{{")] = (
                        f'{where}: {shown!r} opens a tag that never closes (cannot find end tag "}}}}"): add the '
                        "'}}'"
                    )
                return
            texts.append((at, found))
        for at, found in texts:
            for tag in found:
                key = lookup_key(tag)
                if tag.startswith("=") or not key.startswith(_CHECKED) or (at, key) in self.found:
                    continue
                problem = self.unresolved(key, scope, where)
                if problem:
                    self.found[(at, key)] = f"{where}: {problem}"

    def unresolved(self, key: str, scope: set[str], where: Place) -> str | None:
        """Why `{{key}}` does not resolve in `scope`, or None when it does."""
        parts = key.split(".")
        if key in scope or key in self.globals:
            if where.unit == "step" and parts[0] == "steps" and parts[1] in where.same_group:
                return (
                    f"{{{{{key}}}}} refers to step {parts[1]!r}, which runs beside this one in the same group, so"
                    " it is not there yet when this step starts (Argo's validator lets it through; the run fails)"
                )
            return None
        if (parts[0] == "item" and _ANY_ITEM in scope) or key.startswith(_TOLERATED):
            return None
        if (key.startswith("workflow.outputs.parameters.") and _ANY_PARAMETER in scope) or (
            key.startswith("workflow.outputs.artifacts.") and _ANY_ARTIFACT in scope
        ):
            return None
        if self.known.alone and key.startswith("workflow.parameters"):
            return None  # a WorkflowTemplate on its own: the workflow that runs it gives them
        if len(parts) > 2 and f"{_OPAQUE}{parts[0]}.{parts[1]}." in scope and parts[2:] != ["status"]:
            return None  # a templateRef's template, not in this file
        if self.any_output and key.startswith("workflow.outputs."):
            return None
        return explain(key, scope, where, self.known, self.declared_outputs)


def _unclosed(text: str) -> int:
    """Where the first `{{` of `text` that no `}}` follows starts (fasttemplate's scan: a tag ends at the next `}}`)."""
    start = text.find("{{")
    while (end := text.find("}}", start + 2)) >= 0:
        start = text.find("{{", end + 2)
    return start


def _declared_globals(template: dict[str, Any]) -> set[str]:
    """The global outputs a template itself declares by a fixed name."""
    found = set()
    for key in ("parameters", "artifacts"):
        for output in map(_dict, _list(_dict(template.get("outputs")).get(key))):
            name = _str(output.get("globalName"))
            if name and not is_parameter(name):
                found.add(f"workflow.outputs.{key}.{name}")
    return found


def _nodes(callees: Mapping[str, _Template | None]) -> dict[str, dict[str, Any] | None]:
    return {name: None if template is None else template.node for name, template in callees.items()}
