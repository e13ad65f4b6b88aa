"""`vcpilot lint`: what Argo v4.1.2 would reject is reported, one line per problem, before anything is submitted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import kubeyaml
from components.files import MANIFEST_MAX_BYTES
from pipelines.lint import SCHEMA_ENV, Problem, find_schema, lint_document, lint_files, manifest_files

ECHO = {"name": "echo", "container": {"image": "alpine", "command": ["echo", "hi"]}}
SAY = {
    "name": "say",
    "inputs": {"parameters": [{"name": "text"}]},
    "container": {"image": "alpine", "command": ["echo", "{{inputs.parameters.text}}"]},
}


def workflow(*templates: dict[str, Any], kind: str = "Workflow", **spec: Any) -> dict[str, Any]:
    """A minimal valid document of `kind` around `templates`; `spec` overrides or adds spec fields."""
    body = {"entrypoint": templates[0]["name"], "templates": list(templates), **spec}
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": kind, "metadata": {"generateName": "t-"}, "spec": body}


def dag(*tasks: dict[str, Any], name: str = "main") -> dict[str, Any]:
    return {"name": name, "dag": {"tasks": list(tasks)}}


def lint(tmp_path: Path, *docs: Any, schema_path: Path | None = None) -> list[Problem]:
    path = tmp_path / "wf.yaml"
    path.write_text(yaml.dump_all(docs, Dumper=kubeyaml.Dumper, sort_keys=False))  # quoted as go-yaml needs
    return lint_files([path], schema_path=schema_path)


def only(problems: list[Problem]) -> Problem:
    assert len(problems) == 1, "\n".join(map(str, problems))
    return problems[0]


@pytest.fixture(scope="session")
def schema_path(shared_dir: Path) -> Path:
    return shared_dir / "schemas" / "argo-v4.1.2" / "schema.json"


# --- the file as a whole ------------------------------------------------------------------------------------------


def test_upstream_examples_lint_clean(shared_dir: Path, schema_path: Path) -> None:
    files = sorted((shared_dir / "argo-examples").glob("*.yaml"))
    assert len(files) > 20
    assert [str(p) for p in lint_files(files, schema_path=schema_path)] == []


def test_malformed_yaml_is_one_problem_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("kind: Workflow\nspec:\n  templates: [a\n")
    problem = only(lint_files([path]))
    assert problem.file == str(path) and "not valid YAML" in problem.message and "line 4" in problem.message


@pytest.mark.parametrize(
    ("text", "says"),
    [
        # its message was two lines (yaml's ReaderError names the stream on a line of its own)
        ("kind: Workflow\nspec: {}\n\x00", "is not valid YAML: unacceptable character #x0000"),
        # an internal error: a constructor's ValueError, which lint did not catch
        ("kind: Workflow\nspec: {parallelism: !!int abc}\n", "is not valid YAML: invalid literal for int()"),
    ],
)
def test_yaml_the_reader_refuses_is_one_problem_on_one_line(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    problem = only(lint_files([path]))
    assert problem.message.startswith(says) and "\n" not in problem.message


def test_a_key_given_twice_is_reported_not_silently_dropped(tmp_path: Path) -> None:
    path = tmp_path / "twice.yaml"
    path.write_text("kind: Workflow\nspec:\n  entrypoint: a\n  entrypoint: b\n")
    assert "'entrypoint' is given twice (line 4" in only(lint_files([path])).message


def test_unknown_kind_is_one_clear_problem(tmp_path: Path) -> None:
    problem = only(lint(tmp_path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}))
    assert problem.path == "kind" and "'ConfigMap' is not one of Workflow" in problem.message


def test_another_kind_beside_an_argo_document_is_passed_over_as_argo_lint_does(tmp_path: Path) -> None:
    """`argo lint` lints what is Argo's and passes over the rest, failing only when nothing was left to lint;
    a ConfigMap beside a Workflow (upstream's k8s examples) was a problem."""
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    assert lint(tmp_path, config_map, workflow(ECHO)) == []
    pvc = tmp_path / "pvc.yaml"
    pvc.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "PersistentVolumeClaim"}))
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(workflow(ECHO)))
    assert lint_files([pvc, good]) == []
    assert "'PersistentVolumeClaim' is not one of Workflow" in only(lint_files([pvc])).message
    # what is surely a mistake of ours to report, though argo lint passes it over too
    misspelt = {**workflow(ECHO), "kind": "Workflw"}
    assert "'Workflw' is not one of Workflow" in only(lint(tmp_path, misspelt, workflow(ECHO))).message
    no_kind = {"apiVersion": "v1", "metadata": {"name": "x"}}
    assert "has no kind" in only(lint(tmp_path, no_kind, workflow(ECHO))).message


def test_missing_and_empty_files_are_one_problem_each(tmp_path: Path) -> None:
    (tmp_path / "empty.yaml").write_text("# nothing\n")
    problems = lint_files([tmp_path / "missing.yaml", tmp_path / "empty.yaml"])
    assert [p.message for p in problems] == [
        "cannot read the file: No such file or directory",
        "holds no YAML document",
    ]


