"""Argo `resource` templates against a `Cluster`: create/apply/delete/get a Volcano or batch/v1 Job and wait.

Like Argo's `argoexec resource`, the manifest (already substituted) is parsed, `generateName` becomes a name,
and `successCondition`/`failureCondition` are checked on the live object (failure first) until one holds.
Where Argo returns at once when neither condition is given, the local runner waits for the job to finish —
Volcano phase Completed, or a batch/v1 Job's Complete condition — and fails when it fails. The generated
name is derived from the workflow UID and node ID, so a resumed run re-attaches to the job it created
(`submit` is idempotent for an identical spec). Outputs come from `valueFrom.jsonPath` or `jqFilter: '.'`.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import yaml

from components import kubeyaml
from components.files import describe_yaml_error
from components.volcano.cluster import ClusterError, JobNotFound
from pipelines.local.engine.executors import DEADLINE_MESSAGE, POD_DEADLINE_MESSAGE, LeafResult
from pipelines.local.engine.status import Outputs, Parameter
from pipelines.local.expressions import ExpressionError, evaluate_condition, jsonpath
from pipelines.local.workflow import stringify, unsupported_resource

__all__ = ["ObjectCluster", "OwnedObject", "job_finished", "run_resource"]

_FAILED_VOLCANO = ("Failed", "Aborted", "Terminated")
OwnedObject = dict[str, str]


class ObjectCluster(Protocol):
    """The part of `components.volcano.cluster.Cluster` a resource template needs."""

    def submit(self, job: Mapping[str, Any]) -> Any:
        """Create a job (idempotent for an identical spec)."""
        ...

    def get_object(self, name: str, namespace: str = "default") -> dict[str, Any]:
        """The job object with its live status."""
        ...

    def delete(self, name: str, namespace: str = "default", *, missing_ok: bool = False) -> None:
        """Delete a job."""
        ...


def run_resource(
    template: Mapping[str, Any],
    *,
    cluster: ObjectCluster,
    uid: str,
    node_id: str,
    namespace: str,
    cancel: threading.Event,
    deadline_s: float | None = None,
    own: Callable[[OwnedObject], None] | None = None,
) -> LeafResult:
    """Carry out one resource template; `own` records objects created with `setOwnerReference: true`."""
    resource = template["resource"]
    action = str(resource.get("action") or "")
    if reason := unsupported_resource(action, None):
        return LeafResult("Error", f"{reason}.")
    try:
        manifest = kubeyaml.load(str(resource.get("manifest") or ""))
    except yaml.YAMLError as err:
        return LeafResult("Error", f"the resource manifest is not valid YAML{describe_yaml_error(err)}.")
    except (RecursionError, ValueError, TypeError):
        return LeafResult("Error", "the resource manifest is not valid YAML: it nests too deeply or holds a bad value.")
    if not isinstance(manifest, dict):
        return LeafResult("Error", "the resource manifest must be a YAML mapping (one Kubernetes object).")
    if reason := unsupported_resource(action, manifest):
        return LeafResult("Error", f"{reason}.")
    kind = (str(manifest["apiVersion"]), str(manifest["kind"]))
    meta = manifest.setdefault("metadata", {})
    if not meta.get("name"):
        if not meta.get("generateName"):
            return LeafResult(
                "Error", "Kind and name are both required but at least one of them is missing from the manifest."
            )
        meta["name"] = meta.pop("generateName") + _suffix(uid, node_id)
    name, ns = str(meta["name"]), str(meta.get("namespace") or namespace)
    meta["namespace"] = ns
    started = time.monotonic()
    try:
        if action == "delete":
            cluster.delete(name, ns, missing_ok=True)
            return LeafResult("Succeeded", None, _outputs(template, None))
        if action in ("create", "apply"):
            if resource.get("setOwnerReference") and own is not None:
                own({"apiVersion": str(kind[0]), "kind": str(kind[1]), "name": name, "namespace": ns})
            cluster.submit(manifest)
            obj, verdict = _wait(resource, cluster, name, ns, cancel, started, deadline_s)
        else:
            obj, verdict = cluster.get_object(name, ns), None
    except JobNotFound:
        return LeafResult("Failed", f"{kind[1]} {ns}/{name} does not exist (it was deleted while being watched).")
    except ClusterError as err:
        return LeafResult("Failed", str(err))
    except ExpressionError as err:
        return LeafResult("Error", str(err))
    if verdict is not None:
        return LeafResult("Failed", verdict)
    try:
        return LeafResult("Succeeded", None, _outputs(template, obj))
    except ExpressionError as err:
        return LeafResult("Error", str(err))


def _suffix(uid: str, node_id: str) -> str:
    digest = hashlib.sha256(f"{uid}/{node_id}".encode()).digest()
    alphabet = "bcdfghjklmnpqrstvwxz2456789"  # the API server's name alphabet (no vowels, no 0/1/3)
    return "".join(alphabet[b % len(alphabet)] for b in digest[:5])


def _wait(
    resource: Mapping[str, Any],
    cluster: ObjectCluster,
    name: str,
    namespace: str,
    cancel: threading.Event,
    started: float,
    deadline_s: float | None,
) -> tuple[dict[str, Any], str | None]:
    """Poll the object until a condition decides; returns (object, failure message or None)."""
    success, failure = resource.get("successCondition"), resource.get("failureCondition")
    delay = 0.05
    while True:
        obj = cluster.get_object(name, namespace)
        if failure and evaluate_condition(str(failure), obj):
            return obj, f"failure condition '{failure}' evaluated true"
        if success:
            if evaluate_condition(str(success), obj):
                return obj, None
        elif failure:
            return obj, None  # Argo: with only a failureCondition, not failing is success
        else:
            verdict = _default_verdict(obj)
            if verdict is not None:
                return obj, (None if verdict else f"{obj.get('kind', 'Job')} {name} did not complete successfully")
        if deadline_s is not None and time.monotonic() - started > deadline_s:
            return obj, POD_DEADLINE_MESSAGE
        if cancel.wait(delay):
            return obj, DEADLINE_MESSAGE
        delay = min(delay * 1.5, 1.0)


def job_finished(obj: Mapping[str, Any]) -> bool:
    """Whether a Volcano or batch/v1 Job has ended, well or badly (its pods are gone or going)."""
    return _default_verdict(obj) is not None


def _default_verdict(obj: Mapping[str, Any]) -> bool | None:
    """True/False once the job finished well/badly, None while it runs (used when no successCondition)."""
    status = obj.get("status") or {}
    if obj.get("apiVersion") == "batch/v1":
        for condition in status.get("conditions") or []:
            if condition.get("status") == "True" and condition.get("type") in ("Complete", "Failed"):
                return condition["type"] == "Complete"
        return None
    phase = (status.get("state") or {}).get("phase")
    if phase == "Completed":
        return True
    return False if phase in _FAILED_VOLCANO else None


def _outputs(template: Mapping[str, Any], obj: Mapping[str, Any] | None) -> Outputs:
    params: list[Parameter] = []
    for param in (template.get("outputs") or {}).get("parameters") or []:
        source = param.get("valueFrom") or {}
        value: Any = None
        if obj is not None and source.get("jsonPath"):
            value = jsonpath(obj, str(source["jsonPath"]))
        elif obj is not None and source.get("jqFilter"):
            value = _jq(obj, str(source["jqFilter"]))
        if value is None and source.get("default") is not None:
            value = source["default"]
        if value is None:
            value = ""
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        params.append(Parameter(name=param["name"], value=stringify(text), globalName=param.get("globalName")))
    # Argo runs the template as a pod (`argoexec resource`) and records its exit code like any other pod's.
    return Outputs(parameters=params or None, exitCode="0")


def _jq(obj: Mapping[str, Any], jq_filter: str) -> Any:
    """The subset of jq the runner understands: `.` and plain paths such as `.status.state.phase`."""
    expr = jq_filter.strip()
    if expr == ".":
        return obj
    if not expr.startswith(".") or any(c in expr for c in "|[]()$ "):
        raise ExpressionError(f"jqFilter {jq_filter!r} is not supported locally; use '.' or a path like '.status'")
    value: Any = obj
    for part in expr[1:].split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value
