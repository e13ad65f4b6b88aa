"""Who a workflow run is (`WorkflowRun`): what its parent MLflow run records and what carries it to a step's pod.

Apart from the parent run's MLflow calls (components.tracking.runs), so that rendering a step's VCJob for a run
(`vcpilot plan`) imports no tracking client.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from components.tracking.adapter import (
    ARGO_URL_ENV,
    ARGO_URL_TAG,
    IMAGE_ENV,
    IMAGE_TAG,
    NAMESPACE_ENV,
    NAMESPACE_TAG,
    TEMPLATE_VERSION_ENV,
    TEMPLATE_VERSION_TAG,
    TRIGGER_ENV,
    TRIGGER_TAG,
    WORKFLOW_ENV,
    WORKFLOW_TAG,
    WORKFLOW_UID_ENV,
    WORKFLOW_UID_TAG,
)

__all__ = ["WorkflowRun"]

# Which field of a WorkflowRun travels in which environment variable and lands in which tag of the parent.
_FIELDS = {
    "name": (WORKFLOW_ENV, WORKFLOW_TAG),
    "uid": (WORKFLOW_UID_ENV, WORKFLOW_UID_TAG),
    "namespace": (NAMESPACE_ENV, NAMESPACE_TAG),
    "argo_url": (ARGO_URL_ENV, ARGO_URL_TAG),
    "trigger": (TRIGGER_ENV, TRIGGER_TAG),
    "template_version": (TEMPLATE_VERSION_ENV, TEMPLATE_VERSION_TAG),
    "image": (IMAGE_ENV, IMAGE_TAG),
}


class WorkflowRun(BaseModel):
    """The workflow run a parent MLflow run records: who it is, where to see it, how it started, what it ran."""

    model_config = ConfigDict(frozen=True)

    name: str
    uid: str = ""
    namespace: str = ""
    argo_url: str = ""  # the workflow in the Argo UI; empty when no UI is configured (locally)
    trigger: str = ""  # cron, ui, cli, submitted, local
    template_version: str = ""
    image: str = ""

    @property
    def key(self) -> str:
        """The parent run's key: the uid; the name for a caller that knows no uid."""
        return self.uid or self.name

    def step_key(self, step: str, attempt: int | str = 1) -> str:
        """The key of a step's (or a training attempt's) run: `<uid>/<step>/<attempt>`."""
        return f"{self.key}/{step}/{attempt}"

    def tags(self) -> dict[str, str]:
        """The parent's tags; an unknown field (no uid, no Argo UI) is left out, not written empty."""
        return {tag: str(getattr(self, field)) for field, (_, tag) in _FIELDS.items() if getattr(self, field)}

    def env(self) -> dict[str, str]:
        """The environment variables that carry this run to a step's pod."""
        return {env: str(getattr(self, field)) for field, (env, _) in _FIELDS.items() if getattr(self, field)}

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> WorkflowRun | None:
        """The workflow run of a step's environment; None outside a workflow (no `VCPILOT_WORKFLOW`)."""
        if not env.get(WORKFLOW_ENV):
            return None
        return cls(**{field: env.get(name, "") for field, (name, _) in _FIELDS.items()})
