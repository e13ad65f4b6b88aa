"""Load a Workflow, (Cluster)WorkflowTemplate or CronWorkflow to run locally, refusing before it runs what cannot run.

Pre-flight checks are the ones that make a run pointless if they fail: malformed YAML, a document that is not
a Workflow/(Cluster)WorkflowTemplate, an unknown or missing parameter, a template reference that does not resolve, a
template kind the runner does not execute, a DAG whose dependencies name unknown tasks or form a cycle. Full
admission rules are `vcpilot lint`'s job (`pipelines/lint_rules.py`).
"""

from __future__ import annotations

import copy
import json
import math
import re
import secrets
import string
import threading
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from components import kubeyaml
from components.durations import DurationError, DurationTooLong, parse_go_duration
from components.errors import InputError
from components.files import MANIFEST_MAX_BYTES, describe_yaml_error, kind_of, read_text, source_name
from components.names import MAX_RUN_NAME, is_dns1123_label, is_dns1123_subdomain, run_name_problem
from pipelines.local import CRON_LABEL, volumes
from pipelines.local.govalues import format_float_f

__all__ = [
    "API_VERSION",
    "SCHEDULED_TIME",
    "HOST_ROOTS",
    "MAX_RUN_NAME",
    "NO_COMMAND",
    "RESOURCE_KINDS",
    "TEMPLATE_TYPES",
    "Workflow",
    "WorkflowError",
    "check_argument_enums",
    "check_output_sources",
    "check_run_name",
    "check_timing",
    "label_of",
    "load_workflow",
    "optional_field",
    "parse_duration",
    "stringify",
    "template_type",
    "unsupported_resource",
]

API_VERSION = "argoproj.io/v1alpha1"  # the only version of Argo's kinds; the API server refuses a body with another
# The annotation a CronWorkflow's run carries its schedule time in ({{workflow.scheduledTime}}).
SCHEDULED_TIME = "workflows.argoproj.io/scheduled-time"
# What `argo submit --from workflowtemplate/NAME` (or clusterworkflowtemplate/NAME) runs: a Workflow of its spec.
_TEMPLATE_KINDS = ("WorkflowTemplate", "ClusterWorkflowTemplate")
_RUNNABLE_KINDS = ("Workflow", *_TEMPLATE_KINDS, "CronWorkflow")
TEMPLATE_TYPES = ("container", "script", "containerSet", "resource", "dag", "steps", "suspend", "http")
_UNSUPPORTED_TYPES = ("data", "plugin")
_LEAF_TYPES = ("container", "script", "containerSet")  # a pod: its files are in its node's directory
_RETRY_POLICIES = ("Always", "OnFailure", "OnError", "OnTransientError")
# The longest wait Python's timers can hold (a Go duration's own limit, about 292 years, is parse_go_duration's).
_DURATION_MAX_S = min(threading.TIMEOUT_MAX, 2**63 / 1e9)
# Where an artifact comes from besides `raw` and another step (Argo's ArtifactLocation): the local runner has no
# artifact repository, credentials or network; it keeps the artifacts its steps output in their own directories.
_ARTIFACT_SOURCES = ("http", "git", "s3", "gcs", "oss", "hdfs", "azure", "artifactory", "plugin")
# This machine's own directories: a path a step declares under one of them is not moved into the step's own
# directory (the local process needs them as they are), so no artifact is written there.
HOST_ROOTS = frozenset(
    "bin boot dev etc home lib lib32 lib64 libx32 media mnt opt proc root run sbin srv sys usr var work".split()
)
# What a resource template may do locally: LocalCluster holds Volcano and batch/v1 Jobs, and no patch.
RESOURCE_ACTIONS = ("create", "apply", "delete", "get")
RESOURCE_KINDS = frozenset({("batch.volcano.sh/v1alpha1", "Job"), ("batch/v1", "Job")})
NO_COMMAND = "no command; the local runner runs the command itself and cannot read an image's entrypoint"
# common/ancestry.go: each word of `depends` is a task name, optionally followed by `.Result`.
_DEPENDS_WORD = re.compile(r"([a-zA-Z0-9][-a-zA-Z0-9]*?)\.[A-Z][a-zA-Z]+|([a-zA-Z0-9][-a-zA-Z0-9]*)")


class WorkflowError(InputError):
    """The workflow cannot run as given; the message is one sentence that says what to fix."""


def check_run_name(name: str) -> str:
    """`name` when Argo would take it as a workflow's name (`components.names.run_name_problem`); WorkflowError else."""
    problem = run_name_problem(name)
    if problem:
        raise WorkflowError(problem)
    return name


def stringify(value: Any) -> str:
    """A parameter value as Argo's AnyString reads it: strings as they are, everything else as compact JSON.

    A number is the float64 it became, written by `strconv.FormatFloat(v, 'f', -1, 64)`, never with an exponent:
    `1000` for `1e3`, `0.00005` for `5e-5`, `0.0000001` for `1e-7`, `12345678901234568` for 12345678901234567
    (Go's JSON would write `1e-7`; an item of `withItems` is written so, by `go_json`).
    """
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an int past a float64: not one YAML gives (go-yaml reads it as a string)
            number = math.inf
        if math.isfinite(number):
            return format_float_f(number)
    return json.dumps(value, separators=(",", ":"))


def parse_duration(value: str | int | float, what: str = "duration") -> float:
    """Seconds in an Argo duration, as its ParseStringToDuration reads one: a whole number is seconds, else Go's form.

    "30", "-5", "1m30s", "1.5h", "500ms"; not "1.5" (a fraction needs its unit), " 30s", "inf" or a wait longer
    than a Go duration holds. Negative durations are Go's too: a deadline already past, a wait of none.
    """
    text = str(value) if isinstance(value, str | int) and not isinstance(value, bool) else ""  # not YAML's 1.5, true
    try:
        if re.fullmatch(r"[+-]?[0-9]+", text):  # whole seconds; past 20 digits too long for any timer (and float())
            seconds = float(int(text)) if len(text.lstrip("+-0")) <= 20 else float("inf")
        else:
            seconds = parse_go_duration(text)
    except DurationTooLong:
        seconds = float("inf")
    except DurationError:
        raise WorkflowError(
            f'{what} {str(value)!r} is not a duration: write whole seconds ("30") or a number with its unit, e.g. '
            '"30s", "1.5m", "2h".'
        ) from None
    if abs(seconds) > _DURATION_MAX_S:
        raise WorkflowError(f"{what} {str(value)!r} is longer than a duration can be (about 292 years).")
    return seconds


