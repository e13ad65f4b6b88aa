"""Bad input to `vcpilot` commands, as a new user types it: one sentence naming what to fix, exit 1, nothing changed.

Each case was once taken, or refused only after a model loaded or a server was asked, or ended as an internal error.
"""

import json
import os
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner
from unwritable_kit import KINDS, unwritable_place

from pipelines.cli import app


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("VCPILOT_HOME", str(home))
    return home


def refused(args: list[str], *fragments: str) -> str:
    """Run `vcpilot ARGS --json`; assert one sentence on stderr and the same error as stdout's one JSON document."""
    result = CliRunner().invoke(app, [*args, "--json"])
    text = result.stderr.strip()
    assert result.exit_code == 1, result.output
    assert text.startswith("error: ") and text.count("\n") == 0, text
    assert json.loads(result.stdout) == {"error": text.removeprefix("error: "), "exit_code": 1}
    for fragment in fragments:
        assert fragment in text, text
    return text


@pytest.mark.parametrize("namespace", ["", "BAD NS", "Team_A", "a" * 64])
@pytest.mark.parametrize(
    "command", [["get", "hello"], ["logs", "hello"], ["delete", "hello"], ["describe", "job/hello"], ["events"]]
)
def test_a_namespace_kubernetes_refuses_is_said_not_taken_for_a_missing_job(home, command, namespace):
    # it said "job BAD NS/hello does not exist" (and `events -n Bad` listed nothing, exit 0)
    refused(["cluster", *command, "-n", namespace], f"--namespace {namespace!r} is not a namespace name")


def test_cluster_sample_refuses_more_pods_than_a_task_holds_and_an_empty_name(home):
    # --pods 99999999999999999999 was an internal error (a ValidationError); --name '' printed the sample's own name
    refused(["cluster", "sample", "--pods", "99999999999999999999"], "--pods", "2147483647")
    refused(["cluster", "sample", "--name", ""], "--name")


@pytest.mark.parametrize("below", [False, True])
@pytest.mark.parametrize("command", [["runs", "list"], ["cluster", "status"], ["runs", "show", "x"]])
def test_a_vcpilot_home_that_is_a_file_is_refused_by_every_command(tmp_path, monkeypatch, command, below):
    # `runs list` said there were no runs (exit 0), `run-workflow` "…/runs/x: Not a directory", `ui` "File exists"
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("VCPILOT_HOME", str(tmp_path / "afile" / "home" if below else tmp_path / "afile"))
    refused(command, "VCPILOT_HOME", "a file")
    assert (tmp_path / "afile").read_text() == "x"


def test_submit_checks_parameter_values_and_the_namespace_before_asking_the_server(home):
    # both went to the server first: "cannot reach the Argo Server" (exit 3) hid the mistake
    server = ["submit", "--server", "http://127.0.0.1:1"]
    refused([*server, "-p", "gpus-wanted=1Gi"], "parameter gpus-wanted is '1Gi'")
    refused([*server, "--namespace", "Bad NS"], "--namespace", "'Bad NS' is not a namespace name")


def test_doctor_refuses_a_namespace_kubernetes_refuses(home, tmp_path):
    # every check ran and failed on it, as a report, instead of one sentence
    result = CliRunner().invoke(app, ["doctor", "--namespace", "Bad NS", "--kubeconfig", str(tmp_path / "none")])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.strip().count("\n") == 0 and "--namespace 'Bad NS'" in result.stderr


@pytest.mark.parametrize(
    ("option", "says"),
    [(["--device", "bogus"], "--device 'bogus' is not a torch device"), (["--host", "not a host"], "--host")],
)
def test_serve_refuses_a_bad_device_or_host_before_loading_a_model(tmp_path, option, says):
    # --device bogus was an internal error after the model loaded; a bad --host loaded the model, then exit 3
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = str(free.getsockname()[1])
    args = ["serve", "--model", str(tmp_path / "no-model"), "--host", "127.0.0.1", "--port", port, *option]
    result = CliRunner().invoke(app, args)
    text = result.stderr.strip()
    assert result.exit_code == 1 and text.count("\n") == 0 and says in text, result.output


def test_evaluate_refuses_two_evaluation_sets(tmp_path: Path):
    # --dataset-dir was ignored when --eval-set was given too
    (tmp_path / "eval.jsonl").write_text('{"prompt": "a", "completion": "b"}\n')
    args = ["evaluate", "--model", str(tmp_path / "m"), "--eval-set", str(tmp_path / "eval.jsonl")]
    refused([*args, "--dataset-dir", str(tmp_path)], "--eval-set and --dataset-dir")


