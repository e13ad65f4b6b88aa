"""Every upstream Argo example runs locally with the phase and the nodes Argo gives it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

Example = Callable[[str], Path]


def test_hello_world(run, example: Example) -> None:
    ran = run(example("hello-world"))
    assert ran.phase == "Succeeded"
    assert ran.nodes[""]["type"] == "Pod"
    assert ran.out("") == "hello world"


def test_arguments_parameters_default_and_override(run, example: Example) -> None:
    assert run(example("arguments-parameters")).out("") == "hello world"
    ran = run(example("arguments-parameters"), {"message": "goodbye world"})
    assert ran.phase == "Succeeded" and ran.out("") == "goodbye world"
    assert ran.nodes[""]["inputs"]["parameters"] == [{"name": "message", "value": "goodbye world"}]


def test_global_parameters(run, example: Example) -> None:
    assert run(example("global-parameters"), {"message": "from -p"}).out("") == "from -p"


def test_steps_run_group_after_group(run, example: Example) -> None:
    ran = run(example("steps"))
    assert ran.phase == "Succeeded"
    assert {k: ran.out(k) for k in ("[0].hello1", "[1].hello2a", "[1].hello2b")} == {
        "[0].hello1": "hello1",
        "[1].hello2a": "hello2a",
        "[1].hello2b": "hello2b",
    }
    assert ran.nodes["[0]"]["type"] == ran.nodes["[1]"]["type"] == "StepGroup"
    # the second group hangs from the first group's step, as in Argo's node graph
    assert ran.nodes["[1]"]["id"] in ran.nodes["[0].hello1"]["children"]


def test_dag_diamond(run, example: Example) -> None:
    ran = run(example("dag-diamond"))
    assert ran.phase == "Succeeded"
    assert {k: ran.out(k) for k in (".A", ".B", ".C", ".D")} == {".A": "A", ".B": "B", ".C": "C", ".D": "D"}
    n = ran.nodes
    assert set(n[".A"]["children"]) == {n[".B"]["id"], n[".C"]["id"]}
    assert n[".D"]["id"] in n[".B"]["children"] and n[".D"]["id"] in n[".C"]["children"]
    assert n[""]["outboundNodes"] == [n[".D"]["id"]]


def test_dag_multiroot(run, example: Example) -> None:
    ran = run(example("dag-multiroot"))
    assert ran.phase == "Succeeded"
    assert set(ran.nodes[""]["children"]) == {ran.nodes[".A"]["id"], ran.nodes[".B"]["id"]}
    assert ran.out(".D") == "D"


def test_dag_nested(run, example: Example) -> None:
    ran = run(example("dag-nested"))
    assert ran.phase == "Succeeded"
    inner = [k for k, v in ran.nodes.items() if v["type"] == "DAG" and k]
    assert sorted(inner) == [".A", ".B", ".C", ".D"]
    assert ran.out(".D.D") == "DD" and ran.out(".A.C") == "AC"
    assert ran.nodes[".B.A"]["boundaryID"] == ran.nodes[".B"]["id"]


def test_dag_enhanced_depends_omits_what_can_never_run(run, example: Example) -> None:
    ran = run(example("dag-enhanced-depends"))
    assert ran.phase == "Succeeded"  # C fails, but no target's branch does
    assert ran.phases[".C"] == "Failed"
    assert ran.phases[".should-not-execute"] == "Omitted"
    assert ran.message(".should-not-execute") == "omitted: depends condition not met"
    for task in (".should-execute-1", ".should-execute-2", ".should-execute-3"):
        assert ran.phases[task] == "Succeeded"


def test_dag_continue_on_fail(run, example: Example) -> None:
    ran = run(example("dag-continue-on-fail"))
    assert ran.phase == "Failed"  # G's branch inherits E's failure
    assert {k: ran.phases[k] for k in (".A", ".B", ".C", ".D", ".E", ".F", ".G")} == {
        ".A": "Succeeded",
        ".B": "Failed",
        ".C": "Succeeded",
        ".D": "Succeeded",
        ".E": "Failed",
        ".F": "Succeeded",
        ".G": "Omitted",
    }


def test_continue_on_fail(run, example: Example) -> None:
    ran = run(example("continue-on-fail"))
    assert ran.phase == "Succeeded"
    assert ran.phases["[1].C"] == "Failed" and ran.message("[1].C") == "main: Error (exit code 1)"
    assert ran.phases["[2].D"] == "Succeeded"


def test_coinflip_recursive_flips_until_heads(run, example: Example) -> None:
    ran = run(example("coinflip-recursive"))
    assert ran.phase == "Succeeded"
    flips = sorted((k for k in ran.nodes if k.endswith("flip-coin")), key=len)
    results = [ran.out(k) for k in flips]
    assert results[-1] == "heads" and all(r == "tails" for r in results[:-1])
    heads = [k for k in ran.nodes if k.endswith(".heads") and ran.phases[k] == "Succeeded"]
    assert len(heads) == 1 and ran.out(heads[0]) == "it was heads"
    assert len([k for k in ran.nodes if ran.nodes[k]["type"] == "Steps"]) == len(flips)


@pytest.mark.parametrize("kind,sep", [("conditional-parameters", "[1]."), ("dag-conditional-parameters", ".")])
def test_conditional_parameters(run, example: Example, kind: str, sep: str) -> None:
    ran = run(example(kind))
    assert ran.phase == "Succeeded"
    flip = ran.out("[0].flip-coin" if sep == "[1]." else ".flip-coin")
    other = "tails" if flip == "heads" else "heads"
    assert ran.phases[f"{sep}{flip}"] == "Succeeded"
    assert ran.phases[f"{sep}{other}"] == "Skipped"
    assert ran.message(f"{sep}{other}") == f"when '{flip} == {other}' evaluated false"
    assert ran.param("", "stepresult") == flip


def test_exit_handler_with_param(run, example: Example) -> None:
    ran = run(example("exit-handler-with-param"))
    assert ran.phase == "Succeeded"
    assert ran.param("[0].step-1", "result") == "hello world"
    hook = ran.nodes["[0].step-1.onExit"]
    assert hook["nodeFlag"] == {"hooked": True}
    assert ran.out("[0].step-1.onExit") == "hello world"


def test_exit_handlers_run_after_a_failure(run, example: Example) -> None:
    ran = run(example("exit-handlers"))
    assert ran.phase == "Failed"
    assert ran.phases[".onExit"] == "Succeeded"
    assert ran.phases[".onExit[0].celebrate"] == "Skipped"
    assert ran.out(".onExit[0].cry") == "boohoo!"
    notify = ran.out(".onExit[0].notify") or ""
    assert notify.startswith(f"send e-mail: {ran.name} Failed ")
    # the JSON keeps its quotes through `sh -c "echo …"`: Argo quotes it once more as a Go string
    assert '"templateName":"intentional-fail"' in notify and '"message":"main: Error (exit code 1)"' in notify


def test_loops(run, example: Example) -> None:
    ran = run(example("loops"))
    assert ran.phase == "Succeeded"
    assert ran.out("[0].print-message-loop(0:hello world)") == "hello world"
    assert ran.out("[0].print-message-loop(1:goodbye world)") == "goodbye world"


def test_loops_dag(run, example: Example) -> None:
    ran = run(example("loops-dag"))
    assert ran.phase == "Succeeded"
    assert ran.nodes[".B"]["type"] == "TaskGroup"
    assert [ran.out(f".B({i}:{v})") for i, v in enumerate(("foo", "bar", "baz"))] == ["foo", "bar", "baz"]
    assert ran.out(".C") == "C"


def test_output_parameter(run, example: Example) -> None:
    ran = run(example("output-parameter"))
    assert ran.phase == "Succeeded"
    assert ran.param("[0].generate-parameter", "hello-param") == "hello world"
    assert ran.out("[1].consume-parameter") == "hello world"


def test_parameter_aggregation_dag(run, example: Example) -> None:
    ran = run(example("parameter-aggregation-dag"))
    assert ran.phase == "Succeeded"
    # four parallel pods wrote /tmp/num and /tmp/even; each read back its own
    assert [ran.param(f".odd-or-even({i}:{i + 1})", "num") for i in range(4)] == ["1", "2", "3", "4"]
    assert json.loads(ran.out(".print-nums") or "") == ["1", "2", "3", "4"]
    assert json.loads(ran.out(".print-evenness") or "") == ["odd", "even", "odd", "even"]
    assert ran.phases[".divide-by-2(0:evenness:odd,num:1)"] == "Skipped"
    assert ran.out(".divide-by-2(3:evenness:even,num:4)") == "2"
    assert [ran.out(".print(0:1)"), ran.out(".print(1:2)")] == ["1", "2"]


def _attempts(ran, prefix: str = "") -> list[str]:
    pattern = re.compile(re.escape(prefix) + r"\((\d+)\)$")
    return sorted((k for k in ran.nodes if pattern.fullmatch(k)), key=lambda k: int(pattern.fullmatch(k)[1]))


def test_retry_script(run, example: Example) -> None:
    ran = run(example("retry-script"))
    attempts = _attempts(ran)
    assert ran.nodes[""]["type"] == "Retry" and 1 <= len(attempts) <= 11
    assert all(ran.phases[a] == "Failed" for a in attempts[:-1])
    if ran.phase == "Succeeded":
        assert ran.phases[attempts[-1]] == "Succeeded"
    else:  # all 11 attempts failed: (2/3)^11, about 1%
        assert len(attempts) == 11 and ran.message("") == "No more retries left"


@pytest.mark.parametrize("kind", ["scripts-bash", "scripts-python"])
def test_scripts(run, example: Example, kind: str) -> None:
    ran = run(example(kind))
    assert ran.phase == "Succeeded"
    number = ran.out("[0].generate") or ""
    assert 1 <= int(number) <= 100
    assert ran.out("[1].print") == f"result was: {number}"


def test_template_defaults_apply_to_every_template(run, example: Example) -> None:
    ran = run(example("template-defaults"))
    assert ran.nodes[""]["type"] == "Retry"  # retryStrategy limit 2 reaches the steps template too
    mains = _attempts(ran)
    assert 1 <= len(mains) <= 3
    for main in mains:
        assert len(_attempts(ran, f"{main}[0].retry-backoff")) <= 3
    last = mains[-1]
    if ran.phase == "Succeeded":
        assert ran.nodes[f"{last}[1].hello-world"]["type"] == "Retry"
        assert ran.out(f"{last}[1].hello-world(0)") == "hello world"
    else:
        assert ran.phases[f"{last}[0].retry-backoff"] == "Failed"