def test_arguments_are_read_as_argo_lint_walks_them(tmp_path: Path) -> None:
    # Argo's WalkManifests: a directory gives its .yaml, .yml and .json files, nested ones too, in name order, and
    # not those of a linked directory; any other file is passed over; `-` is standard input.
    good, bad = yaml.safe_dump(workflow(ECHO)), yaml.safe_dump(workflow(ECHO, entrypoint="nope"))
    tree = tmp_path / "flows"
    for name, text in {
        "b.yaml": good,
        "a.yml": bad,
        "notes.txt": bad,
        "deeper/c.json": good,
        "deeper/d.yaml": bad,
    }.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(text)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "e.yaml").write_text(bad)
    (tree / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    loose = tmp_path / "wf.txt"
    loose.write_text(bad)
    files, passed = manifest_files([tree, "-", loose, tmp_path / "missing.yaml", "/dev/fd/0"])
    assert files == [
        tree / "a.yml", tree / "b.yaml", tree / "deeper" / "c.json", tree / "deeper" / "d.yaml",
        Path("-"), tmp_path / "missing.yaml", Path("/dev/fd/0"),
    ]  # fmt: skip
    assert [str(p) for p in passed] == [
        f"{loose}: was not linted: as argo lint, only .yaml, .yml and .json files are read"
    ]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert manifest_files([empty]) == (
        [],
        [Problem(str(empty), "", "holds no .yaml, .yml or .json file, so nothing was linted")],
    )


def test_the_cli_lints_a_directory_and_standard_input_and_fails_when_nothing_was_linted(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from pipelines.cli import app

    (tmp_path / "ok.yaml").write_text(yaml.safe_dump(workflow(ECHO)))
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(workflow(ECHO, entrypoint="nope")))
    (tmp_path / "readme.md").write_text("not a workflow")
    runner = CliRunner()
    done = runner.invoke(app, ["lint", str(tmp_path), "--json"])
    assert done.exit_code == 1
    report = json.loads(done.stdout)
    assert report["files"] == [str(tmp_path / "bad.yaml"), str(tmp_path / "ok.yaml")]
    assert {p["file"] for p in report["problems"]} == {str(tmp_path / "bad.yaml")}
    piped = runner.invoke(app, ["lint", "-"], input=(tmp_path / "bad.yaml").read_text())
    assert piped.exit_code == 1 and piped.stdout.startswith("standard input: spec.entrypoint: ")
    assert runner.invoke(app, ["lint", "-"], input=(tmp_path / "ok.yaml").read_text()).exit_code == 0
    alone = runner.invoke(app, ["lint", str(tmp_path / "readme.md")])  # argo lint: "found nothing to lint"
    assert (
        alone.exit_code == 1
        and alone.stdout
        == f"{tmp_path / 'readme.md'}: was not linted: as argo lint, only .yaml, .yml and .json files are read\n"
    )
    beside = runner.invoke(app, ["lint", str(tmp_path / "readme.md"), str(tmp_path / "ok.yaml")])
    assert beside.exit_code == 0 and beside.stderr == "1 file(s) OK\n"


def test_a_file_larger_than_any_manifest_is_one_problem_and_not_read_whole(tmp_path: Path) -> None:
    # it was read whole: `vcpilot lint /dev/zero` read until memory ran out
    (problem,) = lint_files([Path("/dev/zero")])
    assert problem.message == "holds more than 16 MiB, more than any manifest"


def test_documents_of_a_multi_document_file_are_told_apart(tmp_path: Path) -> None:
    problem = only(lint(tmp_path, workflow(ECHO), workflow(ECHO, entrypoint="nope")))
    assert str(problem).startswith(f"{tmp_path / 'wf.yaml'} (document 2): spec.entrypoint: ")


def test_two_independent_errors_are_two_problems(tmp_path: Path) -> None:
    doc = workflow(dag({"name": "a", "template": "ech"}), onExit="cleanup")
    problems = lint(tmp_path, doc)
    assert [p.path for p in problems] == ["spec.onExit", "spec.templates[0].dag.tasks[0].template"]


def test_every_problem_prints_as_one_line_naming_file_and_path(tmp_path: Path) -> None:
    doc = workflow(dag({"name": "a", "template": "echo", "when": "{{tasks.x.outputs.result}} ==\n 'a' &&"}), ECHO)
    problems = lint(tmp_path, doc)
    assert problems
    for problem in problems:
        assert "\n" not in str(problem) and str(problem).startswith(f"{tmp_path / 'wf.yaml'}: spec.templates[0]")


def test_lint_document_is_pure_and_takes_the_file_name(schema_path: Path) -> None:
    from pipelines.lint import load_schema

    problems = lint_document(workflow(ECHO, entrypoint="nope"), schema=load_schema(schema_path), file="in-memory")
    assert [str(p) for p in problems] == ["in-memory: spec.entrypoint: template 'nope' is not defined in this workflow"]


# --- the schema ---------------------------------------------------------------------------------------------------


def test_schema_type_errors_point_at_the_field(tmp_path: Path, schema_path: Path) -> None:
    problem = only(lint(tmp_path, workflow(ECHO, parallelism="two"), schema_path=schema_path))
    assert problem.path == "spec.parallelism" and problem.message == "expected integer, got a string ('two')"


def test_int_or_string_accepts_a_number_as_kubernetes_does(tmp_path: Path, schema_path: Path) -> None:
    retried = {**ECHO, "retryStrategy": {"limit": 2}}
    assert lint(tmp_path, workflow(retried), schema_path=schema_path) == []


def test_typos_in_field_names_are_unknown_fields(tmp_path: Path, schema_path: Path) -> None:
    doc = workflow(
        dag({"name": "a", "template": "echo"}, {"name": "b", "template": "echo", "dependecies": ["a"]}), ECHO
    )
    doc["spec"]["entrypiont"] = doc["spec"].pop("entrypoint")
    problems = {(p.path, p.message) for p in lint(tmp_path, doc, schema_path=schema_path)}
    assert problems == {
        ("spec.entrypiont", "unknown field 'entrypiont' (did you mean 'entrypoint'?)"),
        ("spec.templates[0].dag.tasks[1].dependecies", "unknown field 'dependecies' (did you mean 'dependencies'?)"),
        ("spec.entrypoint", "entrypoint is required: name the template the workflow starts with"),
    }


def test_schema_path_from_the_environment_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(SCHEMA_ENV, str(tmp_path / "nowhere.json"))
    assert find_schema() == tmp_path / "nowhere.json"
    problems = lint(tmp_path, workflow(ECHO))
    assert "cannot read Argo's JSON schema" in only(problems).message and SCHEMA_ENV in only(problems).message


def test_controller_rules_still_run_without_a_schema(tmp_path: Path) -> None:
    (tmp_path / "schema.json").write_text('{"definitions": {}}')
    problem = only(lint(tmp_path, workflow(ECHO, entrypoint="nope"), schema_path=tmp_path / "schema.json"))
    assert problem.path == "spec.entrypoint"


# --- the controller's rules ---------------------------------------------------------------------------------------


def test_continue_on_is_rejected_in_a_dag_that_uses_depends(tmp_path: Path) -> None:
    tasks = (
        {"name": "a", "template": "echo", "continueOn": {"failed": True}},
        {"name": "b", "template": "echo", "depends": "a"},
    )
    problem = only(lint(tmp_path, workflow(dag(*tasks), ECHO)))
    assert problem.path == "spec.templates[0].dag.tasks[0].continueOn" and "'X.Failed'" in problem.message


def test_depends_and_dependencies_cannot_be_mixed(tmp_path: Path) -> None:
    tasks = (
        {"name": "a", "template": "echo"},
        {"name": "b", "template": "echo", "depends": "a", "dependencies": ["a"]},
    )
    problem = only(lint(tmp_path, workflow(dag(*tasks), ECHO)))
    assert problem.path == "spec.templates[0].dag.tasks[1].dependencies" and "uses 'depends'" in problem.message


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"entrypoint": "mian"}, "spec.entrypoint"),
        ({"onExit": "cleanup"}, "spec.onExit"),
        ({"templates": [dag({"name": "a", "template": "ecko"}), ECHO]}, "spec.templates[0].dag.tasks[0].template"),
        (
            {"templates": [{"name": "main", "steps": [[{"name": "a", "template": "x"}]]}]},
            "spec.templates[0].steps[0][0].template",
        ),
        (
            {"templates": [dag({"name": "a", "template": "echo", "onExit": "x"}), ECHO]},
            "spec.templates[0].dag.tasks[0].onExit",
        ),
    ],
)
def test_unknown_template_references(tmp_path: Path, spec: dict[str, Any], path: str) -> None:
    doc = workflow({**ECHO, "name": "main"})
    doc["spec"].update(spec)
    problem = only(lint(tmp_path, doc))
    assert problem.path == path and "is not defined in this workflow" in problem.message


