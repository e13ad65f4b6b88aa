"""Argo semantics beyond the upstream examples: retries, deadlines, parallelism, loops, hooks, global outputs."""

from __future__ import annotations

import signal
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from scan_kit import files_holding

from pipelines.local.engine.executors import DEADLINE_MESSAGE, ProcessTable

pytestmark = pytest.mark.integration


def workflow(templates: list[dict[str, Any]], entrypoint: str = "main", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"generateName": "t-"},
        "spec": {"entrypoint": entrypoint, "templates": templates, **spec},
    }


def with_path(wf: dict[str, Any], path: Path) -> dict[str, Any]:
    """Pass a host path as `{{workflow.parameters.path}}` (paths a template spells out under /tmp are per node)."""
    wf["spec"]["arguments"] = {"parameters": [{"name": "path", "value": str(path)}]}
    return wf


def sh(name: str, script: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "container": {"image": "alpine", "command": ["sh", "-c", script]}, **extra}


def test_retries_until_success_with_the_attempt_number(run, tmp_path: Path) -> None:
    counter = "{{workflow.parameters.path}}"
    script = f'echo x >> {counter}; echo "attempt {{{{retries}}}}"; [ $(wc -l < {counter}) -ge 3 ]'
    ran = run(with_path(workflow([sh("main", script, retryStrategy={"limit": 5})]), tmp_path / "count"))
    assert ran.phase == "Succeeded"
    assert [ran.phases[f"({i})"] for i in range(3)] == ["Failed", "Failed", "Succeeded"]
    assert ran.out("(2)") == "attempt 2" and ran.out("") == "attempt 2"
    assert ran.nodes["(1)"]["nodeFlag"] == {"retried": True}


def test_an_empty_retry_strategy_retries_until_success(run, tmp_path: Path) -> None:
    """`retryStrategy: {}` is a strategy without a limit (Argo's processNodeRetries): retry to completion."""
    counter = "{{workflow.parameters.path}}"
    script = f"echo x >> {counter}; [ $(wc -l < {counter}) -ge 4 ]"
    ran = run(with_path(workflow([sh("main", script, retryStrategy={})]), tmp_path / "count"))
    assert ran.phase == "Succeeded"
    assert [ran.phases[f"({i})"] for i in range(4)] == ["Failed", "Failed", "Failed", "Succeeded"]


def test_retry_limit_and_policy(run) -> None:
    ran = run(workflow([sh("main", "exit 3", retryStrategy={"limit": "1"})]))
    assert ran.phase == "Failed"
    assert ran.message("") == "No more retries left" and set(ran.phases) == {"", "(0)", "(1)"}
    ran = run(workflow([sh("main", "exit 3", retryStrategy={"limit": 4, "retryPolicy": "OnError"})]))
    assert set(ran.phases) == {"", "(0)"}  # a Failed attempt is not an Error
    assert ran.message("") == "main: Error (exit code 3)"


def test_retry_expression_sees_the_last_exit_code(run) -> None:
    strategy = {"limit": 5, "expression": "asInt(lastRetry.exitCode) == 2"}
    ran = run(workflow([sh("main", "exit $(( {{retries}} + 2 ))", retryStrategy=strategy)]))
    assert set(ran.phases) == {"", "(0)", "(1)"}  # exit 2 is retried, exit 3 is not
    assert ran.message("") == "retryStrategy.expression evaluated to false"


def test_workflow_deadline_stops_running_steps(run) -> None:
    start = time.monotonic()
    ran = run(workflow([sh("main", "sleep 30")], activeDeadlineSeconds=1))
    assert time.monotonic() - start < 10
    assert ran.phase == "Failed" and ran.message("") == "Step exceeded its deadline"


