"""A run's state in Argo's own shape (`status.nodes`), kept in memory and persisted atomically for `resume`.

`RunState` is the one place nodes change: every mutation holds its lock and marks the document dirty; a writer
thread writes `status.json` at most every `WRITE_INTERVAL_S` (temp file + `os.replace`), and `close()` writes
the final state. The document is a whole Workflow object — metadata, the spec as run (with `-p` applied) and
the status — plus a `local` section with what only the runner needs (working directory, owned resources).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipelines.local.workflow import WorkflowError

__all__ = [
    "ARTIFACT_MARK",
    "COMPLETED",
    "MAX_NODES",
    "TOO_MANY_NODES",
    "Artifact",
    "FULFILLED",
    "Inputs",
    "NodeFlag",
    "NodeStatus",
    "Outputs",
    "Parameter",
    "RunState",
    "WorkflowStatus",
    "node_id",
    "now_rfc3339",
]

WRITE_INTERVAL_S = 0.1
# Node phases after which a node never changes again (Argo's Fulfilled) and those that actually ran (Completed).
FULFILLED = frozenset({"Succeeded", "Failed", "Error", "Skipped", "Omitted"})
COMPLETED = frozenset({"Succeeded", "Failed", "Error"})
# Argo's stepsOrDagSeparator: what is left of a node name once its boundary's name is cut off.
_SEPARATOR_PREFIXES = (".",)
# The most nodes a run may start. Argo keeps every node in the Workflow's status, at most 1 MB compressed
# (MAX_WORKFLOW_SIZE) unless node status offloading is on, some 20,000 nodes at the most, and errs a workflow that
# outgrows it. Here each running node has a thread, and Linux gives a process some 32,000 (vm.max_map_count): a
# template that calls itself twice, or loops within loops, would add nodes until threads could not start.
MAX_NODES = 20_000
TOO_MANY_NODES = (
    f"the workflow reached {MAX_NODES:,} nodes, more than Argo keeps in a Workflow's status (1 MB compressed): "
    "bound the templates that call themselves or the loops within loops"
)


def now_rfc3339() -> str:
    """The current UTC time as Argo writes it (RFC 3339, seconds)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(value: str | None) -> float | None:
    """Seconds since the epoch of an Argo timestamp, or None."""
    if not value:
        return None
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def node_id(workflow_name: str, node_name: str) -> str:
    """Argo's node ID: the workflow name for the root, else `<workflow>-<fnv32a(node name)>`."""
    if node_name == workflow_name:
        return workflow_name
    h = 0x811C9DC5
    for byte in node_name.encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return f"{workflow_name}-{h}"


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="allow")

    def dump(self) -> dict[str, Any]:
        """The JSON form Argo would show (camelCase, empty fields left out)."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class Parameter(_Model):
    """An input or output parameter with its resolved value."""

    name: str
    value: str | None = None
    default: str | None = None
    enum: list[str] | None = None
    description: str | None = None
    global_name: str | None = Field(default=None, alias="globalName")


# Begins the value `{{steps.X.outputs.artifacts.Y}}` stands for: the artifact's place in the run's directory, which
# only a reference can produce (no parameter value can contain it), so `from` takes nothing else.
ARTIFACT_MARK = "\x00artifact\x00"


class Artifact(_Model):
    """An output artifact: the template's `path`, and where the run keeps it (`local`, under the run's directory).

    Argo records where its artifact repository holds it (`s3.key`, ...); the local runner has no repository and
    keeps the file or directory the step wrote in the node's own directory.
    """

    name: str
    path: str | None = None
    local: str | None = None
    global_name: str | None = Field(default=None, alias="globalName")

    @property
    def reference(self) -> str:
        """What a reference to this artifact substitutes to."""
        return f"{ARTIFACT_MARK}{self.local}"


class Inputs(_Model):
    """A node's resolved inputs."""

    parameters: list[Parameter] | None = None


