"""Loading a workflow: bad input is refused with one sentence before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

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


def test_an_entrypoint_given_replaces_the_files_and_p_supplies_its_inputs_as_argo_adds_them() -> None:
    # `argo submit --entrypoint print -p message=hi` (tests/e2e/test_argo_pipeline.py asks the real server)
    printer = {
        "name": "print",
        "inputs": {"parameters": [{"name": "message"}]},
        "container": {"image": "x", "command": ["echo"]},
    }
    spec = wf(templates=[*wf()["spec"]["templates"], printer])
    loaded = load_workflow(spec, {"message": "hi"}, entrypoint="print")
    assert loaded.spec["entrypoint"] == "print" and loaded.parameters == {"message": "hi"}
    assert refused(spec, {"message": "hi"}) == "unknown parameter 'message': this workflow's parameters are none."
    with pytest.raises(WorkflowError, match="unknown parameter 'mess': this workflow's parameters are message"):
        load_workflow(spec, {"mess": "hi"}, entrypoint="print")
    with pytest.raises(WorkflowError, match="spec.entrypoint refers to template 'nope', which is not defined"):
        load_workflow(spec, {}, entrypoint="nope")


def test_parameters_apply_and_respect_enum() -> None:
    args = {"parameters": [{"name": "size", "value": "s", "enum": ["s", "m"]}]}
    loaded = load_workflow(wf(arguments=args), {"size": "m"})
    assert loaded.parameters == {"size": "m"}
    assert "not one of s, m" in refused(wf(arguments=args), {"size": "xl"})


def test_parameter_values_read_as_argo_reads_the_yaml(tmp_path: Path) -> None:
    # go-yaml v2 resolves the scalars, sigs.k8s.io/yaml writes JSON, AnyString.UnmarshalJSON reads the float64:
    # `y` is true, `5e-5` and `0.00005` are 0.00005, `1e6` is 1000000, `12:30` no base-60 number (PyYAML: 750);
    # the float64 is written without an exponent ('f'), where Go's JSON has one: 1e-7, 1e21, and an int past 2^53
    # loses its last digits (tests/e2e/test_argo_pipeline.py compares it with what the real argo submit sends)
    spelt = [
        "y",
        "5e-5",
        "0.00005",
        "1e6",
        "12:30",
        "0x1F",
        "2.50",
        "1.0",
        "'1.0'",
        "1e-7",
        "-1e21",
        "12345678901234567",
    ]
    text = yaml.safe_dump(wf())
    text += "  arguments:\n    parameters:\n" + "".join(
        f"    - {{name: p{n}, value: {value}}}\n" for n, value in enumerate(spelt)
    )
    path = tmp_path / "wf.yaml"
    path.write_text(text)
    values = list(load_workflow(path).parameters.values())
    assert values == [
        *("true", "0.00005", "0.00005", "1000000", "12:30", "31", "2.5", "1", "1.0"),
        *("0.0000001", "-1000000000000000000000", "12345678901234568"),
    ]


def test_unresolvable_templates_are_refused() -> None:
    steps = [{"name": "main", "steps": [[{"name": "a", "template": "missing"}]]}]
    assert refused(wf(templates=steps)) == (
        "template 'main' step 'a' refers to template 'missing', which is not defined."
    )
    assert "spec.entrypoint refers to template 'other'" in refused(wf(entrypoint="other"))
    ref = [{"name": "main", "dag": {"tasks": [{"name": "a", "templateRef": {"name": "x", "template": "y"}}]}}]
    assert "uses templateRef" in refused(wf(templates=ref))
    assert "is a data template" in refused(wf(templates=[{"name": "main", "data": {"source": {}}}]))
    assert "is a plugin template" in refused(wf(templates=[{"name": "main", "plugin": {"hello": {}}}]))


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


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2", 2.0),
        (5, 5.0),
        ("+7", 7.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("1.5h", 5400.0),
        (".5m", 30.0),
        ("2.s", 2.0),
        ("-1s", -1.0),  # Go's too: a deadline already past
        ("3\u00b5s", 3e-6),
        ("3\u03bcs", 3e-6),
        ("1h2m3s4ms", 3723.004),
    ],
)
def test_parse_duration_reads_what_argo_reads(text: str | int, seconds: float) -> None:
    """Argo's ParseStringToDuration: a whole number is seconds, anything else Go's time.ParseDuration."""
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text",
    [
        "soon",
        "1.5",
        "1e3",
        " 30s",
        "30s ",
        "inf",
        "nan",
        "1.5.5s",
        "5 s",
        "s",
        "-",
        "",
        "1d",
        "1S",
        "1h-2m",
        "\u0663s",
        1.5,
        True,
        None,
        "99999999999h",
        "9" * 400,  # whole seconds beyond a float: OverflowError, not one sentence
    ],
)
def test_parse_duration_refuses_what_argo_cannot_read(text: object) -> None:
    """Before, float() took "1.5", "1e3", " 30s" stripped, and "inf" (a timer that overflowed at run time)."""
    with pytest.raises(WorkflowError, match="duration"):
        parse_duration(text)  # type: ignore[arg-type]


def test_bad_input_fails_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(WorkflowError, match="unknown parameter"):
        run_workflow(wf(), {"x": "1"}, home=tmp_path)
    assert not (tmp_path / "runs").exists()


def test_what_the_runner_has_no_means_for_is_refused_before_anything_runs(tmp_path: Path) -> None:
    """An image's entrypoint, an artifact fetched from outside, an artifact path it cannot keep: each was met only
    when its step came (the steps before it had run), or never (an artifact was silently missing)."""
    first = {"name": "first", "container": {"image": "x", "command": ["touch", str(tmp_path / "ran")]}}

    def steps(*later: dict, **step: object) -> dict:
        main = {
            "name": "main",
            "steps": [[{"name": "a", "template": "first"}], [{"name": "b", "template": "b", **step}]],
        }
        return wf(templates=[main, first, *later])

    no_command = {"name": "b", "container": {"image": "nginx:1.29", "args": ["-g", "daemon off;"]}}
    assert refused(steps(no_command)) == (
        "template 'b' has a container with no command; the local runner runs the command itself and cannot read an "
        "image's entrypoint: give it a command."
    )
    defaults = {"container": {"command": ["sh", "-c"]}}  # templateDefaults may give it
    load_workflow(
        wf(templates=[{"name": "main", "container": {"image": "x", "args": ["true"]}}], templateDefaults=defaults)
    )
    unused = {"name": "unused", "script": {"image": "x", "source": "print(1)"}}  # never called: not refused
    inline = {"name": "main", "dag": {"tasks": [{"name": "a", "inline": {"container": {"image": "x"}}}]}}
    assert refused(wf(templates=[inline])).startswith(
        "the inline template of template 'main' task 'a' has a container with no command;"
    )
    load_workflow(wf(templates=[*wf()["spec"]["templates"], unused]))

    container = {"image": "x", "command": ["true"]}
    takes = {"name": "b", "inputs": {"artifacts": [{"name": "a", "path": "/tmp/a"}]}, "container": container}
    for source, kind in [
        ({"from": "/etc/passwd"}, "comes from '/etc/passwd', which is not a reference such as"),
        ({"http": {"url": "https://example.com/x"}}, "is fetched from http"),
        ({"s3": {"key": "x"}}, "is fetched from s3"),
        ({"git": {"repo": "https://x"}}, "is fetched from git"),
    ]:
        message = refused(steps(takes, arguments={"artifacts": [{"name": "a", **source}]}))
        assert message.startswith("template 'main' step 'b' artifact argument 'a' ") and kind in message
        own = {**takes, "inputs": {"artifacts": [{"name": "a", "path": "/tmp/a", **source}]}}
        assert refused(steps(own)).startswith("template 'b' input artifact 'a' ")
    top = wf(arguments={"artifacts": [{"name": "a", "http": {"url": "https://x"}}]})
    assert refused(top).startswith("spec artifact argument 'a' is fetched from http")
    for path in ["/usr/local/bin/kubectl", "/etc/passwd", "/mnt/out", "relative/file", "/tmp/../../../etc/x", None]:
        raw = {"name": "a", "path": path, "raw": {"data": "x"}}
        message = refused(steps({**takes, "inputs": {"artifacts": [raw]}}))
        assert (
            message.startswith("template 'b' input artifact 'a' is at ") and "keeps artifacts in the step's" in message
        )
        out = {"name": "b", "container": container, "outputs": {"artifacts": [{"name": "o", "path": path}]}}
        assert refused(steps(out)).startswith("template 'b' output artifact 'o' is at ")
    group = {"name": "b", "steps": [[{"name": "c", "template": "first"}]], "outputs": {"artifacts": [{"name": "o"}]}}
    assert (
        refused(steps(group))
        == "template 'b' output artifact 'o' needs from or fromExpression: the artifact of which step it is."
    )
    assert not (tmp_path / "ran").exists()


def test_a_resource_the_local_cluster_cannot_hold_is_refused_before_anything_runs() -> None:
    """A patch, or a Service, StatefulSet or Workflow, erred only when its step came; a `{{...}}` action or object
    is known only then, so the step still says it."""

    def resource(action: str, manifest: str) -> dict:
        args = {"parameters": [{"name": name, "value": "x"} for name in ("a", "k", "whole")]}
        return wf(arguments=args, templates=[{"name": "main", "resource": {"action": action, "manifest": manifest}}])

    job = "apiVersion: batch/v1\nkind: Job\nmetadata: {generateName: x-}\n"
    assert refused(resource("patch", job)) == (
        "template 'main': resource action 'patch' is not supported locally (create, apply, delete, get)."
    )
    service = "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"
    assert refused(resource("create", service)) == (
        "template 'main': the local runner can only manage Volcano and batch/v1 Jobs, not v1 Service."
    )
    load_workflow(resource("create", job))
    load_workflow(resource("{{workflow.parameters.a}}", job))
    load_workflow(resource("create", "apiVersion: v1\nkind: '{{workflow.parameters.k}}'\n"))
    load_workflow(resource("create", "{{workflow.parameters.whole}}"))


def test_a_resource_kind_spelt_out_is_refused_though_a_tag_elsewhere_breaks_the_yaml() -> None:
    """Argo renders the manifest's tags before it parses it (workflow/controller/operator.go executeResource, then
    argoexec's `resource` reads the object), so an unquoted `name: {{...}}` is a name there; as YAML before that it
    is a flow mapping, so the literal kind went unread and a Workflow object (upstream's workflow-of-workflows)
    erred only when its step came, after the steps before it had run."""
    manifest = (
        "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nspec:\n  workflowTemplateRef:\n    name: {{workflow.name}}\n"
    )
    template = {"name": "main", "resource": {"action": "create", "manifest": manifest}}
    assert refused(wf(templates=[template])) == (
        "template 'main': the local runner can only manage Volcano and batch/v1 Jobs, "
        "not argoproj.io/v1alpha1 Workflow."
    )
    job = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  labels:\n    run: {{workflow.name}}\n"
    load_workflow(wf(templates=[{"name": "main", "resource": {"action": "create", "manifest": job}}]))


@pytest.mark.parametrize(
    ("tag", "says"),
    [
        ("workflow.nmae", "{{workflow.nmae}} is not a variable Argo sets for this workflow"),
        ("workflow.parameters.b", "{{workflow.parameters.b}} is not declared in spec.arguments"),
        ("workflow.labels.team", "{{workflow.labels.team}} names no label of the workflow"),
        ("workflow.priority", "{{workflow.priority}} is not a variable"),  # only with spec.priority
        ("workflow.failures", "{{workflow.failures}} is not a variable"),  # only with an onExit
        ("workflow.outputs.parameters.g", "{{workflow.outputs.parameters.g}} is not a variable"),
    ],
)
def test_a_workflow_variable_argo_cannot_resolve_is_refused_before_anything_runs(tag: str, says: str) -> None:
    """Argo's validator: "failed to resolve {{...}}". The runner left the tag in the command as written."""
    main = {"name": "main", "container": {"image": "x", "command": ["echo", f"{{{{{tag}}}}}"]}}
    assert refused(wf(templates=[main])).startswith(f"template 'main': {says}")


def test_the_workflow_variables_argo_sets_load() -> None:
    tags = [
        "workflow.name", "workflow.uid", "workflow.status", "workflow.labels.json", "workflow.annotations",
        "workflow.parameters.a", "workflow.parameters.json", "workflow.labels.team", "workflow.annotations.note",
        "workflow.priority", "workflow.failures", "workflow.outputs.parameters.g", "workflow.creationTimestamp.Y",
        "workflow.duration", "workflow.scheduledTime", " workflow.name ",
    ]  # fmt: skip
    main = {
        "name": "main",
        "container": {"image": "x", "command": ["echo", *(f"{{{{{t}}}}}" for t in tags), "{{=workflow.x}}"]},
        "outputs": {"parameters": [{"name": "o", "value": "1", "globalName": "g"}]},
    }
    document = wf(
        templates=[main],
        arguments={"parameters": [{"name": "a", "value": "1"}]},
        priority=3,
        onExit="main",
        workflowMetadata={"labels": {"team": "ml"}},
    )
    document["metadata"]["annotations"] = {"note": "n"}
    assert load_workflow(document).spec


def test_a_cron_workflow_runs_its_workflow_spec_once_as_argo_submit_from_cronwf() -> None:
    """Argo's ConvertCronWorkflowToWorkflow: generateName `<cron>-`, the cron-workflow label, workflowMetadata."""
    spec = wf()["spec"]
    cron = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": "nightly", "labels": {"not": "copied"}},
        "spec": {"schedules": ["0 2 * * *"], "workflowMetadata": {"labels": {"team": "ml"}}, "workflowSpec": spec},
    }
    loaded = load_workflow(cron)
    assert loaded.name.startswith("nightly-") and len(loaded.name) == len("nightly-") + 5
    assert loaded.labels == {"workflows.argoproj.io/cron-workflow": "nightly", "team": "ml"}
    assert "workflows.argoproj.io/scheduled-time" in loaded.annotations
    assert loaded.spec["entrypoint"] == "main" and loaded.from_template == ""
    assert refused({**cron, "spec": {"schedules": ["* * * * *"]}}) == (
        "the workflow is a CronWorkflow without spec.workflowSpec."
    )
    assert refused({**cron, "metadata": {}}) == "the workflow is a CronWorkflow without metadata.name."
    assert refused({**cron, "spec": {**cron["spec"], "workflowMetadata": []}}) == (
        "spec.workflowMetadata must be a mapping, not a list."
    )
    assert refused({"kind": "ConfigMap"}) == (
        "the workflow is a ConfigMap, not a Workflow, WorkflowTemplate, ClusterWorkflowTemplate or CronWorkflow."
    )


