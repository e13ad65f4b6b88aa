"""`python -m pipelines.guard`: ends a heavy step's Volcano job when its Argo workflow has ended or been stopped.

Argo runs the exit handler (which deletes the workflow's VCJobs) for `argo stop` but not for `argo terminate`,
and never deletes what a resource template created: a terminated workflow's training would hold its GPUs until
someone deleted the workflow. So every pod of a heavy step carries this as a native sidecar (an init container
with restartPolicy Always, which Kubernetes ends with the pod's main container): it polls the workflow, and once
the workflow has ended, is shutting down or is gone, it marks the workflow's MLflow run KILLED and deletes its own
VCJob and the workflow's others (Volcano then removes their pods and PodGroups). An API error is never taken for
an ended workflow.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

from components.tracking.adapter import (
    WORKFLOW_TAG,
    TrackingUnavailable,
    client,
    configured_uri,
    experiment_name,
    tracking_errors,
)
from pipelines.vcjobs import WORKFLOW_LABEL

__all__ = ["ENDED", "main", "should_end"]

ENDED = {"Succeeded", "Failed", "Error"}
POLL_S = 5.0


def should_end(workflow: dict[str, Any] | None) -> str:
    """Why the job must end ("" while its workflow runs): `workflow` is None when it no longer exists."""
    if workflow is None:
        return "its workflow was deleted"
    shutdown = workflow.get("spec", {}).get("shutdown")
    if shutdown:
        return f"its workflow is being shut down ({shutdown})"
    phase = workflow.get("status", {}).get("phase")
    return f"its workflow ended {phase}" if phase in ENDED else ""


def _close_mlflow(workflow: str) -> None:
    """Mark the workflow's parent run KILLED if it is still running (the exit handler may never run)."""
    uri = configured_uri()
    if not uri:
        return
    try:
        mlflow = client(uri)
        with tracking_errors(uri, f"end the run of {workflow}"):
            experiment = mlflow.get_experiment_by_name(experiment_name())
            if experiment is None:
                return
            for run in mlflow.search_runs([experiment.experiment_id], f"tags.`{WORKFLOW_TAG}` = '{workflow}'"):
                if run.info.status == "RUNNING":
                    mlflow.set_terminated(run.info.run_id, status="KILLED")
    except TrackingUnavailable as err:  # MLflow down must not keep the job alive: say so, go on deleting
        print(f"guard: could not end the MLflow run of {workflow}: {err.reason}", file=sys.stderr)


def main() -> int:
    """Poll the workflow until the job must end, then end it; exit 1 only when the job could not be deleted."""
    from components.volcano.cluster import ClusterError
    from components.volcano.k8s_api import BATCH, Api

    # Kubernetes stops a sidecar with SIGTERM once the main container has ended; as PID 1, without a handler, the
    # process would ignore it and be killed 30 s later, holding the pod (and its gang) that long.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    workflow, job = os.environ["VCPILOT_WORKFLOW"], os.environ["VCPILOT_JOB"]
    namespace = os.environ["VCPILOT_NAMESPACE"]
    api = Api(in_cluster=True, attempts=1)  # the poll is the retry
    custom = api.custom
    read = (custom.get_namespaced_custom_object, "argoproj.io", "v1alpha1", namespace, "workflows", workflow)
    while True:
        try:  # None: the workflow is gone; {}: unknown, try again
            found: dict[str, Any] | None = api.call(f"read workflow {workflow}", *read, absent_ok=True)
        except ClusterError:
            found = {}
        except Exception:  # noqa: BLE001 — the API server unreachable for a while: try again
            found = {}
        reason = should_end(found) if found != {} else ""
        if reason:
            break
        time.sleep(POLL_S)
    if reason != "its workflow ended Succeeded":
        _close_mlflow(workflow)
    # Its own job, and the Completed ones of the workflow's earlier steps, which no exit handler will delete now.
    listing = (custom.list_namespaced_custom_object, *BATCH, namespace, "jobs")
    items = api.items(f"list workflow {workflow}'s VCJobs", *listing, label_selector=f"{WORKFLOW_LABEL}={workflow}")
    names = {job, *(str(j["metadata"]["name"]) for j in items)}
    remove = (custom.delete_namespaced_custom_object, *BATCH, namespace, "jobs")
    failed = 0
    for name in sorted(names):
        print(f"guard: deleting VCJob {name}: {reason}", flush=True)
        try:
            api.call(f"delete VCJob {name}", *remove, name, absent_ok=True)
        except ClusterError as err:
            print(f"guard: {err}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
