"""What the local runner does as the real workflow-controller does (tests/e2e/test_argo_examples.py compares)."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.integration


def _workflow(*templates: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"generateName": "argo-"},
        "spec": {"entrypoint": "main", "templates": list(templates), **spec},
    }


def _sh(name: str, script: str) -> dict[str, Any]:
    return {"name": name, "container": {"image": "alpine", "command": ["sh", "-c", script]}}


def test_a_failed_step_names_its_container_in_the_message(run) -> None:
    ran = run(_workflow(_sh("main", "exit 3")))
    assert ran.phase == "Failed" and ran.message("") == "main: Error (exit code 3)"


def test_workflow_failures_is_json_quoted_as_a_go_string(run) -> None:
    # Argo strconv.Quote-s the JSON, so `echo {{workflow.failures}}` in a shell prints the JSON with its quotes.
    wf = _workflow(_sh("main", "exit 1"), _sh("bye", "echo {{workflow.failures}}"), onExit="bye")
    failures = run(wf).out(".onExit") or ""
    assert failures.startswith('[{"displayName":"argo-') and failures.endswith('Z"}]')
    assert ',"message":"main: Error (exit code 1)","templateName":"main","phase":"Failed","podName":"argo-' in failures


def test_workflow_failures_without_any_is_null(run) -> None:
    wf = _workflow(_sh("main", "true"), _sh("bye", "echo {{workflow.failures}}"), onExit="bye")
    assert run(wf).out(".onExit") == "null"


def test_a_long_stdout_keeps_its_last_256_kb_as_the_result(run) -> None:
    # Argo's executor (CaptureScriptResult) drops one trailing newline, then keeps the last 256 kB.
    script = "import sys; sys.stdout.write('a' * 200000 + 'b' * 100000 + '\\n')"
    main = {"name": "main", "container": {"image": "python", "command": ["python", "-c", script]}}
    result = run(_workflow(main)).out("") or ""
    assert len(result) == 256 * 1024
    assert result == "a" * (256 * 1024 - 100000) + "b" * 100000


def test_a_dag_target_runs_only_that_task_and_what_it_depends_on(run) -> None:
    """Argo's executeDAG (workflow/controller/dag.go) executes each `dag.target` task, and executeDAGTask its
    dependencies first: tasks neither a target nor an ancestor of one get no node. The runner ran them all
    (upstream's dag-targets ran B and D too)."""

    def task(name: str, depends: str = "") -> dict[str, Any]:
        return {"name": name, "template": "echo", **({"depends": depends} if depends else {})}

    tasks = [task("A"), task("B", "A"), task("C", "A"), task("D", "B && C"), task("E", "C")]
    main = {"name": "main", "dag": {"target": "{{workflow.parameters.target}}", "tasks": tasks}}
    wf = _workflow(main, _sh("echo", "echo hi"), arguments={"parameters": [{"name": "target", "value": "E"}]})
    ran = run(wf)
    assert ran.phase == "Succeeded"
    assert sorted(ran.phases) == ["", ".A", ".C", ".E"]
    assert sorted(run(wf, {"target": "B E"}).phases) == ["", ".A", ".B", ".C", ".E"]