def test_a_step_that_starts_as_the_workflow_deadline_passes_is_killed_too() -> None:
    # On a loaded machine the deadline's kill came before `sleep 30` was tracked, which then ran its 30 s (CI,
    # 2026-12-07): a process added after the deadline is killed as it is added; an exit handler's is not.
    table = ProcessTable()
    table.expire(DEADLINE_MESSAGE)
    step, handler = (subprocess.Popen(["sleep", "30"], start_new_session=True) for _ in range(2))
    try:
        assert table.add(step, exempt=False).reason == DEADLINE_MESSAGE
        assert step.wait(timeout=10) == -signal.SIGKILL
        assert table.add(handler, exempt=True).reason is None and handler.poll() is None
    finally:
        handler.kill()
        handler.wait()


def test_template_deadline_kills_the_pod(run) -> None:
    ran = run(workflow([sh("main", "sleep 30", activeDeadlineSeconds=1)]))
    assert ran.phase == "Failed"
    assert ran.message("") == "Pod was active on the node longer than the specified deadline"


def test_workflow_parallelism_serializes_pods(run, tmp_path: Path) -> None:
    log = tmp_path / "log"
    leaf = sh("leaf", "echo start >> {{workflow.parameters.path}}; sleep 0.3; echo end >> {{workflow.parameters.path}}")
    dag = {"name": "main", "dag": {"tasks": [{"name": f"t{i}", "template": "leaf"} for i in range(3)]}}
    assert run(with_path(workflow([dag, leaf], parallelism=1), log)).phase == "Succeeded"
    assert log.read_text().split() == ["start", "end"] * 3


def test_template_parallelism_limits_a_loop(run, tmp_path: Path) -> None:
    log = tmp_path / "log"
    leaf = sh("leaf", "echo start >> {{workflow.parameters.path}}; sleep 0.3; echo end >> {{workflow.parameters.path}}")
    loop = {"name": "main", "parallelism": 1, "steps": [[{"name": "x", "template": "leaf", "withItems": [1, 2, 3]}]]}
    assert run(with_path(workflow([loop, leaf]), log)).phase == "Succeeded"
    assert log.read_text().split() == ["start", "end"] * 3


def test_suspend_with_a_duration_ends_by_itself(run) -> None:
    start = time.monotonic()
    ran = run(workflow([{"name": "main", "suspend": {"duration": "1s"}}]))
    assert ran.phase == "Succeeded" and ran.nodes[""]["type"] == "Suspend"
    assert time.monotonic() - start >= 1


def test_a_timed_out_suspend_with_an_unset_supplied_output_errors(run) -> None:
    """Argo's executeSuspend: OverrideOutputParametersWithDefault fails when the time runs out."""
    outputs = {"parameters": [{"name": "answer", "valueFrom": {"supplied": {}}}]}
    ran = run(workflow([{"name": "main", "suspend": {"duration": "0"}, "outputs": outputs}]))
    assert ran.phase == "Error"
    assert ran.message("") == "raw output parameter 'answer' has not been set and does not have a default value"
    # A default of the output, or of the input parameter of the same name (addRawOutputFields), fills it.
    inputs = {"parameters": [{"name": "answer", "default": "from-input"}]}
    ran = run(workflow([{"name": "main", "suspend": {"duration": "0"}, "outputs": outputs, "inputs": inputs}]))
    assert ran.phase == "Succeeded" and ran.param("", "answer") == "from-input"


def test_with_sequence_and_item_maps(run) -> None:
    leaf = {
        "name": "leaf",
        "inputs": {"parameters": [{"name": "v"}]},
        "container": {"image": "x", "command": ["echo", "{{inputs.parameters.v}}"]},
    }
    steps = [
        [{"name": "seq", "template": "leaf", "withSequence": {"count": "2", "format": "n%02d"}, **_arg("{{item}}")}],
        [{"name": "map", "template": "leaf", "withItems": [{"os": "linux", "v": 1}], **_arg("{{item.os}}-{{item.v}}")}],
    ]
    ran = run(workflow([{"name": "main", "steps": steps}, leaf]))
    assert ran.phase == "Succeeded"
    assert [ran.out("[0].seq(0:n00)"), ran.out("[0].seq(1:n01)")] == ["n00", "n01"]  # start defaults to 0
    assert ran.out("[1].map(0:os:linux,v:1)") == "linux-1"


def _arg(value: str) -> dict[str, Any]:
    return {"arguments": {"parameters": [{"name": "v", "value": value}]}}


