"""Where a pod's volumes are on this machine, so a step writes into directories of VCPILOT_HOME, not the host's `/mnt`.

A mount finds its volume as Argo v4.1.2's controller finds it (workflowpod.go addVolumeReferences): in the
template's own `volumes`, then `spec.volumes`, then `spec.volumeClaimTemplates`. Three kinds move:

- a claim of `spec.volumeClaimTemplates`: `<run>/volumes/<name>`, shared by every step of the run, as Argo creates
  the claim with the workflow (and deletes it with the run);
- a `persistentVolumeClaim` whose `claimName` is spelt out: `<VCPILOT_HOME>/claims/<claimName>`, shared by every
  run, as an existing claim outlives workflows; made on first use;
- an `emptyDir`: `<node>/.volumes/<name>`, the pod's own: the containers of a containerSet share it, steps do not.

Any other mount stays the host path it names: a hostPath or nfs volume (a secret or configMap one is refused), a
claim whose name is a `{{...}}`, a mount at a `{{...}}` path (our pipeline's workspace, a host directory local runs
rely on). A literal `subPath` is a directory inside the volume. Until a node runs, these directories are spelt with
markers that no parameter value can hold (`localize` resolves them), so a path that arrives through a parameter never
moves.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["CLAIMS_DIR", "NODE_DIR", "RUN_DIR", "find_volume", "localize", "mounts", "moved_mounts", "place"]

NODE_DIR = "\x00node-dir\x00"  # <VCPILOT_HOME>/runs/<run>/nodes/<node id>: the pod's own filesystem
RUN_DIR = "\x00run-dir\x00"  # <VCPILOT_HOME>/runs/<run>
CLAIMS_DIR = "\x00claims-dir\x00"  # <VCPILOT_HOME>/claims: the existing claims, kept between runs


def mounts(template: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every volumeMount of a container, script or containerSet template (the set's and each container's)."""
    found: list[Any] = []
    for kind in ("container", "script", "containerSet"):
        spec = template.get(kind)
        if isinstance(spec, Mapping):
            found += spec.get("volumeMounts") or []
            if kind == "containerSet":
                found += [m for c in spec.get("containers") or [] for m in c.get("volumeMounts") or []]
    return [m for m in found if isinstance(m, Mapping)]


def find_volume(name: str, template: Mapping[str, Any], spec: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The volume a mount named `name` uses, found where Argo looks (None: none is there).

    A claim template reads `{name, volumeClaimTemplate}`, standing for the claim Argo makes of it.
    """
    for volume in [*(template.get("volumes") or []), *(spec.get("volumes") or [])]:
        if isinstance(volume, Mapping) and volume.get("name") == name:
            return volume
    for claim in spec.get("volumeClaimTemplates") or []:
        if isinstance(claim, Mapping) and (claim.get("metadata") or {}).get("name") == name:
            return {"name": name, "volumeClaimTemplate": claim}
    return None


def place(volume: Mapping[str, Any]) -> str | None:
    """The marked directory `volume` is kept in here; None for one that stays the host path it is mounted at."""
    name = str(volume.get("name"))
    if volume.get("volumeClaimTemplate") is not None:
        return f"{RUN_DIR}/volumes/{name}"
    claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
    if isinstance(claim, str) and claim and "{{" not in claim:
        return f"{CLAIMS_DIR}/{claim}"
    if volume.get("emptyDir") is not None:
        return f"{NODE_DIR}/.volumes/{name}"
    return None


def moved_mounts(template: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, str]:
    """{mountPath: marked directory} for each of the template's literal mount paths whose volume moves.

    One place per mountPath in a pod: the first mount of a path decides it.
    """
    moved: dict[str, str] = {}
    for mount in mounts(template):
        path = mount.get("mountPath")
        if not isinstance(path, str) or not path.startswith("/") or "{{" in path or path.rstrip("/") in moved:
            continue
        volume = find_volume(str(mount.get("name") or ""), template, spec)
        directory = None if volume is None else place(volume)
        if directory is not None and path.rstrip("/"):
            sub = str(mount.get("subPath") or "").strip("/")
            moved[path.rstrip("/")] = f"{directory}/{sub}" if sub else directory
    return moved


def localize(text: str, node_dir: Path) -> str:
    """Resolve the markers in `text` for the node whose directory is `node_dir` (`<home>/runs/<run>/nodes/<id>`)."""
    if NODE_DIR in text:
        text = text.replace(NODE_DIR, str(node_dir))
    if RUN_DIR in text:
        text = text.replace(RUN_DIR, str(node_dir.parents[1]))
    if CLAIMS_DIR in text:
        text = text.replace(CLAIMS_DIR, str(node_dir.parents[3] / "claims"))
    return text