def test_a_file_of_several_documents_runs_its_one_workflow_as_argo_submit_does(tmp_path: Path) -> None:
    """`argo submit` passes over the ConfigMap beside a Workflow; the runner refused the file ("not 2")."""
    path = tmp_path / "wf.yaml"
    path.write_text(yaml.safe_dump_all([{"apiVersion": "v1", "kind": "ConfigMap"}, wf()]))
    assert load_workflow(path).spec["entrypoint"] == "main"
    path.write_text(yaml.safe_dump_all([wf(), wf()]))
    assert refused(path) == f"{path} holds 2 workflows; the local runner runs one: give each a file."
    path.write_text(yaml.safe_dump_all([{"kind": "ConfigMap"}, {"kind": "Secret"}]))
    assert "holds 2 YAML documents and none is a Workflow" in refused(path)
    path.write_text("hello\n")
    assert refused(path) == f"{path} holds a string, not a Workflow (a YAML mapping with kind)."
    path.write_text("# nothing\n")
    assert refused(path) == f"{path} holds no YAML document, not a Workflow (a YAML mapping with kind)."


def test_a_cluster_workflow_template_runs_as_argo_submit_from_clusterworkflowtemplate_runs_it() -> None:
    """It was refused as not a Workflow or WorkflowTemplate, though `vcpilot lint` took it and Argo runs it."""
    document = {**wf(), "kind": "ClusterWorkflowTemplate", "metadata": {"name": "shared"}}
    loaded = load_workflow(document)
    assert loaded.name.startswith("shared-") and loaded.from_template == "shared" and loaded.namespace == "default"


