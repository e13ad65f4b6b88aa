"""Retried templates as Argo's processNodeRetries runs them: limit, retryPolicy, expression and backoff.

A Retry node holds one child per attempt, `<name>(0)`, `<name>(1)`, ...; each attempt substitutes `{{retries}}`
and `{{lastRetry.*}}`. Checks come in Argo's order: the workflow deadline, backoff.maxDuration, the policy
(OnFailure by default, Always when only an expression is given), the limit (`limit: N` allows N+1 attempts),
then the expression. Backoff sleeps for real: `duration * factor^(attempt-1)`, capped by `cap`.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pipelines.local.engine.calls import Call, Prepared
from pipelines.local.engine.executors import STOPPED_MESSAGE
from pipelines.local.engine.node_runner import NodeRunner
from pipelines.local.engine.scope import substitute_tree
from pipelines.local.engine.status import NodeStatus, parse_rfc3339
from pipelines.local.expressions import evaluate_expr
from pipelines.local.govalues import format_float_g
from pipelines.local.workflow import WorkflowError, parse_duration

__all__ = ["run_retries"]

_LONGEST_WAIT_S = (2**63 - 1) / 1e9  # Go's longest time.Duration, about 292 years


def run_retries(engine: NodeRunner, call: Call, prepared: Prepared) -> NodeStatus:
    """Argo's Retry node: run attempts `<name>(0)`, `<name>(1)`, ... until one succeeds or retrying stops."""
    strategy = prepared.template["retryStrategy"] or {}
    node = engine.state.by_name(call.name) or engine.state.init_node(
        call.name,
        "Retry",
        template_name=prepared.name,
        boundary_id=call.boundary_id,
        phase="Running",
        parents=call.parents,
        inputs=prepared.inputs,
        flag=call.flag,
    )
    ended: dict[str, float] = {}  # precise end times of this run's attempts (status keeps seconds)
    while True:
        attempts = [n for c in node.children or [] if (n := engine.state.get(c)) is not None and n.retried]
        last = attempts[-1] if attempts else None
        if last is not None and not last.fulfilled:
            index = len(attempts) - 1
        elif last is not None:
            if not last.failed_or_error:
                engine.state.mark(node, "Succeeded", "", last.outputs)
                return node
            give_up, wait = _retry_verdict(engine, strategy, attempts, last, call, ended.get(last.id))
            if give_up is not None:
                engine.state.mark(node, last.phase, give_up, last.outputs)
                return node
            if wait > 0:
                engine.state.update(node, message=f"Backoff for {_humanize(wait)}")
                cancel = engine.never if call.on_exit else engine.cancel
                if cancel.wait(min(wait, threading.TIMEOUT_MAX)):
                    continue
                engine.state.update(node, message=None)
            index = len(attempts)
        else:
            index = 0
        attempt = replace(call, name=f"{call.name}({index})", parents=(call.name,), retried=True, hooked=False)
        done = engine.run_template(attempt, _for_attempt(engine, prepared, attempt, index, last))
        ended[done.id] = time.time()


def _for_attempt(
    engine: NodeRunner, prepared: Prepared, attempt: Call, index: int, last: NodeStatus | None
) -> Prepared:
    local = {
        "retries": str(index),
        "pod.name": engine.pod_name(attempt.name, prepared.name),
        "node.name": attempt.name,
    }
    local.update(_last_retry(last, default_exit="0"))
    body = substitute_tree(prepared.template, local, skip=("inputs",))
    return Prepared(body, prepared.inputs, {**prepared.scope, **local})


def _retry_verdict(
    engine: NodeRunner,
    strategy: Mapping[str, Any],
    attempts: list[NodeStatus],
    last: NodeStatus,
    call: Call,
    last_ended: float | None,
) -> tuple[str | None, float]:
    """(why retrying stops, or None; seconds to back off first), in Argo's order of checks."""
    if engine.stopped.is_set():
        return STOPPED_MESSAGE, 0.0
    if engine.cancel.is_set() and not call.on_exit:
        return "retry exceeded workflow deadline", 0.0
    now = time.time()
    wait = 0.0
    backoff = strategy.get("backoff") or {}
    if backoff:
        max_deadline = None
        if backoff.get("maxDuration"):
            first = parse_rfc3339(attempts[0].started_at) or now
            max_deadline = first + parse_duration(backoff["maxDuration"], "backoff.maxDuration")
            if now > max_deadline:
                return "Max duration limit exceeded", 0.0
        if not backoff.get("duration"):
            raise WorkflowError("no base duration specified for retryStrategy.")
        wait = parse_duration(backoff["duration"], "backoff.duration")
        factor = _int32(backoff.get("factor") or 0, "backoff.factor")
        if factor > 0 and wait > 0:
            try:
                wait *= math.pow(factor, len(attempts) - 1)
            except OverflowError:
                wait = math.inf
            wait = min(wait, _LONGEST_WAIT_S)  # Argo caps it so, where the multiplication would overflow
        if backoff.get("cap"):
            wait = min(wait, parse_duration(backoff["cap"], "backoff.cap"))
        finished = last_ended or parse_rfc3339(last.finished_at) or now
        if max_deadline is not None and finished + wait > max_deadline:
            return "Backoff would exceed max duration limit", 0.0
        wait = max(0.0, finished + wait - now)
    policy = strategy.get("retryPolicy") or ("OnFailure" if not strategy.get("expression") else "Always")
    retry_failed = policy in ("Always", "OnFailure")
    retry_error = policy in ("Always", "OnError")
    if policy not in ("Always", "OnFailure", "OnError", "OnTransientError"):
        raise WorkflowError(f"{policy} is not a valid RetryPolicy.")
    if (last.phase == "Failed" and not retry_failed) or (last.phase == "Error" and not retry_error):
        return last.message or "", 0.0
    limit = strategy.get("limit")
    if limit is not None and len(attempts) > _int32(limit, "retryStrategy.limit"):
        return "No more retries left", 0.0
    if strategy.get("expression"):
        scope = {"retries": str(len(attempts) - 1), **_last_retry(last, default_exit="-1")}
        if not evaluate_expr(str(strategy["expression"]), scope):
            return "retryStrategy.expression evaluated to false", 0.0
    return None, wait


def _int32(value: Any, what: str) -> int:
    """Argo's intstr.Int32: strconv.Atoi's int64, then Go's conversion to int32 (which wraps a larger one around)."""
    found = re.fullmatch(r"([+-]?)0*([0-9]{1,19})", str(value))
    number = int(found[1] + found[2]) if found else None
    if number is None or not -(2**63) <= number < 2**63:
        raise WorkflowError(f"{what} {value!r} is not an integer.")
    return (number + 2**31) % 2**32 - 2**31


def _last_retry(last: NodeStatus | None, default_exit: str) -> dict[str, str]:
    if last is None:
        return {"lastRetry.exitCode": "0", "lastRetry.status": "", "lastRetry.duration": "0", "lastRetry.message": ""}
    started, finished = parse_rfc3339(last.started_at), parse_rfc3339(last.finished_at)
    exit_code = last.outputs.exit_code if last.outputs and last.outputs.exit_code else default_exit
    return {
        "lastRetry.exitCode": exit_code,
        "lastRetry.status": last.phase,
        # Go's fmt.Sprint(d.Seconds()): "2", not Python's "2.0", which asInt refuses (upstream retry-conditional)
        "lastRetry.duration": format_float_g(float((finished or 0) - (started or 0))),
        "lastRetry.message": last.message or "",
    }


def _humanize(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    minutes = round(seconds / 60)
    return f"{minutes} minute{'s' if minutes != 1 else ''}"
