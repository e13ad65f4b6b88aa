"""The whole `vcpilot` command tree keeps the contract of components/entry.py (README, "Errors and exit codes").

Every command answers `--help` and `-h` with a usage line; every argument and option says what it is; every
command with `--json` prints exactly one JSON document, an error included; each kind of error is one line with its
exit code, and only `--debug` (or VCPILOT_DEBUG=1) shows a traceback. `vcpilot --help` imports nothing heavy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import typer.main
from typer._click import core as click_core
from typer.core import TyperArgument, TyperGroup
from typer.testing import CliRunner

from components.entry import SENTENCE_MAX, new_app
from components.errors import EXIT_INPUT, EXIT_INTERRUPTED, EXIT_UNAVAILABLE, EXIT_USAGE, InputError, Unavailable
from pipelines.cli import app

ROOT = Path(__file__).resolve().parents[2]
# What `vcpilot --help` must not import: each costs more than typer itself (pydantic: typer's own coercion imports
# it for any option that is not a flag, but `--help` has none).
HEAVY = ("hera", "mcp", "fastapi", "mlflow", "torch", "transformers", "kubernetes", "pydantic", "yaml", "httpx")


def _tree() -> list[tuple[list[str], click_core.Command]]:
    """(path, command) of every command and group under `vcpilot`, the root included."""
    found: list[tuple[list[str], click_core.Command]] = []

    def walk(path: list[str], command: click_core.Command, ctx: click_core.Context) -> None:
        found.append((path, command))
        if isinstance(command, TyperGroup):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None, f"vcpilot {' '.join(path)} lists {name} but cannot build it"
                walk([*path, name], sub, click_core.Context(sub, parent=ctx, info_name=name))

    root = typer.main.get_command(app)
    walk([], root, click_core.Context(root, info_name="vcpilot"))
    return found


TREE = _tree()
LEAVES = [(path, command) for path, command in TREE if not isinstance(command, TyperGroup)]
WITH_JSON = [path for path, command in LEAVES if any("--json" in p.opts for p in command.params)]


def _id(path: list[str]) -> str:
    return " ".join(path) or "vcpilot"


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.setenv("VCPILOT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("VCPILOT_WORKSPACE", str(tmp_path / "workspace"))
    monkeypatch.delenv("VCPILOT_DEBUG", raising=False)
    runner = CliRunner()
    return lambda *args, **kw: runner.invoke(app, list(args), **kw)


def one_line_error(result, code: int, *fragments: str) -> str:
    assert result.exit_code == code, (result.exit_code, result.output)
    line = result.stderr.strip()
    assert line.startswith("error: ") and "\n" not in line, result.stderr
    assert "Traceback" not in result.output and "Usage:" not in result.output and "Try " not in result.output
    for fragment in fragments:
        assert fragment in line, line
    return line.removeprefix("error: ")


def test_the_tree_is_the_whole_cli():
    names = {_id(path) for path, _ in TREE}
    assert {"cluster status", "plan", "run", "run-workflow", "runs list", "logs detect", "release show"} <= names
    assert len(LEAVES) > 30 and WITH_JSON


@pytest.mark.parametrize("path", [path for path, _ in TREE], ids=_id)
def test_every_command_answers_help_and_h(run, path):
    for flag in ("--help", "-h"):
        shown = run(*path, flag)
        assert shown.exit_code == 0, shown.output
        assert shown.stdout.startswith(f"Usage: {' '.join(['vcpilot', *path])} "), shown.stdout[:200]
        assert shown.stderr == ""


@pytest.mark.parametrize(("path", "command"), LEAVES, ids=[_id(p) for p, _ in LEAVES])
def test_every_argument_and_option_says_what_it_is(path, command):
    for param in command.params:
        if getattr(param, "hidden", False):
            continue
        assert getattr(param, "help", None), f"vcpilot {_id(path)}: {param.name} has no help"
    assert command.help, f"vcpilot {_id(path)} has no docstring"


@pytest.mark.parametrize("path", WITH_JSON, ids=_id)
def test_every_json_command_prints_one_json_document_on_error(run, path):
    done = run(*path, "--json", "--no-such-option")
    sentence = one_line_error(done, EXIT_USAGE, "--no-such-option", f"`vcpilot {_id(path)} --help`")
    assert json.loads(done.stdout) == {"error": sentence, "exit_code": EXIT_USAGE}


PATH_PARAMS = [
    (path, command, param)
    for path, command in LEAVES
    for param in command.params
    if getattr(getattr(param, "type_descriptor", None), "is_path", False)
]


@pytest.mark.parametrize(
    ("path", "command", "param"), PATH_PARAMS, ids=[f"{_id(p)} {q.name}" for p, _, q in PATH_PARAMS]
)
def test_an_empty_path_is_a_usage_error_not_the_working_directory(run, tmp_path, monkeypatch, path, command, param):
    # typer reads '' as `.`: `compile --out ''` wrote into the working directory, `cluster submit ''` said "is a
    # directory"
    monkeypatch.chdir(tmp_path)
    arguments = [("" if p is param else "x") for p in command.params if isinstance(p, TyperArgument)]
    given = arguments if isinstance(param, TyperArgument) else [*arguments, param.opts[0], ""]
    one_line_error(run(*path, *given), EXIT_USAGE, "empty: give a path")
    assert not list(tmp_path.glob("*.yaml"))
    if not isinstance(param, TyperArgument):
        one_line_error(run(*path, *arguments, f"{param.opts[0]}="), EXIT_USAGE, "empty: give a path")


@pytest.mark.parametrize(
    "args", [("cluster", "status", "--json"), ("runs", "list", "--json"), ("plan", "--json")], ids=" ".join
)
def test_json_commands_that_need_nothing_print_one_document(run, args):
    done = run(*args)
    assert done.exit_code == 0, done.output
    assert isinstance(json.loads(done.stdout), (dict, list))


def test_lint_json_is_one_document_with_its_problems(run, tmp_path):
    good = run("lint", str(ROOT / "deploy" / "argo" / "llm-autopilot.yaml"), "--json")
    assert good.exit_code == 0 and json.loads(good.stdout)["problems"] == []
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nspec: {entrypoint: nope, templates: []}\n")
    found = run("lint", str(bad), "--json")
    assert found.exit_code == 1 and json.loads(found.stdout)["problems"][0]["file"] == str(bad)


def test_a_user_error_is_one_sentence_exit_1_and_a_json_object_with_json(run):
    one_line_error(run("cluster", "get", "nope"), EXIT_INPUT, "job default/nope does not exist")
    done = run("cluster", "get", "nope", "--json")
    sentence = one_line_error(done, EXIT_INPUT)
    assert json.loads(done.stdout) == {"error": sentence, "exit_code": EXIT_INPUT}


def test_an_error_quoting_a_line_break_stays_one_line(run):
    # `vcpilot cluster get $'x\ny'` printed "error: job default/x" and then "y does not exist." on a line of its own
    one_line_error(run("cluster", "get", "x\ny"), EXIT_INPUT, "job default/x\\ny does not exist")
    done = run("cluster", "get", "x\r\ny", "--json")
    assert json.loads(done.stdout)["error"] == one_line_error(done, EXIT_INPUT, "default/x\\r\\ny")


def test_an_error_quoting_control_characters_shows_their_escapes(run):
    # `vcpilot cluster get $'a\e[31mb\vc'` wrote the escape sequence and the vertical tab to the terminal as they
    # were: the rest of the line turned red, and the sentence went on on the next line
    done = run("cluster", "get", "a\x1b[31mb\x0bc\u2028d\x07", "--json")
    sentence = one_line_error(done, EXIT_INPUT, "default/a\\x1b[31mb\\x0bc\\u2028d\\x07 does not exist")
    assert json.loads(done.stdout)["error"] == sentence
    assert not any(ord(c) < 0x20 or c == "\x7f" for c in done.stderr.strip())


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (("cluster", "status", "--bogus"), ("no such option: --bogus", "see `vcpilot cluster status --help`")),
        (("cluster", "status", "--jsn"), ("--jsn", "--json")),
        (("runs", "list", "--limit", "abc"), ("--limit should be a valid integer",)),
        (("runs", "list", "--limit", "0"), ("--limit should be greater than or equal to 1",)),
        # both bounds: nan is not "more than 0.5", and the range is what to choose from
        (("logs", "detect", "--alpha", "nan"), ("--alpha should be a number from 1e-09 to 0.5",)),
        (("logs", "detect", "--alpha", "0.9"), ("--alpha should be a number from 1e-09 to 0.5",)),
        (("ui", "--port", "0"), ("--port should be a whole number from 1 to 65535",)),
        (("cluster", "get"), ("missing argument 'name'",)),
        (("clustr", "status"), ("no such command 'clustr' (did you mean 'cluster'?)",)),
        (("run", "--scenario", "nope"), ("invalid --scenario ('nope' is not one of 'drift'",)),
        (("plan", "--policy", "magic"), ("invalid --policy",)),
        (("plan", "--max-steps"), ("--max-steps",)),
        # an empty model name reached MLflow: "reading registered model  failed: Missing value for … 'name'"
        (("release", "show", "--registered-model", " "), ("--registered-model: is empty; give the registered model",)),
    ],
)
def test_a_usage_error_is_one_sentence_and_exit_2(run, args, fragments):
    one_line_error(run(*args), EXIT_USAGE, *fragments)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("plan", "--max-steps", "0"), "--max-steps must be greater than 0, got 0"),
        (("plan", "--gpus", "2", "--min-gpus", "4"), "--min-gpus 4 is above --gpus 2"),
        (("demo", "data", "--out", "{tmp}", "--changed-share", "2"), "--changed-share should be less than or equal"),
        (("run-workflow", "{tmp}/w.yaml", "-p", "who"), "--param 'who' is not NAME=VALUE"),
    ],
)
def test_an_option_is_named_as_it_is_typed(run, tmp_path, args, message):
    line = one_line_error(run(*(a.replace("{tmp}", str(tmp_path)) for a in args)), EXIT_INPUT)
    assert line.startswith(message), line
    assert "_" not in line.split(" ")[0] and not line.split(" ")[0].endswith(":")


def test_an_error_quoting_a_huge_value_keeps_its_start_and_its_advice(run, tmp_path):
    # a 5,000-digit spec.parallelism was quoted whole: one "sentence" of 5,100 characters
    workflow = tmp_path / "w.yaml"
    workflow.write_text(
        "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {name: x}\nspec:\n"
        f"  parallelism: {'9' * 5000}\n  entrypoint: a\n"
        "  templates: [{name: a, container: {image: busybox, command: [echo]}}]\n"
    )
    sentence = one_line_error(run("run-workflow", str(workflow), "--json"), EXIT_INPUT, "spec.parallelism", " [...] ")
    assert len(sentence) <= SENTENCE_MAX + len(" [...] ")
    assert json.loads(run("run-workflow", str(workflow), "--json").stdout)["error"] == sentence


def test_debug_and_vcpilot_debug_show_the_traceback(run):
    for args, env in (
        (("--debug", "cluster", "get", "nope"), None),
        (("cluster", "get", "nope"), {"VCPILOT_DEBUG": "1"}),
    ):
        done = run(*args, env=env)
        assert done.exit_code == EXIT_INPUT
        assert "Traceback (most recent call last)" in done.stderr and "JobNotFound" in done.stderr
        assert done.stderr.strip().splitlines()[-1] == "error: job default/nope does not exist."


@pytest.mark.parametrize("value", ["0", "false", "No", "off", ""])
def test_vcpilot_debug_set_to_no_shows_no_traceback(run, value):
    # VCPILOT_DEBUG=false showed the traceback, as if it said yes
    one_line_error(run("cluster", "get", "nope", env={"VCPILOT_DEBUG": value}), EXIT_INPUT, "default/nope")


def _failing_app() -> typer.Typer:
    fake = new_app()

    @fake.command()
    def bad(kind: str) -> None:
        """Fail the way `kind` says."""
        raise {
            "input": InputError("--thing is wrong; give a better one"),
            "unavailable": Unavailable("the server at http://x did not answer; try again later"),
            "bug": KeyError("boom"),
            "interrupt": KeyboardInterrupt(),
        }[kind]

    @fake.command()
    def fine() -> None:
        """Succeed."""

    return fake


@pytest.mark.parametrize(
    ("kind", "code", "fragment"),
    [
        ("input", EXIT_INPUT, "--thing is wrong"),
        ("unavailable", EXIT_UNAVAILABLE, "try again later"),
        ("bug", 1, "internal error (KeyError: 'boom'), a bug in vcpilot; run again with --debug"),
        ("interrupt", EXIT_INTERRUPTED, "interrupted"),
    ],
)
def test_each_kind_of_error_ends_in_one_line_and_its_exit_code(monkeypatch, kind, code, fragment):
    monkeypatch.delenv("VCPILOT_DEBUG", raising=False)
    one_line_error(CliRunner().invoke(_failing_app(), ["bad", kind]), code, fragment)


def test_a_bug_shows_its_traceback_with_vcpilot_debug(monkeypatch):
    monkeypatch.setenv("VCPILOT_DEBUG", "1")
    done = CliRunner().invoke(_failing_app(), ["bad", "bug"])
    assert done.exit_code == 1 and "Traceback" in done.stderr and "KeyError: 'boom'" in done.stderr


def test_version():
    done = CliRunner().invoke(app, ["--version"])
    assert done.exit_code == 0 and done.stdout.startswith("vcpilot ")


# Every option a command writes to, given a path it cannot write: `f` is a file, so `f` is no directory and nothing
# goes under `f/`. Each is refused naming the option, before any work starts (compile said `f: File exists`;
# finetune --out f failed only once training began).
UNWRITABLE = [
    (("compile", "--out", "f"), "--out f is a file"),
    (("compile", "--out", "f/d"), "--out f/d is under f, a file"),
    (("finetune", "--data", ".", "--out", "f", "--max-steps", "1"), "--out f is a file"),
    (("finetune", "--data", ".", "--output-dir", "f", "--max-steps", "1"), "--out f is a file"),
    (("finetune", "--data", ".", "--out", "m", "--checkpoint-dir", "f/c", "--max-steps", "1"), "--checkpoint-dir f/c"),
    (("demo", "data", "--out", "f"), "--out f is a file"),
    (("demo", "seed", "--home", "f", "--mlflow-tracking-uri", "http://127.0.0.1:9"), "--home f is a file"),
    # a tracking URI MLflow cannot use: it created the demo under --home, then printed MLflow's paragraph
    (("demo", "seed", "--home", "new", "--mlflow-tracking-uri", "ftp://x"), "is not one MLflow can keep runs under"),
    (("demo", "seed", "--home", "new", "--mlflow-tracking-uri", "http://h:0"), "has a port that is not a number"),
    (("logs", "detect", "--current", "f", "--out", "f"), "--out f is a file"),
    (("logs", "detect", "--current", "f", "--out", "d", "--state", "f"), "--state f is a file"),
    (("logs", "step", "--source", "f", "--report", "f/r.json"), "--report f/r.json is under f"),
    (("logs", "step", "--source", "f", "--report", "r.json", "--state", "f"), "--state f is a file"),
    (("logs", "parse", "f", "--out", "f/p.csv"), "--out f/p.csv is under f"),
    (("logs", "parse", "f", "--out", "p.csv", "--state", "f/s"), "--state f/s is under f"),
    (("logs", "parse", "f", "--out", "p.csv", "--llm-refine", "--llm-cache", "f/c"), "--llm-cache f/c is under f"),
    (("evaluate", "--model", ".", "--eval-set", "f", "--report", "f/r.json"), "--report f/r.json is under f"),
    (("release", "register", "--model", ".", "--registered-model", "m", "--report", "f/r"), "--report f/r is under"),
    (("loadtest", "--url", "http://127.0.0.1:9", "--concurrency", "1", "--records", "f/r"), "--records f/r is under"),
]


@pytest.mark.parametrize(("args", "says"), UNWRITABLE, ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_an_output_path_that_cannot_be_written_is_refused_first(run, tmp_path, monkeypatch, args, says):
    work = tmp_path / "work"
    work.mkdir()
    (work / "f").write_text("x")
    monkeypatch.chdir(work)
    one_line_error(run(*args), EXIT_INPUT, says)
    assert [p.name for p in work.iterdir()] == ["f"] and not (tmp_path / "home").exists()  # nothing was written


def test_mcp_refuses_a_checkpoints_root_that_is_a_file(run, tmp_path, monkeypatch):
    # it served, and every find_latest_checkpoint call then found nothing under a file
    (tmp_path / "f").write_text("x")
    monkeypatch.chdir(tmp_path)
    one_line_error(run("mcp", "--checkpoints-root", "f"), EXIT_INPUT, "--checkpoints-root f is a file")
    assert not (tmp_path / "home").exists()


def test_mcp_refuses_a_checkpoints_root_that_is_a_symlink_loop(run, tmp_path):
    # it was an internal error: "RuntimeError: Symlink loop from …"
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    done = run("mcp", "--checkpoints-root", str(tmp_path / "a"))
    one_line_error(done, EXIT_INPUT, f"--checkpoints-root {tmp_path / 'a'} cannot be a directory (")
    assert not (tmp_path / "home").exists()


def test_the_commands_that_start_a_workflow_spell_param_alike():
    by_path = {_id(path): command for path, command in LEAVES}
    for name in ("run", "run-workflow", "submit"):
        (param,) = [p for p in by_path[name].params if p.name == "param"]
        assert param.opts == ["--param", "-p"], name


def test_the_choices_written_out_are_the_real_ones():
    from agent.cli_mcp import GUARDRAILS_ENV
    from agent.guardrails import ENV_VAR
    from agent.policies import POLICY_NAMES
    from components.serving.cli import serve_command
    from components.serving.command import ENGINES
    from pipelines.cli_plan import PolicyChoice
    from pipelines.cli_run import ScenarioName
    from pipelines.scenarios import SCENARIOS

    assert typing.get_args(ScenarioName) == tuple(SCENARIOS)
    assert typing.get_args(PolicyChoice) == POLICY_NAMES
    engine = typing.get_type_hints(serve_command, include_extras=True)["engine"]
    assert typing.get_args(typing.get_args(engine)[0]) == ENGINES
    assert GUARDRAILS_ENV == ENV_VAR


def test_help_in_a_fresh_process_is_well_formed_and_imports_nothing_heavy():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "--help"], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and done.stdout.startswith("Usage: ") and done.stderr == ""
    probe = (
        "import sys\n"
        "from pipelines.cli import app\n"
        "try:\n    app(['--help'])\nexcept SystemExit:\n    pass\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    assert loaded.stdout.strip().splitlines()[-1] == "[]", loaded.stdout + loaded.stderr