def test_template_ref_is_not_resolved_locally(tmp_path: Path) -> None:
    task = {"name": "a", "templateRef": {"name": "elsewhere", "template": "x"}}
    assert lint(tmp_path, workflow(dag(task))) == []


@pytest.mark.parametrize("kind", ["steps", "dag"])
def test_a_sequence_with_both_count_and_end_is_refused(tmp_path: Path, kind: str) -> None:
    """Argo's validator (workflow/validate/validate.go, addItemsToScope) refuses it, "only one of count or end can
    be defined in withSequence", for a step and a task alike; before, lint passed it and the runner ran `end`."""
    call = {"name": "a", "template": "echo", "withSequence": {"count": "2", "end": "3"}}
    main = {"name": "main", "steps": [[call]]} if kind == "steps" else dag(call)
    where = "steps[0][0]" if kind == "steps" else "dag.tasks[0]"
    problem = only(lint(tmp_path, workflow(main, ECHO)))
    assert problem.path == f"spec.templates[0].{where}.withSequence"
    assert "withSequence may define only one of count and end" in problem.message


@pytest.mark.parametrize(
    ("task", "phrase"),
    [
        ({"depends": "a && ghost"}, "depends on task 'ghost', which is not in this DAG"),
        ({"depends": "a.Succeded"}, "'Succeded' is not a task result"),
        ({"depends": "a.AnySucceeded"}, "needs task 'a' to loop over items"),
        ({"depends": "(a.Succeeded ||"}, "does not parse"),
    ],
)
def test_bad_depends(tmp_path: Path, task: dict[str, Any], phrase: str) -> None:
    doc = workflow(dag({"name": "a", "template": "echo"}, {"name": "b", "template": "echo", **task}), ECHO)
    problem = only(lint(tmp_path, doc))
    assert problem.path == "spec.templates[0].dag.tasks[1].depends" and phrase in problem.message


def test_unknown_task_in_dependencies(tmp_path: Path) -> None:
    doc = workflow(
        dag({"name": "a", "template": "echo"}, {"name": "b", "template": "echo", "dependencies": ["ghost"]}), ECHO
    )
    assert only(lint(tmp_path, doc)).path == "spec.templates[0].dag.tasks[1].dependencies[0]"


def test_dependency_cycle(tmp_path: Path) -> None:
    doc = workflow(
        dag({"name": "a", "template": "echo", "depends": "b"}, {"name": "b", "template": "echo", "depends": "a"}), ECHO
    )
    problem = only(lint(tmp_path, doc))
    assert problem.path == "spec.templates[0].dag.tasks" and "cycle: a -> b -> a" in problem.message


def test_task_references_must_name_a_task_of_the_dag(tmp_path: Path) -> None:
    arguments = {"parameters": [{"name": "text", "value": "{{tasks.ghost.outputs.result}}"}]}
    doc = workflow(dag({"name": "a", "template": "say", "arguments": arguments}), SAY)
    problem = only(lint(tmp_path, doc))
    assert problem.path == "spec.templates[0].dag.tasks[0].arguments.parameters[0].value"
    assert "task 'ghost', which is not in this template" in problem.message


