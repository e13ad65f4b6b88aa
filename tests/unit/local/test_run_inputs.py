"""What `run-workflow`, `resume` and `runs` refuse before they write anything: names, files, parameters."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from components.errors import InputError
from pipelines.cli import app
from pipelines.local.workflow import MAX_RUN_NAME, WorkflowError, check_run_name

HELLO = """\
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: hello-}
spec:
  entrypoint: main
  arguments:
    parameters: [{name: greeting, value: hi, enum: [hi, hello]}]
  templates:
  - name: main
    container: {image: busybox, command: [echo, "{{workflow.parameters.greeting}}"]}
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VCPILOT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _refused(result, *fragments: str) -> str:
    assert result.exit_code == InputError.exit_code, result.output
    text = result.stderr.strip()
    assert text.count("\n") == 0 and "Traceback" not in result.output, result.output
    for fragment in fragments:
        assert fragment in text, text
    return text


def _everything(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("name", ["../../x", "a/b", "..", "Upper", "x" * (MAX_RUN_NAME + 1), "a_b", "-a", "a.", ""])
def test_a_run_name_argo_would_refuse_writes_nothing(home: Path, tmp_path: Path, name: str) -> None:
    workflow = tmp_path / "hello.yaml"
    workflow.write_text(HELLO)
    before = _everything(tmp_path)
    _refused(CliRunner().invoke(app, ["run-workflow", str(workflow), "--name", name]), "is not a run name")
    assert _everything(tmp_path) == before
    commands = (["resume"], ["runs", "show"], ["runs", "logs"], ["runs", "delete", "-y"])
    for command in ([*words, "--", name] for words in commands):
        _refused(CliRunner().invoke(app, command), "is not a run name")
    assert _everything(tmp_path) == before


@pytest.mark.parametrize("name", ["hello", "llm-autopilot-20260101-010101", "a.b-1", "x" * MAX_RUN_NAME])
def test_names_argo_takes_are_run_names(name: str) -> None:
    assert check_run_name(name) == name


def test_a_run_name_is_an_input_error_of_one_sentence() -> None:
    with pytest.raises(WorkflowError) as caught:
        check_run_name("../../etc")
    assert isinstance(caught.value, InputError) and "DNS-1123" in str(caught.value)


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (HELLO.encode() + b"# gr\xfc\xdfe\n", "is not UTF-8 text"),
        (b"\xff\xfe" + HELLO.encode("utf-16-le"), "is not UTF-8 text"),
        (b"kind: [unclosed\n", "is not valid YAML at line 2"),
        (b"kind: Workflow\nmetadata: {generation: !!int abc}\n", "is not valid YAML: invalid literal for int()"),
        (b"kind: Workflow\nkind: Workflow\n", "is not valid YAML at line 2, column 1: key 'kind' is given twice"),
    ],
)
def test_a_workflow_file_that_cannot_be_read_is_one_sentence_naming_it(
    home: Path, tmp_path: Path, content: bytes, fragment: str
) -> None:
    workflow = tmp_path / "broken.yaml"
    workflow.write_bytes(content)
    _refused(CliRunner().invoke(app, ["run-workflow", str(workflow)]), str(workflow), fragment)
    assert not home.exists()


def test_what_argo_refuses_at_submit_starts_nothing_and_names_the_first_problem(home: Path, tmp_path: Path) -> None:
    """`vcpilot lint`'s rules (Argo's validator) before a run: a step that names a step not there ran the steps
    before it and failed only then; `{{inputs.parameters.txt}}` for `text` ran and echoed the tag as written."""
    workflow = tmp_path / "wf.yaml"
    workflow.write_text(
        """\
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: refs-}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - {name: a, template: say, arguments: {parameters: [{name: text, value: hi}]}}
      - {name: b, template: say, arguments: {parameters: [{name: text, value: "{{steps.nope.outputs.result}}"}]}}
  - name: say
    inputs: {parameters: [{name: text}]}
    container: {image: busybox, command: [echo, "{{inputs.parameters.txt}}"]}
"""
    )
    text = _refused(CliRunner().invoke(app, ["run-workflow", str(workflow)]), f"Argo would refuse {workflow}: ")
    # The first in Argo's own walk (entrypoint, step a, its template), as `argo lint` names it.
    assert "template 'say': {{inputs.parameters.txt}} is not declared in the template's inputs" in text
    assert text.endswith(f"; 1 more: vcpilot lint {workflow}.")
    assert not home.exists()


def test_a_parameter_outside_its_enum_starts_nothing(home: Path, tmp_path: Path) -> None:
    workflow = tmp_path / "hello.yaml"
    workflow.write_text(HELLO)
    _refused(CliRunner().invoke(app, ["run-workflow", str(workflow), "-p", "greeting=yo"]), "greeting", "hi, hello")
    _refused(CliRunner().invoke(app, ["run-workflow", str(workflow), "-p", "nope=1"]), "unknown parameter 'nope'")
    assert not home.exists()


@pytest.mark.parametrize(
    ("param", "says"),
    [
        ("gpus-wanted=abc", "parameter gpus-wanted is 'abc', which is not a whole number"),
        ("gpus-wanted=3", "the training's sizes do not fit together"),
        ("queue=Not_A_Queue", "parameter queue is 'Not_A_Queue', which is not a Kubernetes name"),
    ],
)
def test_llm_autopilot_run_by_file_is_held_to_its_parameter_rules_before_it_starts(
    home: Path, param: str, says: str
) -> None:
    template = Path(__file__).resolve().parents[3] / "deploy" / "argo" / "llm-autopilot.yaml"
    _refused(CliRunner().invoke(app, ["run-workflow", str(template), "-p", param]), says)
    assert not home.exists()