def template_type(template: Mapping[str, Any]) -> str | None:
    """Which kind of template this is (container, script, resource, dag, steps, suspend), or None."""
    return next((t for t in TEMPLATE_TYPES if template.get(t) is not None), None)


@dataclass
class Workflow:
    """A workflow ready to run: its identity, the spec with arguments applied, and its templates by name."""

    name: str
    namespace: str
    uid: str
    created_at: str
    spec: dict[str, Any]
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    templates: dict[str, dict[str, Any]] = field(default_factory=dict)
    from_template: str = ""  # the WorkflowTemplate it comes from (its metadata.name), "" for a plain Workflow

    def __post_init__(self) -> None:
        if not self.templates:
            self.templates = {t["name"]: t for t in self.spec.get("templates") or []}

    @property
    def parameters(self) -> dict[str, str]:
        """`workflow.parameters.<name>` values."""
        return {p["name"]: stringify(p["value"]) for p in self.arguments.get("parameters") or [] if "value" in p}

    @property
    def arguments(self) -> dict[str, Any]:
        """`spec.arguments` with `-p` values applied."""
        return self.spec.get("arguments") or {}

    def template(self, ref: Mapping[str, Any]) -> dict[str, Any]:
        """The template a step, task or hook points at, with `templateDefaults` merged in (a fresh copy)."""
        if ref.get("inline") is not None:
            found = dict(ref["inline"])
            found.setdefault("name", "")
        else:
            name = ref.get("template")
            if name not in self.templates:
                raise WorkflowError(f"template {name!r} is not defined in this workflow.")
            found = self.templates[name]
        defaults = self.spec.get("templateDefaults")
        return _merge_defaults(found, defaults) if defaults else copy.deepcopy(found)

    def document(self) -> dict[str, Any]:
        """The Workflow object as persisted in status.json (without status)."""
        metadata: dict[str, Any] = {
            "name": self.name,
            "namespace": self.namespace,
            "uid": self.uid,
            "creationTimestamp": self.created_at,
        }
        if self.labels:
            metadata["labels"] = self.labels
        if self.annotations:
            metadata["annotations"] = self.annotations
        return {"apiVersion": API_VERSION, "kind": "Workflow", "metadata": metadata, "spec": self.spec}

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> Workflow:
        """Rebuild the workflow a run was started with (for `resume`)."""
        meta = document["metadata"]
        return cls(
            name=meta["name"],
            namespace=meta.get("namespace") or "default",
            uid=meta["uid"],
            created_at=meta["creationTimestamp"],
            spec=dict(document["spec"]),
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
        )


def _merge_defaults(template: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Argo's mergedTemplateDefaultsInto: the template wins; type-specific defaults only reach that type."""
    own_type = template_type(template)
    applicable = {k: v for k, v in defaults.items() if k not in TEMPLATE_TYPES or k == own_type}
    return _deep_merge(applicable, template)


def _deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def load_workflow(
    source: str | Path | Mapping[str, Any],
    params: Mapping[str, str] | None = None,
    *,
    name: str | None = None,
    entrypoint: str | None = None,
) -> Workflow:
    """Read a workflow file's document (path, YAML text or dict), apply `-p` values and check it can run.

    `entrypoint` replaces `spec.entrypoint`, as `argo submit --entrypoint` does: the run starts with that template.
    """
    from pipelines.local.beside import config_map_values, holders, import_template_refs, join_template

    document = _read(source)
    kind = document.get("kind")
    if kind == "CronWorkflow":
        document, kind = _from_cron(document, label_of(source)), "Workflow"
    if kind not in _RUNNABLE_KINDS:
        raise WorkflowError(
            f"{label_of(source)} is a {kind or 'document without kind'}, not a Workflow, WorkflowTemplate, "
            "ClusterWorkflowTemplate or CronWorkflow."
        )
    version = document.get("apiVersion")
    if version is not None and version != API_VERSION:  # left out, the API server fills it in
        raise WorkflowError(
            f"{label_of(source)} has apiVersion {stringify(version)!r}, which Argo does not serve: write apiVersion: "
            f"{API_VERSION}."
        )
    spec = document.get("spec")
    if not isinstance(spec, Mapping):
        raise WorkflowError(f"{label_of(source)} has no spec.")
    spec = copy.deepcopy(dict(spec))
    if spec.get("workflowTemplateRef") is not None:
        spec = join_template(spec, source)
    _check_shape(spec)
    if any(holder.get("templateRef") is not None for t in spec.get("templates") or [] for holder in holders(t)):
        import_template_refs(spec, source)
        _check_shape(spec)
    meta = optional_field(document, "metadata", Mapping, "") or {}
    for key in ("labels", "annotations"):
        optional_field(meta, key, Mapping, "metadata")
    config_map_values(spec, source)
    if entrypoint is not None:
        spec["entrypoint"] = entrypoint
    spec["arguments"] = _apply_params(spec.get("arguments") or {}, params or {}, _entry_inputs(spec))
    _check_templates(spec)
    _check_variables(meta, spec)
    if name is None:
        if kind in _TEMPLATE_KINDS and meta.get("name"):
            name = f"{meta['name']}-{_suffix()}"
        elif meta.get("name"):
            name = meta["name"]
        else:
            name = f"{meta.get('generateName') or 'workflow-'}{_suffix()}"
    return Workflow(
        name=check_run_name(str(name)),
        namespace=str(meta.get("namespace") or "default"),
        uid=str(uuid.uuid4()),
        created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        spec=spec,
        labels={str(k): stringify(v) for k, v in (meta.get("labels") or {}).items()},
        annotations={str(k): stringify(v) for k, v in (meta.get("annotations") or {}).items()},
        from_template=str(meta.get("name") or "") if kind in _TEMPLATE_KINDS else "",
    )


def _from_cron(document: Mapping[str, Any], label: str) -> dict[str, Any]:
    """Argo's ConvertCronWorkflowToWorkflow (`argo submit --from cronwf/NAME`): its workflowSpec, run once now."""
    meta = optional_field(document, "metadata", Mapping, "") or {}
    spec = optional_field(document, "spec", Mapping, "") or {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise WorkflowError(f"{label} is a CronWorkflow without metadata.name.")
    if not isinstance(spec.get("workflowSpec"), Mapping):
        raise WorkflowError(f"{label} is a CronWorkflow without spec.workflowSpec.")
    extra = optional_field(spec, "workflowMetadata", Mapping, "spec") or {}
    for key in ("labels", "annotations"):
        optional_field(extra, key, Mapping, "spec.workflowMetadata")
    scheduled = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": document.get("apiVersion"),
        "kind": "Workflow",
        "metadata": {
            "generateName": f"{name}-",
            "namespace": meta.get("namespace"),
            "labels": {CRON_LABEL: name, **(extra.get("labels") or {})},
            "annotations": {SCHEDULED_TIME: scheduled, **(extra.get("annotations") or {})},
        },
        "spec": spec["workflowSpec"],
    }


def _suffix() -> str:
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(5))


