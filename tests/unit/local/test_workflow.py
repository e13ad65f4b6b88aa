"""Loading a workflow: bad input is refused with one sentence before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.local.runner import run_workflow
from pipelines.local.workflow import WorkflowError, load_workflow, parse_duration


def wf(**spec: object) -> dict:
    base: dict = {
        "entrypoint": "main",
        "templates": [{"name": "main", "container": {"image": "x", "command": ["true"]}}],
    }
    base.update(spec)
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "metadata": {"generateName": "t-"}, "spec": base}


def refused(source: object, params: dict | None = None) -> str:
    with pytest.raises(WorkflowError) as err:
        load_workflow(source, params)  # type: ignore[arg-type]
    message = str(err.value)
    assert "\n" not in message and message.endswith(".")
    return message


def test_malformed_yaml_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("kind: Workflow\nspec:\n  entrypoint: [unclosed\n")
    assert "is not valid YAML at line" in refused(path)


def test_missing_file_and_wrong_kind(tmp_path: Path) -> None:
    assert "does not exist" in refused(tmp_path / "nope.yaml")
    assert "is a Pod, not a Workflow" in refused({"kind": "Pod", "spec": {}})


def test_unknown_and_missing_parameters() -> None:
    args = {"parameters": [{"name": "message", "value": "hi"}, {"name": "needed"}]}
    assert refused(wf(arguments=args), {"needed": "x", "typo": "1"}) == (
        "unknown parameter 'typo': this workflow's parameters are message, needed."
    )
    assert refused(wf(arguments=args)) == "parameter 'needed' has no value: pass -p needed=VALUE."


def test_parameters_apply_and_respect_enum() -> None:
    args = {"parameters": [{"name": "size", "value": "s", "enum": ["s", "m"]}]}
    loaded = load_workflow(wf(arguments=args), {"size": "m"})
    assert loaded.parameters == {"size": "m"}
    assert "not one of s, m" in refused(wf(arguments=args), {"size": "xl"})


def test_unresolvable_templates_are_refused() -> None:
    steps = [{"name": "main", "steps": [[{"name": "a", "template": "missing"}]]}]
    assert refused(wf(templates=steps)) == (
        "template 'main' step 'a' refers to template 'missing', which is not defined."
    )
    assert "spec.entrypoint refers to template 'other'" in refused(wf(entrypoint="other"))
    ref = [{"name": "main", "dag": {"tasks": [{"name": "a", "templateRef": {"name": "x", "template": "y"}}]}}]
    assert "uses templateRef" in refused(wf(templates=ref))
    assert "is a http template" in refused(wf(templates=[{"name": "main", "http": {"url": "x"}}]))


def test_dag_cycles_and_unknown_dependencies() -> None:
    leaf = {"name": "leaf", "container": {"image": "x", "command": ["true"]}}
    cycle = {
        "name": "main",
        "dag": {
            "tasks": [
                {"name": "a", "template": "leaf", "depends": "b"},
                {"name": "b", "template": "leaf", "dependencies": ["a"]},
            ]
        },
    }
    assert "has a dependency cycle: a -> b -> a" in refused(wf(templates=[cycle, leaf]))
    unknown = {"name": "main", "dag": {"tasks": [{"name": "a", "template": "leaf", "depends": "ghost.Succeeded"}]}}
    assert "depends on unknown task 'ghost'" in refused(wf(templates=[unknown, leaf]))


def test_names() -> None:
    generated = load_workflow(wf()).name
    assert generated.startswith("t-") and len(generated) == len("t-") + 5
    template = {**wf(), "kind": "WorkflowTemplate", "metadata": {"name": "pipeline"}}
    assert load_workflow(template).name.startswith("pipeline-")
    assert load_workflow(wf(), name="fixed").name == "fixed"


def test_template_defaults_merge_without_leaking_other_types() -> None:
    loaded = load_workflow(
        wf(
            templateDefaults={"retryStrategy": {"limit": "2"}, "script": {"env": [{"name": "A", "value": "1"}]}},
            templates=[
                {"name": "main", "container": {"image": "x", "command": ["true"]}},
                {"name": "s", "script": {"image": "x", "command": ["sh"], "source": "true"}, "retryStrategy": {}},
            ],
        )
    )
    main = loaded.template({"template": "main"})
    assert main["retryStrategy"] == {"limit": "2"} and "script" not in main
    script = loaded.template({"template": "s"})
    assert script["script"]["env"] == [{"name": "A", "value": "1"}] and script["retryStrategy"] == {"limit": "2"}


def test_parse_duration() -> None:
    assert parse_duration("2") == 2.0
    assert parse_duration(5) == 5.0
    assert parse_duration("1m30s") == 90.0
    assert parse_duration("500ms") == 0.5
    with pytest.raises(WorkflowError, match="is not a duration"):
        parse_duration("soon")


def test_bad_input_fails_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(WorkflowError, match="unknown parameter"):
        run_workflow(wf(), {"x": "1"}, home=tmp_path)
    assert not (tmp_path / "runs").exists()
