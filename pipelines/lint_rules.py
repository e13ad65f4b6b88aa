"""Argo's own admission rules (workflow/validate/validate.go, v4.1.2) that its JSON schema cannot express."""

from __future__ import annotations

import re
from typing import Any

from pipelines.lint_cron import cron_findings
from pipelines.lint_explain import hint
from pipelines.lint_leaf import leaf_findings
from pipelines.lint_scope import _dict, _list, _str, scope_findings  # the one definition of these readers
from pipelines.lint_when import DEPENDS_WORD, ancestors, expression_error, substitute_tags
from pipelines.local.globals import WorkflowGlobals
from pipelines.local.workflow import (
    API_VERSION,
    WorkflowError,
    check_argument_enums,
    check_output_sources,
    check_timing,
    stringify,
)

__all__ = ["KINDS", "Finding", "controller_findings"]

KINDS = ("Workflow", "WorkflowTemplate", "ClusterWorkflowTemplate", "CronWorkflow")
Finding = tuple[str, str]
"""A (path, message) pair; `pipelines.lint` adds the file."""

_TYPES = ("container", "containerSet", "steps", "script", "resource", "dag", "suspend", "data", "http", "plugin")
_RUNS_IN = ("Workflow", "CronWorkflow")  # kinds whose arguments are final: templates get theirs at submit time
_FIELD_NAME = re.compile(r"[a-zA-Z0-9][-a-zA-Z0-9]*")
_PARAM_NAME = re.compile(r"[-a-zA-Z0-9_]+")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_RESULTS = ("Succeeded", "Failed", "Errored", "Skipped", "Omitted", "Daemoned", "AnySucceeded", "AllFailed")
_POD_GC_STRATEGIES = ("OnPodCompletion", "OnPodSuccess", "OnWorkflowCompletion", "OnWorkflowSuccess")
_METRIC_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")  # Prometheus' legacy names, less ':' (metrics.IsValidMetricName)
_POD_TYPES = ("container", "containerSet", "script", "resource", "data")  # Argo's Template.IsPodType
_ARTIFACT_SOURCES = ("s3", "git", "http", "artifactory", "hdfs", "raw", "oss", "gcs", "azure", "plugin")


def _indexed(items: Any, path: str) -> list[tuple[str, Any]]:
    return [(f"{path}[{i}]", item) for i, item in enumerate(_list(items))]


def _name_problem(name: str, pattern: re.Pattern[str]) -> str | None:
    if pattern is _PARAM_NAME and not pattern.fullmatch(name):
        return "use only letters, digits, '_' and '-'"
    if pattern is _FIELD_NAME and not pattern.fullmatch(name):
        return "use only letters, digits and '-', starting with a letter or digit"
    return "keep it to 128 characters" if len(name) > 128 else None


def controller_findings(doc: dict[str, Any], *, schema_checked: bool) -> list[Finding]:
    """What Argo's controller would reject in `doc` (one of KINDS); skip what the schema reports when it ran."""
    return _Rules(doc, schema_checked).run()


