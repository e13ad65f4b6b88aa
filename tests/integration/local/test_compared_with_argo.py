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
