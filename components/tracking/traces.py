"""An MLflow trace made from a tree of spans planned beforehand, sent once however often it is sent.

A step that wants a trace (the agent's decisions, `agent.tracing`) builds its `PlannedSpan` tree when the thing
happened, with the times it happened at, and spools it (`components.tracking.recorder.Recorder.log_trace`); the
replay sends it with `send_trace`. The trace carries the key of its spool record as the tag `vcpilot.key`, and
`send_trace` first looks for a trace of the run with that key: a replay after a crash, a retry or a second sweep
finds it and sends nothing.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from components.tracking.adapter import KEY_TAG, TRACKING_URI_ENV

__all__ = ["PlannedSpan", "find_trace", "send_trace"]


class PlannedSpan(BaseModel):
    """One span of the trace to be: MLflow's fields, and its children in the order they happened."""

    model_config = ConfigDict(frozen=True)

    name: str
    span_type: str
    start_ns: int
    end_ns: int
    inputs: Any = None
    outputs: Any = None
    attributes: dict[str, Any] = Field(default_factory=dict)
    error: str = ""  # the span failed (a request that got no usable reply)
    children: list[PlannedSpan] = Field(default_factory=list)

    def walk(self) -> Iterator[PlannedSpan]:
        """The span itself, then every span under it, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()


def find_trace(mlflow_client: Any, experiment_id: str, run_id: str, key: str) -> str | None:
    """The id of the trace linked to `run_id` that carries `key`, or None."""
    for found in mlflow_client.search_traces(locations=[experiment_id], run_id=run_id):
        if found.info.tags.get(KEY_TAG) == key:
            return str(found.info.trace_id)
    return None


def send_trace(
    mlflow_client: Any, tracking_uri: str, run_id: str, root: PlannedSpan, key: str, tags: Mapping[str, str]
) -> str:
    """The trace of `root`, linked to `run_id` in its experiment and tagged `key`: found, or sent now; its id.

    The caller runs this inside `tracking_errors`; MLflow's exporter only logs its own failures, so a sent trace
    is read back to know it arrived.
    """
    import mlflow  # imported here: MLflow takes seconds to import

    experiment_id = mlflow_client.get_run(run_id).info.experiment_id
    if found := find_trace(mlflow_client, experiment_id, run_id, key):
        return found
    with _exporting_to(tracking_uri):
        top = mlflow_client.start_trace(
            root.name,
            span_type=root.span_type,
            inputs=root.inputs,
            attributes=root.attributes,
            tags={**tags, KEY_TAG: key},
            experiment_id=experiment_id,
            start_time_ns=root.start_ns,
            run_id=run_id,  # the trace's mlflow.sourceRun: the run's Traces tab lists it
        )
        trace_id: str = top.trace_id
        try:
            for child in root.children:
                _send(mlflow_client, trace_id, top.span_id, child)
        finally:  # a trace left open is never exported; end it whatever happened to its spans
            mlflow_client.end_trace(trace_id, outputs=root.outputs, end_time_ns=root.end_ns)
        mlflow.flush_trace_async_logging()
    mlflow_client.get_trace(trace_id)
    return trace_id


def _send(mlflow_client: Any, trace_id: str, parent_id: str, planned: PlannedSpan) -> None:
    span = mlflow_client.start_span(
        planned.name,
        trace_id=trace_id,
        parent_id=parent_id,
        span_type=planned.span_type,
        inputs=planned.inputs,
        attributes=planned.attributes,
        start_time_ns=planned.start_ns,
    )
    for child in planned.children:
        _send(mlflow_client, trace_id, span.span_id, child)
    mlflow_client.end_span(
        trace_id,
        span.span_id,
        outputs=planned.outputs,
        status="ERROR" if planned.error else "OK",
        end_time_ns=planned.end_ns,
    )


@contextlib.contextmanager
def _exporting_to(tracking_uri: str) -> Iterator[None]:
    """Within this block MLflow's tracer exports to `tracking_uri`, synchronously.

    The tracer sends every trace to the process's tracking URI, not to the client's, so it is pointed at this one
    for the while and set back after (the environment variable too, which MLflow rewrites). Export is made
    synchronous where the user did not choose: a step's process may exit right after its decision.
    """
    import mlflow

    async_env = "MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"
    added = async_env not in os.environ
    if added:
        os.environ[async_env] = "false"
    previous = mlflow.get_tracking_uri() if mlflow.tracking.is_tracking_uri_set() else None
    saved_env = os.environ.get(TRACKING_URI_ENV)
    moved = previous != tracking_uri
    if moved:
        mlflow.set_tracking_uri(tracking_uri)  # resets the tracer, which is made again for this URI
    try:
        yield
    finally:
        if moved:
            mlflow.set_tracking_uri(previous)  # type: ignore[arg-type]  # None: back to unset
            if saved_env is None:
                os.environ.pop(TRACKING_URI_ENV, None)
            else:
                os.environ[TRACKING_URI_ENV] = saved_env
        if added:
            os.environ.pop(async_env, None)