class Outputs(_Model):
    """A node's outputs: parameters, stdout as `result`, and the main process's exit code."""

    parameters: list[Parameter] | None = None
    artifacts: list[Artifact] | None = None
    result: str | None = None
    exit_code: str | None = Field(default=None, alias="exitCode")

    def parameter(self, name: str) -> str | None:
        """The value of one output parameter, or None."""
        return next((p.value for p in self.parameters or [] if p.name == name), None)


class NodeFlag(_Model):
    """Why a node exists: a lifecycle hook, or one attempt of a retried template."""

    hooked: bool | None = None
    retried: bool | None = None


class NodeStatus(_Model):
    """One entry of `status.nodes`, as Argo's NodeStatus."""

    id: str
    name: str
    display_name: str = Field(alias="displayName")
    type: str  # DAG, Steps, StepGroup, Pod, Retry, Skipped, Suspend, TaskGroup
    template_name: str | None = Field(default=None, alias="templateName")
    template_scope: str | None = Field(default="local/", alias="templateScope")
    phase: str = "Pending"
    boundary_id: str | None = Field(default=None, alias="boundaryID")
    message: str | None = None
    started_at: str | None = Field(default=None, alias="startedAt")
    finished_at: str | None = Field(default=None, alias="finishedAt")
    inputs: Inputs | None = None
    outputs: Outputs | None = None
    children: list[str] | None = None
    outbound_nodes: list[str] | None = Field(default=None, alias="outboundNodes")
    node_flag: NodeFlag | None = Field(default=None, alias="nodeFlag")
    host_node_name: str | None = Field(default=None, alias="hostNodeName")  # a pod's: the machine it ran on

    @property
    def fulfilled(self) -> bool:
        """True once the node will never change again."""
        return self.phase in FULFILLED

    @property
    def completed(self) -> bool:
        """True once the node ran to an end (Skipped and Omitted nodes never ran)."""
        return self.phase in COMPLETED

    @property
    def failed_or_error(self) -> bool:
        """True for Failed and Error."""
        return self.phase in ("Failed", "Error")

    @property
    def hooked(self) -> bool:
        """True for lifecycle-hook nodes (`onExit`, `hooks.exit`)."""
        return bool(self.node_flag and self.node_flag.hooked)

    @property
    def retried(self) -> bool:
        """True for the attempts under a Retry node."""
        return bool(self.node_flag and self.node_flag.retried)


class WorkflowStatus(_Model):
    """`status` of the Workflow: phase, times, message, nodes and global outputs."""

    phase: str = "Pending"
    started_at: str | None = Field(default=None, alias="startedAt")
    finished_at: str | None = Field(default=None, alias="finishedAt")
    message: str | None = None
    progress: str | None = None
    nodes: dict[str, NodeStatus] = Field(default_factory=dict)
    outputs: Outputs | None = None


