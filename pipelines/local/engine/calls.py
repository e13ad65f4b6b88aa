"""What one template invocation is made of: the call (its node, where it hangs, its arguments) and its template.

Shared by the engine and the DAG, steps and retry runners.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pipelines.local.engine.status import Inputs, NodeFlag

__all__ = ["Call", "Prepared", "exit_hook"]


@dataclass(frozen=True)
class Call:
    """One invocation of a template: the node it makes, where it hangs, and what it is given."""

    name: str
    ref: Mapping[str, Any]  # the step, task or hook naming the template (`template` or `inline`)
    arguments: Mapping[str, Any] = field(default_factory=dict)
    boundary_id: str | None = None
    parents: tuple[str, ...] = ()
    on_exit: bool = False  # part of an exit handler: not stopped by the workflow deadline
    hooked: bool = False
    retried: bool = False
    # tasks.name / steps.name. Argo runs the entrypoint, spec.onExit and exit hooks as a WorkflowStep with no name,
    # so their template's body sees `steps.name` as "" (executeTemplate's localParams).
    locals: Mapping[str, str] = field(default_factory=lambda: {"steps.name": ""})
    depth: int = 1  # templates nested to get here, this one counted: Argo's stack depth (`MAX_STACK_DEPTH`)

    @property
    def flag(self) -> NodeFlag | None:
        """The node flag Argo records for hooks and retry attempts."""
        if not (self.hooked or self.retried):
            return None
        return NodeFlag(hooked=self.hooked or None, retried=self.retried or None)


@dataclass
class Prepared:
    """A template with its inputs bound and every resolvable `{{...}}` replaced."""

    template: dict[str, Any]
    inputs: Inputs | None
    scope: dict[str, Any]  # what the template's body saw: globals, locals, inputs

    @property
    def name(self) -> str | None:
        """The template's name."""
        return self.template.get("name") or None


def exit_hook(holder: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The exit hook of a step or task: `hooks.exit`, else the older `onExit`."""
    hook = (holder.get("hooks") or {}).get("exit")
    if isinstance(hook, Mapping):
        return hook
    if holder.get("onExit"):
        return {"template": holder["onExit"]}
    return None