def test_release_register_refuses_a_workflow_that_is_no_run_name(home, tmp_path):
    # it registered the model with the lineage tag `vcpilot.workflow: Bad/../x`
    args = ["release", "register", "--model", str(tmp_path / "m"), "--registered-model", "x"]
    refused([*args, "--workflow", "Bad/../x"], "--workflow 'Bad/../x' is not a run name")


def test_demo_seed_asks_mlflow_before_writing_the_demo_or_training_a_champion(home, tmp_path):
    # it wrote the demo into --home and trained the champion for a minute, then found MLflow unreachable
    args = ["demo", "seed", "--home", str(tmp_path / "ws"), "--mlflow-tracking-uri", "http://127.0.0.1:1"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 3 and "MLflow at http://127.0.0.1:1 is unreachable" in result.stderr, result.output
    assert not (tmp_path / "ws").exists()


@pytest.mark.parametrize("option", [["--lora-target", "q_proj"], ["--lora-r", "4"], ["--lora-alpha", "3"]])
def test_finetune_refuses_lora_options_without_lora(tmp_path, option):
    # they were dropped without a word, and every weight was trained
    args = ["finetune", "--data", str(tmp_path), "--out", str(tmp_path / "m"), "--max-steps", "1", *option]
    refused([*args], f"{option[0]} shapes LoRA adapters; add --lora")
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("command", [["run-workflow", "WF"], ["run"], ["submit", "--server", "http://127.0.0.1:9"]])
def test_a_parameter_given_twice_is_refused_before_anything_starts(home, tmp_path, command):
    # the last one won; `argo submit -p a=1 -p a=2` puts the parameter twice in spec.arguments, which Argo refuses
    wf = tmp_path / "wf.yaml"
    wf.write_text(Path("../shared/argo-examples/arguments-parameters.yaml").read_text())
    args = [str(wf) if part == "WF" else part for part in command]
    refused([*args, "-p", "message=a", "-p", "message=b"], "'message' is given twice")
    assert not (home / "runs").exists()


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("message: x\n", "--parameter-file PF gives 'message', which --param gives too; give it once"),
        ("- message\n", "parameter file PF must hold a mapping of fields, not a list"),
        ("message: .nan\n", "gives 'message' a value JSON cannot hold (nan); quote it"),
        ("a=b: c\n", "names a parameter 'a=b'; a parameter's name is not empty and has no '='"),
        ("message: x\nmessage: y\n", "key 'message' is given twice"),
        (b"message: caf\xe9\n", "parameter file PF is not UTF-8 text"),
    ],
)
@pytest.mark.parametrize("command", [["run-workflow", "WF"], ["run"], ["submit", "--server", "http://127.0.0.1:9"]])
def test_a_parameter_file_argo_submit_would_misread_is_refused_before_anything_starts(
    home, tmp_path, command, content, says
):
    wf, params = tmp_path / "wf.yaml", tmp_path / "params.yaml"
    wf.write_text(Path("../shared/argo-examples/arguments-parameters.yaml").read_text())
    params.write_bytes(content if isinstance(content, bytes) else content.encode())
    args = [str(wf) if part == "WF" else part for part in command]
    extra = ["-p", "message=a"] if "--param gives" in says else []
    refused([*args, *extra, "-f", str(params)], says.replace("PF", str(params)))
    assert not (home / "runs").exists()


@pytest.mark.parametrize(
    ("param", "says"),
    [
        ("log-source=/nonexistent/x.log", "the log source /nonexistent/x.log does not exist"),
        ("log-source=/nonexistent/*.log", "matches no file"),
        ("dataset-dir=/nonexistent", "holds no eval.jsonl"),
        ("log-source=", "parameter log-source is empty"),  # it trained, then detect read the current directory
    ],
)
def test_run_refuses_a_path_this_machine_lacks_before_the_first_champion(home, param, says):
    # the run started, trained the first champion for minutes, and the detect or evaluate step found the typo
    refused(["run", "-p", param], says)
    assert not home.exists() or not any(home.iterdir())


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["loadtest", "--url", "http://a b", "--concurrency", "1"], "--url is invalid ('http://a b' has a host, 'a b'"),
        (["submit", "--server", "http://a b"], "'http://a b' has a host, 'a b', that is not a host name"),
        (["release", "show", "--registered-model", "m", "--tracking-uri", "http://a b"], "has a host, 'a b'"),
        # an internal error in MLflow's client: "URL can't contain control characters"
        (["release", "show", "--registered-model", "m", "--tracking-uri", "http://a%20b"], "has a host, 'a%20b'"),
        # internal errors in the resolver: "UnicodeError: encoding with 'idna' codec failed (label too long)"
        (["loadtest", "--url", "http://a..b:1", "--concurrency", "1"], "host, 'a..b', with a label that is empty"),
        (["submit", "--server", f"http://{'a' * 64}"], "with a label that is empty or longer than 63 characters"),
        (["doctor", "--kubeconfig", "/nonexistent", "--argo-server", f"{'a' * 64}:1"], "longer than 63 characters"),
    ],
)
def test_a_url_whose_host_is_no_host_name_is_refused_before_it_is_looked_up(home, args, says):
    # 'http://a b' was looked up in DNS, and said "cannot reach http://a b" (exit 3): the server seemed down
    refused(args, says)