def test_an_input_outside_its_templates_enum_still_runs_as_on_argo(run) -> None:
    # Argo's controller never checks a template input's enum (only its validator an argument's own enum): the
    # runner errored the step with "not one of" before
    leaf = {
        "name": "leaf",
        "inputs": {"parameters": [{"name": "v", "enum": ["red", "blue"]}]},
        "container": {"image": "x", "command": ["echo", "{{inputs.parameters.v}}"]},
    }
    ran = run(workflow([{"name": "main", "steps": [[{"name": "a", "template": "leaf", **_arg("purple")}]]}, leaf]))
    assert ran.phase == "Succeeded" and ran.out("[0].a") == "purple"
    assert ran.nodes["[0].a"]["inputs"]["parameters"][0]["enum"] == ["red", "blue"]


def test_global_outputs_and_exit_code(run) -> None:
    producer = {
        "name": "produce",
        "container": {"image": "x", "command": ["sh", "-c", "echo -n 42 > /tmp/v"]},
        "outputs": {"parameters": [{"name": "v", "globalName": "answer", "valueFrom": {"path": "/tmp/v"}}]},
    }
    consumer = sh("consume", "echo {{workflow.outputs.parameters.answer}}; exit 0")
    steps = {"name": "main", "steps": [[{"name": "p", "template": "produce"}], [{"name": "c", "template": "consume"}]]}
    ran = run(workflow([steps, producer, consumer]))
    assert ran.phase == "Succeeded"
    assert ran.out("[1].c") == "42"
    assert ran.result.status["outputs"]["parameters"] == [{"name": "answer", "value": "42"}]
    assert ran.nodes["[1].c"]["outputs"]["exitCode"] == "0"


def test_dag_task_exit_hook_and_continue_on(run) -> None:
    hook = {
        "name": "hook",
        "inputs": {"parameters": [{"name": "s"}]},
        "container": {"image": "x", "command": ["echo", "A was {{inputs.parameters.s}}"]},
    }
    tasks = [
        {
            "name": "A",
            "template": "fail",
            "continueOn": {"failed": True},
            "hooks": {
                "exit": {
                    "template": "hook",
                    "arguments": {"parameters": [{"name": "s", "value": "{{tasks.A.status}}"}]},
                }
            },
        },
        {"name": "B", "template": "ok", "depends": "A"},
    ]
    ran = run(workflow([{"name": "main", "dag": {"tasks": tasks}}, sh("fail", "exit 1"), sh("ok", "echo ok"), hook]))
    assert ran.phase == "Succeeded"  # A continues on failure, so `depends: A` fires and the DAG succeeds
    assert ran.out(".A.onExit") == "A was Failed"
    assert ran.phases[".B"] == "Succeeded"


def test_hera_outputs_directory_is_per_node(run) -> None:
    leaf = {
        "name": "leaf",
        "inputs": {"parameters": [{"name": "v"}]},
        "script": {
            "image": "python",
            "command": ["python"],
            "env": [{"name": "hera__outputs_directory", "value": "/tmp/hera-outputs"}],
            "source": (
                "import os, pathlib\n"
                "out = pathlib.Path(os.environ['hera__outputs_directory']) / 'parameters'\n"
                "out.mkdir(parents=True, exist_ok=True)\n"
                "(out / 'v').write_text('{{inputs.parameters.v}}')\n"
            ),
        },
        "outputs": {"parameters": [{"name": "v", "valueFrom": {"path": "/tmp/hera-outputs/parameters/v"}}]},
    }
    loop = {
        "name": "main",
        "dag": {"tasks": [{"name": "x", "template": "leaf", "withItems": ["a", "b", "c"], **_arg("{{item}}")}]},
    }
    ran = run(workflow([loop, leaf]))
    assert ran.phase == "Succeeded"
    assert [ran.param(f".x({i}:{v})", "v") for i, v in enumerate("abc")] == ["a", "b", "c"]


