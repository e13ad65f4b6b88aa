"""The record of every decision: a JSON file in the workspace (the source of truth), an MLflow child run, its trace.

`runs/<workflow>/decisions/<stage>-<attempt>.json` holds the whole `Decision` — observation, candidates, action,
rationale, policy — written atomically, so a reader never sees half of one. The diagnose records are also the
memory of the recursion: `read_history` rebuilds the earlier attempts from them, which is how a bug that fails
twice the same way is told from a first failure. `replay` decides a recorded observation again. The child run's
trace (`agent.tracing`) shows the reasoning stage by stage, made from the same record; both go through a spool, so
an MLflow outage delays them and loses nothing.
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
from agent.tracing import decision_spans
from components.files import read_text, write_text
from components.redact import redact
from components.tracking.adapter import STEP_TAG, WORKFLOW_ENV, configured_uri, experiment_name
from components.tracking.recorder import Recorder
from components.tracking.recorder import spool_dir as recorder_spool_dir
from components.tracking.replay import ReplayResult
from components.tracking.runs import WorkflowRun, start_parent
from components.tracking.spool import Spool
from components.volcano.validation import describe_validation_error

__all__ = [
    "decisions_dir",
    "record_decision",
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
    run: WorkflowRun | None = None,
    spool_dir: str | Path | None = None,
) -> Path:
    """Write `<stage>-<attempt>.json` atomically; then, when MLflow is configured, record the decision there too.

    MLflow is configured by `tracking_uri` (else MLFLOW_TRACKING_URI) and the workflow (`run`, else a run known by
    the name `workflow` alone); `experiment` defaults to MLFLOW_EXPERIMENT_NAME, then llm-autopilot. The decision
    is a child run of the workflow's run, with its trace linked to it, spooled in `spool_dir` (default: where this
    process's spools go, `components.tracking.recorder.spool_dir`) and sent at once. MLflow unreachable or failing
    costs one warning line, never the decision; what it did not take waits in the spool for the exit handler's
    sweep (or `vcpilot runs replay`). Without tracking nothing of MLflow is imported.
    """
    decision = Decision.model_validate(redact(decision.model_dump(mode="json")))  # nothing secret in a record
    target = Path(directory) / f"{decision.stage}-{decision.observation.request.attempt}.json"
    write_text(target, decision.model_dump_json(indent=2) + "\n")
    uri = configured_uri() if tracking_uri is None else tracking_uri
    if uri and (run or workflow):
        workflow_run = run or WorkflowRun(name=workflow)
        where = Path(spool_dir) if spool_dir else recorder_spool_dir({**os.environ, WORKFLOW_ENV: workflow_run.name})
        spool = Spool(where / f"decision-{target.stem}.jsonl")
        recorder = Recorder(spool, uri, flush_every_s=None)
        result = record_decision(recorder, decision, experiment_name(experiment), workflow_run)
        if result.pending:
            log.warning(
                "decision not logged to MLflow yet (%s); it is in %s, and its %d tracking records wait in %s",
                result.reason,
                target,
                result.pending,
                spool.path,
            )
    return target


def record_decision(recorder: Recorder, decision: Decision, experiment: str, run: WorkflowRun) -> ReplayResult:
    """Spool `decision` as a child run of the workflow's parent run, with its record and its trace; send it now.

    Params: stage, policy, action kind, attempt and the training shape; the rationale as a tag; the whole decision
    as the artifact `decision.json`; the trace of `agent.tracing.decision_spans`, stamped when the decision was
    recorded. The child does not carry the workflow tag, which marks the parent. A replay adds nothing twice.
    """
    action = decision.action
    attempt = decision.observation.request.attempt
    name = f"{decision.stage}-{attempt}"
    key = f"{run.key}/decision/{name}"
    tags = {STEP_TAG: decision.stage, "vcpilot.decision": action.kind, "vcpilot.rationale": action.rationale}
    if decision.fallback:
        tags["vcpilot.fallback"] = decision.fallback
    params: dict[str, Any] = {"stage": decision.stage, "policy": decision.policy, "action": action.kind}
    params["attempt"] = attempt
    for field in ("gpus", "micro_batch", "grad_accum", "queue", "from_gpus", "checkpoint", "avoid_nodes"):
        if hasattr(action, field):
            value = getattr(action, field)
            params[field] = ",".join(value) if isinstance(value, list) else value
    parent = start_parent(recorder, experiment, run)
    recorder.start_run(key, name, experiment, tags, parent=parent)
    recorder.log_params(key, {k: str(v)[:_MAX_PARAM] for k, v in params.items()})
    with tempfile.TemporaryDirectory() as tmp:
        record = Path(tmp) / "decision.json"
        record.write_text(decision.model_dump_json(indent=2))
        recorder.log_artifact(key, record)
    span_tags = {"vcpilot.stage": decision.stage, "vcpilot.decision": action.kind}
    recorder.log_trace(key, decision_spans(decision, recorder.clock()), span_tags)
    recorder.end_run(key)
    return recorder.flush(timeout_s=30.0, wait_s=5.0)


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
