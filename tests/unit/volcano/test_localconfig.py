"""Cluster configs are checked whole before a LocalCluster is built from them, and a damaged state starts over."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from components.errors import InputError
from components.volcano.cluster import StateDamaged
from components.volcano.cluster_local import LocalCluster
from components.volcano.localconfig import load_config


def _config(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def _dump(db: Path) -> list[str]:
    with sqlite3.connect(db) as connection:
        return list(connection.iterdump())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nodes: []", "nodes: must not be empty"),
        ("nodes: [{name: a}, {name: a}]", "nodes[1] makes node 'a', which nodes[0] makes too"),
        ("nodes: [{name: a, count: 2}, {name: a-1}]", "nodes[1] makes node 'a-1', which nodes[0] makes too"),
        ("nodes: [{name: Big_Node}]", "nodes[0].name: 'Big_Node' is not a Kubernetes name"),
        ("nodes: [{name: ../x}]", "is not a Kubernetes name"),
        ("nodes: [{name: a, gpus: -1}]", "nodes[0].gpus: value must be at least 0"),
        ("nodes: [{name: a, gpus: 1e9}]", "nodes[0].gpus: value must be at most 1024, got 1000000000"),
        ("nodes: [{name: a, gpus: 1e30}]", "nodes[0].gpus: value must be at most 1024"),  # was pydantic's words
        ("nodes: [{name: a, count: 1e30}]", "nodes[0].count: value must be at most 5000"),
        ("nodes: [{name: a, count: 0}]", "nodes[0].count: value must be at least 1"),
        ("nodes: [{name: a, cpu: '0'}]", "nodes[0].cpu: '0' must be greater than 0"),
        ("nodes: [{name: a, memory: -1Gi}]", "nodes[0].memory: '-1Gi' must be greater than 0"),
        ("nodes: [{name: a, memory: 16GB}]", "nodes[0].memory: quantity '16GB' is not a number"),
        ("queues: [{name: q}, {name: q}]", "queue 'q' is listed twice"),
        # a typo of a billion nodes hung `cluster reset` while it made them
        ("nodes: [{name: a, count: 1000000000}]", "nodes[0].count: value must be at most 5000, got 1000000000"),
        ("nodes: [{name: a, count: 4000}, {name: b, count: 4000}]", "nodes make 8,000 nodes; a LocalCluster has at"),
        ("queues: [{name: q, capability: {nvidia.com/gpu: -4}}]", "capability[nvidia.com/gpu] is -4"),
        ("queues: [{name: Research}]", "queues[0].name: 'Research' is not a Kubernetes name"),
        ("priorityClasses: {system-high: 5}", "names starting with 'system-' are Kubernetes' own"),
        ("priorityClasses: {high: 2000000000}", "it must be at most 1000000000"),
        ("priorityClasses: {low: -3000000000}", "priorityClasses.low: value must be at least -2147483648"),
        ("overcommitFactor: .nan", "overcommitFactor"),
        ("nodes: {name: a}", "nodes: expected a list"),
        # numbers: a quoted one or YAML's true is not a number, and a quantity names its own field (not `memory.str`)
        ("nodes: [{name: a, gpus: '4'}]", "nodes[0].gpus: expected a whole number, got the text '4'"),
        ("nodes: [{name: a, count: true}]", "nodes[0].count: expected a whole number, got true"),
        # YAML 1.1's booleans where text belongs: the sentence says to quote it (it said only "got False")
        ("nodes: [{name: n}]", "nodes[0].name: expected text, got False (YAML reads y, n, yes, no, on, off"),
        ("nodes: [{name: a, pods: 0}]", "nodes[0].pods: value must be at least 1"),
        ("nodes: [{name: a, memory: .inf}]", "nodes[0].memory: quantity inf is not a number"),
        ("nodes: [{name: a, cpu: [1]}]", "nodes[0].cpu: [1] is not a quantity"),
        ("queues: [{name: q, weight: '2'}]", "queues[0].weight: expected a whole number, got the text '2'"),
        ("queues: [{name: q, capability: {cpu: .nan}}]", "queues[0].capability.cpu: quantity nan is not a number"),
        ("priorityClasses: {high: '100'}", "priorityClasses.high: expected a whole number, got the text '100'"),
        ("overcommitFactor: '1.5'", "overcommitFactor: input should be a valid number, got '1.5'"),
        # labels and taints as the API server checks them on a Node
        ("nodes: [{name: a, labels: {'gpu type': a100}}]", "nodes[0].labels: key 'gpu type' must be a name"),
        ("nodes: [{name: a, labels: {gpu: 'a100 80g'}}]", "nodes[0].labels: value 'a100 80g' must be empty"),
        ("nodes: [{name: a, labels: {Bad_Prefix/gpu: x}}]", "key 'Bad_Prefix/gpu' must be a name"),
        ("nodes: [{name: a, taints: [{key: gpu, effect: Nope}]}]", "nodes[0].taints[0].effect: 'Nope' is not allowed"),
        ("nodes: [{name: a, taints: [{effect: NoSchedule}]}]", "nodes[0].taints[0].key: field is required"),
        ("nodes: [{name: a, taints: [{key: k, value: 'a b', effect: NoExecute}]}]", "taints[0].value: value 'a b'"),
        ("- just\n- a list", "must hold a mapping of fields, not a list"),
        ("nodes: [unclosed", "is not valid YAML or JSON at line 1"),
        (b"nodes: [{name: caf\xe9}]", "is not UTF-8 text (byte 0xe9 at offset 18)"),
    ],
)
def test_a_config_kubernetes_or_volcano_would_refuse_is_one_sentence(tmp_path: Path, text: str, message: str) -> None:
    path = _config(tmp_path, text)
    with pytest.raises(InputError) as caught:
        load_config(path)
    sentence = str(caught.value)
    assert message in sentence
    assert str(path) in sentence and "\n" not in sentence


def test_labels_and_taints_kubernetes_accepts_are_kept(tmp_path: Path) -> None:
    config = load_config(
        _config(
            tmp_path,
            "nodes: [{name: a, labels: {example.com/gpu-type: A100_80g, empty: ''},"
            " taints: [{key: nvidia.com/gpu, effect: NoSchedule}, {key: k, value: v.1, effect: PreferNoSchedule}]}]\n"
            "queues: [{name: q, weight: 2.0, capability: {cpu: 1.5, pods: 20}}]",
        )
    )
    (node,) = config.nodes[0].expand()
    assert node["labels"]["example.com/gpu-type"] == "A100_80g" and node["labels"]["empty"] == ""
    assert node["taints"] == [
        {"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"},
        {"key": "k", "value": "v.1", "effect": "PreferNoSchedule"},
    ]
    assert config.queues[0].weight == 2
    # a Queue's capability may name any resource; `pods` was refused as "not a container resource"
    assert config.queues[0].capability == {"cpu": 1.5, "pods": 20}


def test_a_refused_config_leaves_the_cluster_as_it_was(tmp_path: Path) -> None:
    home = tmp_path / "home"
    LocalCluster(home).close()
    db = home / "cluster.db"
    before, rows = db.read_bytes(), _dump(db)
    for text in ("nodes: []", "nodes: [{name: a}, {name: a}]", b"\xff\xfe"):
        with pytest.raises(InputError):
            LocalCluster.start_over(home, _config(tmp_path, text))
        cluster = LocalCluster(home)
        with pytest.raises(InputError):
            cluster.reset(_config(tmp_path, text))
        cluster.close()
    assert _dump(db) == rows
    assert db.read_bytes() == before


def test_a_refused_config_creates_no_cluster(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with pytest.raises(InputError):
        LocalCluster.start_over(home, _config(tmp_path, "nodes: []"))
    with pytest.raises(InputError):
        LocalCluster(home, _config(tmp_path, "nodes: []"))
    assert not home.exists()


def test_a_state_without_nodes_is_named_damaged_and_reset_starts_over(tmp_path: Path) -> None:
    home = tmp_path / "home"
    LocalCluster(home).close()
    with sqlite3.connect(home / "cluster.db") as db:  # what a config of `nodes: []` used to leave
        db.execute("DELETE FROM nodes")
    with pytest.raises(StateDamaged, match=r"has no nodes") as caught:
        LocalCluster(home)
    assert "`vcpilot cluster reset` starts the cluster over" in str(caught.value)
    assert LocalCluster.start_over(home) == home / "cluster.db"
    assert [n.name for n in LocalCluster(home).nodes()] == ["node-0", "node-1"]


def test_a_file_that_is_no_database_is_moved_aside_by_reset(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "cluster.db").write_bytes(b"this is not a database, it was overwritten by accident" * 100)
    with pytest.raises(StateDamaged, match="is damaged and cannot be used") as caught:
        LocalCluster(home)
    assert "\n" not in str(caught.value)
    aside = LocalCluster.start_over(home)
    assert aside.name.startswith("cluster.db.damaged-") and aside.read_bytes().startswith(b"this is not")
    assert [n.name for n in LocalCluster(home).nodes()] == ["node-0", "node-1"]


def test_a_directory_where_the_database_goes_is_damage_reset_moves_aside(tmp_path: Path) -> None:
    # It was "cannot open … check that home is writable", which reset could not get past
    home = tmp_path / "home"
    (home / "cluster.db" / "kept").mkdir(parents=True)
    with pytest.raises(StateDamaged, match=r"cluster.db is damaged and cannot be used; .*: it is not a file$"):
        LocalCluster(home)
    aside = LocalCluster.start_over(home)
    assert aside.name.startswith("cluster.db.damaged-") and (aside / "kept").is_dir()
    assert [n.name for n in LocalCluster(home).nodes()] == ["node-0", "node-1"]


def test_a_home_that_cannot_be_written_is_not_called_damaged(tmp_path: Path) -> None:
    # StateDamaged advises `cluster reset`, which on a read-only or foreign home cannot help (and on one that
    # comes back writable would delete every job): such a home is the user's input, named as such
    with pytest.raises(InputError, match=r"cannot open the LocalCluster's state /proc/1/cluster.db \(unable to open"):
        LocalCluster(Path("/proc/1"))
    if os.geteuid() != 0:
        return
    home = tmp_path / "home"
    LocalCluster(home).close()
    home.chmod(0o500)  # not enough for root: a read-only bind mount over the home, which root cannot write either
    try:
        done = subprocess.run(["mount", "--bind", "-o", "ro", str(home), str(home)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot bind-mount {home} read-only: {done.stderr.strip()}")
        with pytest.raises(InputError, match=f"check that {home} is a writable directory") as caught:
            LocalCluster(home)
        assert not isinstance(caught.value, StateDamaged) and "\n" not in str(caught.value)
    finally:
        subprocess.run(["umount", str(home)], capture_output=True, check=False)
        home.chmod(0o700)


def test_a_stored_job_that_no_longer_parses_is_damaged_state_not_a_traceback(tmp_path: Path) -> None:
    home = tmp_path / "home"
    LocalCluster(home).close()
    with sqlite3.connect(home / "cluster.db") as db:  # what an older, laxer version could have admitted
        manifest = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "old"}, "spec": {}}
        manifest["spec"] = {"tasks": [{"name": "t", "replicas": 1, "template": {"spec": {"containers": [
            {"name": "c", "command": ["true"], "resources": {"limits": {"nvidia.com/gpu": -2}}}]}}}]}  # fmt: skip
        db.execute(
            "INSERT INTO jobs(namespace, name, uid, seq, manifest, phase, pg_phase, retry_count, generation, cwd,"
            " created) VALUES ('default', 'old', 'u', 1, ?, 'Pending', 'Pending', 0, 0, '/', 0)",
            (json.dumps(manifest),),
        )
    cluster = LocalCluster(home)
    with pytest.raises(StateDamaged, match=r"no longer valid .*`vcpilot cluster reset` starts the cluster over"):
        cluster.list_jobs()
    cluster.close()
    LocalCluster.start_over(home)
    assert LocalCluster(home).list_jobs() == []
