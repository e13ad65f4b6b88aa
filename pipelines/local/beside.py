"""What the cluster would hold beside a workflow, found locally in the YAML files beside the workflow's file.

Argo resolves `spec.workflowTemplateRef` and a step's `templateRef` against the cluster's (Cluster)WorkflowTemplates,
and a parameter's `valueFrom.configMapKeyRef` against its ConfigMaps; the local runner reads them from the files in
the workflow file's directory, and joins them into the workflow's spec as Argo does.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from components import kubeyaml
from components.errors import InputError
from components.files import MANIFEST_MAX_BYTES, read_text
from pipelines.local.workflow import API_VERSION, WorkflowError, optional_field, stringify

__all__ = ["config_map_values", "holders", "import_template_refs", "join_template"]

# The label Argo's controller watches ConfigMaps by (its informer's selector): a parameter reads only those.
_CONFIG_MAP_LABEL = "workflows.argoproj.io/configmap-type"


def directory_of(source: str | Path | Mapping[str, Any]) -> Path | None:
    """Where the files beside a workflow's are: its file's directory, the current one for a stream (`-`, `<(…)`).

    None for YAML text or a dict, which have no file.
    """
    if isinstance(source, Mapping) or (isinstance(source, str) and "\n" in source):
        return None
    path = Path(source)
    return path.parent if path.is_file() else Path(".")


def join_template(spec: Mapping[str, Any], source: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    """Argo's JoinWorkflowSpec: the WorkflowTemplate `spec.workflowTemplateRef` names, the workflow's spec over it.

    The cluster holds WorkflowTemplates; locally they are the YAML files beside the workflow's.
    """
    ref = optional_field(spec, "workflowTemplateRef", Mapping, "spec") or {}
    name = ref.get("name")
    if not isinstance(name, str) or not name:
        raise WorkflowError("spec.workflowTemplateRef needs a name: the WorkflowTemplate to run.")
    kind = "ClusterWorkflowTemplate" if ref.get("clusterScope") is True else "WorkflowTemplate"
    here = directory_of(source)
    if here is None:
        raise WorkflowError(
            f"spec.workflowTemplateRef names {kind} {name!r}; the local runner looks for it in the YAML files beside "
            "the workflow's file, and this workflow has no file: run the WorkflowTemplate's own file."
        )
    found = _template_beside(here, kind, name)
    if found is None:
        raise WorkflowError(
            f"spec.workflowTemplateRef names {kind} {name!r}, which no YAML file in {here} defines: put its file "
            "there, or run the WorkflowTemplate's own file."
        )
    own = {k: v for k, v in spec.items() if k != "workflowTemplateRef"}
    return _strategic_merge(found, own)


def holders(template: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every step, task and hook of `template`, to rewrite what it names."""
    for group in template.get("steps") or []:
        for step in group or []:
            yield step
            yield from (h for h in (step.get("hooks") or {}).values() if isinstance(h, dict))
    for task in (template.get("dag") or {}).get("tasks") or []:
        yield task
        yield from (h for h in (task.get("hooks") or {}).values() if isinstance(h, dict))


