"""What `kubectl apply -k deploy/` installs, read from its manifests, so that `vcpilot doctor` checks the same names.

The queues, priority classes and RBAC rules are defined once, in deploy/; this module only reads them. It follows
each kustomization's `resources` (files and folders), as kustomize does, and ignores its patches: the names and
rules read here are not patched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from components.errors import InputError, VcpilotError
from components.files import load_documents

__all__ = ["DEPLOY", "STANDARD_VERBS", "DeployError", "Grant", "manifests", "namespace", "rbac_grants", "volcano_names"]

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
# The verbs `kubectl auth can-i --list` shows for a resource; what is granted beyond the roles' is checked among these.
STANDARD_VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


class DeployError(VcpilotError):
    """deploy/ cannot be read; the message says which file and why."""


class Grant(BaseModel):
    """One verb on one resource, in a namespace or (namespace None) cluster-wide."""

    model_config = ConfigDict(frozen=True)

    group: str
    resource: str
    verb: str
    namespace: str | None = None

    def describe(self) -> str:
        """The grant as people read it: `create jobs.batch.volcano.sh in vcpilot`."""
        what = f"{self.resource}.{self.group}" if self.group else self.resource
        where = f"in {self.namespace}" if self.namespace else "cluster-wide"
        return f"{self.verb} {what} {where}"


def manifests(directory: Path = DEPLOY) -> list[dict[str, Any]]:
    """Every object the kustomization in `directory` lists, its sub-kustomizations' included, unpatched."""
    spec = _load(directory / "kustomization.yaml")
    if len(spec) != 1 or not isinstance(spec[0], dict):
        raise DeployError(f"{directory / 'kustomization.yaml'} is not one kustomization")
    objects: list[dict[str, Any]] = []
    for entry in spec[0].get("resources") or []:
        path = directory / str(entry)
        if path.is_dir():
            objects.extend(manifests(path))
        else:
            objects.extend(o for o in _load(path) if isinstance(o, dict))
    return objects


def namespace(directory: Path = DEPLOY) -> str:
    """The namespace deploy/'s kustomization puts every namespaced object in."""
    spec = _load(directory / "kustomization.yaml")
    name = spec[0].get("namespace") if spec and isinstance(spec[0], dict) else None
    if not name:
        raise DeployError(f"{directory / 'kustomization.yaml'} names no namespace")
    return str(name)


def volcano_names(directory: Path = DEPLOY / "volcano") -> tuple[list[str], list[str]]:
    """The Volcano queues and the priority classes deploy/volcano/ installs: (queues, priority classes)."""
    objects = manifests(directory)
    return _names(objects, "Queue"), _names(objects, "PriorityClass")


def rbac_grants(namespace: str, directory: Path = DEPLOY / "rbac", account: str = "vcpilot-workflow") -> list[Grant]:
    """The grants deploy/rbac/ gives `account`: the Roles' in `namespace`, the ClusterRoles' cluster-wide.

    Only roles that a binding in the same folder binds to that account count, and a rule's resourceNames are ignored
    (ours have none). The order is the manifests' order, so that a report names the missing grants as listed.
    """
    objects = manifests(directory)
    bound = {
        (o["roleRef"]["kind"], o["roleRef"]["name"])
        for o in objects
        if o.get("kind", "").endswith("Binding") and any(s.get("name") == account for s in o.get("subjects") or [])
    }
    grants: list[Grant] = []
    for obj in objects:
        kind = obj.get("kind")
        if kind not in ("Role", "ClusterRole") or (kind, obj["metadata"]["name"]) not in bound:
            continue
        scope = namespace if kind == "Role" else None
        for rule in obj.get("rules") or []:
            for group in rule.get("apiGroups") or [""]:
                for resource in rule.get("resources") or []:
                    verbs = rule.get("verbs") or []
                    for verb in STANDARD_VERBS if "*" in verbs else verbs:
                        grant = Grant(group=group, resource=resource, verb=verb, namespace=scope)
                        if grant not in grants:
                            grants.append(grant)
    return grants


def _names(objects: list[dict[str, Any]], kind: str) -> list[str]:
    return [str(o["metadata"]["name"]) for o in objects if o.get("kind") == kind]


def _load(path: Path) -> list[Any]:
    try:
        return load_documents(path, "", max_bytes=None)  # our own manifests, CRDs of megabytes among them
    except InputError as err:
        raise DeployError(str(err)) from None
