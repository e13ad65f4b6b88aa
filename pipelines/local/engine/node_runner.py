"""What the DAG, steps and retry walkers may ask of the engine: the protocol that spares them importing it.

`engine.py` imports the walkers to dispatch on a template's kind; they are handed the engine as a `NodeRunner`,
so no walker imports `engine.py` and the engine package has no import cycle (`make lint` checks it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any, Protocol

from pipelines.local.engine.calls import Call, Prepared
from pipelines.local.engine.status import NodeStatus, Outputs, RunState
from pipelines.local.workflow import Workflow

__all__ = ["NodeRunner"]


class NodeRunner(Protocol):
    """What a DAG, steps or retry walker may ask of the engine that runs the workflow.

    `execute` runs a call to its node (or returns the node when a resumed run already has it), `run_template`
    does so without the retry wrapper; both block until the node is done. `spawn` runs a child in a thread of
    its own. `cancel` is set once the workflow's deadline has passed; `never` is the event exit handlers wait
    on instead (set only when the run is stopped); `stopped` is set when the run is stopped (Ctrl-C).
    """

    @property
    def wf(self) -> Workflow:
        """The workflow being run."""
        ...

    @property
    def state(self) -> RunState:
        """The run's nodes, shared with every walker."""
        ...

    @property
    def cancel(self) -> threading.Event:
        """Set when the workflow's activeDeadlineSeconds has passed."""
        ...

    @property
    def never(self) -> threading.Event:
        """The cancel event of exit-handler nodes."""
        ...

    @property
    def stopped(self) -> threading.Event:
        """Set when the run is stopped as `argo terminate` stops a workflow: nothing more starts."""
        ...

    def execute(self, call: Call) -> NodeStatus:
        """Run the template a call names, or return its node when it already ran."""
        ...

    def run_template(self, call: Call, prepared: Prepared) -> NodeStatus:
        """Run a prepared template by its kind, without the retry wrapper."""
        ...

    def spawn(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run `fn` in a new thread."""
        ...

    def globals(self) -> dict[str, Any]:
        """The workflow-wide variables as of now."""
        ...

    def publish(self, outputs: Outputs | None) -> None:
        """Make the parameters with a `globalName` workflow outputs."""
        ...

    def pod_name(self, node_name: str, template_name: str | None) -> str:
        """Argo's pod name for a node."""
        ...

    def run_exit_hook(
        self,
        holder: Mapping[str, Any],
        node: NodeStatus,
        boundary_id: str,
        scope: Mapping[str, Any],
        prefix: str,
        name: str,
        depth: int = 1,
    ) -> NodeStatus | None:
        """Run a step's or task's exit hook once its node completed."""
        ...