@pytest.mark.parametrize("key", ["sk-1\r", "sk-1\nX-Injected: 1"])
def test_loadtest_refuses_an_api_key_with_a_line_break_before_sending(home, key):
    # it went into each request's head as written: a key file's CRLF split the head, half the requests failed
    args = ["loadtest", "--url", "http://127.0.0.1:1", "--concurrency", "1", "--api-key", key]
    text = refused(args, "--api-key is invalid", "line break")
    assert "sk-1" not in text  # a token is never echoed


@pytest.mark.parametrize(("server", "says"), [("bogus:999999", "a port that is not a number"), ("a b:80", "a host")])
def test_doctor_refuses_an_argo_server_that_is_no_address(home, tmp_path, server, says):
    # it was looked up in DNS and reported as a server that does not answer, among every other check
    args = ["doctor", "--kubeconfig", str(tmp_path / "none"), "--argo-server", server]
    refused(args, f"--argo-server 'https://{server}' has {says}")


@pytest.mark.parametrize("command", [["show"], ["rollback"]])
def test_release_show_and_rollback_make_no_store_where_a_typo_points(home, tmp_path, command):
    # `--tracking-uri sqlite:///typo/dir/mlflow.db` made the directories and an empty store there, then said
    # "there is no registered model"
    store = tmp_path / "typo" / "dir" / "mlflow.db"
    args = ["release", *command, "--registered-model", "m", "--tracking-uri", f"sqlite:///{store}"]
    refused(args, f"there is no MLflow store at {store}")
    assert not (tmp_path / "typo").exists()


def test_logs_parse_refuses_an_llm_cache_without_llm_refine(tmp_path):
    # the cache was dropped without a word, and no LLM was asked
    (tmp_path / "a.log").write_text("service started\n")
    args = ["logs", "parse", str(tmp_path / "a.log"), "--out", str(tmp_path / "o.csv")]
    refused([*args, "--llm-cache", str(tmp_path / "c.json")], "--llm-cache keeps --llm-refine's answers")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.log"]


@pytest.mark.parametrize("command", [["runs", "list"], ["cluster", "status"], ["plan"]])
def test_a_vcpilot_home_that_is_a_symlink_loop_is_one_sentence(tmp_path, monkeypatch, command):
    # it was an internal error, "RuntimeError: Symlink loop from …", in every command
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    monkeypatch.setenv("VCPILOT_HOME", str(tmp_path / "a"))
    refused(command, f"VCPILOT_HOME {tmp_path / 'a'} cannot be a directory", "point VCPILOT_HOME at one")


