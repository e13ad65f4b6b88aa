"""What running Argo's whole examples directory through the runner found, each case as small as it gets.

The upstream examples beyond `../shared/argo-examples` were run with `vcpilot lint` and `run-workflow`; each test
names the example that showed the difference and says what the runner did before.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipelines.local.engine.engine import Engine
from pipelines.local.runner import RunResult, run_workflow


def run(text: str, home: Path) -> RunResult:
    return run_workflow(yaml.safe_load(text), home=home)


def pods(result: RunResult) -> list[str]:
    """The pods' display names in the order they were created."""
    return [n["displayName"] for n in result.status["nodes"].values() if n["type"] == "Pod"]


@pytest.fixture
def late_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads the engine spawns earlier start later: a scheduler's worst case, made certain."""
    spawn = Engine.spawn
    count = itertools.count()

    def delayed(self: Engine, fn: Callable[[], Any]) -> Future[Any]:
        delay = max(0.0, 0.4 - 0.05 * next(count))

        def late() -> Any:
            time.sleep(delay)
            return fn()

        return spawn(self, late)

    monkeypatch.setattr(Engine, "spawn", delayed)


SEQUENTIAL_STEPS = """
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: seq}
spec:
  entrypoint: main
  templates:
  - name: main
    parallelism: 1
    failFast: true
    steps:
    - - name: unit
        template: exit
        arguments: {parameters: [{name: code, value: "{{item}}"}]}
        withItems: ["0", "0", "0", "1", "0", "0"]
  - name: exit
    inputs: {parameters: [{name: code}]}
    container: {image: alpine, command: [sh, -c, "exit {{inputs.parameters.code}}"]}
"""


def test_parallelism_runs_a_loops_steps_in_order_and_failfast_stops_after_the_failure(
    tmp_path: Path, late_first: None
) -> None:
    # loops-arbitrary-sequential-steps: items took the step's slot in the order their threads reached it, so under
    # load items 1 and 2 sometimes never ran and item 4 or 5 did (Argo starts them in order, stopping after item 3)
    result = run(SEQUENTIAL_STEPS, tmp_path)
    assert result.phase == "Failed"
    assert pods(result) == ["unit(0:0)", "unit(1:0)", "unit(2:0)", "unit(3:1)"]


SEQUENTIAL_DAG = """
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: seq}
spec:
  entrypoint: main
  templates:
  - name: main
    parallelism: 1
    dag:
      tasks:
      - {name: t, template: echo, withItems: [a, b, c, d, e]}
  - name: echo
    container: {image: alpine, command: [echo, hi]}
"""


def test_parallelism_runs_a_loops_tasks_in_order(tmp_path: Path, late_first: None) -> None:
    # the same in a DAG: the items of a task that loops started in whatever order their threads came
    result = run(SEQUENTIAL_DAG, tmp_path)
    assert result.phase == "Succeeded"
    assert pods(result) == ["t(0:a)", "t(1:b)", "t(2:c)", "t(3:d)", "t(4:e)"]


def results(result: RunResult) -> dict[str, str | None]:
    return {n["displayName"]: (n.get("outputs") or {}).get("result") for n in result.status["nodes"].values()}


ECHO = """
  - name: echo
    inputs: {parameters: [{name: m}]}
    container: {image: alpine, command: [echo, "{{inputs.parameters.m}}"]}
"""


def test_a_retried_steps_id_is_its_last_attempts_and_a_pod_has_a_host_node_name(tmp_path: Path) -> None:
    # variables-showcase: {{steps.prepare.hostNodeName}} (which lint accepts, as Argo's validator) failed the step
    # that named it, "which no earlier step provides"; and {{steps.a.id}} of a retried step was its Retry node's,
    # where Argo's buildLocalScope reads the last attempt (possiblyGetRetryChildNode)
    text = (
        """
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: ids}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - name: a
        template: ok
    - - name: b
        template: echo
        arguments: {parameters: [{name: m, value: "{{steps.a.id}} {{steps.a.hostNodeName}}"}]}
  - name: ok
    retryStrategy: {limit: 2}
    container: {image: alpine, command: [echo, hi]}
"""
        + ECHO
    )
    result = run(text, tmp_path)
    assert result.phase == "Succeeded"
    attempt = next(n for n in result.status["nodes"].values() if n["displayName"] == "a(0)")
    assert results(result)["b"] == f"{attempt['id']} {attempt['hostNodeName']}" and attempt["hostNodeName"]


def test_the_entrypoint_sees_steps_name_as_empty(tmp_path: Path) -> None:
    # variables-showcase: Argo runs the entrypoint as a WorkflowStep with no name, so {{steps.name}} in its body
    # is "" (executeTemplate's localParams); the runner failed the step, "which no earlier step provides"
    text = (
        """
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: sn}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - name: a
        template: echo
        arguments: {parameters: [{name: m, value: "step=[{{steps.name}}]"}]}
"""
        + ECHO
    )
    result = run(text, tmp_path)
    assert result.phase == "Succeeded" and results(result)["a"] == "step=[]"


def test_pod_name_in_a_templates_body_has_its_hash(tmp_path: Path) -> None:
    # variables-showcase: {{pod.name}} in a script was `pn-prepare-`, the pod's node not made yet when it was read
    text = """
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: pn}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - name: prepare
        template: prepare
  - name: prepare
    script: {image: alpine, command: [sh], source: "echo {{pod.name}}"}
"""
    result = run(text, tmp_path)
    node = next(n for n in result.status["nodes"].values() if n["displayName"] == "prepare")
    assert results(result)["prepare"] == f"pn-prepare-{node['id'].rsplit('-', 1)[1]}"


def test_a_raw_input_artifact_of_a_steps_template_passes_on(tmp_path: Path) -> None:
    # variables-showcase: `from: "{{inputs.artifacts.seed}}"` of a raw workflow argument errred the step, "which is
    # not an artifact"; Argo's scope holds the raw artifact and the step reads its data
    text = """
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: raw}
spec:
  entrypoint: main
  arguments:
    artifacts: [{name: seed, raw: {data: seed-content}}]
  templates:
  - name: main
    inputs: {artifacts: [{name: seed}]}
    steps:
    - - name: cat
        template: cat
        arguments: {artifacts: [{name: in, from: "{{inputs.artifacts.seed}}"}]}
  - name: cat
    inputs: {artifacts: [{name: in, path: /tmp/in.txt}]}
    container: {image: alpine, command: [cat, /tmp/in.txt]}
"""
    result = run(text, tmp_path)
    assert result.phase == "Succeeded" and results(result)["cat"] == "seed-content"


def test_a_value_that_holds_braces_is_not_read_again(tmp_path: Path) -> None:
    # variables-showcase's exit handler: {{workflow.failures}} held a failed step's message with
    # `{{steps.NAME.outputs.artifacts.NAME}}` in it, and the step that took it errred, "refers to {{steps.NAME…}}"
    text = (
        """
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: br}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - name: a
        template: braces
    - - name: b
        template: echo
        arguments: {parameters: [{name: m, value: "{{steps.a.outputs.result}}"}]}
  - name: braces
    container: {image: alpine, command: [sh, -c, "printf '%s%s' '{' '{steps.ghost.id}}'"]}
"""
        + ECHO
    )
    result = run(text, tmp_path)
    assert result.phase == "Succeeded" and results(result)["b"] == "{{steps.ghost.id}}"