def test_missing_reference_errors_instead_of_hanging(run) -> None:
    tasks = [
        {"name": "A", "template": "ok"},
        {"name": "B", "template": "echo", "depends": "A", **_arg("{{tasks.A.outputs.parameters.nope}}")},
    ]
    echo = {"name": "echo", "inputs": {"parameters": [{"name": "v"}]}, "container": {"image": "x", "command": ["echo"]}}
    ran = run(workflow([{"name": "main", "dag": {"tasks": tasks}}, sh("ok", "true"), echo]))
    assert ran.phase == "Error"
    assert ran.phases[".B"] == "Error" and "tasks.A.outputs.parameters.nope" in (ran.message(".B") or "")


def test_a_failed_exit_handler_fails_a_succeeded_workflow(run) -> None:
    ran = run(workflow([sh("main", "true"), sh("bye", "exit 2")], onExit="bye"))
    assert ran.phases[""] == "Succeeded" and ran.phases[".onExit"] == "Failed"
    assert ran.phase == "Failed" and ran.result.status["message"] == "main: Error (exit code 2)"


def test_a_run_name_is_used_once(run) -> None:
    from pipelines.local.workflow import WorkflowError

    run(workflow([sh("main", "true")]), name="once")
    with pytest.raises(WorkflowError, match="already exists"):
        run(workflow([sh("main", "true")]), name="once")


def test_template_fail_fast_stops_launching(run) -> None:
    loop = {
        "name": "main",
        "parallelism": 1,
        "failFast": True,
        "steps": [[{"name": "x", "template": "maybe", "withItems": ["1", "0", "0"], **_arg("{{item}}")}]],
    }
    maybe = {
        "name": "maybe",
        "inputs": {"parameters": [{"name": "v"}]},
        "container": {"image": "x", "command": ["sh", "-c", "exit {{inputs.parameters.v}}"]},
    }
    ran = run(workflow([loop, maybe]))
    assert ran.phase == "Failed"
    assert [k for k in ran.nodes if k.startswith("[0].x(")] == ["[0].x(0:1)"]
    assert ran.message("") == "template has failed or errored children and failFast enabled"


def test_backoff_that_would_outlast_max_duration_stops(run) -> None:
    strategy = {"limit": 5, "backoff": {"duration": "2", "maxDuration": "1s"}}
    ran = run(workflow([sh("main", "exit 1", retryStrategy=strategy)]))
    assert ran.phase == "Failed"
    assert ran.message("") == "Backoff would exceed max duration limit" and set(ran.phases) == {"", "(0)"}


def test_workflow_variables_and_working_dir(run) -> None:
    script = "echo {{workflow.namespace}} {{workflow.uid}} {{workflow.creationTimestamp.Y}} {{pod.name}} $(pwd)"
    ran = run(
        workflow(
            [{"name": "main", "container": {"image": "x", "command": ["sh", "-c", script], "workingDir": "/tmp/w"}}]
        )
    )
    namespace, uid, year, pod, cwd = (ran.out("") or "").split()
    document_uid = ran.result.home / "runs" / ran.name / "status.json"
    assert namespace == "default" and uid in document_uid.read_text() and len(uid) == 36
    assert year == ran.result.status["startedAt"][:4] and pod == ran.name
    assert cwd == str(ran.result.node_dir(ran.nodes[""]["id"]) / "tmp" / "w")