def test_an_argument_from_a_task_needs_a_dependency_on_it(tmp_path: Path) -> None:
    arguments = {"parameters": [{"name": "text", "value": "{{tasks.a.outputs.result}}"}]}
    doc = workflow(
        dag({"name": "a", "template": "echo"}, {"name": "b", "template": "say", "arguments": arguments}), ECHO, SAY
    )
    assert "does not depend on it" in only(lint(tmp_path, doc)).message


def test_a_resource_task_has_no_result(tmp_path: Path) -> None:
    create = {"name": "create", "resource": {"action": "create", "manifest": "kind: ConfigMap\n"}}
    arguments = {"parameters": [{"name": "text", "value": "{{tasks.a.outputs.result}}"}]}
    tasks = (
        {"name": "a", "template": "create"},
        {"name": "b", "template": "say", "depends": "a", "arguments": arguments},
    )
    assert "produces no outputs.result" in only(lint(tmp_path, workflow(dag(*tasks), create, SAY))).message


def test_step_references_must_point_at_an_earlier_step(tmp_path: Path) -> None:
    arguments = {"parameters": [{"name": "text", "value": "{{steps.b.outputs.result}}"}]}
    steps = {
        "name": "main",
        "steps": [[{"name": "a", "template": "say", "arguments": arguments}], [{"name": "b", "template": "echo"}]],
    }
    problem = only(lint(tmp_path, workflow(steps, ECHO, SAY)))
    assert problem.path == "spec.templates[0].steps[0][0].arguments.parameters[0].value"
    assert "does not run before this one" in problem.message


@pytest.mark.parametrize(
    ("doc", "path", "phrase"),
    [
        (workflow(ECHO, {**ECHO, "name": "Bad_Name"}), "spec.templates[1].name", "template name 'Bad_Name' is invalid"),
        (workflow(ECHO, ECHO), "spec.templates[1].name", "template name 'echo' is used twice"),
        (
            workflow(dag({"name": "a", "template": "echo"}, {"name": "a", "template": "echo"}), ECHO),
            "spec.templates[0].dag.tasks[1].name",
            "task name 'a' is used twice",
        ),
        (
            workflow(
                {"name": "main", "steps": [[{"name": "a", "template": "echo"}], [{"name": "a", "template": "echo"}]]},
                ECHO,
            ),
            "spec.templates[0].steps[1][0].name",
            "step name 'a' is used twice",
        ),
        (
            workflow({**ECHO, "inputs": {"parameters": [{"name": "a b", "value": "1"}]}}),
            "spec.templates[0].inputs.parameters[0].name",
            "input parameter name 'a b' is invalid",
        ),
        (
            workflow(ECHO, arguments={"parameters": [{"name": "p", "value": "1"}, {"name": "p", "value": "2"}]}),
            "spec.arguments.parameters[1].name",
            "parameter name 'p' is used twice",
        ),
        (
            workflow(
                dag({"name": "1st", "template": "echo"}, {"name": "b", "template": "echo", "depends": "1st"}), ECHO
            ),
            "spec.templates[0].dag.tasks[0].name",
            "cannot start with a digit",
        ),
        (workflow(ECHO) | {"metadata": {"name": "My_Flow"}}, "metadata.name", "must be lowercase letters"),
    ],
)
def test_bad_and_duplicate_names(tmp_path: Path, doc: dict[str, Any], path: str, phrase: str) -> None:
    problem = only(lint(tmp_path, doc))
    assert problem.path == path and phrase in problem.message


@pytest.mark.parametrize(
    "when", ["{{tasks.a.outputs.result}} = heads", "('{{workflow.status}}' == 'x'", "a == 'b", "!heads"]
)
def test_when_that_does_not_parse(tmp_path: Path, when: str) -> None:
    doc = workflow(
        dag({"name": "a", "template": "echo"}, {"name": "b", "template": "echo", "depends": "a", "when": when}), ECHO
    )
    problem = only(lint(tmp_path, doc))
    assert problem.path == "spec.templates[0].dag.tasks[1].when" and "does not parse" in problem.message


def test_when_in_govaluate_form_parses(tmp_path: Path) -> None:
    when = "{{tasks.a.outputs.result}} == heads && ('{{workflow.status}}' != 'Failed' || !false)"
    doc = workflow(
        dag({"name": "a", "template": "echo"}, {"name": "b", "template": "echo", "depends": "a", "when": when}), ECHO
    )
    assert lint(tmp_path, doc) == []


def test_a_required_input_must_be_passed(tmp_path: Path) -> None:
    steps = {"name": "main", "steps": [[{"name": "a", "template": "say"}]]}
    problem = only(lint(tmp_path, workflow(steps, SAY)))
    assert problem.path == "spec.templates[0].steps[0][0]"
    assert problem.message == "step 'a' gives no value for input parameter 'text' of template 'say'"


def test_an_argument_needs_a_value(tmp_path: Path) -> None:
    doc = workflow(dag({"name": "a", "template": "say", "arguments": {"parameters": [{"name": "text"}]}}), SAY)
    problems = lint(tmp_path, doc)
    assert [p.path for p in problems] == [
        "spec.templates[0].dag.tasks[0]",
        "spec.templates[0].dag.tasks[0].arguments.parameters[0]",
    ]
    assert "needs a value or valueFrom" in problems[1].message


def test_the_entrypoint_takes_its_inputs_from_the_workflow_arguments(tmp_path: Path) -> None:
    problem = only(lint(tmp_path, workflow(SAY)))
    assert problem.path == "spec.arguments" and "input parameter 'text' of template 'say'" in problem.message
    assert lint(tmp_path, workflow(SAY, arguments={"parameters": [{"name": "text", "value": "hi"}]})) == []
    assert lint(tmp_path, workflow(SAY, kind="WorkflowTemplate")) == []


