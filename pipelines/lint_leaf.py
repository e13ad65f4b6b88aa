"""What Argo's validateLeaf asks of a template that runs a pod (workflow/validate/validate.go, v4.1.2).

An image, mount paths used once, no container named as Argo's own (`wait`, `supervisor`, `artifact-plugin-*`), a
resource action Argo knows with a manifest that is YAML, and no `parallelism`. The schema holds none of these; the
runner, which ignores images and runs no resource but Jobs, ran such a template and the cluster would have refused
the whole workflow at submit.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from components.volcano.resources import quantity_value
from pipelines.lint_scope import _dict, _list  # the one definition of these readers

__all__ = ["leaf_findings"]

_LEAF_TYPES = ("container", "containerSet", "script", "resource", "data", "http", "plugin")  # Template.IsLeaf
_ACTIONS = ("get", "create", "apply", "delete", "replace", "patch")
_TAG = re.compile(r"\{\{.*?\}\}", re.DOTALL)


def leaf_findings(template: dict[str, Any], path: str, defaults: dict[str, Any] | None) -> list[tuple[str, str]]:
    """(path, message) for each thing validateLeaf refuses in `template`.

    `defaults` is the spec's templateDefaults, which may give the image (None where Argo does not look there: a
    ClusterWorkflowTemplate).
    """
    found: list[tuple[str, str]] = []
    if not any(template.get(kind) is not None for kind in _LEAF_TYPES):
        return found
    name = str(template.get("name") or "(inline)")
    for kind in ("container", "script"):
        spec = template.get(kind)
        default = _dict(_dict(defaults).get(kind)).get("image") if defaults is not None else None
        if isinstance(spec, dict) and not spec.get("image") and not default:
            found.append((f"{path}.{kind}.image", f"template {name!r}: {kind}.image may not be empty"))
    if isinstance(template.get("container"), dict):
        found += _mount_clashes(template, path)
    containers = [("containerSet.containers", c) for c in _list(_dict(template.get("containerSet")).get("containers"))]
    inputs, outputs = _dict(template.get("inputs")), _dict(template.get("outputs"))
    in_or_out = inputs.get("artifacts") or outputs.get("parameters") or outputs.get("artifacts")
    if containers and in_or_out and not any(_dict(c).get("name") == "main" for _, c in containers):
        message = f"template {name!r}: a containerSet with input artifacts or outputs needs a container named 'main'"
        found.append((f"{path}.containerSet.containers", message))
    pods = [(kind, template[kind]) for kind in ("container", "script") if isinstance(template.get(kind), dict)]
    for key in ("sidecars", "initContainers"):
        pods += [(f"{key}[{i}]", c) for i, c in enumerate(_list(template.get(key)))]
    pods += [(f"containerSet.containers[{i}]", c) for i, (_, c) in enumerate(containers)]
    for where, container in pods:
        found += _quantities(_dict(container).get("resources"), f"{path}.{where}.resources", name)
    for where, container in [*containers, *(("sidecars", c) for c in _list(template.get("sidecars")))]:
        own = str(_dict(container).get("name") or "")
        if own in ("wait", "supervisor") or own.startswith("artifact-plugin-"):
            found.append((f"{path}.{where}", f"template {name!r}: {own!r} is a reserved Argo container name"))
    if isinstance(template.get("resource"), dict):
        found += _resource(template, path, name)
    if template.get("parallelism") is not None:
        found.append(
            (f"{path}.parallelism", f"template {name!r}: parallelism is only valid for steps and dag templates")
        )
    return found


def _quantities(resources: Any, path: str, name: str) -> list[tuple[str, str]]:
    """Each request or limit that is no Kubernetes quantity: Argo decodes them before it substitutes any `{{...}}`."""
    found = []
    for part in ("limits", "requests"):
        for resource, amount in _dict(_dict(resources).get(part)).items():
            try:
                quantity_value(amount)
            except ValueError:
                hint = (
                    "; a parameter cannot set it (Argo decodes it first): use podSpecPatch"
                    if "{{" in str(amount)
                    else ""
                )
                message = f"template {name!r}: {amount!r} is not a quantity such as 2, 500m or 16Gi{hint}"
                found.append((f"{path}.{part}.{resource}", message))
    return found


def _mount_clashes(template: dict[str, Any], path: str) -> list[tuple[str, str]]:
    """A mountPath used twice, or an input artifact's path where a volume is mounted."""
    found: list[tuple[str, str]] = []
    mounted: dict[str, str] = {}
    for i, mount in enumerate(map(_dict, _list(template["container"].get("volumeMounts")))):
        where = str(mount.get("mountPath"))
        if where in mounted:
            found.append(
                (f"{path}.container.volumeMounts[{i}].mountPath", f"{where!r} is already mounted ({mounted[where]})")
            )
        mounted[where] = f"volume {mount.get('name')!r}"
    for i, artifact in enumerate(map(_dict, _list(_dict(template.get("inputs")).get("artifacts")))):
        where = str(artifact.get("path"))
        if where in mounted:
            found.append((f"{path}.inputs.artifacts[{i}].path", f"{where!r} is already mounted ({mounted[where]})"))
        mounted[where] = f"input artifact {artifact.get('name')!r}"
    return found


def _resource(template: dict[str, Any], path: str, name: str) -> list[tuple[str, str]]:
    resource, found = template["resource"], []
    action = str(resource.get("action") or "")
    if action not in _ACTIONS and not _TAG.fullmatch(action):
        found.append((f"{path}.resource.action", f"template {name!r}: action must be one of {', '.join(_ACTIONS)}"))
    if action in ("delete", "get"):
        return found
    manifest, source = resource.get("manifest") or "", resource.get("manifestFrom")
    if not manifest and source is None:
        found.append((f"{path}.resource", f"template {name!r}: give the resource a manifest or manifestFrom"))
    elif manifest and source is not None:
        found.append((f"{path}.resource", f"template {name!r}: give the resource manifest or manifestFrom, not both"))
    artifact = _dict(_dict(source).get("artifact")).get("name")
    inputs = {_dict(a).get("name") for a in _list(_dict(template.get("inputs")).get("artifacts"))}
    if artifact is not None and artifact not in inputs:
        found.append((f"{path}.resource.manifestFrom", f"artifact {artifact!r} is not an input artifact of {name!r}"))
    try:
        for _ in yaml.safe_load_all(_TAG.sub("vcpilot-argo-tag", str(manifest))):
            pass
    except yaml.YAMLError:
        found.append((f"{path}.resource.manifest", f"template {name!r}: resource.manifest must be valid YAML"))
    return found