class _Rules:
    """One pass over one document, collecting findings instead of stopping at the first like Argo does."""

    def __init__(self, doc: dict[str, Any], schema_checked: bool) -> None:
        self.doc, self.kind, self.schema_checked = doc, doc.get("kind"), schema_checked
        self.found: list[Finding] = []
        self.templates: dict[str, dict[str, Any]] = {}
        self.defaults: dict[str, Any] | None = {}  # spec.templateDefaults

    def add(self, path: str, message: str) -> None:
        self.found.append((path, message))

    def run(self) -> list[Finding]:
        version = self.doc.get("apiVersion")
        if not self.schema_checked and version is not None and version != API_VERSION:
            self.add("apiVersion", f"must be {API_VERSION!r}")  # as the schema says it
        self.metadata(_dict(self.doc.get("metadata")))
        spec = _dict(self.doc.get("spec"))
        if self.kind == "CronWorkflow":
            self.found.extend(cron_findings(spec))
            self.spec(_dict(spec.get("workflowSpec")), "spec.workflowSpec")
        else:
            self.spec(spec, "spec")
        return self.found

    def metadata(self, meta: dict[str, Any]) -> None:
        # Neither Argo nor `argo lint` insists on a name (upstream's k8s-jobs example has none); the API server
        # checks the form of the ones given.
        name, generate = _str(meta.get("name")), _str(meta.get("generateName"))
        limit = 52 if self.kind == "CronWorkflow" else 63  # a CronWorkflow's runs append '-<unix time>'
        for key, value in (("name", name), ("generateName", generate[:-1] + "a" if generate[-1:] == "-" else generate)):
            if value and not _DNS_SUBDOMAIN.fullmatch(value):
                self.add(f"metadata.{key}", f"{key} {meta[key]!r} must be lowercase letters, digits, '-' and '.'")
        if len(name) > limit:
            self.add("metadata.name", f"name {name!r} is longer than {limit} characters")

    def names(self, entries: list[tuple[str, Any]], what: str, pattern: re.Pattern[str], required: bool) -> None:
        """Argo's validateWorkflowFieldNames: each (path, item) has a valid name, used once."""
        seen: set[str] = set()
        for where, item in entries:
            name = _dict(item).get("name")
            if not isinstance(name, str) or not name:
                if required and isinstance(item, dict):
                    self.add(where, f"this {what} needs a name")
                continue
            problem = _name_problem(substitute_tags(name), pattern)
            if problem:
                self.add(f"{where}.name", f"{what} name {name!r} is invalid: {problem}")
            elif name in seen:
                self.add(f"{where}.name", f"{what} name {name!r} is used twice")
            seen.add(name)

    def io_names(self, holder: dict[str, Any], path: str, label: str) -> None:
        for key in ("parameters", "artifacts"):
            entries = _indexed(holder.get(key), f"{path}.{key}")
            self.names(entries, f"{label} {key[:-1]}", _PARAM_NAME, not self.schema_checked)

    def spec(self, spec: dict[str, Any], path: str) -> None:
        # validateLeaf takes an image from a Workflow's or WorkflowTemplate's templateDefaults, not a cluster one's
        self.defaults = None if self.kind == "ClusterWorkflowTemplate" else _dict(spec.get("templateDefaults"))
        templates = _list(spec.get("templates"))
        self.names(_indexed(templates, f"{path}.templates"), "template", _FIELD_NAME, True)
        for template in reversed(templates):
            if isinstance(template, dict) and isinstance(template.get("name"), str):
                self.templates[template["name"]] = template
        self.pod_resources(spec.get("podResources"), f"{path}.podResources")
        strategy = _dict(spec.get("podGC")).get("strategy")
        if strategy not in (None, "", *_POD_GC_STRATEGIES):  # Argo's PodGCStrategy.IsValid
            self.add(f"{path}.podGC.strategy", f"{strategy!r} is not one of {', '.join(_POD_GC_STRATEGIES)}")
        arguments = _dict(spec.get("arguments"))
        self.io_names(arguments, f"{path}.arguments", "workflow argument")
        self.workflow_arguments(arguments, f"{path}.arguments")
        referenced = spec.get("workflowTemplateRef") is not None
        if referenced and templates:
            self.add(f"{path}.templates", "a workflow with a workflowTemplateRef cannot define templates")
        entrypoint = _str(spec.get("entrypoint"))
        if not entrypoint and self.kind in _RUNS_IN and not referenced:
            self.add(f"{path}.entrypoint", "entrypoint is required: name the template the workflow starts with")
        for key, entry in (("entrypoint", entrypoint), ("onExit", _str(spec.get("onExit")))):
            target = self.template_named(entry, f"{path}.{key}") if entry and not referenced else None
            if target is not None and (key == "onExit" or self.kind in _RUNS_IN):
                self.inputs_given(target, entry, arguments, f"{path}.arguments", "spec.arguments")
        self.hooks(_dict(spec.get("hooks")), f"{path}.hooks")
        for i, template in enumerate(templates):
            if isinstance(template, dict):
                self.template(template, f"{path}.templates[{i}]")
        if not referenced:  # the `{{...}}` tags each template names, in the scopes Argo's validator builds
            meta, alone = _dict(self.doc.get("metadata")), self.kind not in _RUNS_IN
            self.found += scope_findings(spec, path, WorkflowGlobals(str(self.kind), meta, spec, alone=alone))

    def workflow_arguments(self, arguments: dict[str, Any], path: str) -> None:
        for i, param in enumerate(_list(arguments.get("parameters"))):
            param, where = _dict(param), f"{path}.parameters[{i}]"
            source = _dict(param.get("valueFrom"))
            if set(source) & {"path", "jsonPath", "jqFilter", "parameter", "expression"}:
                self.add(
                    f"{where}.valueFrom",
                    "a workflow argument's valueFrom only allows configMapKeyRef, supplied and event",
                )
            enum, value = param.get("enum"), param.get("value")
            if isinstance(enum, list) and not enum:
                self.add(f"{where}.enum", "enum needs at least one value")
            elif isinstance(enum, list) and value is not None and stringify(value) not in map(stringify, enum):
                self.add(f"{where}.value", f"value {value!r} is not one of its enum {enum}")

    def template_named(self, name: str, path: str) -> dict[str, Any] | None:
        if name not in self.templates:
            self.add(path, f"template {name!r} is not defined in this workflow{hint(name, self.templates)}")
        return self.templates.get(name)

    def hooks(self, hooks: dict[str, Any], path: str) -> None:
        for name, hook in hooks.items():
            hook = _dict(hook)
            if name != "exit" and not hook.get("expression"):
                self.add(f"{path}.{name}", f"hook {name!r} needs an expression (only the 'exit' hook may omit it)")
            if isinstance(hook.get("template"), str) and hook.get("templateRef") is None:
                self.template_named(hook["template"], f"{path}.{name}.template")

    def template(self, template: dict[str, Any], path: str) -> None:
        name = _str(template.get("name")) or "(inline)"
        types = [key for key in _TYPES if template.get(key) is not None]
        if len(types) != 1:
            which = f"several types ({', '.join(types)}): keep one" if types else "no type: give it one"
            self.add(path, f"template {name!r} has {which} of {', '.join(_TYPES)}")
        for check in (check_timing, check_output_sources):  # the runner's checks, which are Argo's validator's
            try:
                check(template, f"template {name!r}")
            except WorkflowError as error:
                self.add(path, str(error).rstrip("."))
        self.found.extend(leaf_findings(template, path, self.defaults))
        for i, metric in enumerate(map(_dict, _list(_dict(template.get("metrics")).get("prometheus")))):
            self.metric(metric, f"{path}.metrics.prometheus[{i}]")
        kind = types[0] if len(types) == 1 else None
        if template.get("podResources") is not None and kind in ("http", "plugin"):  # they run on the agent pod
            self.add(f"{path}.podResources", f"podResources is not supported for {kind} templates")
        else:
            self.pod_resources(template.get("podResources"), f"{path}.podResources")
        if template.get("resourceClaims") and kind not in (None, *_POD_TYPES):
            self.add(
                f"{path}.resourceClaims", f"resourceClaims is not supported for {kind} templates, which make no pod"
            )
        inputs = _dict(template.get("inputs"))
        self.io_names(inputs, f"{path}.inputs", "input")
        self.io_names(_dict(template.get("outputs")), f"{path}.outputs", "output")
        if isinstance(template.get("steps"), list):
            self.steps(template, path)
        if isinstance(template.get("dag"), dict):
            self.dag(template, path)

    def metric(self, metric: dict[str, Any], path: str) -> None:
        """Argo's checks of a template's Prometheus metric: names and label keys, help, a value (validateTemplate)."""
        name = _str(metric.get("name"))
        keys = [_str(_dict(label).get("key")) for label in _list(metric.get("labels"))]
        for bad in [key for key in (name, *keys) if not _METRIC_NAME.fullmatch(key)][:1]:
            self.add(path, f"metric name or label {bad!r} is invalid: use letters, digits and '_'")
        if metric.get("help") == "":  # a missing one is the schema's to report
            self.add(path, f"metric {name!r} needs a help string")
        for kind in ("gauge", "counter", "histogram"):
            if _dict(metric.get(kind)).get("value") == "":
                self.add(f"{path}.{kind}", f"metric {name!r} needs {kind}.value")

    def pod_resources(self, resources: Any, path: str) -> None:
        """Argo's validatePodResources: pod-level resources are cpu, memory and hugepages-*, without claims."""
        resources = _dict(resources)
        if resources.get("claims"):
            self.add(f"{path}.claims", "claims is not supported for pod-level resources")
        for key in ("limits", "requests"):
            for name in _dict(resources.get(key)):
                if name not in ("cpu", "memory") and not str(name).startswith("hugepages-"):
                    self.add(f"{path}.{key}", f"{name!r} is not a pod-level resource: use cpu, memory or hugepages-*")

    def call(self, call: dict[str, Any], path: str, what: str) -> None:
        """Checks shared by steps and DAG tasks: the template they call, its inputs, `when`, loops, hooks."""
        name = _str(call.get("name"))
        if "template" in call and call.get("templateRef") is not None:
            self.add(path, f"{what} {name!r} names both template and templateRef: keep one")
        elif isinstance(call.get("inline"), dict):
            self.template(call["inline"], f"{path}.inline")
            self.inputs_given(call["inline"], "(inline)", _dict(call.get("arguments")), path, f"{what} {name!r}")
        elif isinstance(call.get("template"), str):
            target = self.template_named(call["template"], f"{path}.template")
            if target is not None:
                self.inputs_given(target, call["template"], _dict(call.get("arguments")), path, f"{what} {name!r}")
        elif call.get("templateRef") is None:
            self.add(path, f"{what} {name!r} names no template: set template, templateRef or inline")
        arguments = _dict(call.get("arguments"))
        self.io_names(arguments, f"{path}.arguments", "argument")
        try:
            check_argument_enums(arguments, f"{what} {name!r}")
        except WorkflowError as refused:
            self.add(f"{path}.arguments", str(refused).rstrip("."))
        for i, param in enumerate(_list(arguments.get("parameters"))):
            if isinstance(param, dict) and param.get("value") is None and param.get("valueFrom") is None:
                self.add(
                    f"{path}.arguments.parameters[{i}]", f"argument {param.get('name')!r} needs a value or valueFrom"
                )
        when = _str(call.get("when"))
        error = expression_error(substitute_tags(when)) if when.strip() else None
        if error:
            self.add(f"{path}.when", f"when {when!r} does not parse: {error}")
        if sum(bool(call.get(key)) or call.get(key) == {} for key in ("withItems", "withParam", "withSequence")) > 1:
            self.add(path, f"{what} {name!r} may use only one of withItems, withParam and withSequence")
        sequence = _dict(call.get("withSequence"))
        if sequence.get("count") is not None and sequence.get("end") is not None:  # Argo's addItemsToScope
            self.add(f"{path}.withSequence", f"{what} {name!r}: withSequence may define only one of count and end")
        if isinstance(call.get("onExit"), str):
            self.template_named(call["onExit"], f"{path}.onExit")
        self.hooks(_dict(call.get("hooks")), f"{path}.hooks")

    def inputs_given(self, target: dict[str, Any], name: str, args: dict[str, Any], path: str, caller: str) -> None:
        """Argo's ProcessArgs: an input with no value, default or ConfigMap source must come from the caller."""
        given = {_str(_dict(p).get("name")): _dict(p) for p in _list(args.get("parameters"))}
        inputs = _dict(target.get("inputs"))
        for param in map(_dict, _list(inputs.get("parameters"))):
            arg = given.get(_str(param.get("name")))
            supplied = arg is not None and (arg.get("value") is not None or arg.get("valueFrom") is not None)
            own = param.get("value") is not None or param.get("default") is not None
            own = own or _dict(param.get("valueFrom")).get("configMapKeyRef") is not None
            if not supplied and (arg is not None or not own):
                self.add(
                    path, f"{caller} gives no value for input parameter {param.get('name')!r} of template {name!r}"
                )
        passed = {_str(_dict(a).get("name")) for a in _list(args.get("artifacts"))}
        for art in map(_dict, _list(inputs.get("artifacts"))):
            if (
                not art.get("optional")
                and not any(k in art for k in _ARTIFACT_SOURCES)
                and _str(art.get("name")) not in passed
            ):
                self.add(path, f"{caller} does not pass input artifact {art.get('name')!r} of template {name!r}")

    def steps(self, template: dict[str, Any], path: str) -> None:
        entries = [
            (f"{path}.steps[{g}][{j}]", s)
            for g, group in enumerate(template["steps"])
            for j, s in enumerate(_list(group))
        ]
        self.names(entries, "step", _FIELD_NAME, True)
        for where, step in entries:
            if isinstance(step, dict):
                self.call(step, where, "step")

    def dag(self, template: dict[str, Any], path: str) -> None:
        name, dag, tasks_path = template.get("name"), template["dag"], f"{path}.dag.tasks"
        tasks = [task if isinstance(task, dict) else {} for task in _list(dag.get("tasks"))]
        if not tasks:
            self.add(tasks_path, f"DAG template {name!r} needs at least one task")
        self.names(_indexed(tasks, tasks_path), "task", _FIELD_NAME, not self.schema_checked)
        nodes = {_str(task.get("name")): task for task in tasks}
        uses_depends = any(task.get("depends") for task in tasks)
        graph = {
            _str(task.get("name")): self.dependencies(task, f"{tasks_path}[{i}]", nodes) for i, task in enumerate(tasks)
        }
        for i, task in enumerate(tasks):
            where, task_name = f"{tasks_path}[{i}]", _str(task.get("name"))
            if (uses_depends or task.get("dependencies")) and task_name[:1].isdigit():
                self.add(
                    f"{where}.name", f"task name {task_name!r} cannot start with a digit in a DAG with dependencies"
                )
            if uses_depends and task.get("dependencies"):
                self.add(
                    f"{where}.dependencies", "Argo rejects 'dependencies' in a DAG that uses 'depends': use depends"
                )
            if uses_depends and task.get("continueOn") is not None:
                self.add(
                    f"{where}.continueOn",
                    "Argo rejects continueOn in a DAG that uses 'depends': write 'X.Failed' there",
                )
            self.call(task, where, "task")
            # Argo's validateDAGTaskArgumentDependency: an argument that starts with a task's variable needs it.
            before = ancestors(task_name, graph)
            arguments = _dict(task.get("arguments"))
            for key, field in (("parameters", "value"), ("artifacts", "from")):
                for k, arg in enumerate(map(_dict, _list(arguments.get(key)))):
                    value = stringify(arg.get(field)) if arg.get(field) is not None else ""
                    used = value.split(".")[1] if value.startswith("{{tasks.") else None
                    if used in nodes and used not in before:
                        self.add(
                            f"{where}.arguments.{key}[{k}].{field}", f"uses task {used!r} but does not depend on it"
                        )
        cycle = _cycle(graph)
        if cycle:
            self.add(tasks_path, f"tasks form a dependency cycle: {' -> '.join(cycle)}")
        for target in _str(dag.get("target")).split():
            if "{{" not in target and target not in nodes:
                self.add(f"{path}.dag.target", f"target {target!r} is not a task of DAG template {name!r}")

    def dependencies(self, task: dict[str, Any], path: str, nodes: dict[str, dict[str, Any]]) -> set[str]:
        """The names a task waits for, reporting unknown names, unknown results and bad `depends` syntax."""
        names: set[str] = set()
        depends = _str(task.get("depends"))
        for match in DEPENDS_WORD.finditer(depends):
            node, _, result = match.group(0).partition(".")
            names.add(node)
            if result and result not in _RESULTS:
                self.add(f"{path}.depends", f"{result!r} is not a task result: use one of {', '.join(_RESULTS)}")
            elif result in ("AnySucceeded", "AllFailed") and node in nodes:
                if not any(nodes[node].get(key) for key in ("withItems", "withParam", "withSequence")):
                    self.add(f"{path}.depends", f"{match.group(0)!r} needs task {node!r} to loop over items")
            if node not in nodes:
                self.add(f"{path}.depends", f"depends on task {node!r}, which is not in this DAG{hint(node, nodes)}")
        error = expression_error(DEPENDS_WORD.sub("true", depends)) if depends.strip() else None
        if error:
            self.add(f"{path}.depends", f"depends {depends!r} does not parse: {error}")
        for i, node in enumerate(_list(task.get("dependencies"))):
            names.add(_str(node))
            if _str(node) not in nodes:
                self.add(f"{path}.dependencies[{i}]", f"depends on task {node!r}, which is not in this DAG")
        return names & set(nodes)


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One dependency cycle of the DAG (`a -> b -> a`: a waits for b, b for a), or None."""
    left = dict(graph)
    while ready := [node for node, deps in left.items() if not deps & left.keys()]:
        for node in ready:
            del left[node]
    if not left:
        return None
    node, trail = min(left), []  # every task left waits for another one left, so this walk must come back
    while node not in trail:
        trail.append(node)
        node = min(left[node] & left.keys())
    return trail[trail.index(node) :] + [node]