def test_undeclared_parameters_cannot_be_referenced(tmp_path: Path) -> None:
    typo = {
        **SAY,
        "container": {"image": "alpine", "command": ["echo", "{{inputs.parameters.txt}}", "{{workflow.parameters.x}}"]},
    }
    problems = lint(
        tmp_path,
        workflow(
            dag({"name": "a", "template": "say", "arguments": {"parameters": [{"name": "text", "value": "1"}]}}), typo
        ),
    )
    assert [(p.path, p.message) for p in problems] == [
        (
            "spec.templates[1].container.command[1]",
            "template 'say': {{inputs.parameters.txt}} is not declared in the template's inputs (did you mean 'text'?)",
        ),
        (
            "spec.templates[1].container.command[2]",
            "template 'say': {{workflow.parameters.x}} is not declared in spec.arguments",
        ),
    ]


def test_a_workflow_variable_argo_does_not_set_is_a_problem(tmp_path: Path) -> None:
    """Argo's validator: "failed to resolve {{workflow.nmae}}"; lint said nothing."""
    echo = {**ECHO, "container": {"image": "alpine", "command": ["echo", "{{workflow.nmae}}", "{{workflow.labels.x}}"]}}
    problems = lint(tmp_path, workflow(echo))
    assert [(p.path, p.message) for p in problems] == [
        (
            "spec.templates[0].container.command[1]",
            "template 'echo': {{workflow.nmae}} is not a variable Argo sets for this workflow (Argo: failed to resolve "
            "it) (did you mean 'workflow.name'?)",
        ),
        (
            "spec.templates[0].container.command[2]",
            "template 'echo': {{workflow.labels.x}} names no label of the workflow (metadata or spec.workflowMetadata)",
        ),
    ]
    cron_run = {
        **ECHO,
        "container": {"image": "a", "command": ["echo", "{{workflow.labels.workflows.argoproj.io/cron-workflow}}"]},
    }
    cron = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": "c"},
        "spec": {"schedules": ["0 2 * * *"], "workflowSpec": workflow(cron_run)["spec"]},
    }
    assert lint(tmp_path, cron) == []  # the label its runs carry
    alone = {**ECHO, "container": {"image": "a", "command": ["echo", "{{workflow.parameters.given-at-submit}}"]}}
    assert lint(tmp_path, workflow(alone, kind="WorkflowTemplate")) == []


def test_every_workflow_parameter_as_json_is_argos_own_variable(tmp_path: Path) -> None:
    """`{{workflow.parameters.json}}` (util/variables/keys in Argo v4): upstream's variables-showcase was refused."""
    echo = {**ECHO, "container": {"image": "alpine", "command": ["echo", "{{workflow.parameters.json}}"]}}
    assert lint(tmp_path, workflow(echo, arguments={"parameters": [{"name": "a", "value": "1"}]})) == []


def test_entrypoint_is_required_for_a_workflow_but_not_a_template(tmp_path: Path) -> None:
    doc = workflow(ECHO)
    del doc["spec"]["entrypoint"]
    assert only(lint(tmp_path, doc)).path == "spec.entrypoint"
    assert lint(tmp_path, doc | {"kind": "WorkflowTemplate"}) == []


@pytest.mark.parametrize(
    ("template", "phrase"),
    [
        ({"name": "t"}, "has no type"),
        (
            {"name": "t", "container": {"image": "a"}, "script": {"image": "a", "source": "x"}},
            "several types (container, script)",
        ),
    ],
)
def test_a_template_has_exactly_one_type(tmp_path: Path, template: dict[str, Any], phrase: str) -> None:
    problem = only(lint(tmp_path, workflow(template)))
    assert problem.path == "spec.templates[0]" and phrase in problem.message


def test_retry_strategy_on_a_resource_template_is_accepted_like_argo_does(tmp_path: Path) -> None:
    create = {"name": "c", "retryStrategy": {"limit": "2"}, "resource": {"action": "create", "manifest": "kind: X\n"}}
    assert lint(tmp_path, workflow(create)) == []


def test_cron_workflow_rules_apply_to_its_workflow_spec(tmp_path: Path) -> None:
    spec = {"schedules": ["*/5 * * *"], "workflowSpec": {"entrypoint": "mian", "templates": [ECHO]}}
    doc = {"apiVersion": "argoproj.io/v1alpha1", "kind": "CronWorkflow", "metadata": {"name": "c"}, "spec": spec}
    assert [p.path for p in lint(tmp_path, doc)] == ["spec.schedules[0]", "spec.workflowSpec.entrypoint"]


@pytest.mark.parametrize(
    ("template", "spec", "path", "phrase"),
    [
        (
            {**ECHO, "name": "main", "podResources": {"requests": {"nvidia.com/gpu": "1"}}},
            {},
            "spec.templates[0].podResources.requests",
            "'nvidia.com/gpu' is not a pod-level resource",
        ),
        (
            {**ECHO, "name": "main"},
            {"podResources": {"claims": [{"name": "gpu"}]}},
            "spec.podResources.claims",
            "claims is not supported",
        ),
        (
            {"name": "get", "http": {"url": "http://127.0.0.1"}, "podResources": {"requests": {"cpu": "1"}}},
            {},
            "spec.templates[0].podResources",
            "podResources is not supported for http templates",
        ),
        (
            {"name": "main", "steps": [[{"name": "a", "template": "echo"}]], "resourceClaims": [{"name": "gpu"}]},
            {},
            "spec.templates[0].resourceClaims",
            "resourceClaims is not supported for steps templates",
        ),
    ],
)
def test_pod_level_resources_argo_refuses_are_refused(tmp_path, template, spec, path, phrase) -> None:
    """Argo's validatePodResources and validateTemplate (workflow/validate/validate.go): pod-level resources are
    cpu, memory and hugepages-*, never claims, and only where a pod runs; before, lint passed all four."""
    problem = only(lint(tmp_path, workflow(template, ECHO, **spec)))
    assert problem.path == path and phrase in problem.message, problem


