import json

import pytest
import yaml
from typer.testing import CliRunner
from vcjob_factory import vcjob

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
    assert json.loads(run("status", "--json").stdout)["jobs"] == []


def test_unknown_names(run):
    one_sentence_error(run("get", "nope"), "job default/nope does not exist")
    one_sentence_error(run("delete", "nope"), "does not exist")
    one_sentence_error(run("fail-node", "gpu-9"), "node 'gpu-9' does not exist")


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
    one_sentence_error(run("reset", "--config", str(config)), "nodes.0.gpus")