# Each command that writes a file a person names, its inputs present, with the option named in the key given a path
# where no file can be created. The check up front took such a path (it looked only for a file in the way), and
# `loadtest` ran its load, `release register` registered a model version in MLflow, before failing to write it.
# Now: exit 1, one sentence naming the option and path, nothing done, nothing left behind.
UNWRITABLE_OUTPUTS = {
    "loadtest --records": ["loadtest", "--url", "URL", "--concurrency", "1", "--requests", "2", "--timeout-s", "2"],
    "release register --report": ["release", "register", "--model", "MODEL", "--registered-model", "m"],
    "evaluate --report": ["evaluate", "--model", "MODEL", "--eval-set", "DATA/eval.jsonl"],
    "finetune --out": ["finetune", "--data", "DATA", "--max-steps", "1"],
    "finetune --checkpoint-dir": ["finetune", "--data", "DATA", "--out", "TMP/model", "--max-steps", "1"],
    "logs parse --out": ["logs", "parse", "DATA/a.log"],
    "logs parse --state": ["logs", "parse", "DATA/a.log", "--out", "TMP/parsed.csv"],
    "logs detect --out": ["logs", "detect", "--current", "DATA/a.log"],
    "logs step --report": ["logs", "step", "--source", "DATA/a.log"],
    "demo data --out": ["demo", "data"],
    "compile --out": ["compile"],
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", UNWRITABLE_OUTPUTS)
def test_an_output_no_file_can_be_created_at_is_refused_before_any_work(home, tmp_path, monkeypatch, case, kind):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # the registry is the one under the test's home
    data, model = tmp_path / "data", tmp_path / "model-in"
    data.mkdir()
    model.mkdir()
    (model / "config.json").write_text("{}")
    line = json.dumps({"prompt": "What is 2+2?", "completion": "4"}) + "\n"
    (data / "train.jsonl").write_text(line * 8)
    (data / "eval.jsonl").write_text(line * 2)
    (data / "a.log").write_text("2024-01-01 00:00:00 INFO service started\n" * 40)
    option = case.split()[-1]
    with socket.socket() as server, unwritable_place(kind, tmp_path) as place:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        given = {"URL": url, "MODEL": str(model), "DATA": str(data), "TMP": str(tmp_path)}
        args = [_placed(arg, given) for arg in UNWRITABLE_OUTPUTS[case]]
        out = place.under("out")
        before = sorted(tmp_path.rglob("*"))
        text = refused([*args, option, str(out)])
        assert text == (
            f"error: {option} {out} cannot be written: no file can be created in {place.directory} "
            f"({place.strerror}); give a path in a writable directory"
        )
        with pytest.raises(BlockingIOError):  # no request reached the server
            server.accept()
        assert sorted(tmp_path.rglob("*")) == before  # no MLflow store or run under the home, no model, no state
        assert not home.exists()


def _placed(arg: str, given: dict[str, str]) -> str:
    """`arg` with its leading placeholder (`DATA/a.log`) replaced by the test's path."""
    head, _, rest = arg.partition("/")
    return given[head] + (f"/{rest}" if rest else "") if head in given else arg


@pytest.mark.parametrize(
    ("option", "says"),
    [
        (["release", "register", "--evaluation"], "the evaluate report {} is not JSON"),
        (["release", "register", "--loadtest"], "the loadtest report {} is not JSON"),
        (["evaluate", "--slo-ttft-ms", "1", "--slo-tpot-ms", "1", "--loadtest-report"], "load-test report {} is not"),
        (["lint", "WF", "--schema"], "--schema {} is not Argo's JSON schema (JSON nested too deeply to be read)"),
    ],
)
def test_a_report_or_schema_nested_too_deeply_is_not_json(home, tmp_path, option, says):
    # each was an internal error: "RecursionError: maximum recursion depth exceeded while decoding a JSON array"
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (tmp_path / "eval.jsonl").write_text('{"prompt": "a", "completion": "b"}\n')
    (tmp_path / "wf.yaml").write_text(Path("../shared/argo-examples/arguments-parameters.yaml").read_text())
    given = {
        "release": ["--model", str(model), "--registered-model", "m", "--tracking-uri", f"sqlite:///{home}/m.db"],
        "evaluate": ["--model", str(model), "--eval-set", str(tmp_path / "eval.jsonl")],
        "lint": [],
    }[option[0]]
    args = [str(tmp_path / "wf.yaml") if arg == "WF" else arg for arg in option]
    refused([*args[:-1], *given, args[-1], str(deep)], says.format(deep))
    assert not home.exists()


@pytest.mark.parametrize(
    ("kind", "says"), [("dir", "a directory"), ("fifo", "not a regular file"), ("text", "not an SQL")]
)
@pytest.mark.parametrize("command", [["release", "show"], ["release", "rollback"]])
def test_a_sqlite_store_that_is_no_database_file_is_refused_before_mlflow(home, tmp_path, command, kind, says):
    # MLflow retried a directory or a pipe for minutes, printing a paragraph of warnings each time; a text file was
    # "connecting to MLflow failed" with exit 3, as if a later try could work
    store = tmp_path / "store"
    if kind == "dir":
        store.mkdir()
    elif kind == "fifo":
        os.mkfifo(store)
    else:
        store.write_text("nodes: []\n")
    uri = f"sqlite:///{store}"
    refused([*command, "--registered-model", "m", "--tracking-uri", uri], f"names {store}, which is {says}")