def test_a_workflow_template_ref_runs_the_template_beside_it_with_the_workflows_spec_over_it(tmp_path: Path) -> None:
    """Argo's JoinWorkflowSpec: the template's spec, the workflow's merged over it (an argument it gives replaces
    the template's whole; templates merge by name); the cluster's WorkflowTemplates are the files beside it."""
    template = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "WorkflowTemplate",
        "metadata": {"name": "hello"},
        "spec": {
            "entrypoint": "main",
            "arguments": {"parameters": [{"name": "a", "value": "1", "enum": ["1", "2"]}, {"name": "b", "value": "x"}]},
            "templates": [
                {
                    "name": "main",
                    "container": {"image": "x", "command": ["echo"], "args": ["{{workflow.parameters.a}}"]},
                },
                {"name": "other", "container": {"image": "x", "command": ["true"]}},
            ],
        },
    }
    other_version = {**template, "apiVersion": "argoproj.io/v2", "metadata": {"name": "v2"}}
    (tmp_path / "templates.yaml").write_text(yaml.safe_dump_all([{"kind": "ConfigMap"}, template, other_version]))
    (tmp_path / "broken.yaml").write_text("kind: [unclosed\n")  # a sibling that does not read is passed over
    ref = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"generateName": "hello-"},
        "spec": {
            "workflowTemplateRef": {"name": "hello"},
            "entrypoint": "other",
            "arguments": {"parameters": [{"name": "a", "value": "2"}]},
        },
    }
    path = tmp_path / "ref.yaml"
    path.write_text(yaml.safe_dump(ref))
    loaded = load_workflow(path, {"b": "y"})
    assert loaded.spec["entrypoint"] == "other" and "workflowTemplateRef" not in loaded.spec
    assert loaded.parameters == {"a": "2", "b": "y"}
    assert [t["name"] for t in loaded.spec["templates"]] == ["main", "other"]
    assert load_workflow(path, {"a": "3"}).parameters["a"] == "3"  # the workflow's `a` replaced the enum's whole

    for spec_ref, message in [
        ({"name": "nope"}, f"spec.workflowTemplateRef names WorkflowTemplate 'nope', which no YAML file in {tmp_path}"),
        ({"name": "hello", "clusterScope": True}, "names ClusterWorkflowTemplate 'hello', which no YAML file"),
        ({}, "spec.workflowTemplateRef needs a name: the WorkflowTemplate to run."),
        ({"name": "v2"}, "names WorkflowTemplate 'v2', which no YAML file"),  # argoproj.io/v2: not Argo's, was run
    ]:
        path.write_text(yaml.safe_dump({**ref, "spec": {"workflowTemplateRef": spec_ref}}))
        assert message in refused(path)
    assert "this workflow has no file" in refused({**ref, "spec": {"workflowTemplateRef": {"name": "hello"}}})


