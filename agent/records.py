"""The record of every decision: a JSON file in the workspace (the source of truth), an MLflow child run, its trace.

`runs/<workflow>/decisions/<stage>-<attempt>.json` holds the whole `Decision` — observation, candidates, action,
rationale, policy — written atomically, so a reader never sees half of one. The diagnose records are also the
memory of the recursion: `read_history` rebuilds the earlier attempts from them, which is how a bug that fails
twice the same way is told from a first failure. `replay` decides a recorded observation again. The child run's
trace (`agent.tracing`) shows the reasoning stage by stage, made from the same record.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent.failures import attempt_record
from agent.observation import AttemptRecord
from agent.policy import Decision, Policy
from agent.tracing import trace_decision
from components.files import read_text
from components.tracking.adapter import (
    PARENT_TAG,
    STEP_TAG,
    TAG_LIMIT,
    TrackingUnavailable,
    bounded_retries,
    client,
    configured_uri,
    experiment_name,
    tracking_errors,
)
from components.tracking.runs import workflow_run
from components.volcano.validation import describe_validation_error

__all__ = [
    "decisions_dir",
    "log_decision",
    "read_decision",
    "read_history",
    "replay",
    "write_decision",
]

_MAX_PARAM = 500

log = logging.getLogger(__name__)


def decisions_dir(workspace: str, workflow: str) -> Path:
    """Where the decisions of one workflow run are kept: `<workspace>/runs/<workflow>/decisions`."""
    return Path(workspace) / "runs" / workflow / "decisions"


def write_decision(
    decision: Decision,
    directory: str | Path,
    *,
    workflow: str = "",
    tracking_uri: str | None = None,
    experiment: str | None = None,
) -> Path:
    """Write `<stage>-<attempt>.json` atomically; then, when MLflow is configured, log the decision there too.

    MLflow is configured by `tracking_uri` (else MLFLOW_TRACKING_URI) and `workflow`; `experiment` defaults to
    MLFLOW_EXPERIMENT_NAME, then llm-autopilot. The decision is a child run of the workflow's run, and its trace
    is linked to that child. MLflow unreachable or failing (`TrackingUnavailable`) costs one warning line, never
    the decision; without tracking nothing of MLflow is imported.
    """
    target = Path(directory) / f"{decision.stage}-{decision.observation.request.attempt}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=target.parent, prefix=f".{target.name}.", delete=False) as tmp:
        tmp.write(decision.model_dump_json(indent=2) + "\n")
    os.replace(tmp.name, target)
    uri = configured_uri() if tracking_uri is None else tracking_uri
    if uri and workflow:
        try:
            with bounded_retries():
                run_id = log_decision(decision, uri, experiment_name(experiment), workflow)
        except TrackingUnavailable as err:  # the workspace record stands; MLflow is a view of it
            log.warning("decision not logged to MLflow (%s); it is in %s", err.reason, target)
            return target
        try:
            with bounded_retries():
                trace_decision(decision, uri, run_id)
        except TrackingUnavailable as err:
            log.warning("decision %s logged to MLflow without its trace (%s); it is in %s", run_id, err.reason, target)
    return target


def log_decision(decision: Decision, tracking_uri: str, experiment: str, workflow: str) -> str:
    """Log `decision` as a child run of the workflow's parent run; return the child's run id.

    Params: stage, policy, action kind, attempt and the training shape; the rationale as a tag; the whole
    decision as the artifact `decision.json`. The child does not carry the workflow tag, which marks the parent.
    TrackingUnavailable when MLflow fails.
    """
    mlflow: Any = client(tracking_uri)
    parent = workflow_run(tracking_uri, experiment, workflow)
    action = decision.action
    attempt = decision.observation.request.attempt
    tags = {
        PARENT_TAG: parent,
        STEP_TAG: decision.stage,
        "vcpilot.decision": action.kind,
        "vcpilot.rationale": action.rationale[:TAG_LIMIT],
    }
    if decision.fallback:
        tags["vcpilot.fallback"] = decision.fallback[:TAG_LIMIT]
    params = {"stage": decision.stage, "policy": decision.policy, "action": action.kind, "attempt": attempt}
    for field in ("gpus", "micro_batch", "grad_accum", "queue", "from_gpus", "checkpoint", "avoid_nodes"):
        if hasattr(action, field):
            value = getattr(action, field)
            params[field] = ",".join(value) if isinstance(value, list) else value
    with tracking_errors(tracking_uri, f"log the {decision.stage} decision"):
        from mlflow.entities import Param  # imported here: MLflow takes seconds to import

        experiment_id = mlflow.get_run(parent).info.experiment_id
        run = mlflow.create_run(experiment_id, run_name=f"{decision.stage}-{attempt}", tags=tags)
        run_id: str = run.info.run_id
        mlflow.log_batch(run_id, params=[Param(key, str(value)[:_MAX_PARAM]) for key, value in params.items()])
        mlflow.log_text(run_id, decision.model_dump_json(indent=2), "decision.json")
        mlflow.set_terminated(run_id, status="FINISHED")
    return run_id


def read_decision(path: str | Path) -> Decision:
    """A recorded decision; ValueError in one sentence when the file is missing or not a decision record."""
    file = Path(path)
    try:
        return Decision.model_validate_json(read_text(file, "decision record"))
    except ValidationError as err:
        raise ValueError(f"{file} is not a decision record: {describe_validation_error(err, Decision)}") from None


def read_history(directory: str | Path) -> list[AttemptRecord]:
    """The failed attempts of this run, oldest first, rebuilt from its diagnose records (none: an empty list)."""
    records: list[AttemptRecord] = []
    root = Path(directory)
    for path in root.glob("diagnose-*.json") if root.is_dir() else ():
        try:
            record = attempt_record(read_decision(path).observation)
        except ValueError as err:  # a damaged record loses its attempt, not the run
            log.warning("%s", err)
            continue
        if record is not None:
            records.append(record)
    return sorted(records, key=lambda r: r.attempt)


def replay(record_path: str | Path, policy: Policy) -> Decision:
    """Decide the recorded observation again with `policy` (the rules give back the recorded action)."""
    recorded = read_decision(record_path)
    return policy.decide(recorded.observation, recorded.stage)