def test_pod_level_resources_argo_accepts_are_accepted(tmp_path: Path) -> None:
    resources = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"hugepages-2Mi": "1Gi"}}
    claimed = {**ECHO, "podResources": resources, "resourceClaims": [{"name": "gpu", "resourceClaimName": "g"}]}
    assert lint(tmp_path, workflow(claimed, podResources=resources)) == []


MOUNTED = {"image": "a", "command": ["true"], "volumeMounts": [{"name": "v", "mountPath": "/x"}]}


@pytest.mark.parametrize(
    ("template", "path", "phrase"),
    [
        ({"name": "main", "container": {"command": ["true"]}}, "container.image", "container.image may not be empty"),
        ({"name": "main", "script": {"image": "", "source": "true"}}, "script.image", "script.image may not be empty"),
        (
            {"name": "main", "container": {**MOUNTED, "volumeMounts": MOUNTED["volumeMounts"] * 2}},
            "container.volumeMounts[1].mountPath",
            "'/x' is already mounted",
        ),
        (
            {
                "name": "main",
                "inputs": {"artifacts": [{"name": "a", "path": "/x", "raw": {"data": "1"}}]},
                "container": MOUNTED,
            },
            "inputs.artifacts[0].path",
            "'/x' is already mounted (volume 'v')",
        ),
        ({**ECHO, "name": "main", "sidecars": [{"name": "wait", "image": "a"}]}, "sidecars", "'wait' is a reserved"),
        (
            {
                "name": "main",
                "containerSet": {"containers": [{"name": "supervisor", "image": "a", "command": ["true"]}]},
            },
            "containerSet.containers",
            "'supervisor' is a reserved Argo container name",
        ),
        (
            {
                "name": "main",
                "containerSet": {"containers": [{"name": "a", "image": "a", "command": ["true"]}]},
                "outputs": {"parameters": [{"name": "o", "valueFrom": {"path": "/tmp/o"}}]},
            },
            "containerSet.containers",
            "needs a container named 'main'",
        ),
        ({"name": "main", "resource": {"action": "scale", "manifest": "kind: X"}}, "resource.action", "must be one of"),
        (
            {"name": "main", "resource": {"action": "create"}},
            "resource",
            "give the resource a manifest or manifestFrom",
        ),
        ({"name": "main", "resource": {"action": "apply", "manifest": "a: [b"}}, "resource.manifest", "valid YAML"),
        ({**ECHO, "name": "main", "parallelism": 2}, "parallelism", "only valid for steps and dag templates"),
    ],
)
def test_a_leaf_template_argo_refuses_is_refused(tmp_path, template, path, phrase) -> None:
    """Argo's validateLeaf (workflow/validate/validate.go) refuses each at submit; before, lint passed them all and
    the runner, which ignores images and mounts nothing, ran them."""
    volumes = [{"name": "v", "emptyDir": {}}]
    problem = only(lint(tmp_path, workflow(template, volumes=volumes)))
    assert problem.path == f"spec.templates[0].{path}" and phrase in problem.message, problem


def test_what_validate_leaf_accepts_is_accepted(tmp_path: Path) -> None:
    """The image from templateDefaults, `{{...}}` in a manifest or an action, parallelism on steps, a get without
    a manifest."""
    main = {
        "name": "main",
        "parallelism": 1,
        "steps": [[{"name": "a", "template": "c"}, {"name": "b", "template": "g"}]],
    }
    container = {"name": "c", "container": {"command": ["true"]}}
    manifest = "kind: Job\nmetadata: {name: {{workflow.name}}}\n"
    get = {"name": "g", "resource": {"action": "get", "manifest": manifest}}
    doc = workflow(main, container, get, templateDefaults={"container": {"image": "alpine"}})
    assert lint(tmp_path, doc) == []


@pytest.mark.parametrize(
    ("where", "amount", "phrase"),
    [
        ("container", "abc", "'abc' is not a quantity"),
        ("container", "1GB", "'1GB' is not a quantity"),
        ("container", "{{workflow.name}}", "use podSpecPatch"),  # argo-workflows issues 703, 1015, 6939, 15005
        ("script", "1.5.5", "'1.5.5' is not a quantity"),
        ("sidecars[0]", "2 Gi", "'2 Gi' is not a quantity"),
        ("initContainers[0]", "-", "'-' is not a quantity"),
    ],
)
def test_a_request_that_is_no_quantity_is_refused_as_argo_decodes_it(tmp_path, where, amount, phrase) -> None:
    """apimachinery's Quantity.UnmarshalJSON runs when Argo reads the workflow, before any `{{...}}` is substituted:
    "quantities must match the regular expression"; before, lint passed these and the runner ran them."""
    pod = {"image": "alpine", "command": ["true"], "resources": {"limits": {"memory": amount}}}
    kind, _, index = where.partition("[")
    template: dict[str, Any] = {"name": "main", "container": {"image": "alpine", "command": ["true"]}}
    if kind == "script":
        template = {"name": "main", "script": {**pod, "source": "true"}}
    elif index:
        template[kind] = [{**pod, "name": "side"}]
    else:
        template["container"] = pod
    problem = only(lint(tmp_path, workflow(template)))
    assert problem.path == f"spec.templates[0].{where}.resources.limits.memory" and phrase in problem.message, problem