def test_a_template_ref_is_resolved_from_the_files_beside_the_workflow_in_its_own_scope(tmp_path: Path) -> None:
    """Each template a templateRef reaches comes in as `<workflowtemplate>.<template>`; a plain `template:` inside it
    names that WorkflowTemplate's template (and its onExit too), not the workflow's of the same name."""

    def library(kind: str, name: str, templates: list[dict]) -> dict:
        return {"kind": kind, "metadata": {"name": name}, "spec": {"templates": templates}}

    leaf = {"name": "echo", "container": {"image": "x", "command": ["echo", "library"]}}
    inner = {"name": "inner", "steps": [[{"name": "e", "template": "echo", "onExit": "echo"}]]}
    ref = {"name": "c", "templateRef": {"name": "shared", "template": "echo", "clusterScope": True}}
    outer = {"name": "outer", "dag": {"tasks": [{"name": "a", "template": "inner"}, {**ref, "depends": "a"}]}}
    (tmp_path / "lib.yaml").write_text(
        yaml.safe_dump_all(
            [
                library("WorkflowTemplate", "lib", [leaf, inner, outer]),
                library("ClusterWorkflowTemplate", "shared", [leaf]),
            ]
        )
    )
    mine = {"name": "echo", "container": {"image": "x", "command": ["echo", "mine"]}}
    main = {"name": "main", "steps": [[{"name": "o", "templateRef": {"name": "lib", "template": "outer"}}]]}
    path = tmp_path / "wf.yaml"
    path.write_text(yaml.safe_dump(wf(templates=[main, mine])))
    templates = {t["name"]: t for t in load_workflow(path).spec["templates"]}
    assert sorted(templates) == ["echo", "lib.echo", "lib.inner", "lib.outer", "main", "shared.echo"]
    assert templates["main"]["steps"][0][0] == {"name": "o", "template": "lib.outer"}
    assert [t["template"] for t in templates["lib.outer"]["dag"]["tasks"]] == ["lib.inner", "shared.echo"]
    assert templates["lib.inner"]["steps"][0][0] == {"name": "e", "template": "lib.echo", "onExit": "lib.echo"}

    def main_refers(to: dict) -> str:
        path.write_text(yaml.safe_dump(wf(templates=[{"name": "main", "steps": [[{"name": "o", "templateRef": to}]]}])))
        return refused(path)

    assert main_refers({"name": "nope", "template": "x"}) == (
        f"template 'main' step or task 'o' refers to WorkflowTemplate 'nope', which no YAML file in {tmp_path} "
        "defines: put its file there, or inline the template."
    )
    assert "refers to template 'x' of WorkflowTemplate 'lib', which has no such one." in main_refers(
        {"name": "lib", "template": "x"}
    )
    assert "has a templateRef without a name and a template" in main_refers({"name": "lib"})
    text = yaml.safe_dump(
        wf(templates=[{"name": "main", "steps": [[{"name": "o", "templateRef": {"name": "lib", "template": "echo"}}]]}])
    )
    assert "this workflow has no file: inline the template" in refused(text)


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"parallelism": -1}, "spec.parallelism must be a whole number of at least 1, not -1."),
        ({"parallelism": 0}, "spec.parallelism must be a whole number of at least 1, not 0."),  # Argo: no pod runs
        ({"parallelism": "2"}, "spec.parallelism must be a whole number of at least 1, not '2'."),
        ({"activeDeadlineSeconds": "abc"}, "spec.activeDeadlineSeconds must be a whole number of at least 0"),
        (
            {"templates": [{"name": "main", "parallelism": True, "steps": []}]},
            "spec.templates[0].parallelism must be a whole number of at least 1, not True.",
        ),
    ],
)
def test_int64_fields_argo_reads_before_anything_runs_are_checked_at_load(spec: dict, says: str) -> None:
    # these failed once the run had started (a ValueError from a semaphore, a deadline that was not a number)
    assert refused(wf(**spec)).startswith(says)
    assert load_workflow(wf(parallelism=2, activeDeadlineSeconds=0)).spec["parallelism"] == 2


# -- what Argo's validator (workflow/validate/validate.go) refuses at submit, refused here before anything runs --

LEAF = {"name": "leaf", "container": {"image": "x", "command": ["true"]}}
ECHO = {
    "name": "echo",
    "inputs": {"parameters": [{"name": "msg"}]},
    "container": {"image": "x", "command": ["echo", "{{inputs.parameters.msg}}"]},
}


def dag(*tasks: dict) -> dict:
    return {"name": "main", "dag": {"tasks": list(tasks)}}


