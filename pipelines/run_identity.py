"""Who a workflow run is, as its MLflow parent run records it: uid, namespace, Argo UI link, trigger, version, image.

Argo tells a step its workflow's name, uid and namespace (`{{workflow.uid}}`, …) and its labels
(`{{workflow.labels.json}}`); the trigger is read from the labels, which say how the run started:

| trigger | the workflow's labels |
|---|---|
| `cron` | `workflows.argoproj.io/cron-workflow`, which Argo's cron controller puts on every workflow it starts |
| `local` | `vcpilot.io/trigger: local`, which the local runner puts on its workflows |
| `cli`, `ui`, … | `vcpilot.io/trigger`, when whoever submits says so (`vcpilot submit` says `cli`) |
| `submitted` | none of these: the Argo Server labels a run from its UI as one from `argo submit` (`creator`) |
"""

from __future__ import annotations

import json

from components.tracking.workflow_run import WorkflowRun
from pipelines.local import CRON_LABEL, TRIGGER_LABEL

__all__ = ["CRON_LABEL", "TRIGGER_LABEL", "argo_link", "trigger_of", "workflow_run_of"]


def trigger_of(labels: dict[str, str]) -> str:
    """How the run started, from its labels (see the table above)."""
    if labels.get(TRIGGER_LABEL):
        return labels[TRIGGER_LABEL]
    if labels.get(CRON_LABEL):
        return "cron"
    return "submitted"


def argo_link(base_url: str, namespace: str, name: str) -> str:
    """The workflow in the Argo UI (`<base>/workflows/<namespace>/<name>`); "" when no UI is configured."""
    return f"{base_url.rstrip('/')}/workflows/{namespace}/{name}" if base_url else ""


def workflow_run_of(
    *,
    name: str,
    uid: str = "",
    namespace: str,
    labels_json: str = "{}",
    argo_ui_url: str = "",
    template_version: str = "",
    image: str,
) -> WorkflowRun:
    """The WorkflowRun of what a step's inputs say; labels that are not a JSON object count as none.

    What is not given is what a step hears of a run that Argo did not label, with no UI configured.
    """
    try:
        labels = json.loads(labels_json or "{}")
    except ValueError:
        labels = {}
    if not isinstance(labels, dict):
        labels = {}
    return WorkflowRun(
        name=name,
        uid=uid,
        namespace=namespace,
        argo_url=argo_link(argo_ui_url, namespace, name),
        trigger=trigger_of({str(k): str(v) for k, v in labels.items()}),
        template_version=template_version,
        image=image,
    )