def test_a_quantity_written_as_a_number_is_accepted(tmp_path: Path) -> None:
    """`nvidia.com/gpu: 1`, as Kubernetes' own docs write it: Quantity.UnmarshalJSON reads a JSON number's text as it
    reads a string (the published schema says string only; lint refused every such request before)."""
    resources = {"limits": {"nvidia.com/gpu": 1, "cpu": 0.5}, "requests": {"memory": "100Mi", "cpu": 1e3}}
    template = {"name": "main", "container": {"image": "alpine", "command": ["true"], "resources": resources}}
    assert lint(tmp_path, workflow(template)) == []


COUNTER = {"name": "runs_total", "help": "Runs", "counter": {"value": "1"}}


@pytest.mark.parametrize(
    ("metric", "phrase"),
    [
        ({**COUNTER, "name": "runs-total"}, "'runs-total' is invalid"),
        ({**COUNTER, "name": "runs:total"}, "'runs:total' is invalid"),
        ({**COUNTER, "labels": [{"key": "step-name", "value": "x"}]}, "'step-name' is invalid"),
        ({**COUNTER, "help": ""}, "needs a help string"),
        ({**COUNTER, "counter": {"value": ""}}, "needs counter.value"),
    ],
)
def test_a_metric_argo_refuses_is_refused(tmp_path: Path, metric: dict[str, Any], phrase: str) -> None:
    """Argo's validateTemplate and workflow/metrics/util.go (IsValidMetricName: Prometheus' legacy names, no ':';
    ValidateMetricValues); before, lint passed each."""
    problem = only(lint(tmp_path, workflow({**ECHO, "metrics": {"prometheus": [metric]}})))
    assert problem.path.startswith("spec.templates[0].metrics.prometheus[0]") and phrase in problem.message


def test_a_pod_gc_strategy_argo_does_not_know_is_refused(tmp_path: Path) -> None:
    """Argo's validate.Workflow: PodGCStrategy.IsValid; before, lint passed it."""
    assert lint(tmp_path, workflow(ECHO, podGC={"strategy": "OnWorkflowSuccess"})) == []
    problem = only(lint(tmp_path, workflow(ECHO, podGC={"strategy": "OnSuccess"})))
    assert problem.path == "spec.podGC.strategy" and "'OnSuccess' is not one of OnPodCompletion" in problem.message


def cron_workflow(**spec: Any) -> dict[str, Any]:
    body = {"schedules": ["0 2 * * *"], "workflowSpec": {"entrypoint": "echo", "templates": [ECHO]}, **spec}
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "CronWorkflow", "metadata": {"name": "c"}, "spec": body}


@pytest.mark.parametrize(
    "schedule",
    [
        "*/5 * * * *",
        "0 9-17/2 * JAN-mar mon,FRI",
        "? 0 1 * 0",
        "5/15 * * * *",
        "CRON_TZ=Asia/Tokyo 0 3 * * *",
        "TZ=UTC @daily",
        "@every 1h30m",
        "@hourly",
    ],
)
def test_schedules_robfig_cron_parses_are_accepted(tmp_path: Path, schedule: str) -> None:
    assert lint(tmp_path, cron_workflow(schedules=[schedule])) == []


@pytest.mark.parametrize(
    ("spec", "path", "phrase"),
    [
        ({"schedules": ["61 * * * *"]}, "spec.schedules[0]", "minute '61': outside 0-59"),
        ({"schedules": ["0 0 * * 7"]}, "spec.schedules[0]", "day of week '7': outside 0-6"),
        ({"schedules": ["0 0 0 * *"]}, "spec.schedules[0]", "day of month '0': outside 1-31"),
        ({"schedules": ["0 5-1 * * *"]}, "spec.schedules[0]", "hour '5-1': outside 0-23"),
        ({"schedules": ["*/0 * * * *"]}, "spec.schedules[0]", "the step must be positive"),
        ({"schedules": ["0 0 * foo *"]}, "spec.schedules[0]", "month 'foo': not a number"),
        ({"schedules": ["@every 1d"]}, "spec.schedules[0]", "'1d' is not a Go duration"),
        ({"schedules": ["@fortnightly"]}, "spec.schedules[0]", "'@fortnightly' is not one of @yearly"),
        ({"schedules": ["CRON_TZ=Mars/Olympus 0 0 * * *"]}, "spec.schedules[0]", "'Mars/Olympus' is not a time zone"),
        ({"schedules": []}, "spec.schedules", "needs at least one schedule"),
        ({"timezone": "Mars/Olympus"}, "spec.timezone", "is not a time zone of the IANA database"),
        ({"concurrencyPolicy": "Sometimes"}, "spec.concurrencyPolicy", "is not one of Allow, Forbid, Replace"),
        ({"startingDeadlineSeconds": -1}, "spec.startingDeadlineSeconds", "must not be negative"),
    ],
)
def test_a_cron_workflow_argo_refuses_is_refused(tmp_path: Path, spec: dict[str, Any], path: str, phrase: str) -> None:
    """Argo's validate.CronWorkflow (workflow/validate/validate.go) parses each schedule with robfig/cron v3's
    ParseStandard and checks the timezone, concurrencyPolicy and startingDeadlineSeconds; before, lint took a
    schedule of five well-formed fields whatever their values, and the rest unchecked."""
    problem = only(lint(tmp_path, cron_workflow(**spec)))
    assert problem.path == path and phrase in problem.message, problem