def test_argo_v4s_workflow_wide_variables(run) -> None:
    """util/variables/keys in Argo v4.1.2, each as its setGlobalParameters writes it (encoding/json: sorted keys,
    struct fields in order, values as strings, <>& escaped). Before, `.s`, `scheduledTime` and the bare
    `labels`/`annotations` stayed unresolved, the JSON was Python's (insertion order, ü escaped), and strftime
    letters Argo has not (`c`, `j`, `x`) were set while `L` was not."""
    names = [
        "workflow.creationTimestamp.s",
        "workflow.creationTimestamp.L",
        "workflow.scheduledTime",
        "workflow.labels",
        "workflow.annotations.json",
        "workflow.parameters.json",
        "inputs.parameters",
    ]
    main = {
        "name": "main",
        "inputs": {"parameters": [{"name": "p", "value": "<ü>"}]},
        "container": {"image": "x", "command": ["printf", "%s\\n", *(f"{{{{{n}}}}}" for n in names)]},
    }
    document = workflow([main], arguments={"parameters": [{"value": 5, "name": "n", "enum": [5, 6]}]})
    document["metadata"] |= {
        "labels": {"z": "1", "a": "2"},
        "annotations": {"workflows.argoproj.io/scheduled-time": "2026-04-29T00:00:00Z"},
    }
    ran = run(document)
    seconds, millis, scheduled, labels, annotations, parameters, inputs = (ran.out("") or "").splitlines()
    created = datetime.strptime(ran.result.status["startedAt"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert abs(int(seconds) - created.timestamp()) <= 2 and millis == ".000"
    assert scheduled == "2026-04-29T00:00:00Z"
    assert labels.startswith('{"a":"2",') and '"z":"1"' in labels
    assert annotations == '{"workflows.argoproj.io/scheduled-time":"2026-04-29T00:00:00Z"}'
    assert parameters == '[{"name":"n","value":"5","enum":["5","6"]}]'
    assert inputs == '[{"name":"p","value":"\\u003cü\\u003e"}]'
    unknown = run(
        workflow([{**main, "container": {"image": "x", "command": ["echo", "{{workflow.creationTimestamp.c}}"]}}])
    )
    assert unknown.phase != "Succeeded" or unknown.out("") == "{{workflow.creationTimestamp.c}}"


def test_a_step_that_declares_a_path_at_its_root_runs_in_its_own_root(run) -> None:
    """Upstream's conditional-artifacts: a script writes `result.txt` (the image's WORKDIR is /) and outputs
    `/result.txt`. It ran in the runner's directory, so the artifact was missing and the step erred."""
    write = {
        "name": "write",
        "script": {"image": "python:alpine", "command": ["python"], "source": "open('result.txt', 'w').write('hi')"},
        "outputs": {"artifacts": [{"name": "r", "path": "/result.txt"}]},
    }
    read = {
        "name": "read",
        "inputs": {"artifacts": [{"name": "r", "path": "/tmp/r"}]},
        "container": {"image": "x", "command": ["sh", "-c", "cat /tmp/r; echo; pwd"]},
    }
    arguments = {"artifacts": [{"name": "r", "from": "{{steps.w.outputs.artifacts.r}}"}]}
    main = {
        "name": "main",
        "steps": [[{"name": "w", "template": "write"}], [{"name": "r", "template": "read", "arguments": arguments}]],
    }
    ran = run(workflow([main, write, read]))
    text, cwd = (ran.out("[1].r") or "").splitlines()
    assert ran.phase == "Succeeded" and text == "hi"
    assert cwd != str(ran.result.node_dir(ran.nodes["[1].r"]["id"]))  # no path at its root: the runner's directory


def test_a_secret_a_step_prints_is_stored_masked(run, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key, token = "sk-planted0123456789abcdef", "hunter2-planted-pw"
    monkeypatch.setenv("PLANTED_KEY", key)  # the host's environment, as a Secret mounted as env would be
    monkeypatch.setenv("PLANTED_PASSWORD", token)
    # On stdout and stderr, split over two writes, and on a last line without a newline.
    script = 'printf "calling with ${PLANTED_KEY%${PLANTED_KEY#????????}}"; sleep 0.2; '
    script += 'echo "${PLANTED_KEY#????????} now"; echo "password=$PLANTED_PASSWORD" >&2; printf "last $PLANTED_KEY"'
    ran = run(workflow([sh("main", script)]))
    assert ran.phase == "Succeeded"
    log = next(home.rglob("main.log")).read_text()
    # Two pipes, pumped by two threads: stderr's line may land before or after stdout's, even beside its last.
    assert all(masked in log for masked in ("calling with *** now\n", "password=***\n", "last ***")), log
    stored, holding = files_holding(home, key, token)
    assert stored and not holding, holding
    assert ran.out("") == "calling with *** now\nlast ***"


def test_recursion_that_never_ends_stops_at_argos_stack_depth(run) -> None:
    # A steps template that calls itself unconditionally: Argo's executeTemplate refuses the 100th nested template
    # (maxAllowedStackDepth) with an Error node; the runner once recursed until it was killed.
    main = {"name": "main", "steps": [[{"name": "again", "template": "main"}]]}
    ran = run(workflow([main]))
    assert ran.phase == "Failed"
    errors = [node for node in ran.nodes.values() if node["phase"] == "Error"]
    assert len(errors) == 1 and errors[0]["message"].startswith("Maximum recursion depth exceeded. See https://")
    assert errors[0]["name"].count(".again") == 99  # the entrypoint and 98 levels below it ran: 99 templates
    assert sum(node["type"] == "Steps" for node in ran.nodes.values()) == 99
    # a recursion that ends (a DAG calling itself a few times) is untouched
    count = {"name": "n", "value": "{{inputs.parameters.n}}"}
    down = {
        "name": "down",
        "inputs": {"parameters": [{"name": "n"}]},
        "dag": {
            "tasks": [
                {
                    "name": "again",
                    "template": "down",
                    "when": "{{inputs.parameters.n}} > 0",
                    "arguments": {"parameters": [{"name": "n", "value": "{{=asInt(inputs.parameters.n) - 1}}"}]},
                }
            ]
        },
    }
    ran = run(workflow([down], entrypoint="down", arguments={"parameters": [count | {"value": "30"}]}))
    assert ran.phase == "Succeeded" and sum(node["type"] == "DAG" for node in ran.nodes.values()) == 31


def test_raw_input_artifacts_are_written_where_the_step_reads_them(run) -> None:
    """Argo passes `raw` artifacts without a repository; its own, an argument's (which wins), the workflow's, with
    parameters substituted. Each lands in the step's own directory, also off /tmp: `/inputs/...` and an output
    parameter's `/outputs/...` move with it instead of writing into this machine's root."""
    leaf = {
        "name": "leaf",
        "inputs": {
            "parameters": [{"name": "n"}],
            "artifacts": [
                {"name": "own", "path": "/tmp/own", "raw": {"data": "own {{inputs.parameters.n}}\n"}},
                {"name": "given", "path": "/inputs/given/data", "raw": {"data": "replaced"}},
                {"name": "maybe", "path": "/tmp/maybe", "optional": True},
            ],
        },
        "container": {
            "image": "alpine",
            "command": ["sh", "-c"],
            "args": [
                "cat /tmp/own {{inputs.artifacts.given.path}}; test ! -e /tmp/maybe; mkdir -p /outputs/n; "
                "echo {{inputs.parameters.n}} > /outputs/n/data"
            ],
        },
        "outputs": {"parameters": [{"name": "n", "valueFrom": {"path": "/outputs/n/data"}}]},
    }
    given = {
        "parameters": [{"name": "n", "value": "{{item}}"}],
        "artifacts": [{"name": "given", "raw": {"data": "{{workflow.parameters.w}}"}}],
    }
    main = {"name": "main", "steps": [[{"name": "x", "template": "leaf", "withItems": [1, 2], "arguments": given}]]}
    ran = run(workflow([main, leaf], arguments={"parameters": [{"name": "w", "value": "wf"}]}))
    assert ran.phase == "Succeeded", ran.result.status
    assert [ran.out(f"[0].x({i}:{i + 1})") for i in range(2)] == ["own 1\nwf", "own 2\nwf"]
    assert [ran.param(f"[0].x({i}:{i + 1})", "n") for i in range(2)] == ["1", "2"]
    assert not Path("/outputs").exists() and not Path("/inputs").exists()
    missing = {**leaf, "inputs": {"artifacts": [{"name": "a", "path": "/tmp/a"}]}}
    ran = run(workflow([{**missing, "name": "main"}]))
    assert ran.phase == "Error" and ran.message("") == "inputs.artifacts.a was not supplied."


def test_output_artifacts_are_kept_in_the_run_and_passed_by_reference(run, home: Path) -> None:
    """A step's output artifact (a file or a directory) stays in its node's directory; `from`, `fromExpression`,
    `subPath`, a steps template's own outputs, a `globalName` and an exit hook's arguments pass it on by copying,
    as Argo's repository would; a missing one errs its step unless `optional`."""
    make = sh(
        "make",
        "mkdir -p /tmp/dir/sub; echo file > /tmp/out.txt; echo deep > /tmp/dir/sub/x; echo {{inputs.parameters.n}}",
        inputs={"parameters": [{"name": "n"}]},
        outputs={
            "artifacts": [
                {"name": "file", "path": "/tmp/out.txt", "globalName": "kept"},
                {"name": "dir", "path": "/tmp/dir"},
                {"name": "none", "path": "/tmp/none", "optional": True},
            ]
        },
    )
    use = sh(
        "use",
        "cat /data/f /data/d/sub/x /data/s; ls /data",
        inputs={
            "artifacts": [
                {"name": "f", "path": "/data/f"},
                {"name": "d", "path": "/data/d"},
                {"name": "s", "path": "/data/s"},
            ]
        },
    )
    choose = "steps.a.outputs.result == '1' ? steps.a.outputs.artifacts.file : steps.a.outputs.artifacts.none"
    args = {
        "artifacts": [
            {"name": "f", "fromExpression": choose},
            {"name": "d", "from": "{{steps.a.outputs.artifacts.dir}}"},
            {"name": "s", "from": "{{steps.a.outputs.artifacts.dir}}", "subPath": "sub/x"},
        ]
    }
    inner = {
        "name": "inner",
        "steps": [
            [{"name": "a", "template": "make", "arguments": {"parameters": [{"name": "n", "value": "1"}]}}],
            [{"name": "b", "template": "use", "arguments": args}],
        ],
        "outputs": {"artifacts": [{"name": "passed", "from": "{{steps.a.outputs.artifacts.file}}"}]},
    }
    again = sh(
        "again",
        "cat /tmp/in /tmp/global",
        inputs={"artifacts": [{"name": "in", "path": "/tmp/in"}, {"name": "g", "path": "/tmp/global"}]},
    )
    main = {
        "name": "main",
        "steps": [
            [{"name": "inner", "template": "inner"}],
            [
                {
                    "name": "again",
                    "template": "again",
                    "arguments": {
                        "artifacts": [
                            {"name": "in", "from": "{{steps.inner.outputs.artifacts.passed}}"},
                            {"name": "g", "from": "{{workflow.outputs.artifacts.kept}}"},
                        ]
                    },
                }
            ],
        ],
    }
    ran = run(workflow([main, inner, make, use, again]))
    assert ran.phase == "Succeeded", ran.result.status
    assert ran.out("[0].inner[1].b") == "file\ndeep\ndeep\nd\nf\ns"
    assert ran.out("[1].again") == "file\nfile"
    made = ran.nodes["[0].inner[0].a"]["outputs"]["artifacts"]
    assert [(a["name"], a["path"]) for a in made] == [("file", "/tmp/out.txt"), ("dir", "/tmp/dir")]
    run_dir = home / "runs" / ran.result.name
    assert (run_dir / made[0]["local"]).read_text() == "file\n"

    missing = sh("main", "true", outputs={"artifacts": [{"name": "x", "path": "/tmp/x"}]})
    ran = run(workflow([missing]))
    assert ran.phase == "Error" and ran.message("") == "output artifact 'x': /tmp/x does not exist."
    escape = {"name": "f", "from": "{{steps.a.outputs.artifacts.dir}}", "subPath": "../../../../../etc"}
    bad = {
        **main,
        "steps": [
            [{"name": "a", "template": "make", "arguments": {"parameters": [{"name": "n", "value": "1"}]}}],
            [{"name": "b", "template": "use", "arguments": {"artifacts": [escape]}}],
        ],
    }
    ran = run(workflow([bad, make, use]))
    assert ran.phase == "Failed" and ran.phases["[1].b"] == "Error"
    assert ran.message("[1].b") == "artifact argument 'f' points outside the run's directory."


def test_a_step_and_a_task_exit_code_is_steps_name_exit_code(run) -> None:
    """Argo v4's node variable is `steps.NAME.exitCode` (util/variables/keys/noderef.go), upstream's
    exit-code-output-variable reads it after a failed step it continues on."""
    echo = sh("echo", "echo {{inputs.parameters.code}}", inputs={"parameters": [{"name": "code"}]})
    code = {"parameters": [{"name": "code", "value": "{{steps.fail.exitCode}}"}]}
    steps = [[{"name": "fail", "template": "fail", "continueOn": {"failed": True}}],
             [{"name": "show", "template": "echo", "arguments": code}]]  # fmt: skip
    ran = run(workflow([{"name": "main", "steps": steps}, sh("fail", "exit 123"), echo]))
    assert ran.phase == "Succeeded" and ran.out("[1].show") == "123"
    tasks = [{"name": "fail", "template": "fail", "continueOn": {"failed": True}},
             {"name": "show", "template": "echo", "depends": "fail.Failed",
              "arguments": {"parameters": [{"name": "code", "value": "{{tasks.fail.exitCode}}"}]}}]  # fmt: skip
    ran = run(workflow([{"name": "main", "dag": {"tasks": tasks}}, sh("fail", "exit 7"), echo]))
    assert ran.phase == "Succeeded" and ran.out(".show") == "7"


def test_last_retry_duration_is_go_seconds_which_as_int_reads(run, tmp_path: Path) -> None:
    """fmt.Sprint(d.Seconds()) is "0" or "2", never "0.0": upstream retry-conditional's asInt(lastRetry.duration)."""
    counter = "{{workflow.parameters.path}}"
    script = f'echo x >> {counter}; echo "took {{{{lastRetry.duration}}}}"; [ $(wc -l < {counter}) -ge 3 ] || exit 2'
    strategy = {"limit": 5, "expression": "asInt(lastRetry.exitCode) > 1 && asInt(lastRetry.duration) < 120"}
    ran = run(with_path(workflow([sh("main", script, retryStrategy=strategy)]), tmp_path / "count"))
    assert ran.phase == "Succeeded" and set(ran.phases) == {"", "(0)", "(1)", "(2)"}
    assert ran.out("(0)") == "took 0" and ran.out("(2)") in ("took 0", "took 1")


@pytest.mark.parametrize("kind", ["steps", "dag"])
def test_a_loops_result_that_is_not_json_errs_only_where_the_template_reads_it(run, kind: str) -> None:
    """Argo captures a step's stdout as its result only when its steps/DAG template names that result
    (operator.go hasOutputResultRef), and then unmarshals each looped result as JSON (processAggregateNodeOutputs):
    plain text errs the steps node, or the task that reads it."""
    say = {"name": "say", "inputs": {"parameters": [{"name": "w"}]},
           "script": {"image": "alpine", "command": ["sh"], "source": "echo {{inputs.parameters.w}}"}}  # fmt: skip
    show = sh("show", "echo {{inputs.parameters.all}}", inputs={"parameters": [{"name": "all"}]})
    loop = {"name": "gen", "template": "say", "withItems": ["hello", "world"],
            "arguments": {"parameters": [{"name": "w", "value": "{{item}}"}]}}  # fmt: skip

    def main(reads: bool) -> dict[str, Any]:
        value = f"{{{{{'steps' if kind == 'steps' else 'tasks'}.gen.outputs.result}}}}" if reads else "none"
        use = {"name": "use", "template": "show", "arguments": {"parameters": [{"name": "all", "value": value}]}}
        if kind == "steps":
            return {"name": "main", "steps": [[loop], [use]]}
        return {"name": "main", "dag": {"tasks": [loop, {**use, "depends": "gen"}]}}

    ran = run(workflow([main(reads=True), say, show]))
    assert ran.phase == "Error"
    where = "" if kind == "steps" else ".use"
    assert ran.phases[where] == "Error" and ran.message(where) == "invalid character 'h' looking for beginning of value"
    ran = run(workflow([main(reads=False), say, show]))
    assert ran.phase == "Succeeded"
