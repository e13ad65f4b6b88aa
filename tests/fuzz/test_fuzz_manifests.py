"""Fuzz the parsers of what people hand-write: Volcano Jobs, LocalCluster configs and Argo workflows.

Each parser's contract is a ValueError of one sentence (VcpilotError subclasses where it has one: InputError for a
cluster config, WorkflowError for a workflow); mutations of valid documents must get that or a parsed object.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml
from fuzz_kit import SHARED, mutated_bytes, mutated_tree, one_line, yaml_bytes
from hypothesis import example, given
from hypothesis import strategies as st
from vcjob_factory import vcjob, vcjob_task

from components.volcano.builder import TrainingRequest, build_training_job
from components.volcano.localconfig import LocalClusterConfig, load_config
from components.volcano.models import apply_volcano_defaults, parse_job, validate_job
from pipelines.cluster_sample import sample_job
from pipelines.local.engine.locks import holding, locks_of
from pipelines.local.workflow import load_workflow

JOBS: list[dict[str, Any]] = [
    vcjob("train", pods=2, gpus=2, max_retry=2, policies=[{"event": "PodEvicted", "action": "RestartJob"}]),
    vcjob(
        "mixed",
        tasks=[
            vcjob_task("master", 1, 0),
            vcjob_task("worker", 3, 1, policies=[{"exitCode": 3, "action": "RestartTask"}]),
        ],
    ),
    sample_job().to_dict(),
    build_training_job(
        TrainingRequest(
            name="ft",
            image="step:0.1",
            command=["python"],
            total_gpus=4,
            gpus_per_pod=2,
            micro_batch=2,
            grad_accum=2,
            global_batch=16,
        )
    ).to_dict(),
]
CONFIGS: list[dict[str, Any]] = [
    {"nodes": [{"name": "big", "count": 3, "gpus": 8}], "queues": [{"name": "research", "weight": 2}]},
    {
        "nodes": [{"name": "a", "gpus": 4, "labels": {"zone": "x"}}, {"name": "b", "count": 2, "gpus": 2}],
        "queues": [{"name": "capped", "capability": {"nvidia.com/gpu": 2}, "reclaimable": False}],
        "priorityClasses": {"high": 1000},
    },
]


def _workflows() -> list[dict[str, Any]]:
    found = []
    for path in sorted(SHARED.glob("argo-examples/*.yaml")):
        found += [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    return found or [
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Workflow",
            "metadata": {"generateName": "hello-"},
            "spec": {"entrypoint": "main", "templates": [{"name": "main", "container": {"image": "alpine"}}]},
        }
    ]


WORKFLOWS = _workflows()


def _submit_checks(doc: Any) -> None:
    """What LocalCluster.submit runs before it touches the database: parse, Volcano's defaults, admission."""
    validate_job(apply_volcano_defaults(parse_job(doc)))


@given(mutated_tree(JOBS, steps=4))
@example(
    {
        **JOBS[0],
        "spec": {
            **JOBS[0]["spec"],
            "tasks": [{**JOBS[0]["spec"]["tasks"][0], "partitionPolicy": {"minPartitions": "x"}}],
        },
    }
)
# A key holding a newline was named raw: "unknown field spec.\n0", two lines (make fuzz, 2026-12-07).
@example({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "x"}, "spec": {"\n0": None}})
def test_vcjob(doc: Any) -> None:
    try:
        _submit_checks(doc)
    except ValueError as err:
        one_line(str(err))


@given(mutated_bytes([yaml_bytes(j) for j in JOBS]))
def test_vcjob_text(data: bytes) -> None:
    try:
        _submit_checks(data.decode("utf-8", errors="replace"))
    except ValueError as err:
        one_line(str(err))


@given(st.one_of(mutated_tree(CONFIGS, steps=4), mutated_bytes([yaml_bytes(c) for c in CONFIGS])))
@example({"nodes": []})
@example(b"\xff\xfe")
@example({"\n": None})  # named raw, the sentence was two lines (make fuzz, 2026-12-07)
def test_cluster_config(doc: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cluster.yaml"
        path.write_bytes(doc if isinstance(doc, bytes) else yaml_bytes(doc))
        try:
            config = load_config(path)
        except ValueError as err:  # InputError
            one_line(str(err))
            return
    assert isinstance(config, LocalClusterConfig)
    for entry in config.nodes:
        for node in entry.expand():
            assert node["name"]


@given(st.one_of(mutated_tree(WORKFLOWS, steps=4), mutated_bytes([yaml_bytes(w) for w in WORKFLOWS[:8]])))
@example(b"kind: Workflow\nspec:\n  entrypoint: main\n  templates:\n  -")  # a template that is null
@example({"kind": "Workflow", "spec": {"entrypoint": "m", "arguments": ["x"], "templates": [{"name": "m"}]}})
@example({"kind": "Workflow", "spec": {"entrypoint": "m", "templates": [{"name": "m", "dag": {"tasks": [[]]}}]}})
@example({"apiVersion": "argoproj.io/v1alpha1", "kind": "\n", "spec": {}})  # quoted raw: two lines (make fuzz)
@example({"kind": "Workflow", "spec": {"entrypoint": "a\nb", "templates": [{"name": "a\nb", "container": {}}]}})
def test_workflow(doc: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "workflow.yaml"
        path.write_bytes(doc if isinstance(doc, bytes) else yaml_bytes(doc))
        try:
            load_workflow(path, {"message": "hi"})
        except ValueError as err:  # WorkflowError
            one_line(str(err))


SYNCHRONIZATIONS: list[Any] = [
    {"mutexes": [{"name": "welcome"}, {"name": "other", "namespace": "team"}]},
    {"semaphores": [{"configMapKeyRef": {"name": "limits", "key": "gpu"}, "namespace": "team"}]},
    {"mutexes": [{"name": "m", "database": True}], "semaphores": [{"database": {"key": "k"}}]},
]


@given(mutated_tree(SYNCHRONIZATIONS, steps=4))
@example({"mutexes": [{"name": "a/../../b\x00"}]})  # the lock's file name: quoted, never a path
def test_synchronization(sync: Any) -> None:
    # A template's or workflow's `synchronization` as the runner reads it at run time: its locks, or one sentence.
    with tempfile.TemporaryDirectory() as tmp:
        try:
            found = locks_of(sync, "default", "spec.synchronization", lambda name, key: 2)
        except ValueError as err:  # WorkflowError
            one_line(str(err))
            return
        with holding(Path(tmp) / "locks", found, lambda message: None, lambda: True) as held:
            assert held  # nothing else holds them
        assert all(path.parent == Path(tmp) / "locks" for path in (Path(tmp) / "locks").rglob("*"))
