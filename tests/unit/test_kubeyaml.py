"""Every YAML reader reads as Kubernetes and Argo do (`components.kubeyaml`), reader by reader with the same bytes.

A YAML bomb (aliases that stand for ~10^9 values) took `vcpilot lint` and `run-workflow` past a minute and 4 GB
before this; a key given twice was refused by `lint` and silently overwritten by every other reader; nesting
deeper than Python recurses was an internal error in `lint`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import kubeyaml
from components.errors import VcpilotError
from components.files import load_documents
from components.volcano.models import parse_job
from pipelines.lint import lint_files
from pipelines.local.engine.resources import run_resource
from pipelines.local.workflow import WorkflowError, load_workflow

LAUGHS = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9) if prev else ', '.join(['lol'] * 9)}]\n"
    for prev, name in zip(["", *"abcdefgh"], "abcdefghi", strict=True)
)
WORKFLOW = """apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: x-}
spec:
  entrypoint: main
  templates:
  - name: main
    container: {image: alpine, command: [echo], args: ARGS}
"""
BOMB = LAUGHS + WORKFLOW.replace("ARGS", "*i")
DUPLICATE = WORKFLOW.replace("ARGS", "[a]") + "metadata: {generateName: y-}\n"
CYCLE = WORKFLOW.replace("ARGS", "&loop [a, *loop]")
DEEP = WORKFLOW.replace("ARGS", "[" * 3000 + "]" * 3000)


def _lint(path: Path) -> str:
    problems = lint_files([path])
    assert len(problems) == 1, problems
    return problems[0].message


def _files(path: Path) -> Any:
    return load_documents(path, "workflow")


def _workflow(path: Path) -> Any:
    return load_workflow(path)


def _job(path: Path) -> Any:
    return parse_job(path.read_text())


# Each reader, and what it raises or returns for a refusal.
READERS: dict[str, Callable[[Path], Any]] = {
    "files (cluster submit, cluster config, guardrails)": _files,
    "lint": _lint,
    "run-workflow": _workflow,
    "Volcano manifest": _job,
}


def _refusal(reader: str, path: Path) -> str:
    read = READERS[reader]
    if reader == "lint":
        return read(path)
    with pytest.raises((VcpilotError, WorkflowError, ValueError)) as caught:
        read(path)
    return str(caught.value)


def _bounded(call: Callable[[], str], seconds: float = 60.0) -> str:
    """`call()` in a thread; a reader that walks a bomb never returns, so the test fails instead of hanging."""
    out: list[str] = []
    worker = threading.Thread(target=lambda: out.append(call()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert out, f"the reader did not return within {seconds:g} s"
    return out[0]


@pytest.mark.parametrize("reader", READERS)
def test_a_yaml_bomb_is_refused_in_one_sentence_before_anything_walks_it(tmp_path: Path, reader: str) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    sentence = _bounded(lambda: _refusal(reader, path))
    assert "aliases expand it to" in sentence and "excessive aliasing" in sentence and "\n" not in sentence


@pytest.mark.parametrize("reader", READERS)
def test_a_key_given_twice_is_refused_as_kubernetes_refuses_it(tmp_path: Path, reader: str) -> None:
    path = tmp_path / "twice.yaml"
    path.write_text(DUPLICATE)
    sentence = _refusal(reader, path)
    assert "key 'metadata' is given twice" in sentence and "line 9" in sentence


@pytest.mark.parametrize("reader", READERS)
def test_an_alias_inside_its_own_anchor_is_refused(tmp_path: Path, reader: str) -> None:
    path = tmp_path / "cycle.yaml"
    path.write_text(CYCLE)
    assert "an alias refers to its own anchor" in _refusal(reader, path)


@pytest.mark.parametrize("reader", READERS)
def test_nesting_too_deep_to_read_is_one_sentence(tmp_path: Path, reader: str) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text(DEEP)
    sentence = _refusal(reader, path)
    assert "nests its values too deeply" in sentence and "internal error" not in sentence


def test_a_resource_templates_manifest_reads_the_same_way() -> None:
    template = {"resource": {"action": "create", "manifest": LAUGHS + "kind: *i\n"}}
    result = _bounded(
        lambda: (
            run_resource(
                template, cluster=None, uid="u", node_id="n", namespace="default", cancel=threading.Event()
            ).message
        )
    )
    assert "excessive aliasing" in result


def test_anchors_a_workflow_reuses_and_merge_keys_still_read() -> None:
    text = """