def test_an_api_version_argo_does_not_serve_is_refused(tmp_path: Path) -> None:
    assert refused({**wf(), "apiVersion": "argoproj.io/v2"}) == (
        "the workflow has apiVersion 'argoproj.io/v2', which Argo does not serve: write apiVersion: "
        "argoproj.io/v1alpha1."
    )
    cron = {"apiVersion": "argoproj.io/v1", "kind": "CronWorkflow", "metadata": {"name": "c"}}
    assert "has apiVersion 'argoproj.io/v1'" in refused({**cron, "spec": {"workflowSpec": wf()["spec"]}})
    assert "is a workflow, not a Workflow" in refused({**wf(), "kind": "workflow"})  # kinds are case-sensitive
    assert load_workflow({k: v for k, v in wf().items() if k != "apiVersion"}).spec  # the API server fills it in
    with pytest.raises(WorkflowError, match="apiVersion"):
        run_workflow({**wf(), "apiVersion": "argoproj.io/v2"}, home=tmp_path)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("main", "says"),
    [
        (
            dag({"name": "a", "template": "leaf"}, {"name": "a", "template": "leaf", "depends": "a"}),
            "template 'main' has two tasks named 'a'; task names must be unique: rename one.",
        ),
        (  # Argo's validateSteps: one name per step across all the groups of a steps template
            {"name": "main", "steps": [[{"name": "a", "template": "leaf"}], [{"name": "a", "template": "leaf"}]]},
            "template 'main' has two steps named 'a'; step names must be unique: rename one.",
        ),
    ],
)
def test_two_steps_or_tasks_of_one_name_are_refused(main: dict, says: str) -> None:
    assert refused(wf(templates=[main, LEAF])) == says


@pytest.mark.parametrize(
    ("templates", "arguments", "says"),
    [
        (
            [{**LEAF, "name": "main", "inputs": {"parameters": [{"name": "p", "value": "1"}] * 2}}],
            None,
            "spec.templates[0].inputs has two parameters named 'p'",
        ),
        (
            [{**LEAF, "name": "main", "outputs": {"artifacts": [{"name": "a", "path": "/a"}] * 2}}],
            None,
            "spec.templates[0].outputs has two artifacts named 'a'",
        ),
        ([LEAF | {"name": "main"}], {"parameters": [{"name": "x", "value": "1"}] * 2}, "spec.arguments has two"),
    ],
)
def test_two_inputs_outputs_or_arguments_of_one_name_are_refused(templates, arguments, says) -> None:
    # Argo's validateWorkflowFieldNames; the runner took the last of the two, lint alone reported it
    assert says in refused(wf(templates=templates, **({"arguments": arguments} if arguments else {})))


def test_two_templates_of_one_name_are_refused() -> None:
    assert "template names must be unique; leaf appear" in refused(wf(templates=[dag(), LEAF, LEAF]))


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"retryStrategy": {"limit": "abc"}}, "template 'leaf' retryStrategy.limit is 'abc': write a whole number"),
        ({"retryStrategy": {"limit": 1.5}}, "template 'leaf' retryStrategy.limit is 1.5"),
        ({"retryStrategy": {"limit": 2, "backoff": {"factor": "x"}}}, "retryStrategy.backoff.factor is 'x'"),
        (
            {"retryStrategy": {"backoff": {"duration": "abc"}}},
            "template 'leaf' retryStrategy.backoff.duration 'abc' is",
        ),
        ({"retryStrategy": {"backoff": {"duration": "1", "cap": "1x"}}}, "retryStrategy.backoff.cap '1x' is not a"),
        ({"retryStrategy": {"retryPolicy": "Sometimes"}}, "retryStrategy.retryPolicy 'Sometimes' is not one of"),
        ({"activeDeadlineSeconds": "abc"}, "template 'leaf' activeDeadlineSeconds is 'abc': write a whole number"),
        ({"activeDeadlineSeconds": "30s"}, "template 'leaf' activeDeadlineSeconds is '30s'"),  # Argo: int or {{..}}
        ({"activeDeadlineSeconds": -1}, "template 'leaf' activeDeadlineSeconds is -1"),
        ({"timeout": "abc"}, "template 'leaf' timeout 'abc' is not a duration: write e.g. \"30s\""),
        ({"timeout": "30"}, "template 'leaf' timeout '30' is not a duration"),  # Argo: a whole number is refused
        ({"timeout": "inf"}, "template 'leaf' timeout 'inf' is not a duration"),  # float() took it: a timer overflowed
        ({"retryStrategy": {"backoff": {"duration": "1.5"}}}, "retryStrategy.backoff.duration '1.5' is not a"),
        ({"pendingTimeout": "soon"}, "template 'leaf' pendingTimeout 'soon' is not a duration"),
    ],
)
def test_retry_and_deadline_fields_that_cannot_be_read_are_refused_naming_the_field(fields: dict, says: str) -> None:
    assert says in refused(wf(templates=[dag({"name": "a", "template": "leaf"}), {**LEAF, **fields}]))


def test_retry_and_deadline_fields_argo_takes_still_load() -> None:
    fields = {
        "retryStrategy": {"limit": "{{workflow.parameters.n}}", "backoff": {"duration": "1", "factor": "2"}},
        "activeDeadlineSeconds": "{{workflow.parameters.n}}",
        "timeout": "1m30s",
        "pendingTimeout": "30",  # unlike timeout, a whole number of seconds (Argo's validator has no rule for it)
    }
    args = {"parameters": [{"name": "n", "value": "3"}]}
    assert load_workflow(wf(arguments=args, templates=[{**LEAF, "name": "main", **fields}])).spec
    assert load_workflow(wf(templates=[{**LEAF, "name": "main", "retryStrategy": {"limit": 2}, "timeout": "{{x}}"}]))


def test_deadlines_only_on_the_templates_argo_takes_them_on() -> None:
    with_deadline = {**dag({"name": "a", "template": "leaf"}), "activeDeadlineSeconds": 5}
    assert "template 'main' sets activeDeadlineSeconds, which only a leaf template may" in refused(
        wf(templates=[with_deadline, LEAF])
    )
    with_timeout = {**dag({"name": "a", "template": "leaf"}), "timeout": "5s"}
    assert "template 'main' is a dag template, which cannot have a timeout" in refused(
        wf(templates=[with_timeout, LEAF])
    )
    pending = {**dag({"name": "a", "template": "leaf"}), "pendingTimeout": "5m"}
    assert "template 'main' is a dag template, which cannot have a pendingTimeout" in refused(
        wf(templates=[pending, LEAF])
    )