def import_template_refs(spec: dict[str, Any], source: str | Path | Mapping[str, Any]) -> None:
    """Resolve each step's `templateRef` as Argo does against the cluster's WorkflowTemplates: here, files beside it.

    The template it reaches is copied in as `<workflowtemplate>.<template>` (Argo's template names hold no '.', so
    no template of the file has that name), its own references resolved in its scope.
    """
    directory = directory_of(source)
    templates: list[dict[str, Any]] = spec["templates"]
    libraries: dict[tuple[str, str], dict[str, Any] | None] = {}
    pending: list[tuple[dict[str, Any], tuple[str, str] | None]] = [(t, None) for t in templates]

    def resolve(ref: Mapping[str, Any], where: str) -> str:
        name, wanted = ref.get("name"), ref.get("template")
        if not isinstance(name, str) or not isinstance(wanted, str):
            raise WorkflowError(f"{where} has a templateRef without a name and a template.")
        kind = "ClusterWorkflowTemplate" if ref.get("clusterScope") is True else "WorkflowTemplate"
        if directory is None:
            raise WorkflowError(
                f"{where} uses templateRef; the local runner looks for {kind} {name!r} in the YAML files beside the "
                "workflow's file, and this workflow has no file: inline the template."
            )
        if (kind, name) not in libraries:
            libraries[kind, name] = _template_beside(directory, kind, name)
        library = libraries[kind, name]
        if library is None:
            raise WorkflowError(
                f"{where} refers to {kind} {name!r}, which no YAML file in {directory} defines: put its file there, "
                "or inline the template."
            )
        target = f"{name}.{wanted}"
        if not any(t.get("name") == target for t in templates):
            body = next((t for t in library.get("templates") or [] if t.get("name") == wanted), None)
            if not isinstance(body, Mapping):
                raise WorkflowError(f"{where} refers to template {wanted!r} of {kind} {name!r}, which has no such one.")
            imported = {**copy.deepcopy(dict(body)), "name": target}
            templates.append(imported)
            pending.append((imported, (kind, name)))
        return target

    while pending:
        template, scope = pending.pop(0)
        where = f"template {template.get('name')!r}"
        for holder in holders(template):
            here = f"{where} step or task {holder.get('name')!r}"
            if holder.get("templateRef") is not None:
                ref = holder.pop("templateRef")
                holder["template"] = resolve(ref if isinstance(ref, Mapping) else {}, here)
            elif scope is not None and isinstance(holder.get("template"), str):
                own = {"name": scope[1], "template": holder["template"], "clusterScope": scope[0] != "WorkflowTemplate"}
                holder["template"] = resolve(own, here)
            if scope is not None and isinstance(holder.get("onExit"), str):
                own = {"name": scope[1], "template": holder["onExit"], "clusterScope": scope[0] != "WorkflowTemplate"}
                holder["onExit"] = resolve(own, here)


def _template_beside(directory: Path, kind: str, name: str) -> dict[str, Any] | None:
    """The spec of the `kind` named `name` in a YAML file of `directory`, or None."""
    found = _beside(directory, API_VERSION, kind, name)
    return dict(found["spec"]) if found is not None and isinstance(found.get("spec"), Mapping) else None


def _beside(directory: Path, version: str, kind: str, name: str) -> Mapping[str, Any] | None:
    """The `kind` named `name` in a YAML file of `directory`, where locally what the cluster holds is kept.

    Files that do not read are passed over.
    """
    for path in sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")]):
        try:
            documents = kubeyaml.load_all(read_text(path, "workflow", max_bytes=MANIFEST_MAX_BYTES))
        except (InputError, yaml.YAMLError, RecursionError, ValueError, TypeError):
            continue
        for document in documents:
            if (
                isinstance(document, Mapping)
                and document.get("kind") == kind
                and document.get("apiVersion") in (None, version)
                and isinstance(document.get("metadata"), Mapping)
                and document["metadata"].get("name") == name
            ):
                return document
    return None