defaults: &defaults {image: alpine, command: [echo]}
steps:
""" + "".join(f"- {{<<: *defaults, args: [{n}]}}\n" for n in range(300))
    text += "last: {<<: *defaults, image: busybox}\n"  # a key the merge brought may be given again: it overrides
    document = kubeyaml.load(text)
    assert document["steps"][299] == {"image": "alpine", "command": ["echo"], "args": [299]}
    assert document["last"] == {"image": "busybox", "command": ["echo"]}


def test_dates_stay_strings_as_in_json() -> None:
    assert kubeyaml.load("day: 2024-01-01\nat: 2024-01-01T10:00:00Z\n") == {
        "day": "2024-01-01",
        "at": "2024-01-01T10:00:00Z",
    }


def test_expansion_just_under_the_bound_reads_and_just_over_it_does_not() -> None:
    # one anchor of 1,000 values, aliased n times: the aliases add 1,001 values each (the list and its items)
    anchor = "a: &a [" + ", ".join(["x"] * 1000) + "]\n"
    under = kubeyaml.MAX_ALIAS_VALUES // 1001
    assert len(kubeyaml.load(anchor + "b: [" + ", ".join(["*a"] * under) + "]\n")["b"]) == under
    with pytest.raises(yaml.YAMLError, match="excessive aliasing"):
        kubeyaml.load(anchor + "b: [" + ", ".join(["*a"] * (under + 1)) + "]\n")


# go-yaml v2's resolve.go (sigs.k8s.io/yaml, which kubectl, the API server and Argo's CLI read YAML with), against
# PyYAML's YAML 1.1 rules: y/n are booleans, a float needs no point, ints are Go's literals, never base 60.
@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("y", True),
        ("N", False),
        ("yes", True),
        ("off", False),
        ("1e3", 1000.0),
        ("5e-5", 5e-5),
        ("012", 10),
        ("0o12", 10),
        ("0x1F", 31),
        ("0b11", 3),
        ("08", 8.0),  # not octal, so Go reads it as the float it also matches
        ("1_000", 1000),
        (".5", 0.5),
        ("-0x10", -16),
        ("18446744073709551615", 2**64 - 1),  # ParseUint
        ("99999999999999999999999", 1e23),  # past uint64: the float
        ("12:30", "12:30"),  # PyYAML: 750
        ("1:30:00", "1:30:00"),
        ("1e400", "1e400"),  # beyond float64: ParseFloat fails, the string stays
        ("1" * 5000, "1" * 5000),  # ... and past 4,300 digits, which Python's int() refused (a ValueError)
        ("9" * 300, float("9" * 300)),
        ("0x", "0x"),
        ("2024-01-01", "2024-01-01"),
        ("v1.2", "v1.2"),
        ("~", None),
    ],
)
def test_a_plain_scalar_reads_as_go_yaml_reads_it(text: str, value: Any) -> None:
    assert kubeyaml.go_scalar(text) == value and type(kubeyaml.go_scalar(text)) is type(value)
    assert kubeyaml.load(f"v: {text}\n") == {"v": value}
    assert kubeyaml.load(f"v: '{text}'\n") == {"v": text}  # quoted: always the string


def test_keys_are_json_strings_as_sigs_yaml_writes_them() -> None:
    document = kubeyaml.load("1: a\ny: b\n1.5: c\n1e6: d\n0.1: e\nname: f\n<<: {g: h}\n")
    assert document == {"1": "a", "true": "b", "1.5": "c", "1e+06": "d", "0.1": "e", "name": "f", "g": "h"}
    with pytest.raises(yaml.YAMLError, match="key 'true' is given twice"):  # 1 == True to Python, not to JSON
        kubeyaml.load("true: a\ny: b\n")
    assert kubeyaml.load("1: a\ntrue: b\n") == {"1": "a", "true": "b"}
    with pytest.raises(yaml.YAMLError, match="a key is null"):
        kubeyaml.load("~: a\n")
