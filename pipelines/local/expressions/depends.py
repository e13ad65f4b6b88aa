"""DAG `depends` logic (Argo's enhanced depends): `A && (C.Succeeded || C.Failed)`, `B || C`, `x.AnySucceeded`.

As in Argo (workflow/common/ancestry.go, workflow/controller/dag.go):
- a bare task name `A` means `(A.Succeeded || A.Skipped || A.Daemoned)`, plus `A.Errored` / `A.Failed` when
  task A declares `continueOn: {error: true}` / `{failed: true}` -- so `depends: A` also fires when A was skipped;
- old-style `dependencies: [A, B]` is the same as `depends: "A && B"`;
- the logic is evaluated with expr-lang after every `-` became `_` (so `flip-coin.Succeeded` works);
- nothing is decided until every referenced task is fulfilled (Succeeded, Failed, Error, Skipped, Omitted,
  or a started daemon).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from pipelines.local.expressions.errors import ExpressionError, quote_expression
from pipelines.local.expressions.expr.evaluator import evaluate
from pipelines.local.expressions.expr.parser import parse

__all__ = ["RESULTS", "depends_targets", "evaluate_depends", "expand_depends"]

# The results a dependency can be tested for, as `task.Result`.
RESULTS = frozenset({"Succeeded", "Failed", "Errored", "Skipped", "Omitted", "Daemoned", "AnySucceeded", "AllFailed"})
# Phases after which a node is done; "Daemoned" stands for a daemon step that has started and keeps running.
_FULFILLED = frozenset({"Succeeded", "Failed", "Error", "Errored", "Skipped", "Omitted", "Daemoned"})
# Argo's taskNameRegex: `name.Result` or a bare `name`.
_REFERENCE = re.compile(r"([a-zA-Z0-9][-a-zA-Z0-9]*?\.[A-Z][a-zA-Z]+)|([a-zA-Z0-9][-a-zA-Z0-9]*)")
_CHILD = re.compile(r"(?P<task>.+)\((?P<index>\d+)\)")


def _references(expression: str) -> list[tuple[str, str | None, int, int]]:
    """(task, result or None for a bare name, start, end) for every task reference, in order."""
    found: list[tuple[str, str | None, int, int]] = []
    for match in _REFERENCE.finditer(expression):
        if match.group(1):
            task, result = match.group(1).split(".")
            found.append((task, result, match.start(), match.end()))
        else:
            found.append((match.group(2), None, match.start(), match.end()))
    return found


def depends_targets(expression: str) -> set[str]:
    """The task names a `depends` expression refers to: `depends_targets("A && B.Failed") == {"A", "B"}`."""
    return {task for task, _, _, _ in _references(expression)}


def _expand(task: str, continue_on: Mapping[str, Any] | None) -> str:
    results = ["Succeeded", "Skipped", "Daemoned"]
    if continue_on and continue_on.get("error"):
        results.append("Errored")
    if continue_on and continue_on.get("failed"):
        results.append("Failed")
    return "(" + " || ".join(f"{task}.{result}" for result in results) + ")"


def expand_depends(expression: str, continue_on: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """The expression with every bare task name spelled out, e.g. `A` -> `(A.Succeeded || A.Skipped || A.Daemoned)`.

    `continue_on` maps a task name to its `continueOn` block (`{"failed": true}`, `{"error": true}`).
    """
    continue_on = continue_on or {}
    expanded = expression
    for task, result, start, end in reversed(_references(expression)):
        if result is None:
            expanded = expanded[:start] + _expand(task, continue_on.get(task)) + expanded[end:]
    return expanded


@lru_cache(maxsize=1024)
def _compile(expression: str, continue_on: tuple[tuple[str, bool, bool], ...]) -> Any:
    for task, result, _, _ in _references(expression):
        if result is not None and result not in RESULTS:
            raise ExpressionError(
                f"task result '{result}' for task '{task}' is invalid (use one of {', '.join(sorted(RESULTS))})"
            )
    blocks = {task: {"error": error, "failed": failed} for task, error, failed in continue_on}
    logic = expand_depends(expression, blocks).replace("-", "_")
    try:
        return parse(logic)
    except ExpressionError as error:
        raise ExpressionError(f"cannot parse it: {error}") from None


def _task_results(task: str, phase: str, statuses: Mapping[str, str]) -> dict[str, bool]:
    children = [
        child_phase
        for key, child_phase in statuses.items()
        if (match := _CHILD.fullmatch(key)) is not None and match.group("task") == task
    ]
    return {
        "Succeeded": phase == "Succeeded",
        "Failed": phase == "Failed",
        "Errored": phase in ("Error", "Errored"),
        "Skipped": phase == "Skipped",
        "Omitted": phase == "Omitted",
        "Daemoned": phase == "Daemoned",
        "AnySucceeded": any(p == "Succeeded" for p in children),
        "AllFailed": bool(children) and all(p == "Failed" for p in children),
    }


def evaluate_depends(
    expression: str,
    statuses: Mapping[str, str],
    *,
    continue_on: Mapping[str, Mapping[str, Any]] | None = None,
) -> bool | None:
    """Whether a DAG task whose `depends` is `expression` should run: True/False once decidable, else None.

    `statuses` maps task name to node phase ("Succeeded", "Failed", "Error", "Skipped", "Omitted", "Running",
    "Pending"); pass "Daemoned" for a daemon task that has started.  A task missing from `statuses` has not
    run yet.  For a task expanded with withItems/withParam, pass the group's phase under its name and each
    child's phase under "<task>(0)", "<task>(1)", ... -- `AnySucceeded` and `AllFailed` read those.
    `continue_on` maps task names to their `continueOn` block, which widens what a bare name accepts.
    """
    blocks = continue_on or {}
    key = tuple(sorted((task, bool(block.get("error")), bool(block.get("failed"))) for task, block in blocks.items()))
    try:
        tree = _compile(expression, key)
    except ExpressionError as error:
        raise ExpressionError(f"depends {quote_expression(expression)} is invalid: {error}") from None
    env: dict[str, Any] = {}
    for task in depends_targets(expression):
        phase = statuses.get(task)
        if phase not in _FULFILLED:
            return None
        env[task.replace("-", "_")] = _task_results(task, phase, statuses)
    try:
        result = evaluate(tree, env)
    except ExpressionError as error:
        raise ExpressionError(f"depends {quote_expression(expression)} cannot be evaluated: {error}") from None
    if not isinstance(result, bool):
        raise ExpressionError(f"depends {quote_expression(expression)} does not evaluate to a boolean")
    return result
