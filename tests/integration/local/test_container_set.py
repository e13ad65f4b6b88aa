"""containerSet templates as Argo v4.1.2 runs them: one pod, its containers as a graph, one shared directory."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from pipelines.local.runner import run_workflow
from pipelines.local.workflow import WorkflowError

pytestmark = pytest.mark.integration


def sh(name: str, script: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "alpine", "command": ["sh", "-c", script], **extra}


def workflow(container_set: dict[str, Any], **template: Any) -> dict[str, Any]:
    main = {"name": "main", "containerSet": container_set, **template}
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"generateName": "cs-"},
        "spec": {"entrypoint": "main", "templates": [main]},
    }


def nodes(result: Any) -> dict[str, dict[str, Any]]:
    return {n["displayName"]: n for n in result.status["nodes"].values()}


def test_the_documented_example_shares_its_workspace_and_outputs_from_it(tmp_path: Path) -> None:
    """docs/container-set-template.md's first example: a and b, then main, append to /workspace/message."""
    shared = {
        "volumeMounts": [{"mountPath": "/workspace", "name": "workspace"}],
        "containers": [
            sh("a", "echo 'a: hello world' >> /workspace/message"),
            sh("b", "echo 'b: hello world' >> /workspace/message"),
            sh("main", "echo 'main: hello world' >> /workspace/message", dependencies=["a", "b"]),
        ],
    }
    outputs = {"parameters": [{"name": "message", "valueFrom": {"path": "/workspace/message"}}]}
    wf = workflow(shared, volumes=[{"name": "workspace", "emptyDir": {}}], outputs=outputs)
    result = run_workflow(wf, home=tmp_path / "home")
    assert result.phase == "Succeeded"
    found = nodes(result)
    pod = found[result.name]
    assert pod["type"] == "Pod" and pod["outputs"]["exitCode"] == "0"
    lines = pod["outputs"]["parameters"][0]["value"].splitlines()
    assert sorted(lines[:2]) == ["a: hello world", "b: hello world"] and lines[2] == "main: hello world"
    assert {k: (v["type"], v["phase"]) for k, v in found.items() if k != result.name} == {
        "a": ("Container", "Succeeded"), "b": ("Container", "Succeeded"), "main": ("Container", "Succeeded")
    }  # fmt: skip
    # the graph: a and b under the pod, main under each of them (Argo's executeContainerSet)
    by_id = {n["id"]: n["displayName"] for n in result.status["nodes"].values()}
    assert sorted(by_id[c] for c in pod["children"]) == ["a", "b"]
    assert [by_id[c] for c in found["a"]["children"]] == ["main"] == [by_id[c] for c in found["b"]["children"]]
    assert not Path("/workspace/message").exists()  # the pod's own volume, not this machine's /workspace


def test_a_sequence_runs_in_order_and_main_gives_the_result(tmp_path: Path) -> None:
    chain = {
        "containers": [
            sh("c", "cat /tmp/order; echo c >> /tmp/order", dependencies=["b"]),
            sh("a", "sleep 0.3; echo a >> /tmp/order"),
            sh("b", "echo b >> /tmp/order", dependencies=["a"]),
            sh("main", "cat /tmp/order", dependencies=["c"]),
        ]
    }
    result = run_workflow(workflow(chain), home=tmp_path / "home")
    assert result.phase == "Succeeded"
    assert nodes(result)[result.name]["outputs"]["result"] == "a\nb\nc"  # main's stdout only


def test_the_first_failure_fails_the_pod_and_stops_the_rest(tmp_path: Path) -> None:
    failing = {
        "containers": [
            sh("slow", "sleep 30"),
            sh("a", "sleep 0.2; exit 3"),
            sh("after", "echo never", dependencies=["a"]),
        ]
    }
    start = time.monotonic()
    result = run_workflow(workflow(failing), home=tmp_path / "home")
    assert time.monotonic() - start < 20  # slow was killed with the pod
    found = nodes(result)
    assert result.phase == "Failed" and found[result.name]["message"] == "a: Error (exit code 3)"
    assert (found["a"]["phase"], found["a"]["message"]) == ("Failed", "a: Error (exit code 3)")
    assert found["after"]["phase"] == "Error"
    assert found["after"]["message"] == "after: Error (exit code 64): dependency 'a' exited with non-zero code: 3"
    assert (found["slow"]["phase"], found["slow"]["message"]) == ("Failed", "Pod Failed whilst container running")


def test_the_inner_retry_strategy_reruns_a_failing_container(tmp_path: Path) -> None:
    flaky = sh("main", "echo x >> {{workflow.parameters.path}}; [ $(wc -l < {{workflow.parameters.path}}) -ge 3 ]")
    wf = workflow({"retryStrategy": {"retries": "4", "duration": "0.1s"}, "containers": [flaky]})
    wf["spec"]["arguments"] = {"parameters": [{"name": "path", "value": str(tmp_path / "count")}]}
    result = run_workflow(wf, home=tmp_path / "home")
    assert result.phase == "Succeeded" and len((tmp_path / "count").read_text().split()) == 3
    wf["metadata"] = {"name": "few"}
    wf["spec"]["templates"][0]["containerSet"]["retryStrategy"]["retries"] = 1  # one attempt in all
    (tmp_path / "count").unlink()
    assert run_workflow(wf, home=tmp_path / "home").phase == "Failed"


@pytest.mark.parametrize(
    ("container_set", "says"),
    [
        ({"containers": []}, "containerSet needs containers: a list of at least one container"),
        ({"containers": [sh("a", "true"), sh("a", "true")]}, "containers"),
        ({"containers": [sh("a_b", "true")]}, "container name 'a_b' is not a name"),
        ({"containers": [sh("a", "true", dependencies=["z"])]}, "container 'a' depends on 'z', not defined"),
        (
            {"containers": [sh("a", "true", dependencies=["b"]), sh("b", "true", dependencies=["a"])]},
            "dependency cycle: a -> b -> a",
        ),
        ({"containers": [{"name": "a", "image": "argoproj/argosay:v2"}]}, "container 'a' has no command"),
        ({"retryStrategy": {"retries": "abc"}, "containers": [sh("a", "true")]}, "retries 'abc' is not a whole"),
        ({"retryStrategy": {}, "containers": [sh("a", "true")]}, "retries None is not a whole number"),
        (
            {"retryStrategy": {"retries": 2, "duration": "5x"}, "containers": [sh("a", "true")]},
            "containerSet.retryStrategy.duration",
        ),
        (
            {
                "volumeMounts": [{"name": "w", "mountPath": "/w"}, {"name": "v", "mountPath": "/w"}],
                "containers": [sh("a", "true")],
            },  # fmt: skip
            "mounts the same mountPath twice",
        ),
    ],
)
def test_a_container_set_argo_refuses_is_refused_before_anything_runs(
    tmp_path: Path, container_set: dict[str, Any], says: str
) -> None:
    with pytest.raises(WorkflowError, match=says):
        run_workflow(workflow(container_set), home=tmp_path / "home")
    assert not (tmp_path / "home" / "runs").exists() or not any((tmp_path / "home" / "runs").iterdir())