def test_a_bad_timeout_found_while_running_names_timeout(tmp_path: Path) -> None:
    args = {"parameters": [{"name": "t", "value": "abc"}]}
    main = {**LEAF, "name": "main", "timeout": "{{workflow.parameters.t}}"}
    result = run_workflow(wf(arguments=args, templates=[main]), home=tmp_path)
    messages = [n.get("message") or "" for n in result.nodes.values()]
    assert any("template 'main' timeout 'abc' is not a duration" in m for m in messages), messages


@pytest.mark.parametrize(
    "call",
    [
        {"name": "a", "template": "echo"},
        {"name": "a", "template": "echo", "arguments": {"parameters": [{"name": "other", "value": "1"}]}},
    ],
)
def test_a_required_input_the_caller_does_not_give_is_refused_before_anything_runs(call: dict, tmp_path: Path) -> None:
    says = (
        "template 'main' task 'a' gives no value for input parameter 'msg' of template 'echo', which has no default: "
        "add it to its arguments.parameters."
    )
    assert refused(wf(templates=[dag(call), ECHO])) == says
    steps = {"name": "main", "steps": [[call]]}
    assert refused(wf(templates=[steps, ECHO])) == says.replace("task 'a'", "step 'a'")
    with pytest.raises(WorkflowError, match="gives no value"):
        run_workflow(wf(templates=[dag(call), ECHO]), home=tmp_path)
    assert not (tmp_path / "runs").exists()


def test_an_entrypoint_input_comes_from_the_workflow_arguments() -> None:
    entry = {**ECHO, "name": "main"}
    assert refused(wf(templates=[entry])).startswith(
        "the entrypoint gives no value for input parameter 'msg' of template 'main', which has no default: add it "
        "to spec.arguments.parameters."
    )
    assert load_workflow(wf(templates=[entry], arguments={"parameters": [{"name": "msg", "value": "hi"}]}))


PARAMETER_TYPE = {"workflows.argoproj.io/configmap-type": "Parameter"}


def test_a_parameter_from_a_config_map_reads_the_config_map_beside_the_workflow(tmp_path: Path) -> None:
    """Argo reads the cluster's ConfigMaps (those with the configmap-type label); locally, the YAML files beside the
    workflow's, as for WorkflowTemplates. Before, an argument said "has no value: pass -p" and an input failed its
    step with "inputs.parameters.message was not supplied"."""
    ref = {"configMapKeyRef": {"name": "simple", "key": "msg"}}
    echo = {"name": "main", "container": {"image": "x", "command": ["echo", "{{workflow.parameters.message}}"]}}
    path = tmp_path / "wf.yaml"
    arguments = {"parameters": [{"name": "message", "valueFrom": ref}]}
    path.write_text(yaml.safe_dump(wf(templates=[echo], arguments=arguments)))
    assert refused(path) == (
        f"parameter 'message' takes its value from ConfigMap 'simple' (key 'msg'), which the local runner looks for "
        f"in the YAML files of {tmp_path}, and no ConfigMap 'simple' is there: put it there, as the cluster would "
        "hold it, or give the parameter a valueFrom.default."
    )
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "simple"}, "data": {"msg": "hi"}}
    (tmp_path / "cm.yaml").write_text(yaml.safe_dump(config_map))
    assert "ConfigMap 'simple' has no label workflows.argoproj.io/configmap-type" in refused(path)
    config_map["metadata"]["labels"] = PARAMETER_TYPE
    (tmp_path / "cm.yaml").write_text(yaml.safe_dump(config_map))
    assert load_workflow(path).parameters == {"message": "hi"}
    assert load_workflow(path, {"message": "given"}).parameters == {"message": "given"}
    config_map["data"] = {"other": "x"}
    (tmp_path / "cm.yaml").write_text(yaml.safe_dump(config_map))
    assert "ConfigMap 'simple' has no key 'msg'" in refused(path)
    with_default = {"name": "message", "valueFrom": {**ref, "default": "fallback"}}
    path.write_text(yaml.safe_dump(wf(templates=[echo], arguments={"parameters": [with_default]})))
    assert load_workflow(path).parameters == {"message": "fallback"}
    own = {**echo, "inputs": {"parameters": [{"name": "m", "valueFrom": ref}]}}
    assert "parameter 'm' takes its value from ConfigMap 'simple'" in refused(wf(templates=[own]))


def test_inputs_given_every_way_argo_takes_still_load(tmp_path: Path) -> None:
    own = {
        "name": "own",
        "inputs": {
            "parameters": [
                {"name": "d", "default": "x"},
                {"name": "v", "value": "y"},
                {"name": "cm", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}},
            ]
        },
        "container": {"image": "x", "command": ["true"]},
    }
    tasks = [
        {
            "name": "a",
            "template": "echo",
            "arguments": {"parameters": [{"name": "msg", "value": "{{tasks.b.outputs.result}}"}]},
        },
        {"name": "b", "template": "own"},
        {"name": "c", "template": "echo", "arguments": {"parameters": [{"name": "msg", "value": 3}]}},
        {
            "name": "d",
            "inline": {"inputs": {"parameters": [{"name": "p", "default": "1"}]}, "container": LEAF["container"]},
        },
    ]
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": PARAMETER_TYPE}}
    (tmp_path / "cm.yaml").write_text(yaml.safe_dump({**config_map, "data": {"k": "from the ConfigMap"}}))
    (tmp_path / "tasks.yaml").write_text(yaml.safe_dump(wf(templates=[dag(*tasks), ECHO, own])))
    assert load_workflow(tmp_path / "tasks.yaml")
    library = {"kind": "WorkflowTemplate", "metadata": {"name": "lib"}, "spec": {"templates": [ECHO]}}
    (tmp_path / "lib.yaml").write_text(yaml.safe_dump(library))
    ref = {"name": "r", "templateRef": {"name": "lib", "template": "echo"}}
    path = tmp_path / "wf.yaml"
    path.write_text(
        yaml.safe_dump(wf(templates=[dag({**ref, "arguments": {"parameters": [{"name": "msg", "value": "1"}]}})]))
    )
    assert load_workflow(path)
    path.write_text(yaml.safe_dump(wf(templates=[dag(ref)])))
    assert "of template 'lib.echo', which has no default" in refused(path)


