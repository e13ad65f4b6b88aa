"""`{{...}}` tags in the scopes Argo v4.1.2's validator builds (pipelines/lint_scope.py).

What `argo lint` refuses with "failed to resolve {{...}}" is one problem naming the template and the tag; what it
takes is no problem. Every case below was put to the real `argo lint --offline` v4.1.2 and it agreed, save the one
in STRICTER and the templateRef, whose WorkflowTemplate Argo looked up (it is in no file, so neither could it nor
can we read its outputs). tests/e2e/test_argo_lint.py keeps a sample of them checked against it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from components.errors import InputError
from pipelines.cli import app
from pipelines.lint import lint_document
from pipelines.lint_tags import lookup_key, substitute, tags

ECHO = {"name": "echo", "container": {"image": "alpine", "command": ["echo", "hi"]}}
SAY = {
    "name": "say",
    "inputs": {"parameters": [{"name": "text"}]},
    "container": {"image": "alpine", "command": ["echo", "{{inputs.parameters.text}}"]},
}
CREATE = {"name": "create", "resource": {"action": "create", "manifest": "kind: ConfigMap\n"}}
GLOBAL = {**ECHO, "name": "g", "outputs": {"parameters": [{"name": "p", "value": "1", "globalName": "G"}]}}
ART = {"artifacts": [{"name": "a", "path": "/tmp/a", "raw": {"data": "x"}}]}


def wf(*templates: dict[str, Any], kind: str = "Workflow", **spec: Any) -> dict[str, Any]:
    """A workflow that starts with the first of `templates`; echo and say are there to be called."""
    names = {t["name"] for t in templates}
    body = {
        "entrypoint": templates[0]["name"],
        "templates": [*templates, *(t for t in (ECHO, SAY) if t["name"] not in names)],
    }
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": kind,
        "metadata": {"generateName": "t-"},
        "spec": {**body, **spec},
    }


def leaf(*args: str, name: str = "main", **fields: Any) -> dict[str, Any]:
    return {"name": name, "container": {"image": "alpine", "command": ["echo", *args]}, **fields}


def steps(*groups: list[dict[str, Any]], name: str = "main", **fields: Any) -> dict[str, Any]:
    return {"name": name, "steps": [list(group) for group in groups], **fields}


def dag(*tasks: dict[str, Any], name: str = "main", **fields: Any) -> dict[str, Any]:
    return {"name": name, "dag": {"tasks": list(tasks)}, **fields}


def say(name: str, value: str, **fields: Any) -> dict[str, Any]:
    """A step or task that passes `value` to say."""
    return {"name": name, "template": "say", "arguments": {"parameters": [{"name": "text", "value": value}]}, **fields}


def run(name: str, template: str = "echo", **fields: Any) -> dict[str, Any]:
    return {"name": name, "template": template, **fields}


ARG = "arguments.parameters[0].value"
EXIT_HOOK = {"exit": {"template": "echo"}}

# name: (document, where the problem is, what its sentence says)
REFUSED: dict[str, tuple[dict[str, Any], str, str]] = {
    # fasttemplate over the template's JSON: 'cannot find end tag "}}"' (the local runner failed at the node)
    "a tag that never closes": (
        wf(leaf("value {{workflow.name", "done")),
        "spec.templates[0].container.command[1]",
        "template 'main': '{{workflow.name' opens a tag that never closes",
    ),
    "a tag that never closes in a step's argument": (
        wf(steps([say("a", "x}} then {{inputs.parameters.nope")])),
        f"spec.templates[0].steps[0][0].{ARG}",
        "template 'main' step 'a': '{{inputs.parameters.nope' opens a tag that never closes",
    ),
    "a misspelt pod variable": (
        wf(leaf("{{pod.nme}}")),
        "spec.templates[0].container.command[1]",
        "template 'main': {{pod.nme}} is not a variable Argo sets (did you mean 'pod.name'?)",
    ),
    "pod.name where no pod runs": (
        wf(steps([say("a", "{{pod.name}}")])),
        f"spec.templates[0].steps[0][0].{ARG}",
        "template 'main' step 'a': {{pod.name}} is set only where a pod runs",
    ),
    "pod.name in a suspend template": (
        wf({"name": "main", "suspend": {"duration": "{{pod.name}}"}}),
        "spec.templates[0].suspend.duration",
        "not in a suspend template",
    ),
    "pod.name in an inline template, seen from its step": (
        wf(steps([{"name": "a", "inline": {"container": {"image": "alpine", "command": ["echo", "{{pod.name}}"]}}}])),
        "spec.templates[0].steps[0][0].inline.container.command[1]",
        "template 'main' step 'a': {{pod.name}} is set only where a pod runs",
    ),
    "an input artifact not declared": (
        wf(leaf("{{inputs.artifacts.zz.path}}", inputs=ART)),
        "spec.templates[0].container.command[1]",
        "{{inputs.artifacts.zz.path}}: the template declares no input artifact 'zz'",
    ),
    "an input artifact's path in a steps template": (
        wf(
            steps(
                [say("s", "{{inputs.artifacts.a.path}}")], inputs={"artifacts": [{"name": "a", "raw": {"data": "x"}}]}
            )
        ),
        f"spec.templates[0].steps[0][0].{ARG}",
        "an input artifact has a path only where a pod runs",
    ),
    "an input artifact variable Argo does not set": (
        wf(leaf("{{inputs.artifacts.a.key}}", inputs=ART)),
        "spec.templates[0].container.command[1]",
        "{{inputs.artifacts.a.key}} is not a variable Argo sets",
    ),
    "inputs.parameters.json": (
        wf(leaf("{{inputs.parameters.json}}", inputs={"parameters": [{"name": "a", "value": "1"}]})),
        "spec.templates[0].container.command[1]",
        "{{inputs.parameters.json}} is not declared in the template's inputs",
    ),
    "a loop item in a container template": (
        wf(leaf("{{item.x}}")),
        "spec.templates[0].container.command[1]",
        "{{item.x}} names a loop item, which only the step or task that loops has",
    ),
    "a loop item in a step that does not loop": (
        wf(steps([say("a", "{{item.x}}")])),
        f"spec.templates[0].steps[0][0].{ARG}",
        "this step has no withItems, withParam or withSequence",
    ),
    "a key no item of withItems has": (
        wf(steps([say("a", "{{item.oss}}", withItems=[{"os": "debian"}])])),
        f"spec.templates[0].steps[0][0].{ARG}",
        "{{item.oss}}: no item of withItems has the key 'oss' (did you mean 'os'?)",
    ),
    "a key of a withSequence item": (
        wf(steps([say("a", "{{item.x}}", withSequence={"count": "2"})])),
        f"spec.templates[0].steps[0][0].{ARG}",
        "withSequence's items are numbers",
    ),
    "another task's loop item": (
        wf(dag(say("a", "1", withParam="[1]"), say("b", "{{item.x}}"))),
        f"spec.templates[0].dag.tasks[1].{ARG}",
        "template 'main' task 'b': {{item.x}} names a loop item, and this task has no withItems",
    ),
    "a step's variable in a container template": (
        wf(leaf("{{steps.a.outputs.result}}")),
        "spec.templates[0].container.command[1]",
        "{{steps.a.outputs.result}} names a step, and a container template has none",
    ),
    "a task's variable in a steps template": (
        wf(steps([run("a")], [say("b", "{{tasks.a.outputs.result}}")])),
        f"spec.templates[0].steps[1][0].{ARG}",
        "names a task, but this is a steps template: write steps.NAME",
    ),
    "a step's own result without an exit hook": (
        wf(steps([say("b", "{{steps.b.outputs.result}}")])),
        f"spec.templates[0].steps[0][0].{ARG}",
        "refers to the step itself, whose outputs exist only in its onExit or exit hook",
    ),
    "the exit code of a resource step": (
        wf(steps([run("a", "create")], [say("b", "{{steps.a.exitCode}}")]), CREATE),
        f"spec.templates[0].steps[1][0].{ARG}",
        "{{steps.a.exitCode}}: template 'create' produces no exitCode",
    ),
    "the result of a containerSet with no main container": (
        wf(
            steps([run("a", "cs")], [say("b", "{{steps.a.outputs.result}}")]),
            {"name": "cs", "containerSet": {"containers": [{"name": "x", "image": "alpine"}]}},
        ),
        f"spec.templates[0].steps[1][0].{ARG}",
        "its containerSet has no container named 'main'",
    ),
    "the ip of a step that is no daemon": (
        wf(steps([run("a")], [say("b", "{{steps.a.ip}}")])),
        f"spec.templates[0].steps[1][0].{ARG}",
        "{{steps.a.ip}}: template 'echo' is not a daemon",
    ),
    "the outputs list of a step that does not loop": (
        wf(steps([run("a")], [say("b", "{{steps.a.outputs.parameters}}")])),
        f"spec.templates[0].steps[1][0].{ARG}",
        "is the list of a loop's outputs, and step 'a' has no withItems or withParam",
    ),
    "an output artifact the step's template lacks": (
        wf(steps([run("a")], [say("b", "{{steps.a.outputs.artifacts.out}}")])),
        f"spec.templates[0].steps[1][0].{ARG}",
        "template 'echo' has no output artifact 'out'",
    ),
    "a step variable Argo does not set": (
        wf(steps([run("a")], [say("b", "{{steps.a.phase}}")])),
        f"spec.templates[0].steps[1][0].{ARG}",
        "{{steps.a.phase}} is not a variable Argo sets: a step gives id, status",
    ),
    "a wrong output in a steps template's outputs": (
        wf(
            steps(
                [run("a")],
                outputs={"parameters": [{"name": "o", "valueFrom": {"parameter": "{{steps.a.outputs.parameters.x}}"}}]},
            )
        ),
        "spec.templates[0].outputs.parameters[0].valueFrom.parameter",
        "template 'main' outputs: {{steps.a.outputs.parameters.x}}: template 'echo' has no output parameter 'x'",
    ),
    "the status of a task it does not depend on": (
        wf(dag(run("a"), run("b", when="{{tasks.a.status}} == Succeeded"))),
        "spec.templates[0].dag.tasks[1].when",
        "template 'main' task 'b': {{tasks.a.status}}: a task sees the status of the tasks it depends on only",
    ),
    "a task's status in the DAG's outputs": (
        wf(dag(run("a"), outputs={"parameters": [{"name": "o", "valueFrom": {"parameter": "{{tasks.a.status}}"}}]})),
        "spec.templates[0].outputs.parameters[0].valueFrom.parameter",
        "not to the DAG's outputs",
    ),
    "the exit code of a resource task": (
        wf(dag(run("a", "create"), say("b", "{{tasks.a.exitCode}}", depends="a")), CREATE),
        f"spec.templates[0].dag.tasks[1].{ARG}",
        "{{tasks.a.exitCode}}: template 'create' produces no exitCode",
    ),
    "workflow.failures in a template the entrypoint runs": (
        wf(leaf("{{workflow.failures}}"), onExit="echo"),
        "spec.templates[0].container.command[1]",
        "{{workflow.failures}} is set only in the templates the onExit handler runs, and this one also runs from",
    ),
    "workflow.failures in a template both the entrypoint and onExit run": (
        wf(steps([run("a", "shared")]), leaf("{{workflow.failures}}", name="shared"), onExit="shared"),
        "spec.templates[1].container.command[1]",
        "template 'shared': {{workflow.failures}} is set only in the templates the onExit handler runs",
    ),
    "workflow.failures with an exit hook but no onExit": (
        wf(leaf("x"), leaf("{{workflow.failures}}", name="bye"), hooks={"exit": {"template": "bye"}}),
        "spec.templates[1].container.command[1]",
        "{{workflow.failures}} is set only for a spec.onExit handler, and this workflow has none",
    ),
    "a global output named before the step that sets it": (
        wf(steps([say("b", "{{workflow.outputs.parameters.G}}")], [run("a", "g")]), GLOBAL),
        f"spec.templates[0].steps[0][0].{ARG}",
        "{{workflow.outputs.parameters.G}} is set once the step or task that produces it has run",
    ),
    "a global output whose template nothing before runs": (
        wf(leaf("{{workflow.outputs.parameters.G}}"), GLOBAL),
        "spec.templates[0].container.command[1]",
        "{{workflow.outputs.parameters.G}} is set once the step or task that produces it has run",
    ),
    "a global output named at run time, outside the steps after it": (
        wf(
            steps([run("a", "pg")], [run("b", "use")]),
            {
                **GLOBAL,
                "name": "pg",
                "outputs": {"parameters": [{"name": "p", "value": "1", "globalName": "{{workflow.name}}"}]},
            },
            leaf("{{workflow.outputs.parameters.anything}}", name="use"),
        ),
        "spec.templates[2].container.command[1]",
        "{{workflow.outputs.parameters.anything}} is not a variable Argo sets for this workflow",
    ),
    "a tag in a workflow argument, landing in the entrypoint": (
        wf(
            leaf("{{inputs.parameters.p}}", inputs={"parameters": [{"name": "p"}]}),
            arguments={"parameters": [{"name": "p", "value": "{{pod.nme}}"}]},
        ),
        "spec.arguments.parameters[0].value",
        "template 'main': {{pod.nme}} is not a variable Argo sets",
    ),
    "an input artifact's location in the entrypoint, which no argument replaces": (
        wf(
            leaf(
                "hi",
                inputs={"artifacts": [{"name": "a", "path": "/a", "git": {"repo": "r", "revision": "{{tasks.x.id}}"}}]},
            )
        ),
        "spec.templates[0].inputs.artifacts[0].git.revision",
        "template 'main': {{tasks.x.id}} names a task, and a container template has none",
    ),
    "a tag in a map key": (
        wf(leaf("x", metadata={"annotations": {"{{pod.nme}}": "x"}})),
        "spec.templates[0].metadata.annotations.{{pod.nme}}",
        "{{pod.nme}} is not a variable Argo sets",
    ),
    "a WorkflowTemplate is held to the same scopes": (
        wf(leaf("{{pod.nme}}"), kind="WorkflowTemplate"),
        "spec.templates[0].container.command[1]",
        "{{pod.nme}} is not a variable Argo sets",
    ),
}

ACCEPTED: dict[str, dict[str, Any]] = {
    "a tag a later string closes (the tag is '\",\"', no variable)": wf(leaf("{{", "}}")),
    "pod.name in a container, spaced": wf(leaf("{{pod.name}}", "{{ pod.name }}")),
    "pod.name in a resource manifest": wf(
        {"name": "main", "resource": {"action": "create", "manifest": "name: '{{pod.name}}'\n"}}
    ),
    "what Argo does not check": wf(
        leaf("{{node.name}}", "{{retries}}", "{{lastRetry.status}}", "{{item}}", "{{user.x}}", "{{node.nme}}")
    ),
    "outputs of the template itself": wf(leaf("{{outputs.parameters.nope.path}}", "{{outputs.anything}}")),
    "expressions": wf(leaf("{{=inputs.parameters.nope}}", "{{ =steps.x }}")),
    "all inputs as JSON, even with none": wf(leaf("{{inputs.parameters}}")),
    "an input artifact, its path": wf(leaf("{{inputs.artifacts.a}}", "{{inputs.artifacts.a.path}}", inputs=ART)),
    "an input artifact's location, which the arguments replace": wf(
        leaf("x"),
        leaf(
            "hi",
            name="other",
            inputs={"artifacts": [{"name": "a", "path": "/a", "git": {"repo": "r", "revision": "{{tasks.x.id}}"}}]},
        ),
    ),
    "a step's metadata, which Argo does not check": wf(
        steps([run("a")], metadata={"annotations": {"x": "{{workflow.nope}}"}})
    ),
    "withItems map keys, list indexes, withParam": wf(
        steps(
            [say("a", "{{item.os}}", withItems=[{"os": "debian"}])],
            [say("b", "{{item.[1]}}", withItems=[["x", "y"]])],
            [say("c", "{{item.anything}}", withParam="[1]")],
        )
    ),
    "a loop item of an earlier step (Argo never clears them)": wf(
        steps([say("a", "1", withParam="[1]")], [say("b", "{{item.x}}")])
    ),
    "the variables of a step that ran": wf(
        steps(
            [run("a")],
            [
                say(
                    "b",
                    "{{steps.a.id}}{{steps.a.status}}{{steps.a.startedAt}}{{steps.a.finishedAt}}{{steps.a.exitCode}}",
                )
            ],
        )
    ),
    "a step's own status, and own result with an exit hook": wf(
        steps([say("a", "{{steps.a.status}}"), say("b", "{{steps.b.outputs.result}}", onExit="echo")])
    ),
    "a daemon's ip": wf(steps([run("a", "d")], [say("b", "{{steps.a.ip}}")]), {**ECHO, "name": "d", "daemon": True}),
    "a loop's outputs, a script loop's results": wf(
        steps(
            [run("a", withItems=[1]), run("s", "script", withItems=[1])],
            [say("b", "{{steps.a.outputs.parameters}}{{steps.s.outputs.result}}")],
        ),
        {"name": "script", "script": {"image": "alpine", "source": "echo 1"}},
    ),
    "a templateRef's outputs": wf(
        steps(
            [{"name": "a", "templateRef": {"name": "x", "template": "z"}}],
            [say("b", "{{steps.a.outputs.parameters.any}}")],
        )
    ),
    "the status of tasks it depends on, or that have hooks": wf(
        dag(
            run("a"),
            run("c", depends="a"),
            say("b", "{{tasks.a.status}}", depends="c"),
            run("h", hooks=EXIT_HOOK),
            run("d", when="{{tasks.h.status}} == x"),
        )
    ),
    "a task's result in a when, though it does not depend on it": wf(
        dag(run("a"), run("b", when="{{tasks.a.outputs.result}} == x"))
    ),
    "a task's own status when it has hooks": wf(dag(run("b", when="{{tasks.b.status}} == x", hooks=EXIT_HOOK))),
    "workflow.failures in the onExit handler, and what runs from it": wf(
        leaf("x"),
        steps([say("a", "{{workflow.failures}}")], name="bye"),
        leaf("{{workflow.failures}}", name="other"),
        onExit="bye",
    ),
    "a global output after its step, and in onExit": wf(
        steps([run("a", "g")], [say("b", "{{workflow.outputs.parameters.G}}")]),
        GLOBAL,
        leaf("{{workflow.outputs.parameters.G}}", name="bye"),
        onExit="bye",
    ),
    "a global output named at run time, in the steps after it": wf(
        steps([run("a", "pg")], [say("b", "{{workflow.outputs.parameters.anything}}")]),
        {
            **GLOBAL,
            "name": "pg",
            "outputs": {"parameters": [{"name": "p", "value": "1", "globalName": "{{workflow.name}}"}]},
        },
    ),
    "step names made of inputs, and tags nested in tags": wf(
        steps(
            [run("a-{{inputs.parameters.d}}")],
            [say("b", "{{steps.a-{{inputs.parameters.d}}.status}}")],
            inputs={"parameters": [{"name": "d", "value": "x"}]},
        )
    ),
    "a WorkflowTemplate's parameters, given by the workflow that runs it": wf(
        leaf("{{workflow.parameters.any}}"), kind="WorkflowTemplate"
    ),
    "an unclosed {{ hides what follows it, as in Argo's scan": wf(leaf("a {{ b", "{{pod.nme}}")),
    "a newline inside a tag is not trimmed": wf(leaf("{{\npod.nme}}")),
    "a CronWorkflow's onExit handler": {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": "c"},
        "spec": {
            "schedules": ["0 2 * * *"],
            "workflowSpec": wf(leaf("x"), leaf("{{workflow.failures}}", name="bye"), onExit="bye")["spec"],
        },
    },
}

# Refused though Argo's validator lets it through: the step starts beside the one it names, whose outputs are not
# there yet, and the run fails at that step.
STRICTER = {
    "a step naming a step of its own parallel group": wf(steps([run("a"), say("b", "{{steps.a.outputs.result}}")]))
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_tag_argo_cannot_resolve_is_one_problem_naming_template_and_tag(case: str) -> None:
    doc, path, phrase = REFUSED[case]
    problems = lint_document(doc, schema=None)
    assert [p.path for p in problems] == [path], "\n".join(map(str, problems))
    assert phrase in problems[0].message and problems[0].message.startswith("template '"), problems[0].message


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_a_tag_argo_resolves_or_leaves_alone_is_no_problem(case: str) -> None:
    assert [str(p) for p in lint_document(ACCEPTED[case], schema=None)] == []


def test_a_step_of_the_same_parallel_group_is_refused_on_purpose() -> None:
    problems = lint_document(STRICTER["a step naming a step of its own parallel group"], schema=None)
    assert [p.path for p in problems] == [f"spec.templates[0].steps[0][1].{ARG}"]
    assert "runs beside this one in the same group" in problems[0].message


def test_a_template_is_checked_on_its_first_visit_only_as_argo_does() -> None:
    """`shared` runs from the entrypoint first (no failures yet), so its use under onExit does not make it fine;
    `other` is reached from nothing before the onExit handler, so failures are known by then."""
    doc = wf(
        steps([run("a", "shared")]),
        leaf("{{workflow.failures}}", name="shared"),
        leaf("{{workflow.failures}}", name="other"),
        onExit="shared",
    )
    assert [p.path for p in lint_document(doc, schema=None)] == ["spec.templates[1].container.command[1]"]


def test_every_unresolvable_tag_is_reported_once(tmp_path: Path) -> None:
    doc = wf(steps([say("a", "{{pod.name}} {{item.x}}")], [say("b", "{{steps.zz.status}}")]))
    messages = [p.message for p in lint_document(doc, schema=None)]
    assert len(messages) == 3 and all(m.startswith("template 'main' step '") for m in messages), messages


@pytest.mark.parametrize(
    ("text", "values", "result"),
    [
        ("a {{inputs.parameters.x}} b", {"inputs.parameters.x": "1"}, "a 1 b"),
        ("{{ inputs.parameters.x }}", {"inputs.parameters.x": "1"}, "1"),
        ("{{steps.run-{{inputs.parameters.d}}.status}}", {"inputs.parameters.d": "7"}, "{{steps.run-7.status}}"),
        ("{{=inputs.parameters.x}}", {"inputs.parameters.x": "1"}, "{{=inputs.parameters.x}}"),
        ("{{unknown}} and {{", {}, "{{unknown}} and {{"),
    ],
)
def test_substitution_is_argos_replace(text: str, values: dict[str, str], result: str) -> None:
    assert substitute(text, values) == result


def test_tags_and_their_keys_are_read_as_argo_reads_them() -> None:
    assert tags("{{a}} x {{ b }}") == ["a", " b "]
    assert tags("echo ${{ b") is None  # Argo's scan runs on into the next string
    assert lookup_key(" pod.name ") == "pod.name"
    assert lookup_key("\npod.name") == "\\npod.name"  # a newline is an escape in the JSON Argo scans
    assert lookup_key("a<b") == "a\\u003cb"


def test_run_workflow_refuses_what_argo_lint_refuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loader takes `{{workflow.failures}}` anywhere in a workflow with an onExit; Argo only where the onExit
    handler's templates are checked first: run-workflow applies lint's rule and starts nothing."""
    monkeypatch.setenv("VCPILOT_HOME", str(tmp_path / "home"))
    workflow = tmp_path / "wf.yaml"
    workflow.write_text(yaml.safe_dump(wf(leaf("{{workflow.failures}}"), onExit="echo"), sort_keys=False))
    result = CliRunner().invoke(app, ["run-workflow", str(workflow)])
    assert result.exit_code == InputError.exit_code, result.output
    assert f"Argo would refuse {workflow}: spec.templates[0].container.command[1]: template 'main': " in result.stderr
    assert "{{workflow.failures}} is set only in the templates the onExit handler runs" in result.stderr
    assert not (tmp_path / "home").exists()
