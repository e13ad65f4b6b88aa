"""`run-workflow` and `resume` from the command line: JSON only with --json, exit 0 only on success."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pipelines.local.cli import app

pytestmark = pytest.mark.integration


@pytest.fixture
def cli(home: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("VCPILOT_HOME", str(home))
    return CliRunner()


def test_json_prints_only_the_final_status(cli: CliRunner, shared_dir: Path) -> None:
    path = shared_dir / "argo-examples" / "arguments-parameters.yaml"
    out = cli.invoke(app, ["run-workflow", str(path), "-p", "message=hi there", "--json"])
    assert out.exit_code == 0, out.output
    status = json.loads(out.stdout)
    assert status["phase"] == "Succeeded"
    assert [n["outputs"]["result"] for n in status["nodes"].values()] == ["hi there"]


def test_failed_workflow_exits_1_and_shows_the_tree(cli: CliRunner, shared_dir: Path) -> None:
    out = cli.invoke(app, ["run-workflow", str(shared_dir / "argo-examples" / "exit-handlers.yaml")])
    assert out.exit_code == 1
    assert "cry" in out.stdout and "Failed: main: Error (exit code 1)" in out.stdout


def test_bad_input_is_one_line_and_exit_1(cli: CliRunner, shared_dir: Path, home: Path) -> None:
    path = shared_dir / "argo-examples" / "hello-world.yaml"
    out = cli.invoke(app, ["run-workflow", str(path), "-p", "who=me", "--json"])
    assert out.exit_code == 1  # EXIT_INPUT
    sentence = "unknown parameter 'who': this workflow's parameters are none."
    assert out.stderr.strip() == f"error: {sentence}"
    assert json.loads(out.stdout) == {"error": sentence, "exit_code": 1} and not (home / "runs").exists()
    out = cli.invoke(app, ["resume", "nope"])
    assert out.exit_code == 1 and "there is no run named 'nope'" in out.stderr
    out = cli.invoke(app, ["run-workflow", str(path), "--parameter", "who"])  # the old spelling still works
    message = "error: --param 'who' is not NAME=VALUE; write --param name=value"
    assert (out.exit_code, out.stderr.strip()) == (1, message)
    assert not (home / "runs").exists()


def test_resume_of_a_finished_run_returns_it(cli: CliRunner, shared_dir: Path) -> None:
    path = shared_dir / "argo-examples" / "hello-world.yaml"
    first = json.loads(cli.invoke(app, ["run-workflow", str(path), "--json", "--name", "hi"]).stdout)
    again = cli.invoke(app, ["resume", "hi", "--json"])
    assert again.exit_code == 0 and json.loads(again.stdout) == first


@pytest.mark.parametrize("record", ["[]", "null", '{"status": "x"}', '{"phase": 5}', '{"metadata": {}, "spec": {}, '
                                    '"status": {"nodes": [1]}}', "{not json"])  # fmt: skip
def test_a_damaged_run_record_is_one_sentence_listed_as_damaged_beside_the_other_runs(
    cli: CliRunner, shared_dir: Path, home: Path, record: str
) -> None:
    from pipelines.cli import app as vcpilot

    path = shared_dir / "argo-examples" / "hello-world.yaml"
    assert cli.invoke(app, ["run-workflow", str(path), "--name", "good"]).exit_code == 0
    (home / "runs" / "bad").mkdir()
    (home / "runs" / "bad" / "status.json").write_text(record)
    listed = cli.invoke(vcpilot, ["runs", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    runs = {run["name"]: run for run in json.loads(listed.stdout)}
    assert runs.keys() == {"good", "bad"} and runs["good"]["phase"] == "Succeeded"
    assert runs["bad"]["phase"] == "Damaged" and "runs/bad/status.json is not" in runs["bad"]["message"]
    assert runs["bad"]["message"].endswith("`vcpilot runs delete bad --yes` removes it")
    text = cli.invoke(vcpilot, ["runs", "list"])  # listed where a person looks, not hidden
    assert text.exit_code == 0 and any(line.startswith("bad  Damaged: ") for line in text.stdout.splitlines())
    for argv in (["runs", "show", "bad"], ["runs", "logs", "bad"], ["resume", "bad"]):
        out = cli.invoke(vcpilot, argv)
        assert out.exit_code == 1 and out.stderr.strip().count("\n") == 0, (argv, out.stderr)
        assert "runs/bad/status.json is not" in out.stderr and "internal error" not in out.stderr
    asked = cli.invoke(vcpilot, ["runs", "delete", "bad"])  # no terminal to answer at: nothing changes
    assert asked.exit_code == 1 and asked.stderr.strip().splitlines()[-1] == (
        "error: runs delete would remove run bad (its record damaged): pass --yes when there is no terminal to "
        "confirm at."
    )
    assert (home / "runs" / "bad" / "status.json").exists()
    deleted = cli.invoke(vcpilot, ["runs", "delete", "bad", "--yes", "--json"])  # the way out
    assert deleted.exit_code == 0, deleted.output
    answer = json.loads(deleted.stdout)
    assert answer["name"] == "bad" and answer["removed"][0].startswith(str(home / "runs" / "bad"))
    assert answer["mlflow"].endswith("the damaged record does not say where it is")
    assert not (home / "runs" / "bad").exists() and (home / "runs" / "good" / "status.json").exists()


def test_standard_input_and_a_pipe_are_read_once_linted_and_run_as_argo_submit_reads_them(
    cli: CliRunner, shared_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `argo submit -` reads standard input, and `<(envsubst < wf.yaml)` is a pipe. Each can be read once, and
    # run-workflow reads its file twice (the lint rule, then the loader): both must get the same bytes.
    from pipelines.cli import app as vcpilot  # with the lint rule, which pipelines.cli adds

    text = (shared_dir / "argo-examples" / "arguments-parameters.yaml").read_text()
    out = cli.invoke(vcpilot, ["run-workflow", "-", "-p", "message=piped", "--json"], input=text)
    assert out.exit_code == 0, out.output
    assert [n["outputs"]["result"] for n in json.loads(out.stdout)["nodes"].values()] == ["piped"]

    read, write = os.pipe()
    os.write(write, text.encode())
    os.close(write)
    try:
        out = cli.invoke(vcpilot, ["run-workflow", f"/dev/fd/{read}", "--json"])
    finally:
        os.close(read)
    assert out.exit_code == 0, out.output
    assert [n["outputs"]["result"] for n in json.loads(out.stdout)["nodes"].values()] == ["hello world"]

    # What Argo refuses is refused from standard input too, named so: the lint rule read what the loader read.
    bad = text.replace("  entrypoint:", "  bogusField: 1\n  entrypoint:")
    out = cli.invoke(vcpilot, ["run-workflow", "-"], input=bad)
    assert out.exit_code == 1
    assert out.stderr.strip() == "error: Argo would refuse standard input: spec.bogusField: unknown field 'bogusField'."
    out = cli.invoke(vcpilot, ["run-workflow", "-"], input=b"\xff\xfe")
    assert out.stderr.strip() == (
        "error: the workflow on standard input is not UTF-8 text (byte 0xff at offset 0); save it as UTF-8"
    )

    # The files beside a workflow on standard input are those of the current directory.
    (tmp_path / "library.yaml").write_text(
        text.replace("kind: Workflow", "kind: WorkflowTemplate").replace(
            "generateName: arguments-parameters-", "name: lib"
        )
    )
    monkeypatch.chdir(tmp_path)
    ref = "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {generateName: ref-}\nspec:\n"
    out = cli.invoke(vcpilot, ["run-workflow", "-", "--json"], input=ref + "  workflowTemplateRef: {name: lib}\n")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["phase"] == "Succeeded"


def test_a_parameter_file_gives_values_as_argo_submit_f_reads_them(
    cli: CliRunner, shared_dir: Path, tmp_path: Path
) -> None:
    # A string as it is, anything else Go's JSON of it (tests/e2e/test_argo_pipeline.py compares with argo submit).
    params = tmp_path / "params.yaml"
    for spelt, printed in [
        ("'2.50'", "2.50"),
        ("2.50", "2.5"),
        ("1e-7", "1e-7"),
        ("{b: 1, a: [x]}", '{"a":["x"],"b":1}'),
    ]:
        params.write_text(f"message: {spelt}\n")
        out = cli.invoke(
            app,
            [
                "run-workflow",
                str(shared_dir / "argo-examples" / "arguments-parameters.yaml"),
                "-f",
                str(params),
                "--json",
            ],
        )
        assert out.exit_code == 0, out.output
        assert [n["outputs"]["result"] for n in json.loads(out.stdout)["nodes"].values()] == [printed]