def _output(**param: object) -> dict:
    return {"outputs": {"parameters": [{"name": "p", **param}]}}


@pytest.mark.parametrize(
    ("template", "says"),
    [  # Argo's validateOutputs: the runner dropped such a parameter from the node's outputs without a word
        (
            {**LEAF, **_output(valueFrom={"expression": "'x'"})},
            "template 'leaf': outputs.parameters.p.valueFrom.expression is not read in a container template: use path.",
        ),
        (
            {**dag({"name": "a", "template": "leaf"}), **_output(valueFrom={"path": "/tmp/p"})},
            "template 'main': outputs.parameters.p.valueFrom.path is not read in a dag template: use parameter or "
            "expression.",
        ),
        (  # validateOutputParameter: one source, and not beside a value
            {**LEAF, **_output(valueFrom={"path": "/tmp/p", "jsonPath": "{.a}"})},
            "outputs.parameters.p.valueFrom must name one of path, jqFilter, jsonPath, parameter, expression, "
            "supplied, not path and jsonPath.",
        ),
        ({**LEAF, **_output(valueFrom={"default": "d"})}, "valueFrom must name one of path"),
        ({**LEAF, **_output(value="v", valueFrom={"path": "/tmp/p"})}, "has both valueFrom and value: choose one."),
        ({**LEAF, **_output()}, "outputs.parameters.p has neither valueFrom nor value."),
    ],
)
def test_an_output_parameter_its_template_cannot_give_is_refused(template: dict, says: str) -> None:
    templates = [template] if template["name"] == "leaf" else [template, LEAF]
    assert says in refused(wf(entrypoint=templates[0]["name"], templates=templates))


def test_output_parameters_argo_takes_still_load() -> None:
    leaf = {**LEAF, **_output(valueFrom={"path": "/tmp/p", "default": "d"})}
    main = {**dag({"name": "a", "template": "leaf"}), **_output(valueFrom={"expression": "tasks.a.outputs.result"})}
    suspend = {"name": "wait", "suspend": {}, **_output(valueFrom={"supplied": {}})}
    literal = {**LEAF, "name": "lit", **_output(value="v")}
    assert load_workflow(wf(templates=[main, leaf, suspend, literal]))


@pytest.mark.parametrize(
    ("argument", "says"),
    [  # Argo's validateArgumentsValues on a step's or task's arguments; the runner ran such a step
        (
            {"value": "purple", "enum": ["red", "blue"]},
            "task 'a': arguments.parameters.msg.value 'purple' is not one of its enum red, blue.",
        ),
        ({"value": "{{workflow.name}}", "enum": ["red"]}, "value '{{workflow.name}}' is not one of its enum red."),
        ({"value": "red", "enum": []}, "arguments.parameters.msg.enum is empty"),
    ],
)
def test_a_step_argument_outside_its_own_enum_is_refused(argument: dict, says: str) -> None:
    task = {"name": "a", "template": "echo", "arguments": {"parameters": [{"name": "msg", **argument}]}}
    assert says in refused(wf(templates=[dag(task), ECHO]))


def test_a_step_argument_in_its_enum_loads() -> None:
    task = {"name": "a", "template": "echo", "arguments": {"parameters": [{"name": "msg", "value": 1, "enum": [1]}]}}
    assert load_workflow(wf(templates=[dag(task), ECHO]))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("daemon", True),
        ("sidecars", [{"name": "db", "image": "x", "command": ["serve"]}]),
        ("initContainers", [{"name": "fetch", "image": "x", "command": ["true"]}]),
    ],
)
def test_what_argo_runs_around_a_step_is_refused_before_anything_runs(field: str, value: object) -> None:
    # the runner ran the step without it: a daemon's server blocked the run, a sidecar's was never there
    step = {"name": "b", "container": {"image": "x", "command": ["true"]}, field: value}
    says = refused(wf(templates=[dag({"name": "a", "template": "b"}), step]))
    assert says.startswith(f"template 'b' has {field} (") and "which the local runner cannot run" in says
    assert load_workflow(wf(templates=[dag({"name": "a", "template": "b"}), {**step, field: type(value)()}]))


def test_a_lifecycle_hook_other_than_exit_is_refused_before_anything_runs() -> None:
    # the runner ran the workflow without it: a `running` or `success` hook's step never ran
    hook = {"expression": "steps.a.status == 'Running'", "template": "leaf"}
    steps = {"name": "main", "steps": [[{"name": "a", "template": "leaf", "hooks": {"running": hook}}]]}
    assert refused(wf(templates=[steps, LEAF])) == (
        "template 'main' step 'a' has lifecycle hook 'running', which the local runner cannot run (it runs exit hooks "
        "only): remove it to run here."
    )
    assert refused(wf(hooks={"success": {"expression": "workflow.status == 'Succeeded'", "template": "main"}}))
    exit_hook = {
        "name": "main",
        "steps": [[{"name": "a", "template": "leaf", "hooks": {"exit": {"template": "leaf"}}}]],
    }
    assert load_workflow(wf(templates=[exit_hook, LEAF], hooks={"exit": {"template": "leaf"}}))