def test_parameter_values_may_be_numbers_as_argo_reads_them(tmp_path: Path, schema_path: Path) -> None:
    arguments = {"parameters": [{"name": "n", "value": 3, "enum": [1, 2, 3]}, {"name": "flag", "value": True}]}
    assert lint(tmp_path, workflow(ECHO, arguments=arguments), schema_path=schema_path) == []
    arguments["parameters"][0]["value"] = 4
    problem = only(lint(tmp_path, workflow(ECHO, arguments=arguments), schema_path=schema_path))
    assert problem.path == "spec.arguments.parameters[0].value" and "is not one of its enum" in problem.message


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"", "error: --schema {schema} is not Argo's JSON schema (it is empty)"),
        (b"not json", "error: --schema {schema} is not Argo's JSON schema (Expecting value"),
        (b"[]", "error: --schema {schema} is not Argo's JSON schema (it has no 'definitions')"),
        (None, "error: cannot read --schema {schema}: No such file or directory"),
        # it was read whole with open(): /dev/zero or a log by mistake filled the memory
        (b" " * (MANIFEST_MAX_BYTES + 1), "error: --schema {schema} holds more than 16 MiB, more than any manifest"),
        (b'{"definitions": "caf\xe9"}', "error: --schema {schema} is not UTF-8 text (byte 0xe9 at offset 20)"),
        (
            b'{"definitions": {"io.argoproj.workflow.v1alpha1.Workflow": 5}}',
            "error: --schema {schema} is not Argo's JSON schema (its definition "
            "'io.argoproj.workflow.v1alpha1.Workflow' is not an object)",
        ),
    ],
    ids=["empty", "not-json", "no-definitions", "missing", "too-big", "not-utf8", "definition-not-an-object"],
)
def test_a_schema_that_cannot_be_read_is_one_sentence_naming_schema(tmp_path, content, says):
    # it was reported as one more problem against each file linted
    from typer.testing import CliRunner

    from pipelines.cli import app

    schema = tmp_path / "schema.json"
    if content is not None:
        schema.write_bytes(content)
    workflow = tmp_path / "w.yaml"
    workflow.write_text("kind: Workflow\n")
    done = CliRunner().invoke(app, ["lint", "--schema", str(schema), str(workflow)])
    assert done.exit_code == 1 and done.stdout == ""
    assert done.stderr.startswith(says.format(schema=schema)) and done.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("definition", "says"),
    [
        ({"type": "bogus"}, "UnknownType"),  # an internal error before
        ({"properties": {"spec": {"$ref": "#/definitions/nowhere"}}}, "PointerToNowhere"),
        ({"properties": {"spec": 5}}, "AttributeError"),  # a sub-schema that is no schema
    ],
)
def test_a_schema_broken_where_a_document_leads_it_is_a_problem_not_an_internal_error(
    tmp_path: Path, definition: dict[str, Any], says: str
) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"definitions": {"io.argoproj.workflow.v1alpha1.Workflow": definition}}))
    problems = lint(tmp_path, workflow(ECHO), schema_path=schema)
    broken = [p for p in problems if "Argo's JSON schema cannot check it" in p.message]
    assert len(broken) == 1 and says in broken[0].message and SCHEMA_ENV in broken[0].message


# --- what the local runner refuses at load is a lint problem too (one rule: pipelines.local.workflow.check_timing) --


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"retryStrategy": {"limit": "abc"}}, "template 'echo' retryStrategy.limit is 'abc': write a whole number"),
        ({"retryStrategy": {"backoff": {"duration": "abc"}}}, "retryStrategy.backoff.duration 'abc' is not a duration"),
        ({"activeDeadlineSeconds": "abc"}, "template 'echo' activeDeadlineSeconds is 'abc'"),
        ({"timeout": "abc"}, "template 'echo' timeout 'abc' is not a duration"),
        ({"pendingTimeout": "1.5"}, "template 'echo' pendingTimeout '1.5' is not a duration"),
    ],
)
def test_retry_and_deadline_values_that_cannot_be_read_are_problems(
    tmp_path: Path, fields: dict[str, Any], says: str
) -> None:
    problem = only(lint(tmp_path, workflow({**ECHO, **fields})))
    assert problem.path == "spec.templates[0]" and says in problem.message


def test_an_api_version_argo_does_not_serve_is_a_problem_without_the_schema_too(tmp_path: Path) -> None:
    (tmp_path / "schema.json").write_text('{"definitions": {}}')
    document = {**workflow(ECHO), "apiVersion": "argoproj.io/v2"}
    problem = only(lint(tmp_path, document, schema_path=tmp_path / "schema.json"))
    assert problem.path == "apiVersion" and problem.message == "must be 'argoproj.io/v1alpha1'"


def test_an_output_parameter_from_a_source_its_template_does_not_read_is_a_problem(tmp_path: Path) -> None:
    # Argo's validateOutputs: a container's output comes from a path; run-workflow refuses it with the same words.
    writer = {**SAY, "outputs": {"parameters": [{"name": "o", "valueFrom": {"expression": "'x'"}}]}}
    problem = only(lint(tmp_path, workflow(writer, arguments={"parameters": [{"name": "text", "value": "hi"}]})))
    assert problem.path == "spec.templates[0]"
    assert problem.message == (
        "template 'say': outputs.parameters.o.valueFrom.expression is not read in a container template: use path"
    )


def test_a_step_argument_outside_its_own_enum_is_a_problem(tmp_path: Path) -> None:
    # Argo's validateArgumentsValues compares the value as written.
    argument = {"name": "text", "value": "purple", "enum": ["red", "blue"]}
    doc = workflow(dag({"name": "a", "template": "say", "arguments": {"parameters": [argument]}}), SAY)
    problem = only(lint(tmp_path, doc))
    assert problem.path == "spec.templates[0].dag.tasks[0].arguments"
    assert "'purple' is not one of its enum red, blue" in problem.message


@pytest.mark.parametrize("outputs", [[], {"parameters": "p"}, {"parameters": ["p"]}])
def test_outputs_of_the_wrong_shape_are_shape_problems_not_crashes(tmp_path: Path, outputs: Any) -> None:
    doc = workflow({**SAY, "outputs": outputs}, arguments={"parameters": [{"name": "text", "value": "x"}]})
    assert only(lint(tmp_path, doc)).message.startswith("expected ")
