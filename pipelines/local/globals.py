"""Which workflow-wide variables (`{{workflow.X}}`) a workflow's templates may name, as Argo's validator decides it.

Argo v4.1.2 (workflow/validate/validate.go) refuses a workflow whose templates name a `{{workflow.X}}` it does
not set: "failed to resolve {{workflow.X}}". It sets name, namespace, uid, mainEntrypoint, serviceAccountName,
status, the labels and annotations (all, as JSON, and by name: the workflow's own and its workflowMetadata's),
the parameters when there are any (all, as JSON, by name), priority when `spec.priority` is set, failures when
there is a `spec.onExit` (an exit hook in `spec.hooks` is not enough), the global outputs the templates declare
(`globalName`), and lets through the ones it knows only when the workflow runs: creationTimestamp, scheduledTime
and duration. A WorkflowTemplate linted on its own may name any parameter: the workflow that runs it gives them.
One definition for the local runner's load (pipelines.local.workflow) and `vcpilot lint` (pipelines.lint_scope,
which also holds Argo to when in its walk failures and each global output become known).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from pipelines.local import CRON_LABEL
from pipelines.local.workflow import SCHEDULED_TIME, stringify

__all__ = ["WorkflowGlobals"]

# A simple tag (not an `{{=expression}}`, which Argo's validator does not resolve) naming a workflow variable.
_TAG = re.compile(r"{{\s*(workflow\.[^{}=]*?)\s*}}")
_ALWAYS = frozenset(
    f"workflow.{name}"
    for name in (
        "name",
        "namespace",
        "uid",
        "mainEntrypoint",
        "serviceAccountName",
        "status",
        "labels",
        "labels.json",
        "annotations",
        "annotations.json",
    )
)
_AT_RUN_TIME = ("workflow.creationTimestamp", "workflow.scheduledTime", "workflow.duration")


def _keys(holder: Any, key: str) -> set[str]:
    value = holder.get(key) if isinstance(holder, Mapping) else None
    return {str(k) for k in value} if isinstance(value, Mapping) else set()


def _items(holder: Any, key: str) -> list[Mapping[str, Any]]:
    value = holder.get(key) if isinstance(holder, Mapping) else None
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


class WorkflowGlobals:
    """The `{{workflow.X}}` a workflow document (Workflow, a template or a CronWorkflow) sets for its templates."""

    def __init__(self, kind: str, metadata: Mapping[str, Any], spec: Mapping[str, Any], *, alone: bool) -> None:
        """`spec` is the WorkflowSpec (a CronWorkflow's workflowSpec); `alone`: a template linted on its own."""
        extra = spec.get("workflowMetadata")
        labels = _keys(metadata, "labels") | _keys(extra, "labels") | _keys(extra, "labelsFrom")
        annotations = _keys(metadata, "annotations") | _keys(extra, "annotations")
        if kind == "CronWorkflow":  # its runs' metadata: the workflowMetadata and what the cron controller adds
            labels, annotations = labels | {CRON_LABEL}, annotations | {SCHEDULED_TIME}
        arguments = _items(spec.get("arguments"), "parameters")
        params = [str(p.get("name")) for p in arguments if p.get("name")]
        known = set(_ALWAYS)
        known |= {f"workflow.labels.{k}" for k in labels} | {f"workflow.annotations.{k}" for k in annotations}
        if params:
            known |= {"workflow.parameters", "workflow.parameters.json", *(f"workflow.parameters.{p}" for p in params)}
        if spec.get("priority") is not None:
            known.add("workflow.priority")
        # What Argo substitutes for each variable it sets before the templates are walked: a parameter's own value
        # when it has one (a tag inside it is then resolved where it lands), else None for a stand-in.
        self.values: dict[str, str | None] = dict.fromkeys(known)
        for param in arguments:
            if param.get("name") and param.get("value") is not None:
                self.values[f"workflow.parameters.{param['name']}"] = stringify(param["value"])
        if spec.get("priority") is not None:
            self.values["workflow.priority"] = stringify(spec["priority"])
        self.on_exit = bool(spec.get("onExit"))
        if self.on_exit:
            known.add("workflow.failures")
        self.outputs_any = False
        for template in _items(spec, "templates"):
            for key in ("parameters", "artifacts"):
                for output in _items(template.get("outputs"), key):
                    name = output.get("globalName")
                    if isinstance(name, str) and name:
                        self.outputs_any |= "{{" in name  # a name given at run time: any may come
                        known.add(f"workflow.outputs.{key}.{name}")
        self.known = frozenset(known)
        self.prefixes = (*_AT_RUN_TIME, *(("workflow.parameters.",) if alone else ()))
        self.params = frozenset(params)
        self.alone = alone

    def resolves(self, tag: str) -> bool:
        """Tell whether Argo's validator resolves `{{tag}}`."""
        if tag in self.known or tag.startswith(self.prefixes):
            return True
        return self.outputs_any and tag.startswith("workflow.outputs.")

    def unresolved(self, text: str) -> Iterator[str]:
        """Each `workflow.X` a `{{...}}` tag in `text` names that Argo's validator would fail to resolve."""
        for match in _TAG.finditer(text):
            if not self.resolves(match.group(1)):
                yield match.group(1)

    def first_unresolved(self, value: Any) -> str | None:
        """The first unresolved `workflow.X` in any string inside `value` (a template), or None."""
        if isinstance(value, str):
            return next(self.unresolved(value), None)
        items = value.values() if isinstance(value, Mapping) else value if isinstance(value, list) else ()
        return next((tag for item in items if (tag := self.first_unresolved(item)) is not None), None)

    def problem(self, tag: str) -> str:
        """One sentence on an unresolved `tag`, naming what to do."""
        if tag.startswith("workflow.parameters."):
            return f"{{{{{tag}}}}} is not declared in spec.arguments"
        if tag.startswith(("workflow.labels.", "workflow.annotations.")):
            what = tag.split(".")[1][:-1]
            return f"{{{{{tag}}}}} names no {what} of the workflow (metadata or spec.workflowMetadata)"
        return f"{{{{{tag}}}}} is not a variable Argo sets for this workflow (Argo: failed to resolve it)"