@pytest.mark.parametrize(
    ("container", "says"),
    [
        (
            {"env": [{"name": "PW", "valueFrom": {"secretKeyRef": {"name": "s", "key": "pw"}}}]},
            "template 'main' env 'PW' takes its value from a Secret, which the local runner does not have: "
            "give it a value.",
        ),
        (
            {"env": [{"name": "C", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]},
            "template 'main' env 'C' takes its value from a ConfigMap, which the local runner does not have: "
            "give it a value.",
        ),
        (
            {"envFrom": [{"secretRef": {"name": "s"}}]},
            "template 'main' envFrom takes variables from a Secret, which the local runner does not have: "
            "give them values in env.",
        ),
        (
            {"volumeMounts": [{"name": "creds", "mountPath": "/secret/x"}]},
            "template 'main' mounts volume 'creds', a Secret, which the local runner does not have: "
            "mount an emptyDir or a claim, or remove it to run here.",
        ),
    ],
)
def test_a_secret_or_configmap_a_step_reads_is_refused_before_anything_runs(container: dict, says: str) -> None:
    """Kubernetes fills these in when it makes the pod (Argo's controller passes the container's env, envFrom and
    volumes through unchanged: workflow/controller/workflowpod.go createWorkflowPod); the runner has neither Secrets
    nor ConfigMaps and ran the step with the variable empty and no file (upstream's secrets example Succeeded,
    printing "secret from env: " and nothing more)."""
    main = {"name": "main", "container": {"image": "x", "command": ["true"], **container}}
    creds = [{"name": "creds", "secret": {"secretName": "s"}}]
    assert refused(wf(templates=[main], volumes=creds)) == says


@pytest.mark.parametrize(
    ("where", "patch", "says"),
    [
        ("template", '{"containers":[{"name":"main","env":[{"name":"A","value":"1"}]}]}', "containers[].env"),
        ("template", "nodeSelector:\n  gpu: a100\n", "nodeSelector"),
        ("workflow", '{"containers":[{"name":"main","command":["{{inputs.parameters.c}}"]}]}', "containers[].command"),
        ("template", "not a mapping", "a patch that is not a mapping"),
    ],
)
def test_a_pod_spec_patch_beyond_resources_is_refused_before_anything_runs(where: str, patch: str, says: str) -> None:
    """Argo merges podSpecPatch into the pod it makes (workflow/controller/workflowpod.go, a strategic merge patch): a
    command, env, image or node selector there changes what the step runs or where; the runner passed it over."""
    main: dict = {"name": "main", "container": {"image": "x", "command": ["true"]}}
    spec = {"podSpecPatch": patch} if where == "workflow" else {}
    if where == "template":
        main["podSpecPatch"] = patch
    message = refused(wf(templates=[main], **spec))
    assert f"podSpecPatch changes {says}" in message


def test_a_pod_spec_patch_of_resources_only_runs() -> None:
    # upstream's pod-spec-patch examples: the resources of the main container, which the runner does not look at
    patch = '{"containers":[{"name":"main", "resources":{"limits":{"cpu": "{{inputs.parameters.cpu-limit}}"}}}]}'
    main = {"name": "main", "podSpecPatch": patch, "container": {"image": "x", "command": ["true"]}}
    assert load_workflow(wf(templates=[main])) is not None


# -- found by mutating the upstream examples: each was a Python exception, or a run Argo would not make ----------


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        # an AttributeError / "unhashable type" from the loader: the loader shape-checked a hook only as a mapping
        ({"hooks": {"exit": {"template": ["main"]}}}, "spec.hooks.exit.template must be a string, not a list."),
        ({"hooks": {"exit": {"template": "main", "arguments": 5}}}, "spec.hooks.exit.arguments must be a mapping"),
        (
            {"arguments": {"parameters": [{"name": "a", "valueFrom": "x"}]}},
            "spec.arguments.parameters[0].valueFrom must be a mapping, not a string.",
        ),
        # Argo's types: a larger number does not unmarshal (argo submit refuses it); the runner's timer overflowed
        ({"activeDeadlineSeconds": 2**63}, "spec.activeDeadlineSeconds is 9223372036854775808, more than an int64"),
        ({"parallelism": 2**64}, "spec.parallelism is 18446744073709551616, more than an int64 holds"),
        # Argo's controller honours these from the start; the runner ran the workflow at once, to its end
        ({"suspend": True}, "spec.suspend is set (it waits for argo resume before anything runs on Argo)"),
        ({"shutdown": "Terminate"}, "spec.shutdown is set (it stops at once on Argo)"),
    ],
)
def test_a_mutated_spec_is_refused_in_one_sentence(spec: dict, says: str) -> None:
    assert refused(wf(**spec)).startswith(says)


@pytest.mark.parametrize(
    ("loop", "says"),
    [
        ({"withItems": "abc"}, "withItems must be a list, not a string."),  # it looped over 'a', 'b' and 'c'
        ({"withItems": {"a": 1}}, "withItems must be a list, not a mapping."),  # ... over the keys
        ({"withSequence": "3"}, "withSequence must be a mapping, not a string."),  # an AttributeError at run time
    ],
)
def test_a_loop_of_the_wrong_type_is_refused_before_anything_runs(loop: dict, says: str) -> None:
    steps = {"name": "main", "steps": [[{"name": "a", "template": "leaf", **loop}]]}
    assert refused(wf(templates=[steps, LEAF])) == f"spec.templates[0].steps[0][0].{says}"


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        # an int32 in Argo's IntOrString: 2**63 retried a failing step without end, Argo's CLI does not unmarshal it
        ({"retryStrategy": {"limit": 2**31}}, "retryStrategy.limit is 2147483648: write a whole number (up to"),
        # strconv.Atoi cannot read it; the runner retried without end
        ({"retryStrategy": {"limit": "99999999999999999999"}}, "retryStrategy.limit is '99999999999999999999'"),
        ({"activeDeadlineSeconds": "1" * 5000}, "activeDeadlineSeconds is '1111"),  # int() refused it: a ValueError
        ({"retryStrategy": {"limit": 1, "backoff": {"duration": "1", "factor": 2**40}}}, "backoff.factor is"),
    ],
)
def test_an_int_or_string_past_what_argo_reads_is_refused(fields: dict, says: str) -> None:
    assert says in refused(wf(templates=[{**LEAF, "name": "main", **fields}]))
    strings = {"retryStrategy": {"limit": "2147483648", "backoff": {"duration": "1", "factor": "-2147483648"}}}
    assert load_workflow(wf(templates=[{**LEAF, "name": "main", **strings}]))  # Atoi reads these


@pytest.mark.parametrize("path", ["/etc/hostname", "/dev/zero", "relative/x", "/tmp/../etc/hostname"])
def test_an_output_parameter_read_from_the_hosts_files_is_refused(path: str) -> None:
    # the host's /etc/hostname was read, not the container's; its /dev/zero without end (a MemoryError)
    outputs = {"parameters": [{"name": "v", "valueFrom": {"path": path}}]}
    says = refused(wf(templates=[{**LEAF, "name": "main", "outputs": outputs}]))
    assert says.startswith(f"template 'main' output parameter 'v' is at {path!r}; the local runner keeps the files")