def label_of(source: str | Path | Mapping[str, Any]) -> str:
    """How a message names the workflow `source`: its path (`-`: standard input), or "the workflow" for YAML text."""
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and len(source) < 300):
        return str(source_name(source))
    return "the workflow"


def _read(source: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(source, Mapping):
        return dict(source)
    text = str(source)
    if isinstance(source, Path) or "\n" not in text:
        path = Path(text)
        if text != "-" and not path.exists():
            raise WorkflowError(f"{path} does not exist.")
        try:  # `-` is standard input, as for argo submit; a pipe (`<(envsubst < wf.yaml)`) is read as a file is
            text = read_text(path, "workflow", max_bytes=MANIFEST_MAX_BYTES, stdin=True)
        except InputError as err:
            raise WorkflowError(str(err)) from None
    try:
        documents = kubeyaml.load_all(text)
    except yaml.YAMLError as err:
        raise WorkflowError(f"{label_of(source)} is not valid YAML{describe_yaml_error(err)}.") from None
    except RecursionError:
        raise WorkflowError(f"{label_of(source)} nests its values too deeply to be read.") from None
    except (ValueError, TypeError) as err:  # a constructor's refusal: a bad `!!binary`
        raise WorkflowError(f"{label_of(source)} is not valid YAML: {' '.join(str(err).split())}.") from None
    runnable = [d for d in documents if isinstance(d, dict) and d.get("kind") in _RUNNABLE_KINDS]
    if len(runnable) == 1 or len(documents) == 1 and isinstance(documents[0], dict):
        return (runnable or documents)[0]  # the rest passed over, as `argo submit` passes over other kinds
    label = label_of(source)
    if len(runnable) > 1:
        raise WorkflowError(f"{label} holds {len(runnable)} workflows; the local runner runs one: give each a file.")
    if len(documents) <= 1:
        what = kind_of(documents[0]) if documents else "no YAML document"
        raise WorkflowError(f"{label} holds {what}, not a Workflow (a YAML mapping with kind).")
    raise WorkflowError(
        f"{label} holds {len(documents)} YAML documents and none is a Workflow, WorkflowTemplate, "
        "ClusterWorkflowTemplate or CronWorkflow."
    )


def _entry_inputs(spec: Mapping[str, Any]) -> list[str]:
    """The input parameters of the entrypoint's template, which the workflow's arguments supply by name."""
    entry = next((t for t in spec.get("templates") or [] if t.get("name") == spec.get("entrypoint")), None)
    inputs = entry.get("inputs") if entry is not None else None
    found = inputs.get("parameters") if isinstance(inputs, Mapping) else None
    return [p["name"] for p in found or [] if isinstance(p, Mapping) and isinstance(p.get("name"), str)]


def _apply_params(arguments: Mapping[str, Any], params: Mapping[str, str], entry: list[str]) -> dict[str, Any]:
    """The workflow's arguments with `-p` values applied, as Argo's overrideParameters applies them.

    A name the arguments do not declare is refused, unless the entrypoint's template takes it as an input: Argo
    adds it to the arguments, which supply the entrypoint (`argo submit --entrypoint print -p message=hi`).
    """
    declared = [dict(p) for p in arguments.get("parameters") or []]
    names = [p.get("name") for p in declared]
    for key in params:
        if key in entry and key not in names:
            declared.append({"name": key})
            names.append(key)
        if key not in names:
            known = ", ".join(dict.fromkeys([*map(str, names), *entry])) or "none"
            raise WorkflowError(f"unknown parameter {key!r}: this workflow's parameters are {known}.")
    for p in declared:
        if p["name"] in params:
            p["value"] = params[p["name"]]
            p.pop("valueFrom", None)
        elif "value" not in p and isinstance(p.get("valueFrom"), Mapping) and "default" in p["valueFrom"]:
            p["value"] = p["valueFrom"]["default"]
        elif "value" not in p and "default" in p:
            p["value"] = p["default"]
        if p.get("value") is None:
            raise WorkflowError(f"parameter {p['name']!r} has no value: pass -p {p['name']}=VALUE.")
        p["value"] = stringify(p["value"])
        enum = [stringify(e) for e in p.get("enum") or []]
        if enum and p["value"] not in enum:
            raise WorkflowError(f"parameter {p['name']!r} is {p['value']!r}, which is not one of {', '.join(enum)}.")
    return {**arguments, "parameters": declared} if declared or "parameters" in arguments else dict(arguments)


def _refs(template: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(where, holder) for every step, task and hook that names a template."""
    where = f"template {template.get('name')!r}"
    for group in template.get("steps") or []:
        for step in group or []:
            yield f"{where} step {step.get('name')!r}", step
            yield from _hooks(f"{where} step {step.get('name')!r}", step)
    for task in (template.get("dag") or {}).get("tasks") or []:
        yield f"{where} task {task.get('name')!r}", task
        yield from _hooks(f"{where} task {task.get('name')!r}", task)


def _hooks(where: str, holder: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    if holder.get("onExit"):
        yield f"{where} onExit", {"template": holder["onExit"]}
    for hook_name, hook in (holder.get("hooks") or {}).items():
        yield f"{where} hook {hook_name!r}", hook


def _check_variables(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> None:
    """Refuse a `{{workflow.X}}` Argo's validator fails to resolve (it stayed in the command as written)."""
    from pipelines.local.globals import WorkflowGlobals

    known = WorkflowGlobals("Workflow", meta, spec, alone=False)
    for template in spec.get("templates") or []:
        tag = known.first_unresolved(template)
        if tag is not None:
            raise WorkflowError(f"template {template.get('name')!r}: {known.problem(tag)}.")


def _check_templates(spec: Mapping[str, Any]) -> None:
    templates = spec.get("templates") or []
    names = [t.get("name") for t in templates]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise WorkflowError(f"template names must be unique; {', '.join(map(str, duplicated))} appear more than once.")
    known = set(names)
    # Argo's controller honours both from the start: a suspended workflow waits for `argo resume` before anything
    # runs, a shut-down one stops at once.
    for key, what in (("suspend", "it waits for argo resume before anything runs"), ("shutdown", "it stops at once")):
        if spec.get(key):
            raise WorkflowError(
                f"spec.{key} is set ({what} on Argo), which the local runner does not do: remove it to run here."
            )
    entrypoint = spec.get("entrypoint")
    if not entrypoint:
        raise WorkflowError("spec.entrypoint is missing: name the template the workflow starts with.")
    holders: list[tuple[str, Mapping[str, Any]]] = [("spec.entrypoint", {"template": entrypoint})]
    holders += list(_hooks("spec", spec))
    for template in templates:
        _check_kind(template)
        check_timing(template, f"template {template.get('name')!r}")
        check_output_sources(template, f"template {template.get('name')!r}")
        holders += list(_refs(template))
        if template.get("dag") is not None:
            _check_dag(template)
        if template.get("steps") is not None:
            _check_steps(template)
    inline = [(f"the inline template of {w}", t) for w, h in holders if isinstance(t := h.get("inline"), Mapping)]
    for where, template in inline:
        _check_kind(template, where)
        check_timing(template, where)
        check_output_sources(template, where)
    used = {h.get("template") for _, h in holders}
    defaults = spec.get("templateDefaults") or {}
    check_timing(defaults, "spec.templateDefaults")
    _check_artifact_arguments(spec, "spec")
    for where, holder in holders:
        _check_artifact_arguments(holder, where)
    named = [(f"template {t.get('name')!r}", t) for t in templates if t.get("name") in used]
    for where, template in [*named, *inline]:
        _check_runnable(_merge_defaults(template, defaults) if defaults else template, where, spec)
    for where, holder in holders:
        if holder.get("templateRef"):
            raise WorkflowError(
                f"{where} uses templateRef, which the local runner cannot resolve; inline the template."
            )
        if holder.get("inline") is None and holder.get("template") not in known:
            raise WorkflowError(f"{where} refers to template {holder.get('template')!r}, which is not defined.")
    _check_supplied(spec, "spec.arguments", {"template": entrypoint}, "the entrypoint", spec.get("arguments"))
    if spec.get("onExit"):
        _check_supplied(spec, "spec.arguments", {"template": spec["onExit"]}, "spec.onExit", spec.get("arguments"))
    _check_only_exit_hooks(spec, "spec")
    for template in templates:
        for where, call in _calls(template):
            _check_supplied(spec, "its arguments", call, where, call.get("arguments"))
            check_argument_enums(call.get("arguments"), where)
            _check_only_exit_hooks(call, where)


def _calls(template: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(where, step or task) for each step and DAG task of `template`: what Argo validates with its arguments."""
    where = f"template {template.get('name')!r}"
    for group in template.get("steps") or []:
        yield from ((f"{where} step {step.get('name')!r}", step) for step in group or [])
    yield from ((f"{where} task {task.get('name')!r}", task) for task in (template.get("dag") or {}).get("tasks") or [])


def _check_supplied(
    spec: Mapping[str, Any], field: str, call: Mapping[str, Any], where: str, arguments: Mapping[str, Any] | None
) -> None:
    """Argo's ProcessArgs as its validator runs it: each input parameter of the template `call` runs has a value.

    The caller's argument wins (a `valueFrom` in its place counts only from a ConfigMap); without one, the input's
    own value or default, or its ConfigMap.
    """
    found = (t for t in spec.get("templates") or [] if t.get("name") == call.get("template"))
    target: Mapping[str, Any] = call["inline"] if call.get("inline") is not None else next(found, {})
    given = {p.get("name"): p for p in (arguments or {}).get("parameters") or []}
    for param in (target.get("inputs") or {}).get("parameters") or []:
        value, source = param.get("value", param.get("default")), param.get("valueFrom")
        argument = given.get(param["name"])
        if argument is not None:
            value = argument.get("value")
            source = source if value is not None else argument.get("valueFrom")
        if value is None and not (isinstance(source, Mapping) and source.get("configMapKeyRef") is not None):
            name = f"template {target.get('name')!r}" if target.get("name") else "its inline template"
            raise WorkflowError(
                f"{where} gives no value for input parameter {param['name']!r} of {name}, which has no default: "
                f"add it to {field}.parameters."
            )


def _check_only_exit_hooks(holder: Mapping[str, Any], where: str) -> None:
    """Refuse a lifecycle hook other than `exit`: Argo runs it when its expression holds, the runner never did."""
    for name in holder.get("hooks") or {}:
        if name != "exit":
            raise WorkflowError(
                f"{where} has lifecycle hook {name!r}, which the local runner cannot run (it runs exit hooks only): "
                "remove it to run here."
            )


def _mappings(holder: Any, key: str) -> list[Mapping[str, Any]]:
    """The mappings in `holder[key]`, for checks that lint runs on files the schema may not have passed."""
    items = holder.get(key) if isinstance(holder, Mapping) else None
    return [item for item in items if isinstance(item, Mapping)] if isinstance(items, list) else []


def check_argument_enums(arguments: Mapping[str, Any] | None, where: str) -> None:
    """Argo's validateArgumentsValues: a step's or task's argument with an `enum` holds one of it, as written.

    Argo compares the value before substitution, so a `{{...}}` value never matches a literal enum.
    """
    for param in _mappings(arguments, "parameters"):
        enum = param.get("enum")
        if not isinstance(enum, list):
            continue
        field_ = f"{where}: arguments.parameters.{param.get('name')}"
        if not enum:
            raise WorkflowError(f"{field_}.enum is empty: give it at least one value.")
        if param.get("value") is None:
            raise WorkflowError(f"{field_} has an enum but no value: give it one of {', '.join(map(stringify, enum))}.")
        value, allowed = stringify(param["value"]), ", ".join(map(stringify, enum))
        if value not in map(stringify, enum):
            raise WorkflowError(f"{field_}.value {value!r} is not one of its enum {allowed}.")


def _int_or_variable(value: Any) -> bool:
    """Argo's IsValidIntOrArgoVariable: an IntOrString holding a whole number, or a `{{...}}` filled in later.

    Its number is an int32 (a larger one does not unmarshal); its string one strconv.Atoi takes (an int64).
    """
    if isinstance(value, str):
        if value.startswith("{{") and value.endswith("}}"):
            return True
        found = re.fullmatch(r"([+-]?)0*([0-9]{1,19})", value)  # past 19 digits no int64 (nor Python's int())
        return found is not None and -(2**63) <= int(found[1] + found[2]) < 2**63
    return isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**31


def check_timing(template: Mapping[str, Any], where: str) -> None:
    """The deadlines and retries of a template as Argo's validator (or, for a literal, its controller) reads them."""
    kind = template_type(template)
    deadline = template.get("activeDeadlineSeconds")
    if deadline is not None and kind in ("steps", "dag"):
        raise WorkflowError(
            f"{where} sets activeDeadlineSeconds, which only a leaf template may: set it on the templates it runs."
        )
    if deadline is not None and (not _int_or_variable(deadline) or str(deadline).startswith("-")):
        raise WorkflowError(
            f"{where} activeDeadlineSeconds is {deadline!r}: write a whole number of seconds (0 to 2147483647) or "
            "a {{...}} variable."
        )
    # pendingTimeout: how long a node's pod may stay Pending (Argo's controller fails it after). A local step's
    # process starts at once, so the runner checks the field as Argo does and has nothing to time.
    for key in ("timeout", "pendingTimeout"):
        value = template.get(key)
        if value in (None, ""):
            continue
        if kind in ("steps", "dag", "suspend"):
            raise WorkflowError(f"{where} is a {kind} template, which cannot have a {key}; a leaf template can.")
        if "{{" in str(value):
            continue
        valid = key != "timeout" or re.fullmatch(r"[+-]?[0-9]+", str(value)) is None  # Argo's validator: no bare number
        try:
            parse_duration(value)
        except WorkflowError:
            valid = False
        if not valid:
            raise WorkflowError(f'{where} {key} {value!r} is not a duration: write e.g. "30s", "5m" or "1h".')
    strategy = template.get("retryStrategy")
    if not isinstance(strategy, Mapping):
        return
    policy = strategy.get("retryPolicy")
    if policy not in (None, "", *_RETRY_POLICIES):
        raise WorkflowError(f"{where} retryStrategy.retryPolicy {policy!r} is not one of {', '.join(_RETRY_POLICIES)}.")
    backoff: Mapping[str, Any] = strategy["backoff"] if isinstance(strategy.get("backoff"), Mapping) else {}
    for key, value in (("limit", strategy.get("limit")), ("backoff.factor", backoff.get("factor"))):
        if value is not None and not _int_or_variable(value):
            raise WorkflowError(
                f"{where} retryStrategy.{key} is {value!r}: write a whole number (up to 2147483647) or a {{{{...}}}} "
                "variable."
            )
    for key in ("duration", "maxDuration", "cap"):
        value = backoff.get(key)
        if value not in (None, "") and "{{" not in str(value):
            parse_duration(value, f"{where} retryStrategy.backoff.{key}")


def _check_kind(template: Mapping[str, Any], where: str = "") -> None:
    where = where or f"template {template.get('name')!r}"
    for unsupported in _UNSUPPORTED_TYPES:
        if template.get(unsupported) is not None:
            raise WorkflowError(f"{where} is a {unsupported} template, which the local runner cannot run.")
    if template_type(template) is None:
        raise WorkflowError(f"{where} has no container, script, resource, dag, steps or suspend.")


# Where each kind of template takes an output parameter from (Argo's validateOutputs); a source it has no use for
# would be dropped without a word, so Argo's validator refuses it.
_OUTPUT_SOURCES = {
    "container": ("path",),
    "script": ("path",),
    "containerSet": ("path",),
    "resource": ("jqFilter", "jsonPath"),
    "dag": ("parameter", "expression"),
    "steps": ("parameter", "expression"),
}
_VALUE_FROM = ("path", "jqFilter", "jsonPath", "parameter", "expression", "supplied")


def check_output_sources(template: Mapping[str, Any], where: str) -> None:
    """Refuse an output parameter as Argo's validateOutputParameter and validateOutputs do, naming it."""
    kind = template_type(template)
    for param in _mappings(template.get("outputs"), "parameters"):
        field_ = f"{where}: outputs.parameters.{param.get('name')}"
        source = param.get("valueFrom")
        if source is not None and not isinstance(source, Mapping):
            continue  # the shape check (the runner's or lint's schema) names it
        if source is not None and param.get("value") is not None:
            raise WorkflowError(f"{field_} has both valueFrom and value: choose one.")
        if source is None:
            if param.get("value") is None:
                raise WorkflowError(f"{field_} has neither valueFrom nor value.")
            continue
        given = [key for key in _VALUE_FROM if source.get(key) not in (None, "")]
        if len(given) != 1:
            raise WorkflowError(
                f"{field_}.valueFrom must name one of path, jqFilter, jsonPath, parameter, expression, supplied"
                f"{'' if not given else ', not ' + ' and '.join(given)}."
            )
        allowed = _OUTPUT_SOURCES.get(kind or "")
        if allowed and given[0] not in allowed:
            raise WorkflowError(
                f"{field_}.valueFrom.{given[0]} is not read in a {kind} template: use {' or '.join(allowed)}."
            )


# What Argo runs beside or around a step and the runner has no means for; ignoring it would change what the step
# sees (a sidecar's server, an init container's files) or when it runs (a daemon).
_NOT_RUN = {
    "daemon": "a pod that serves until its steps or DAG ends",
    "sidecars": "containers that run beside main",
    "initContainers": "containers that run before main",
}


def _check_runnable(template: Mapping[str, Any], where: str, spec: Mapping[str, Any]) -> None:
    """Refuse what a template that may run needs and the local runner does not have, or its pod could not have.

    An image's entrypoint, an artifact repository, an artifact from outside, a volume that is not there.
    """
    for key, what in _NOT_RUN.items():
        if template.get(key):
            raise WorkflowError(
                f"{where} has {key} ({what}), which the local runner cannot run: remove it to run here."
            )
    kind = template_type(template)
    if kind in ("container", "script") and not template[kind].get("command"):
        raise WorkflowError(f"{where} has a {kind} with {NO_COMMAND}: give it a command.")
    if kind == "containerSet":
        _check_container_set(template["containerSet"], where)
    if kind == "http":
        _check_http(template["http"], where)
    if kind == "resource":
        _check_resource(template, where)
    leaf = kind in _LEAF_TYPES
    mounted: list[str] = []
    if leaf:
        _check_env(template, where)
        _check_pod_spec_patch(template.get("podSpecPatch") or spec.get("podSpecPatch"), where)
        _check_volumes(template, spec, where)
        mounted = list(volumes.moved_mounts(template, spec))
    for param in (template.get("outputs") or {}).get("parameters") or [] if leaf else []:
        path = (param.get("valueFrom") or {}).get("path")
        if path and "{{" not in str(path):
            here = f"{where} output parameter {param['name']!r}"
            _check_artifact_path({"path": path}, here, mounted, "the files of output parameters")
    for artifact in (template.get("outputs") or {}).get("artifacts") or []:
        here = f"{where} output artifact {artifact['name']!r}"
        if leaf:
            _check_artifact_path(artifact, here, mounted)
        elif not artifact.get("from") and not artifact.get("fromExpression"):
            raise WorkflowError(f"{here} needs from or fromExpression: the artifact of which step it is.")
        else:
            _check_artifact_reference(artifact, here)
    for artifact in (template.get("inputs") or {}).get("artifacts") or []:
        here = f"{where} input artifact {artifact['name']!r}"
        _check_artifact_source(artifact, here)
        if leaf:
            _check_artifact_path(artifact, here, mounted)


# What Kubernetes fills a pod's env and volumes from; the runner has none, and a step would see nothing there.
_FROM_CLUSTER = {
    "secretKeyRef": "Secret",
    "configMapKeyRef": "ConfigMap",
    "secretRef": "Secret",
    "configMapRef": "ConfigMap",
}


def _check_env(template: Mapping[str, Any], where: str) -> None:
    """Env variables the pod would take from a Secret or ConfigMap (Kubernetes fills them in; here they were empty)."""
    for kind in ("container", "script", "containerSet"):
        spec = template.get(kind)
        if not isinstance(spec, Mapping):
            continue
        containers = [spec, *(spec.get("containers") or [])] if kind == "containerSet" else [spec]
        for container in (c for c in containers if isinstance(c, Mapping)):
            for env in (e for e in container.get("env") or [] if isinstance(e, Mapping)):
                source = next((_FROM_CLUSTER[k] for k in env.get("valueFrom") or {} if k in _FROM_CLUSTER), None)
                if source:
                    raise WorkflowError(
                        f"{where} env {env.get('name')!r} takes its value from a {source}, which the local runner "
                        "does not have: give it a value."
                    )
            for env in (e for e in container.get("envFrom") or [] if isinstance(e, Mapping)):
                source = next((_FROM_CLUSTER[k] for k in env if k in _FROM_CLUSTER), None)
                if source:
                    raise WorkflowError(
                        f"{where} envFrom takes variables from a {source}, which the local runner does not have: "
                        "give them values in env."
                    )


def _check_pod_spec_patch(patch: Any, where: str) -> None:
    """A podSpecPatch (the template's, else the workflow's) that changes more than its containers' resources.

    Argo merges it into the pod it makes (workflowpod.go, strategic merge): a patch of `resources` changes nothing a
    step sees here (resources are not looked at), one of a command, env, image or the pod's spec would be passed over.
    """
    if not patch:
        return
    try:  # Argo renders the tags first: each reads as a plain word here
        data = kubeyaml.load(re.sub(r"\{\{.*?\}\}", "vcpilot-argo-tag", str(patch)))
    except (yaml.YAMLError, RecursionError, ValueError, TypeError):
        data = None
    containers = data.get("containers") if isinstance(data, Mapping) else None
    changed = sorted(set(data) - {"containers"}) if isinstance(data, Mapping) else ["a patch that is not a mapping"]
    if isinstance(containers, list):
        for container in containers:
            extra = set(container) - {"name", "resources"} if isinstance(container, Mapping) else {"a container"}
            changed += sorted(f"containers[].{key}" for key in extra)
    elif containers is not None:
        changed.append("containers")
    if changed:
        raise WorkflowError(
            f"{where} podSpecPatch changes {', '.join(dict.fromkeys(changed))}, which the local runner does not "
            "apply (only containers' resources, which it does not look at): remove it to run here."
        )


def _check_volumes(template: Mapping[str, Any], spec: Mapping[str, Any], where: str) -> None:
    """Each volume a leaf template mounts, as Argo's controller and Kubernetes take it when they make the pod.

    On Argo the step errs when its turn comes ("volume 'x' not found in workflow spec") or Kubernetes refuses its
    pod; here the workflow is refused before anything runs.
    """
    for mount in volumes.mounts(template):
        name = stringify(mount.get("name") or "")
        if "{{" in name:
            continue
        volume = volumes.find_volume(name, template, spec)
        if volume is None:
            raise WorkflowError(
                f"{where} volumeMounts: volume {name!r} is not in the template's volumes, spec.volumes or "
                "spec.volumeClaimTemplates; define it there or mount one that is."
            )
        source = next((kind for key, kind in (("secret", "Secret"), ("configMap", "ConfigMap")) if key in volume), None)
        if source:
            raise WorkflowError(
                f"{where} mounts volume {name!r}, a {source}, which the local runner does not have: mount an "
                "emptyDir or a claim, or remove it to run here."
            )
        if not is_dns1123_label(name):
            raise WorkflowError(
                f"{where} volume {name!r} is not a volume name: lower-case letters, digits and '-', at most 63, "
                "starting and ending with a letter or digit (a DNS-1123 label)."
            )
        claim = stringify((volume.get("persistentVolumeClaim") or {}).get("claimName") or "")
        if claim and "{{" not in claim and not is_dns1123_subdomain(claim):
            raise WorkflowError(
                f"{where} volume {name!r} persistentVolumeClaim.claimName {claim!r} is not a claim name: lower-case "
                "letters, digits, '-' and '.', starting and ending with a letter or digit (a DNS-1123 subdomain)."
            )
        sub = stringify(mount.get("subPath") or "")
        if sub.startswith("/") or ".." in sub.split("/"):
            raise WorkflowError(
                f"{where} volumeMounts subPath {sub!r} of volume {name!r} leaves the volume: Kubernetes takes only "
                "a relative path without '..'."
            )
        moved = volumes.place(volume) is not None
        if moved and ("{{" in sub or mount.get("subPathExpr")):
            raise WorkflowError(
                f"{where} volumeMounts of volume {name!r} take their subPath from a variable, which the local runner "
                "cannot place inside the volume: spell the subPath out."
            )


def _check_container_set(spec: Any, where: str) -> None:
    """Argo's ContainerSetTemplate.Validate, and a command for each container (the runner cannot read an image's)."""
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    if not isinstance(containers, list) or not containers or not all(isinstance(c, Mapping) for c in containers):
        raise WorkflowError(f"{where} containerSet needs containers: a list of at least one container.")
    names = [c.get("name") for c in containers]
    for name in names:
        if not isinstance(name, str) or not re.fullmatch(r"[a-zA-Z0-9][-a-zA-Z0-9]*", name) or len(name) > 128:
            raise WorkflowError(
                f"{where} containerSet container name {name!r} is not a name: letters, digits and '-' (up to 128), "
                "not starting with '-'."
            )
    _check_unique(names, f"{where} containerSet", "containers")
    mounts = [m.get("mountPath") for m in spec.get("volumeMounts") or [] if isinstance(m, Mapping)]
    if len(set(mounts)) != len(mounts):
        raise WorkflowError(f"{where} containerSet mounts the same mountPath twice in its volumeMounts.")
    graph = {c["name"]: list(c.get("dependencies") or []) for c in containers}
    for name, dependencies in graph.items():
        for dependency in dependencies:
            if dependency not in graph:
                raise WorkflowError(f"{where} containerSet container {name!r} depends on {dependency!r}, not defined.")
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            raise WorkflowError(f"{where} containerSet has a dependency cycle: {' -> '.join([*path, name])}.")
        if name not in done:
            for dependency in graph[name]:
                visit(dependency, [*path, name])
            done.add(name)

    for name in graph:
        visit(name, [])
    strategy = spec.get("retryStrategy")
    if strategy is not None:
        retries = strategy.get("retries") if isinstance(strategy, Mapping) else None
        if retries is None or not re.fullmatch(r"[0-9]+", str(retries)) or not _int_or_variable(retries):
            raise WorkflowError(f"{where} containerSet.retryStrategy.retries {retries!r} is not a whole number.")
        if strategy.get("duration") not in (None, ""):
            parse_duration(strategy["duration"], f"{where} containerSet.retryStrategy.duration")
    for container in containers:
        if not container.get("command"):
            here = f"{where} containerSet container {container['name']!r}"
            raise WorkflowError(f"{here} has {NO_COMMAND}: give it a command.")


def _check_http(spec: Any, where: str) -> None:
    """What an http template needs to be sent from here: a URL, headers with values (no Secrets here)."""
    if not isinstance(spec, Mapping) or not isinstance(spec.get("url"), str) or not spec["url"]:
        raise WorkflowError(f"{where} http needs a url.")
    timeout = spec.get("timeoutSeconds")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int)):
        raise WorkflowError(f"{where} http.timeoutSeconds {timeout!r} is not a whole number of seconds.")
    for header in _named_mappings(spec, "headers", f"{where} http"):
        if (header.get("valueFrom") or {}).get("secretKeyRef") is not None:
            raise WorkflowError(
                f"{where} http header {header['name']!r} takes its value from a Secret, which the local runner "
                "does not have: give it a value."
            )


def _check_artifact_path(artifact: Mapping[str, Any], where: str, mounted: list[str], what: str = "artifacts") -> None:
    """An artifact's path is in the step's own directory or on a volume that moved (`mounted`), never the host's.

    So is the file an output parameter is read from (`what`): the host's /etc/hostname is not the container's, and
    its /dev/zero never ends.
    """
    path = artifact.get("path")
    parts = path.split("/") if isinstance(path, str) else []
    on_volume = isinstance(path, str) and any(path == m or path.startswith(f"{m}/") for m in mounted)
    if len(parts) < 2 or parts[0] or ".." in parts or (parts[1] in HOST_ROOTS and not on_volume):
        raise WorkflowError(
            f"{where} is at {path!r}; the local runner keeps {what} in the step's own directory or its volumes, "
            "so it takes an absolute path outside this machine's system directories (/etc, /usr, /home, /mnt, ...) "
            "unless a claim or emptyDir is mounted there: use /tmp."
        )


def unsupported_resource(action: str, manifest: Mapping[str, Any] | None) -> str | None:
    """Why the local runner cannot `action` the object `manifest` (None: it can; a None manifest is not looked at)."""
    if action not in RESOURCE_ACTIONS:
        return f"resource action {action!r} is not supported locally ({', '.join(RESOURCE_ACTIONS)})"
    kind = (manifest or {}).get("apiVersion"), (manifest or {}).get("kind")
    if manifest is not None and kind not in RESOURCE_KINDS:
        return f"the local runner can only manage Volcano and batch/v1 Jobs, not {kind[0]} {kind[1]}"
    return None


def _check_resource(template: Mapping[str, Any], where: str) -> None:
    """A resource template's action and object, when the file spells them out (a `{{...}}` is known only later)."""
    resource = template["resource"]
    action = stringify(resource.get("action") or "")
    # Argo renders the tags before it parses the manifest: an unquoted `name: {{...}}` is a flow mapping to YAML,
    # so each tag reads as a plain word here, and one in apiVersion or kind still marks it as known only later.
    tag = "vcpilot-argo-tag"
    try:
        manifest = kubeyaml.load(re.sub(r"\{\{.*?\}\}", tag, str(resource.get("manifest") or "")))
    except (yaml.YAMLError, RecursionError, ValueError, TypeError):  # the step says why, when it runs
        manifest = None
    if not isinstance(manifest, Mapping) or tag in f"{manifest.get('apiVersion')}{manifest.get('kind')}":
        manifest = None
    reason = None if "{{" in action else unsupported_resource(action, manifest)
    if reason:
        raise WorkflowError(f"{where}: {reason}.")


def _check_artifact_arguments(holder: Mapping[str, Any], where: str) -> None:
    for artifact in (holder.get("arguments") or {}).get("artifacts") or []:
        _check_artifact_source(artifact, f"{where} artifact argument {artifact['name']!r}")


def _check_artifact_source(artifact: Mapping[str, Any], where: str) -> None:
    """An input artifact or an artifact argument: `raw` or another step's (`from`), nothing from outside."""
    _check_artifact_reference(artifact, where)
    for source in _ARTIFACT_SOURCES:
        if artifact.get(source) is not None:
            raise WorkflowError(
                f"{where} is fetched from {source}, which the local runner does not do: it passes only raw "
                "artifacts (raw: {data: ...}) and those its steps output."
            )


def _check_artifact_reference(artifact: Mapping[str, Any], where: str) -> None:
    reference = artifact.get("from")
    if reference is not None and "{{" not in str(reference):
        raise WorkflowError(
            f"{where} comes from {reference!r}, which is not a reference such as "
            "{{steps.NAME.outputs.artifacts.NAME}} to an artifact a step outputs."
        )


def _check_unique(names: list[Any], where: str, what: str) -> None:
    """Argo's validator: within one steps or DAG template, no two steps or tasks share a name."""
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice is not None:
        raise WorkflowError(f"{where} has two {what}s named {twice!r}; {what} names must be unique: rename one.")


def _check_steps(template: Mapping[str, Any]) -> None:
    names = [step.get("name") for group in template["steps"] or [] for step in group or []]
    _check_unique(names, f"template {template.get('name')!r}", "step")


def _check_dag(template: Mapping[str, Any]) -> None:
    tasks = template["dag"].get("tasks") or []
    names = [t.get("name") for t in tasks]
    where = f"template {template.get('name')!r}"
    _check_unique(names, where, "task")
    deps: dict[str, set[str]] = {}
    for task in tasks:
        if task.get("depends") and task.get("dependencies"):
            raise WorkflowError(f"{where} task {task['name']!r} sets both depends and dependencies; keep one.")
        found = set(task.get("dependencies") or [])
        for full, bare in _DEPENDS_WORD.findall(str(task.get("depends") or "")):
            found.add(full or bare)
        unknown = sorted(found - set(names))
        if unknown:
            raise WorkflowError(f"{where} task {task['name']!r} depends on unknown task {unknown[0]!r}.")
        deps[task["name"]] = found
    state: dict[str, int] = {}

    def visit(task: str, path: list[str]) -> None:
        if state.get(task) == 2:
            return
        if state.get(task) == 1:
            cycle = " -> ".join([*path[path.index(task) :], task])
            raise WorkflowError(f"{where} has a dependency cycle: {cycle}.")
        state[task] = 1
        for dep in sorted(deps[task]):
            visit(dep, [*path, task])
        state[task] = 2

    for task_name in names:
        visit(task_name, [])


# -- the shape of what the loader and the engine walk ---------------------------------------------------------
# A field of the wrong type (a list where a mapping goes, a number for a name) is refused here in one sentence,
# before a check or the engine meets it as an AttributeError deep inside the run.

_TYPE_NAMES: dict[type, str] = {Mapping: "a mapping", list: "a list", str: "a string"}


def optional_field(holder: Mapping[str, Any], key: str, expected: type, where: str) -> Any:
    """`holder[key]` when it is absent, null or of type `expected`; WorkflowError naming the field otherwise."""
    value = holder.get(key)
    if value is not None and not isinstance(value, expected):
        field_name = f"{where}.{key}" if where else key
        raise WorkflowError(f"{field_name} must be {_TYPE_NAMES[expected]}, not {kind_of(value)}.")
    return value


def _whole(holder: Mapping[str, Any], key: str, where: str, *, least: int) -> None:
    """Refuse `holder[key]`, when given, unless it is a whole number of at least `least`, naming the field.

    The fields are int64s in Argo's types: a larger number does not unmarshal, and `argo submit` refuses it.
    """
    value = holder.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
        raise WorkflowError(f"{where}.{key} must be a whole number of at least {least}, not {value!r}.")
    if value is not None and value >= 2**63:
        raise WorkflowError(f"{where}.{key} is {value}, more than an int64 holds: give at most {2**63 - 1}.")


def _named_mappings(holder: Mapping[str, Any], key: str, where: str, *, names: bool = True) -> list[Mapping[str, Any]]:
    """`holder[key]` as a list of mappings, each with a string `name` when `names`."""
    items = optional_field(holder, key, list, where) or []
    for index, item in enumerate(items):
        here = f"{where}.{key}[{index}]"
        if not isinstance(item, Mapping):
            raise WorkflowError(f"{here} must be a mapping, not {kind_of(item)}.")
        if names and not isinstance(item.get("name"), str):
            raise WorkflowError(f"{here} needs a name (a string), not {kind_of(item.get('name'))}.")
    return items


def _check_io(holder: Mapping[str, Any], where: str) -> None:
    for key in ("arguments", "inputs", "outputs"):
        block = optional_field(holder, key, Mapping, where)
        if block is not None:  # Argo's validateWorkflowFieldNames: each name used once
            for kind in ("parameter", "artifact"):
                items = _named_mappings(block, f"{kind}s", f"{where}.{key}")
                _check_unique([item["name"] for item in items], f"{where}.{key}", kind)
            for index, param in enumerate(block.get("parameters") or []):
                optional_field(param, "valueFrom", Mapping, f"{where}.{key}.parameters[{index}]")


def _check_hooks(holder: Mapping[str, Any], where: str) -> None:
    optional_field(holder, "onExit", str, where)
    for name, hook in (optional_field(holder, "hooks", Mapping, where) or {}).items():
        if not isinstance(hook, Mapping):
            raise WorkflowError(f"{where}.hooks.{name} must be a mapping, not {kind_of(hook)}.")
        for key in ("template", "expression"):  # a hook is a call too: what it runs, with its arguments
            optional_field(hook, key, str, f"{where}.hooks.{name}")
        _check_io(hook, f"{where}.hooks.{name}")


def _check_call(call: Mapping[str, Any], where: str) -> None:
    """A step or a DAG task: what it calls, its arguments, its hooks."""
    for key in ("template", "when", "depends"):
        optional_field(call, key, str, where)
    optional_field(call, "withItems", list, where)
    optional_field(call, "withSequence", Mapping, where)
    inline = optional_field(call, "inline", Mapping, where)
    if inline is not None:
        _check_template(inline, f"{where}.inline")
    for dependency in optional_field(call, "dependencies", list, where) or []:
        if not isinstance(dependency, str):
            raise WorkflowError(f"{where}.dependencies must list task names, not {kind_of(dependency)}.")
    _check_io(call, where)
    _check_hooks(call, where)


def _check_template(template: Mapping[str, Any], where: str) -> None:
    _check_io(template, where)
    _whole(template, "parallelism", where, least=1)
    for index, group in enumerate(optional_field(template, "steps", list, where) or []):
        if not isinstance(group, list):
            raise WorkflowError(f"{where}.steps[{index}] must be a list of steps, not {kind_of(group)}.")
        for number, step in enumerate(group):
            if not isinstance(step, Mapping):
                raise WorkflowError(f"{where}.steps[{index}][{number}] must be a mapping, not {kind_of(step)}.")
            _check_call(step, f"{where}.steps[{index}][{number}]")
    dag = optional_field(template, "dag", Mapping, where)
    if dag is not None:
        for index, task in enumerate(_named_mappings(dag, "tasks", f"{where}.dag")):
            _check_call(task, f"{where}.dag.tasks[{index}]")
    for kind in TEMPLATE_TYPES + _UNSUPPORTED_TYPES:
        if kind not in ("steps", "dag"):
            optional_field(template, kind, Mapping, where)


def _check_shape(spec: Mapping[str, Any]) -> None:
    """Refuse, naming the field, a spec whose parts the loader reads are not of the type Argo's schema gives."""
    for key in ("entrypoint", "serviceAccountName"):
        optional_field(spec, key, str, "spec")
    # int64 fields in Argo's schema, read before anything runs: under 1, Argo's parallelism lets no pod start
    _whole(spec, "parallelism", "spec", least=1)
    _whole(spec, "activeDeadlineSeconds", "spec", least=0)
    _check_io(spec, "spec")
    _check_hooks(spec, "spec")
    for index, template in enumerate(_named_mappings(spec, "templates", "spec")):
        _check_template(template, f"spec.templates[{index}]")
    optional_field(spec, "templateDefaults", Mapping, "spec")