class RunState:
    """The nodes of one run behind a lock, and the throttled atomic writer of `status.json`."""

    def __init__(
        self,
        path: Path,
        document: dict[str, Any],
        *,
        on_update: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.path = path
        self.document = document
        self.status = WorkflowStatus.model_validate(document.get("status") or {})
        self.workflow_name: str = document["metadata"]["name"]
        self.lock = threading.RLock()
        self._write_lock = threading.Lock()
        self._by_name = {n.name: n for n in self.status.nodes.values()}
        self._on_update = on_update
        self._dirty = threading.Event()
        self._closed = False
        self._frozen: dict[str, Any] | None = None
        self.overflowed = False  # set once a node was refused for MAX_NODES: the workflow errs with TOO_MANY_NODES
        self._last_write = 0.0
        self._writer = threading.Thread(target=self._write_loop, name="status-writer", daemon=True)
        self._writer.start()

    # -- reading ---------------------------------------------------------------------------------------

    def by_name(self, name: str) -> NodeStatus | None:
        """The node with that name, or None."""
        return self._by_name.get(name)

    def get(self, node_id_: str) -> NodeStatus | None:
        """The node with that ID, or None."""
        return self.status.nodes.get(node_id_)

    def nodes(self) -> list[NodeStatus]:
        """A snapshot of every node, in creation order."""
        with self.lock:
            return list(self.status.nodes.values())

    def last_attempt(self, node: NodeStatus) -> NodeStatus:
        """Argo's possiblyGetRetryChildNode: a Retry node's last attempt (not a hook), else the node itself.

        `steps.NAME.id`, `.status`, `.startedAt`, `.finishedAt` and `.hostNodeName` of a retried step are its last
        attempt's (buildLocalScope).
        """
        if node.type != "Retry":
            return node
        with self.lock:
            for child_id in reversed(node.children or []):
                child = self.status.nodes.get(child_id)
                if child is not None and not child.hooked:
                    return child
        return node

    def outbound(self, node: NodeStatus) -> list[str]:
        """Argo's getOutboundNodes: the IDs a dependent of this node hangs from."""
        with self.lock:
            return self._outbound(node.id)

    def _outbound(self, nid: str) -> list[str]:
        node = self.status.nodes.get(nid)
        if node is None:
            return []
        if node.type in ("Pod", "Skipped", "Suspend"):
            return [nid]
        if node.type == "TaskGroup":
            kids = [c for c in node.children or [] if c in self.status.nodes]
            return [o for c in kids for o in self._outbound(c)] if kids else [nid]
        if node.type == "Retry":
            attempts = [c for c in node.children or [] if (n := self.status.nodes.get(c)) and n.retried]
            return attempts[-1:]
        return [o for ob in node.outbound_nodes or [] for o in self._outbound(ob)]

    # -- changing ----------------------------------------------------------------------------------------

    def init_node(
        self,
        name: str,
        type_: str,
        *,
        template_name: str | None,
        boundary_id: str | None,
        phase: str,
        parents: Iterable[str] = (),
        message: str | None = None,
        inputs: Inputs | None = None,
        flag: NodeFlag | None = None,
    ) -> NodeStatus:
        """Create a node (Argo's initializeNode) and link it under its parents (node names).

        Past MAX_NODES a node that would still run is refused (WorkflowError); one that is already decided (the
        Error node that refusal makes) is not, so that every branch ends.
        """
        with self.lock:
            if phase not in FULFILLED and len(self.status.nodes) >= MAX_NODES:
                self.overflowed = True
                raise WorkflowError(f"{TOO_MANY_NODES}.")
            boundary = self.status.nodes.get(boundary_id) if boundary_id else None
            display = name
            if boundary is not None and name.startswith(boundary.name):
                display = name[len(boundary.name) :]
                if display.startswith("["):
                    close = display.find("]")
                    if display[close + 1 : close + 2] == ".":
                        display = display[close + 2 :]
                elif display.startswith(_SEPARATOR_PREFIXES):
                    display = display[1:]
            node = NodeStatus(
                id=node_id(self.workflow_name, name),
                name=name,
                displayName=display,
                type=type_,
                templateName=template_name,
                phase=phase,
                boundaryID=boundary_id or None,
                message=message,
                startedAt=now_rfc3339(),
                inputs=inputs,
                nodeFlag=flag,
            )
            if node.fulfilled:
                node.finished_at = node.started_at
            self.status.nodes[node.id] = node
            self._by_name[name] = node
            for parent in parents:
                self._add_child(parent, node.id)
            self.changed()
            return node

    def add_child(self, parent_name: str, child_name: str) -> None:
        """Link an existing node under another one (both by name)."""
        with self.lock:
            self._add_child(parent_name, node_id(self.workflow_name, child_name))
            self.changed()

    def _add_child(self, parent_name: str, child_id: str) -> None:
        parent = self._by_name.get(parent_name)
        if parent is None:
            return
        if parent.children is None:
            parent.children = []
        if child_id not in parent.children:
            parent.children.append(child_id)

    def update(self, node: NodeStatus, **fields: Any) -> None:
        """Set fields of a node (snake_case names)."""
        with self.lock:
            for key, value in fields.items():
                setattr(node, key, value)
            self.changed()

    def mark(self, node: NodeStatus, phase: str, message: str | None = None, outputs: Outputs | None = None) -> None:
        """Move a node to a phase (Argo's markNodePhase); a fulfilled phase stamps finishedAt."""
        with self.lock:
            node.phase = phase
            if message is not None:
                node.message = message or None
            if outputs is not None:
                node.outputs = outputs
            if phase in FULFILLED and not node.finished_at:
                node.finished_at = now_rfc3339()
            self.changed()

    def forget(self, node: NodeStatus) -> None:
        """Remove a node and every link to it (a node to run again after a resume)."""
        with self.lock:
            self.status.nodes.pop(node.id, None)
            self._by_name.pop(node.name, None)
            for other in self.status.nodes.values():
                if other.children and node.id in other.children:
                    other.children.remove(node.id)
                if other.outbound_nodes and node.id in other.outbound_nodes:
                    other.outbound_nodes.remove(node.id)
            self.changed()

    def set_global_output(self, name: str, value: str) -> None:
        """Add or replace a global output parameter (`globalName`)."""
        with self.lock:
            outputs = self.status.outputs or Outputs(parameters=[])
            params = [p for p in outputs.parameters or [] if p.name != name]
            params.append(Parameter(name=name, value=value))
            outputs.parameters = params
            self.status.outputs = outputs
            self.changed()

    def set_global_artifact(self, name: str, artifact: Artifact) -> None:
        """Add or replace a global output artifact (`globalName`)."""
        with self.lock:
            outputs = self.status.outputs or Outputs()
            kept = [a for a in outputs.artifacts or [] if a.name != name]
            outputs.artifacts = [*kept, Artifact(name=name, path=artifact.path, local=artifact.local)]
            self.status.outputs = outputs
            self.changed()

    def set_workflow(self, **fields: Any) -> None:
        """Set workflow-level status fields (phase, startedAt, finishedAt, message)."""
        with self.lock:
            for key, value in fields.items():
                setattr(self.status, key, value)
            self.changed()

    # -- persisting ----------------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The Argo-shaped status as a plain dict (the frozen one once `freeze` was called)."""
        with self.lock:
            if self._frozen is not None:
                return json.loads(json.dumps(self._frozen))
            pods = [n for n in self.status.nodes.values() if n.type == "Pod"]
            if pods:
                self.status.progress = f"{sum(n.phase == 'Succeeded' for n in pods)}/{len(pods)}"
            return self.status.dump()

    def freeze(self) -> None:
        """Keep the status as it is now, on disk and for the listener; later changes stay in memory only.

        A stopped run records where it stopped while its threads unwind; what they do then is not the run's.
        """
        with self.lock:
            self._frozen = self.snapshot()
        self.write()

    def changed(self) -> None:
        """Note that something changed; the writer thread persists it soon."""
        self._dirty.set()

    def _write_loop(self) -> None:
        while True:
            self._dirty.wait()
            if self._closed:
                return
            delay = self._last_write + WRITE_INTERVAL_S - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if self._closed:
                return
            self._dirty.clear()
            self.write()

    def write(self) -> dict[str, Any]:
        """Write status.json now (atomically) and tell the listener; returns the status written."""
        with self._write_lock:  # one writer at a time, so that an older snapshot never replaces a newer one
            status = self.snapshot()
            with self.lock:
                text = json.dumps({**self.document, "status": status}, indent=1)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(text)
            os.replace(tmp, self.path)
            self._last_write = time.monotonic()
        if self._on_update is not None:
            with contextlib.suppress(Exception):  # a broken display must not stop the run
                self._on_update(status)
        return status

    def close(self) -> dict[str, Any]:
        """Stop the writer thread and write the final state."""
        self._closed = True
        self._dirty.set()
        self._writer.join(timeout=5)
        return self.write()
