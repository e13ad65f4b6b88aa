import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner
from vcjob_factory import GPU, vcjob, vcjob_task

from components.errors import InputError
from components.volcano.cluster import Invalid
from components.volcano.cluster_local import LocalCluster
from pipelines.cli import app


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.setenv("VCPILOT_HOME", str(tmp_path / "home"))
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(app, ["cluster", *args])

    return invoke


def one_sentence_error(result, *fragments):
    assert result.exit_code == 1  # EXIT_INPUT
    text = result.stderr.strip()
    assert text.count("\n") == 0, text
    for fragment in fragments:
        assert fragment in text
    assert "Traceback" not in result.output


def test_status_json_is_one_document(run):
    result = run("status", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert [n["name"] for n in data["nodes"]] == ["node-0", "node-1"]
    assert [q["name"] for q in data["queues"]] == ["default"]
    assert data["jobs"] == []


# What no `cluster status` needs: no YAML, no workflow, no client library, no pod log reader (`cluster logs`) and
# no `logging` (components.entry puts the redacting filter on `logging.lastResort` when something imports it).
NOT_FOR_STATUS = (
    "logging",
    "yaml",
    "hera",
    "mlflow",
    "torch",
    "mcp",
    "fastapi",
    "httpx",
    "kubernetes",
    "components.volcano.locallogs",
)


def _status_imports(unwanted: tuple[str, ...]) -> tuple[str, list[str]]:
    """What `cluster status` prints in a fresh process, and which of `unwanted` it imported."""
    probe = (
        "import json, sys\n"
        "from pipelines.cli import app\n"
        "try:\n    app(['cluster', 'status'])\nexcept SystemExit as end:\n    assert not end.code, end.code\n"
        f"print(json.dumps([m for m in {unwanted!r} if m in sys.modules]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    *shown, imported = done.stdout.strip().splitlines()
    return "\n".join(shown), json.loads(imported)


def test_status_in_a_fresh_process_imports_only_what_it_shows(run, tmp_path):
    # `cluster status` is the command people type most: it reads the cluster and prints aligned columns, and
    # parses no YAML and builds no workflow (benchmarks/cli.py, docs/benchmarks.md). Live jobs are synced and
    # scheduled from their stored manifests (localstate.JobRow): a running gang and one that waits for GPUs the
    # cluster does not have build no Volcano model either, so no pydantic.
    run("submit", str(_job_file(tmp_path, vcjob("train", gpus=1, pods=2, script="sleep 30"))))
    run("submit", str(_job_file(tmp_path, vcjob("big", gpus=8, script="sleep 30"))))
    shown, imported = _status_imports((*NOT_FOR_STATUS, "pydantic", "rich", "components.volcano.models"))
    assert imported == []
    phases = {line.split()[0]: line.split()[2] for line in shown.splitlines() if line.startswith("  default/")}
    assert phases == {"default/train": "Running", "default/big": "Pending"}
    assert "  node-0   yes     2/4" in shown.splitlines() or "  node-1   yes     2/4" in shown.splitlines()
    run("delete", "train")
    run("delete", "big")


def test_status_of_a_settled_cluster_imports_no_pydantic_and_no_rich(run, tmp_path):
    # The cluster's answers are dataclasses, a finished job is shown from its stored manifest and the tables are
    # plain text: what keeps `cluster status` within the start-up goal of benchmarks/cli.py.
    assert run("status").exit_code == 0  # the cluster exists (a fresh one reads its config model)
    shown, imported = _status_imports((*NOT_FOR_STATUS, "pydantic", "rich", "components.volcano.models"))
    assert imported == []
    assert shown.splitlines()[:2] == ["Nodes:", "  NAME     READY   GPUS USED/ALLOCATABLE"]
    assert "  node-0   yes     0/4" in shown.splitlines() and shown.splitlines()[-2:] == ["Jobs:", "  <none>"]
    run("submit", str(_job_file(tmp_path, vcjob("done", gpus=1, labels={"team": "a"}))))
    assert run("get", "done").exit_code == 0
    LocalCluster(os.environ["VCPILOT_HOME"]).wait("done", timeout=20)
    shown, imported = _status_imports((*NOT_FOR_STATUS, "pydantic", "rich", "components.volcano.models"))
    assert imported == []
    job = next(line.split() for line in shown.splitlines() if "default/done" in line)
    assert job[:4] == ["default/done", "default", "Completed", "0"]
    assert json.loads(run("status", "--json").stdout)["jobs"][0]["labels"] == {"team": "a"}


def test_submit_rejects_bad_files(run, tmp_path):
    one_sentence_error(run("submit", str(tmp_path / "missing.yaml")), "cannot read")
    broken = tmp_path / "broken.yaml"
    broken.write_text("spec: [unclosed")
    one_sentence_error(run("submit", str(broken)), "not valid YAML")
    pod = tmp_path / "pod.yaml"
    pod.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    one_sentence_error(run("submit", str(pod)), "not a batch.volcano.sh/v1alpha1 Job")
    typo = tmp_path / "typo.yaml"
    job = vcjob("t")
    job["spec"]["minAvaliable"] = job["spec"].pop("minAvailable")
    typo.write_text(yaml.safe_dump(job))
    one_sentence_error(run("submit", str(typo)), "minAvaliable")
    # a file of several jobs, of none, or of something else: what it holds, in words (it said "does not hold one
    # Volcano Job object" for all of them)
    two = tmp_path / "two.yaml"
    two.write_text(yaml.safe_dump(vcjob("a")) + "---\n" + yaml.safe_dump(vcjob("b")))
    one_sentence_error(run("submit", str(two)), "holds 2 YAML documents; submit one Volcano Job per file")
    for text, fragment in (("# nothing\n", "holds no document"), ("[1]", "holds a list"), ("7", "holds a number")):
        other = tmp_path / "other.yaml"
        other.write_text(text)
        one_sentence_error(run("submit", str(other)), fragment)
    assert json.loads(run("status", "--json").stdout)["jobs"] == []


def test_submit_reads_standard_input_for_a_dash(tmp_path, monkeypatch):
    # kubectl's `create -f -`: `vcpilot cluster sample | vcpilot cluster submit -` (it said "cannot read - ")
    monkeypatch.setenv("VCPILOT_HOME", str(tmp_path / "home"))
    runner = CliRunner()
    sample = runner.invoke(app, ["cluster", "sample"]).stdout
    done = runner.invoke(app, ["cluster", "submit", "-", "--json"], input=sample)
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["name"] == yaml.safe_load(sample)["metadata"]["name"]
    for text, fragment in ((b"\xff", "standard input is not UTF-8"), (b"[1]", "standard input holds a list")):
        one_sentence_error(runner.invoke(app, ["cluster", "submit", "-"], input=text), fragment)
    assert len(json.loads(runner.invoke(app, ["cluster", "status", "--json"]).stdout)["jobs"]) == 1


def test_unknown_names(run):
    one_sentence_error(run("get", "nope"), "job default/nope does not exist")
    one_sentence_error(run("delete", "nope"), "does not exist")
    one_sentence_error(run("fail-node", "gpu-9"), "node 'gpu-9' does not exist")


def test_a_home_that_is_a_file_says_to_set_vcpilot_home(run, tmp_path, monkeypatch):
    # it said "cannot use … as the LocalCluster's home: File exists", and not what to do
    (tmp_path / "afile").write_text("x")
    for home in (tmp_path / "afile", tmp_path / "afile" / "below"):
        monkeypatch.setenv("VCPILOT_HOME", str(home))
        one_sentence_error(run("status"), f"VCPILOT_HOME {home} is", "a file")
    assert (tmp_path / "afile").read_text() == "x"


def test_fail_and_recover_node(run):
    assert run("fail-node", "node-1").exit_code == 0
    nodes = {n["name"]: n["ready"] for n in json.loads(run("status", "--json").stdout)["nodes"]}
    assert nodes == {"node-0": True, "node-1": False}
    assert run("recover-node", "node-1").exit_code == 0


def test_reset_with_a_config(run, tmp_path):
    config = tmp_path / "cluster.yaml"
    config.write_text("nodes: [{name: big, count: 3, gpus: 8}]\nqueues: [{name: research, weight: 2}]\n")
    assert run("reset", "--config", str(config)).exit_code == 0
    data = json.loads(run("status", "--json").stdout)
    assert [n["gpu_capacity"] for n in data["nodes"]] == [8, 8, 8]
    assert [q["name"] for q in data["queues"]] == ["default", "research"]
    config.write_text("nodes: [{name: big, gpus: -1}]\n")
    one_sentence_error(run("reset", "--config", str(config)), "nodes[0].gpus")


def _refused(result, *fragments):
    """One sentence on stderr naming what is wrong, the input error's exit code, no traceback."""
    assert result.exit_code == InputError.exit_code, result.output
    text = result.stderr.strip()
    assert text.count("\n") == 0 and "Traceback" not in result.output, result.output
    for fragment in fragments:
        assert fragment in text, text


def test_a_refused_config_leaves_the_cluster_as_it_was(run, tmp_path):
    assert run("submit", str(_job_file(tmp_path, vcjob("keep", "sleep 30")))).exit_code == 0
    before = json.loads(run("status", "--json").stdout)
    config = tmp_path / "bad.yaml"
    for text, fragment in (
        ("nodes: []", "nodes: must not be empty"),
        ("nodes: [{name: a}, {name: a}]", "which nodes[0] makes too"),
        ("nodes: [{name: a, memory: 0}]", "must be greater than 0"),
    ):
        config.write_text(text)
        _refused(run("reset", "--config", str(config)), str(config), fragment)
    after = json.loads(run("status", "--json").stdout)
    assert [j["name"] for j in after["jobs"]] == ["keep"] and after["nodes"] == before["nodes"]
    assert run("status").exit_code == 0  # and every command still works
    assert run("delete", "keep").exit_code == 0


def test_a_damaged_state_is_one_sentence_and_reset_recovers_it(run, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "cluster.db").write_bytes(b"\x00garbage" * 512)
    _refused_state = run("status")
    assert _refused_state.exit_code != 0 and "Traceback" not in _refused_state.output
    assert "`vcpilot cluster reset`" in _refused_state.stderr and _refused_state.stderr.strip().count("\n") == 0
    reset = run("reset")
    assert reset.exit_code == 0 and "the damaged state was moved to" in reset.stdout
    assert run("status").exit_code == 0


@pytest.mark.parametrize(("gpus", "fragment"), [(-2, "must be greater than or equal to 0"), (0.5, "whole number")])
def test_a_gpu_amount_kubernetes_refuses_is_not_admitted(run, tmp_path, gpus, fragment):
    job = vcjob("bad")
    resources = job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]
    resources["requests"][GPU] = resources["limits"][GPU] = gpus
    _refused(run("submit", str(_job_file(tmp_path, job))), "nvidia.com/gpu", fragment)
    data = json.loads(run("status", "--json").stdout)
    assert data["jobs"] == [] and {n["gpu_allocated"] for n in data["nodes"]} == {0}


def test_a_file_that_is_not_utf8_is_one_sentence_naming_it(run, tmp_path):
    latin = tmp_path / "latin1.yaml"
    latin.write_bytes(yaml.safe_dump(vcjob("caf")).encode() + b"# caf\xe9\n")
    _refused(run("submit", str(latin)), str(latin), "is not UTF-8 text")
    config = tmp_path / "latin1-config.yaml"
    config.write_bytes(b"nodes: [{name: caf\xe9}]\n")
    _refused(run("reset", "--config", str(config)), str(config), "is not UTF-8 text")
    _refused(run("submit", str(tmp_path)), "is a directory")


def _job_file(tmp_path, job):
    path = tmp_path / f"{job['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


# -- the verbs of issue 14: --json everywhere, events, describe, reset's confirmation, the sample ----------------


def test_every_cluster_verb_speaks_json(run, tmp_path):
    assert json.loads(run("fail-node", "node-1", "--json").stdout) == {"node": "node-1", "ready": False, "evicted": []}
    assert json.loads(run("recover-node", "node-1", "--json").stdout) == {"node": "node-1", "ready": True}
    assert json.loads(run("events", "--json").stdout) == {"events": []}
    described = json.loads(run("describe", "node/node-0", "--json").stdout)
    assert described["kind"] == "Node" and described["node"]["gpu_capacity"] == 4
    queue = json.loads(run("describe", "queue/default", "--json").stdout)
    assert queue["queue"]["name"] == "default" and queue["jobs"] == []
    reset = json.loads(run("reset", "--json").stdout)
    assert reset == {
        "deleted_jobs": [],
        "nodes": ["node-0", "node-1"],
        "queues": ["default"],
        "damaged_state_moved_to": None,
    }
    sample = json.loads(run("sample", "--json").stdout)
    assert sample["kind"] == "Job" and sample["metadata"]["name"] == "hello"


def test_describe_and_events_name_what_is_wrong(run):
    one_sentence_error(run("describe", "hello"), "KIND/NAME", "job, pod, queue, node")
    one_sentence_error(run("describe", "deployment/x"), "KIND/NAME")
    one_sentence_error(run("describe", "job/nope"), "job default/nope does not exist")
    one_sentence_error(run("describe", "pod/nope"), "pod default/nope does not exist")
    one_sentence_error(run("describe", "queue/nope"), "queue 'nope' does not exist")
    one_sentence_error(run("describe", "node/gpu-9"), "node 'gpu-9' does not exist", "node-0")
    one_sentence_error(run("events", "--for", "job/nope"), "job default/nope does not exist")
    one_sentence_error(run("events", "--for", "queue/default"), "queues have no events")
    one_sentence_error(run("logs", "nope"), "job default/nope does not exist")


def _pending_job(run, tmp_path, name="big"):
    """A job no node can hold (16 GPUs a pod): it is stored and pending, and no process starts."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(vcjob(name, gpus=16)))
    assert run("submit", str(path)).exit_code == 0
    return path


def test_events_and_describe_of_a_pending_job(run, tmp_path):
    _pending_job(run, tmp_path)
    events = json.loads(run("events", "--for", "job/big", "--json").stdout)["events"]
    assert [(e["object"], e["reason"]) for e in events][:1] == [("Job/big", "Created")]
    assert all(e["job"] == "big" and e["namespace"] == "default" for e in events)
    text = run("events").stdout
    assert "default/big" in text and "Created" in text and text.splitlines()[0].split()[:3] == ["JOB", "AGE", "TYPE"]
    described = run("describe", "job/big")
    assert described.exit_code == 0
    out = described.stdout
    for line in ("Name:", "Queue:", "Phase:", "Pods:", "Events:"):
        assert line in out
    assert "Pending" in out and "Created" in out
    data = json.loads(run("describe", "vcjob/big", "--json").stdout)
    assert data["job"]["phase"] == "Pending" and data["spec"]["tasks"][0]["name"] == "main"
    queue = json.loads(run("describe", "queue/default", "--json").stdout)
    assert queue["jobs"] == ["default/big"] and queue["queue"]["pending"] + queue["queue"]["inqueue"] == 1


def test_reset_asks_before_it_deletes_jobs(run, tmp_path, monkeypatch):
    from components import entry
    from components.errors import EXIT_FAILED

    _pending_job(run, tmp_path)
    # No terminal (CliRunner's stdin is none): refused in one sentence, the job kept.
    one_sentence_error(run("reset"), "would delete 1 job(s)", "--yes")
    assert len(json.loads(run("status", "--json").stdout)["jobs"]) == 1
    # At a terminal: a "no" keeps everything, a "yes" resets.
    monkeypatch.setattr(entry, "interactive", lambda: True)
    runner = CliRunner()
    declined = runner.invoke(app, ["cluster", "reset"], input="n\n")
    assert declined.exit_code == EXIT_FAILED
    assert "cluster left as it was" in declined.stderr
    assert len(json.loads(run("status", "--json").stdout)["jobs"]) == 1
    accepted = runner.invoke(app, ["cluster", "reset"], input="y\n")
    assert accepted.exit_code == 0, accepted.output
    assert json.loads(run("status", "--json").stdout)["jobs"] == []
    # --yes / -y skip the question; an empty cluster is reset without one.
    monkeypatch.setattr(entry, "interactive", lambda: False)
    _pending_job(run, tmp_path)
    assert run("reset", "-y").exit_code == 0
    assert run("reset").exit_code == 0


def test_the_sample_is_a_valid_job_for_submit(run, tmp_path):
    from components.volcano.models import apply_volcano_defaults, parse_job, validate_job

    result = run("sample")
    assert result.exit_code == 0
    manifest = yaml.safe_load(result.stdout)
    validate_job(apply_volcano_defaults(parse_job(manifest)))
    assert manifest["spec"]["minAvailable"] == 2 and manifest["spec"]["tasks"][0]["replicas"] == 2
    help_text = run("submit", "--help").stdout
    assert "cluster sample" in help_text


@pytest.mark.parametrize("name", ["Bad_Name", "-x", "a" * 64, "x" * 30 + "/y"])
@pytest.mark.parametrize("as_json", [False, True])
def test_the_sample_refuses_a_name_submit_would_refuse(run, name, as_json):
    result = run("sample", "--name", name, *(["--json"] if as_json else []))
    assert result.exit_code == 1
    sentence = result.stderr.strip()
    assert sentence.startswith("error: --name is invalid") and repr(name) in sentence and sentence.count("\n") == 0
    assert "apiVersion" not in result.stdout
    if as_json:
        assert json.loads(result.stdout)["exit_code"] == 1


def test_logs_refuse_json_with_follow_and_unknown_pods(run, tmp_path):
    _pending_job(run, tmp_path)
    one_sentence_error(run("logs", "big", "--json", "-f"), "--json", "--follow")
    one_sentence_error(run("logs", "big", "--pod", "nope"), "has no pod 'nope'", "pods: none")  # not admitted
    assert json.loads(run("logs", "big", "--json").stdout) == {"job": "default/big", "runs": []}


def test_queues_and_submissions_volcanos_queue_checks_refuse(run, tmp_path):
    # validate_queue.go refuses a queue whose parent does not exist (it was created); its checks of the queue alone
    # are one sentence (it was pydantic's "1 validation error for Queue"); admit_job.go refuses a job in the root
    # queue or in a queue with child queues (LocalCluster ran both).
    cluster = LocalCluster()
    with pytest.raises(Invalid, match=r"^queue: spec\.reclaimable: expected true or false, got 'yes'\.$"):
        cluster.apply_queue({"metadata": {"name": "team"}, "spec": {"reclaimable": "yes"}})
    with pytest.raises(Invalid, match=r"^queue team: its spec\.parent .org. does not exist; create that queue first"):
        cluster.apply_queue({"metadata": {"name": "team"}, "spec": {"parent": "org"}})
    assert [q.name for q in cluster.queues()] == ["default"]
    # weight 0 is unset: Volcano's mutating webhook makes it 1 (it was refused as "must be at least 1")
    assert cluster.apply_queue({"metadata": {"name": "org"}, "spec": {"parent": "root", "weight": 0}}).weight == 1
    cluster.apply_queue({"metadata": {"name": "team"}, "spec": {"parent": "org"}})
    cluster.apply_queue({"metadata": {"name": "root"}})
    # validateHierarchicalQueueResources: no capability above an ancestor's (it was stored)
    cluster.apply_queue({"metadata": {"name": "org"}, "spec": {"parent": "root", "capability": {GPU: 4}}})
    with pytest.raises(Invalid, match=r"^queue team: spec\.capability\[nvidia.com/gpu\] is 8, above the 4 of its"):
        cluster.apply_queue({"metadata": {"name": "team"}, "spec": {"parent": "org", "capability": {GPU: 8}}})
    assert cluster.queue("team").capability == {}
    for queue, fragment in (
        ("root", "queue 'root' is the top of Volcano's queue tree and takes no jobs"),
        ("org", "queue 'org' is the parent of team; submit to a queue without child queues (a leaf)"),
    ):
        _refused(run("submit", str(_job_file(tmp_path, vcjob("j", "true", queue=queue)))), fragment)
    assert json.loads(run("status", "--json").stdout)["jobs"] == []
    assert run("submit", str(_job_file(tmp_path, vcjob("j", "true", queue="team")))).exit_code == 0


def test_a_pytorch_job_without_its_master_task_runs_without_master_addr(run, tmp_path):
    # Volcano's webhook checks only mpi's master task, and its pytorch plugin sets nothing in a job without one; it
    # was refused ("the pytorch plugin needs a task named 'master'"), and the pods would have had a MASTER_ADDR.
    job = vcjob("solo", "echo addr=${MASTER_ADDR:-none} world=${WORLD_SIZE:-none}", gpus=0)
    job["spec"]["plugins"] = {"pytorch": ["--master=master", "--worker=main"]}
    assert run("submit", str(_job_file(tmp_path, job))).exit_code == 0
    assert LocalCluster(os.environ["VCPILOT_HOME"]).wait("solo", timeout=20).phase == "Completed"
    assert "addr=none world=none" in run("logs", "solo").stdout


def test_a_batch_v1_job_is_not_held_to_volcanos_pod_name_rule(run):
    # A batch/v1 Job's pods are named by its controller, so a 60-character Job runs on Kubernetes; LocalCluster,
    # which runs it as a Volcano Job with one task `job`, refused it ("pod name '…-job-0' would be 66 characters").
    cluster = LocalCluster(os.environ["VCPILOT_HOME"])
    name = "a" * 60
    template = {
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}
    }
    cluster.submit(
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {"template": template}}
    )
    assert cluster.wait(name, timeout=20).phase == "Completed"
    long_vcjob = vcjob(name, "true")
    with pytest.raises(Invalid, match=r"would be 67 characters, over the 63 Volcano allows"):
        cluster.submit(long_vcjob)  # a Volcano Job of that name still is


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # ValidateJobSpec: they were taken (restartPolicy made Never), or said "invalid literal for int()", or named
        # spec.tasks[0].replicas, a field of the Volcano Job LocalCluster runs, not of the Job written
        ({"completions": "abc"}, "batch/v1 Job's spec.completions: expected a whole number, got the text 'abc'"),
        ({"completions": -1}, "batch/v1 Job's spec.completions: value must be at least 0, got -1"),
        ({"backoffLimit": -1}, "batch/v1 Job's spec.backoffLimit: value must be at least 0, got -1"),
        ({"parallelism": True}, "batch/v1 Job's spec.parallelism: expected a whole number, got true"),
        ({"restartPolicy": "Always"}, "restartPolicy is 'Always'; a Job's pods need OnFailure or Never"),
        ({"restartPolicy": None}, "restartPolicy is not set; a Job's pods need OnFailure or Never"),
    ],
)
def test_a_batch_v1_job_kubernetes_refuses_is_refused_in_its_own_terms(run, change, message):
    pod = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}
    spec: dict = {"template": {"spec": pod}}
    if "restartPolicy" in change:
        pod["restartPolicy"] = change["restartPolicy"]
        if pod["restartPolicy"] is None:
            del pod["restartPolicy"]
    else:
        spec.update(change)
    cluster = LocalCluster(os.environ["VCPILOT_HOME"])
    with pytest.raises(Invalid) as caught:
        cluster.submit({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": spec})
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert cluster.list_jobs() == []


# -- a policy's timeout is a metav1.Duration: Go's time.ParseDuration decides what it is ------------------------


@pytest.mark.parametrize(
    ("timeout", "message"),
    [
        ("10x", "spec.policies[0].timeout: '10x' is not a duration (Go's time.ParseDuration: a number with a unit"),
        ("1.5", "spec.policies[0].timeout: '1.5' is not a duration (Go's time.ParseDuration"),
        ("abc", "spec.policies[0].timeout: 'abc' is not a duration (Go's time.ParseDuration"),
        ("-", "spec.policies[0].timeout: '-' is not a duration (Go's time.ParseDuration"),
        (30, 'spec.policies[0].timeout: 30 is not a duration: write it as a string with its unit, e.g. "30s"'),
    ],
)
def test_a_timeout_volcano_cannot_decode_is_refused_and_nothing_changes(run, tmp_path, timeout, message):
    """It was free text: submit stored "10x", which Volcano's controller (metav1.Duration) cannot decode."""
    job = vcjob("bad", "exit 3", policies=[{"event": "PodFailed", "action": "AbortJob", "timeout": timeout}])
    _refused(run("submit", str(_job_file(tmp_path, job))), message)
    data = json.loads(run("status", "--json").stdout)
    assert data["jobs"] == [] and {n["gpu_allocated"] for n in data["nodes"]} == {0}


def test_timeouts_go_parses_are_taken_kept_as_written_and_acted_on(run, tmp_path):
    # "0" and "-1s" are no wait for Volcano's controller either: the policy acts at once
    cluster = LocalCluster(os.environ["VCPILOT_HOME"])
    for name, timeout in (("zero", "0"), ("past", "-1s")):
        job = vcjob(name, "exit 3", policies=[{"event": "PodFailed", "action": "AbortJob", "timeout": timeout}])
        assert run("submit", str(_job_file(tmp_path, job))).exit_code == 0
        assert cluster.wait(name, timeout=20).phase == "Aborted"
    task = vcjob_task(policies=[{"event": "PodFailed", "action": "RestartTask", "timeout": "500ms"}])
    job = vcjob("ok", tasks=[task], policies=[{"event": "PodEvicted", "action": "RestartJob", "timeout": "1h30m"}])
    assert run("submit", str(_job_file(tmp_path, job))).exit_code == 0
    assert cluster.wait("ok", timeout=20).phase == "Completed"
    spec = cluster.get_object("ok")["spec"]
    assert spec["policies"][0]["timeout"] == "1h30m" and spec["tasks"][0]["policies"][0]["timeout"] == "500ms"


def test_status_counts_the_pods_of_a_big_job_by_phase_and_lists_a_small_ones(run, tmp_path):
    for job in (vcjob("big", pods=6, min_available=1), vcjob("small", pods=2)):
        path = tmp_path / f"{job['metadata']['name']}.yaml"
        path.write_text(yaml.safe_dump(job))
        assert run("submit", str(path)).exit_code == 0
    cluster = LocalCluster(tmp_path / "home")
    cluster.wait("big", timeout=30)
    cluster.wait("small", timeout=30)
    out = run("status").stdout
    big = next(line for line in out.splitlines() if "default/big" in line)
    assert " 6: 6 Succeeded " in big and "big-main-0" not in big
    assert "small-main-0:Succeeded@node-" in out and "small-main-1:Succeeded@node-" in out