def config_map_values(spec: dict[str, Any], source: str | Path | Mapping[str, Any]) -> None:
    """Each parameter `valueFrom.configMapKeyRef` names gets its value from a ConfigMap beside the workflow's file.

    As Argo reads the cluster's (ProcessArgs, setGlobalParameters): the ConfigMap's value first, else
    `valueFrom.default`, else the workflow is refused. A name or key that is a `{{...}}` is left to run time.
    """
    places = [spec.get("arguments") or {}]
    for template in spec.get("templates") or []:
        places += [template.get("inputs") or {}, *((h.get("arguments") or {}) for h in holders(template))]
    directory = directory_of(source)
    for place in places:
        for param in place.get("parameters") or [] if isinstance(place, Mapping) else []:
            ref = (param.get("valueFrom") or {}).get("configMapKeyRef") if isinstance(param, dict) else None
            if not isinstance(ref, Mapping) or "{{" in f"{ref.get('name')}{ref.get('key')}" or "value" in param:
                continue
            name, key = str(ref.get("name")), str(ref.get("key"))
            found = _beside(directory, "v1", "ConfigMap", name) if directory is not None else None
            labels = (found.get("metadata") or {}).get("labels") if found is not None else None
            watched = isinstance(labels, Mapping) and _CONFIG_MAP_LABEL in labels
            data = found.get("data") if found is not None and watched else None
            if isinstance(data, Mapping) and key in data:
                param["value"] = stringify(data[key])
            elif "default" in param["valueFrom"]:
                param["value"] = stringify(param["valueFrom"]["default"])
            else:
                where = f"in the YAML files of {directory}" if directory is not None else "(this workflow has no file)"
                missing = (
                    f"no ConfigMap {name!r} is there"
                    if found is None
                    else f"ConfigMap {name!r} has no label {_CONFIG_MAP_LABEL} (Argo reads only those)"
                    if not watched
                    else f"ConfigMap {name!r} has no key {key!r}"
                )
                raise WorkflowError(
                    f"parameter {param.get('name')!r} takes its value from ConfigMap {name!r} (key {key!r}), which the "
                    f"local runner looks for {where}, and {missing}: put it there, as the cluster would hold it, or "
                    "give the parameter a valueFrom.default."
                )


# Lists that Kubernetes' strategic merge joins by `name` in a WorkflowSpec (the rest are replaced whole).
_MERGED_BY_NAME = frozenset({"templates", "parameters", "artifacts", "volumes", "env"})


def _strategic_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`over` merged into `base` as Argo's MergeTo does: mappings key by key, named lists item by item.

    An argument the workflow gives replaces the template's whole, as JoinWorkflowSpec keeps the higher priority's.
    """
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        old = out.get(key)
        if isinstance(value, Mapping) and isinstance(old, Mapping):
            out[key] = _strategic_merge(old, value)
        elif key in _MERGED_BY_NAME and isinstance(value, list) and isinstance(old, list):
            named = {item.get("name"): item for item in old if isinstance(item, Mapping)}
            for item in value:
                if not isinstance(item, Mapping) or item.get("name") not in named:
                    continue
                mine = named[item.get("name")]
                whole = key in ("parameters", "artifacts")
                named[item.get("name")] = copy.deepcopy(item) if whole else _strategic_merge(mine, item)
            added = [copy.deepcopy(i) for i in value if not isinstance(i, Mapping) or i.get("name") not in named]
            out[key] = [named.get(i.get("name"), i) if isinstance(i, Mapping) else i for i in old] + added
        else:
            out[key] = copy.deepcopy(value)
    return out


def semaphore_limits(directory: Path | None) -> Callable[[str, str], int]:
    """A semaphore's size, as Argo's controller reads it: `data[key]` of the ConfigMap beside the workflow's file.

    Read each time a lock is asked for, so a size changed while a run waits takes effect, as on Argo. A missing
    ConfigMap or key, or a size that is not an integer, is a WorkflowError (Argo errs the node).
    """

    def limit(name: str, key: str) -> int:
        found = _beside(directory, "v1", "ConfigMap", name) if directory is not None else None
        if found is None:
            raise WorkflowError(
                f"a semaphore's ConfigMap {name!r} is in no YAML file beside the workflow's: put it there, where the "
                "local runner keeps what the cluster holds."
            )
        data = found.get("data")
        if not isinstance(data, Mapping) or key not in data:
            raise WorkflowError(f"Sync configuration key {key!r} not found in ConfigMap {name!r}.")
        text = str(data[key])
        if not re.fullmatch(r"[+-]?[0-9]{1,18}", text):  # Go's strconv.Atoi
            raise WorkflowError(f"ConfigMap {name!r} key {key!r} is {text!r}, not a whole number: a semaphore's size.")
        return int(text)

    return limit
