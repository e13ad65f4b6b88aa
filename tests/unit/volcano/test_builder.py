"""A training request becomes the Job the pytorch plugin expects, or one sentence saying what to fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from components.volcano.builder import (
    TrainingRequest,
    build_training_job,
    build_training_job_from,
    parse_request,
)
from components.volcano.models import Job, parse_job, validate_job

BASE: dict[str, Any] = {
    "name": "ft-llama",
    "image": "ghcr.io/acme/train:1.0",
    "command": ["python", "-m", "components.finetune.train"],
    "total_gpus": 1,
    "micro_batch": 4,
    "grad_accum": 8,
    "global_batch": 32,
}

SHAPES: dict[str, dict[str, Any]] = {
    "one-gpu": {},
    "eight-gpus-two-per-pod": {"total_gpus": 8, "gpus_per_pod": 2, "grad_accum": 1, "global_batch": 32},
    "avoid-nodes": {"total_gpus": 4, "grad_accum": 2, "avoid_nodes": ["gpu-node-3", "gpu-node-7"]},
    "priority-class": {
        "priority_class": "training-high",
        "queue": "team-a",
        "ttl_seconds_after_finished": 3600,
    },
    "resume": {
        "resume_checkpoint": "/workspace/ckpt/step-1200",
        "env": {"HF_HOME": "/workspace/hf"},
        "args": ["--lr", "1e-5"],
        "labels": {"vcpilot.io/run": "run-42"},
        "namespace": "ml",
        "cpu_per_pod": "8",
        "memory_per_pod": "64Gi",
    },
}


def request(**changes: Any) -> TrainingRequest:
    return parse_request({**BASE, **changes})


def env_of(job: Job, task: int = 0) -> dict[str, str | None]:
    return {e.name: e.value for e in job.spec.tasks[task].template.spec.containers[0].env}


def rejects(**changes: Any) -> str:
    with pytest.raises(ValueError) as caught:
        parse_request({**BASE, **changes})
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.fixture(scope="module")
def job_schema(shared_dir: Path) -> jsonschema.protocols.Validator:
    crd = yaml.safe_load((shared_dir / "schemas" / "volcano-v1.15.1" / "batch.volcano.sh_jobs.yaml").read_text())
    version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
    return jsonschema.Draft7Validator(version["schema"]["openAPIV3Schema"])


@pytest.mark.parametrize("shape", SHAPES, ids=list(SHAPES))
def test_every_rendered_job_passes_the_crd_schema_and_admission(shape: str, job_schema) -> None:
    job = build_training_job(request(**SHAPES[shape]))
    manifest = job.to_dict()
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in job_schema.iter_errors(manifest)]
    assert not errors, errors
    validate_job(job)
    assert parse_job(manifest) == job, "the manifest reads back into the same Job"


def test_one_gpu_is_a_single_master() -> None:
    job = build_training_job(request())
    spec = job.spec
    assert [t.name for t in spec.tasks] == ["master"]
    assert spec.min_available == 1
    assert spec.scheduler_name == "volcano"
    assert spec.plugins == {
        "pytorch": ["--master=master", "--worker=worker", "--port=23456"],
        "svc": [],
        "env": [],
    }


def test_pods_get_the_gpus_and_the_layout_the_pytorch_plugin_needs() -> None:
    job = build_training_job(request(**SHAPES["eight-gpus-two-per-pod"]))
    master, worker = job.spec.tasks
    assert (master.name, master.replicas, master.min_available) == ("master", 1, 1)
    assert (worker.name, worker.replicas, worker.min_available) == ("worker", 3, 3)
    assert job.spec.min_available == 4
    manifest = job.to_dict()
    for task in manifest["spec"]["tasks"]:
        pod = task["template"]["spec"]
        assert pod["restartPolicy"] == "Never"
        resources = pod["containers"][0]["resources"]
        assert resources["requests"] == resources["limits"] == {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": 2}
    assert env_of(job, 1)["VCPILOT_GPUS_PER_POD"] == "2"


def test_failures_restart_the_job_and_master_completion_completes_it() -> None:
    manifest = build_training_job(request(max_retry=5)).to_dict()
    assert manifest["spec"]["policies"] == [
        {"event": "PodEvicted", "action": "RestartJob"},
        {"event": "PodFailed", "action": "RestartJob"},
    ]
    assert manifest["spec"]["tasks"][0]["policies"] == [{"event": "TaskCompleted", "action": "CompleteJob"}]
    assert manifest["spec"]["maxRetry"] == 5


def test_avoided_nodes_become_a_required_node_affinity() -> None:
    job = build_training_job(request(**SHAPES["avoid-nodes"]))
    for task in job.to_dict()["spec"]["tasks"]:
        affinity = task["template"]["spec"]["affinity"]
        terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert terms == [
            {
                "matchExpressions": [
                    {
                        "key": "kubernetes.io/hostname",
                        "operator": "NotIn",
                        "values": ["gpu-node-3", "gpu-node-7"],
                    }
                ]
            }
        ]
    assert "affinity" not in build_training_job(request()).to_dict()["spec"]["tasks"][0]["template"]["spec"]


def test_priority_class_and_queue_are_set_on_the_job() -> None:
    manifest = build_training_job(request(**SHAPES["priority-class"])).to_dict()
    assert manifest["spec"]["priorityClassName"] == "training-high"
    assert manifest["spec"]["queue"] == "team-a"
    assert manifest["spec"]["ttlSecondsAfterFinished"] == 3600
    assert manifest["spec"]["tasks"][0]["template"]["spec"]["priorityClassName"] == "training-high"


def test_batch_sizes_and_resume_reach_the_training_program() -> None:
    job = build_training_job(request(**SHAPES["resume"]))
    env = env_of(job)
    assert env["VCPILOT_MICRO_BATCH"] == "4"
    assert env["VCPILOT_GRAD_ACCUM"] == "8"
    assert env["VCPILOT_GLOBAL_BATCH"] == "32"
    assert env["VCPILOT_RESUME"] == "/workspace/ckpt/step-1200"
    assert env["HF_HOME"] == "/workspace/hf"
    assert "VCPILOT_RESUME" not in env_of(build_training_job(request()))
    container = job.spec.tasks[0].template.spec.containers[0]
    assert container.args == ["--lr", "1e-5"]
    assert container.resources.limits["memory"] == "64Gi"


def test_labels_mark_the_job_and_its_pods_as_ours() -> None:
    job = build_training_job(request(**SHAPES["resume"]))
    expected = {"vcpilot.io/run": "run-42", "app.kubernetes.io/managed-by": "vcpilot"}
    assert job.metadata.labels == expected
    assert job.metadata.namespace == "ml"
    assert all(task.template.metadata.labels == expected for task in job.spec.tasks)


def test_dict_helper_builds_the_same_job() -> None:
    assert build_training_job_from(dict(BASE)) == build_training_job(request())


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"global_batch": 64},
            "global_batch 64 must equal total_gpus × micro_batch × grad_accum, but 1 × 4 × 8 = 32",
        ),
        ({"total_gpus": 0}, "total_gpus: value must be greater than 0, got 0"),
        ({"micro_batch": -1}, "micro_batch: value must be greater than 0, got -1"),
        ({"grad_accum": 0}, "grad_accum: value must be greater than 0"),
        ({"gpus_per_pod": 0}, "gpus_per_pod: value must be greater than 0"),
        (
            {"total_gpus": 6, "gpus_per_pod": 4, "global_batch": 192},
            "total_gpus 6 is not a multiple of gpus_per_pod 4",
        ),
        ({"name": "Llama_FT"}, "name: 'Llama_FT' must be a lowercase RFC 1123 label"),
        ({"name": "7b-ft"}, "name: '7b-ft' must be a lowercase RFC 1123 label that starts with a letter"),
        ({"name": "ft.v2"}, "name: 'ft.v2' must be a lowercase RFC 1123 label"),
        (
            {"name": "a" * 54, "total_gpus": 16, "global_batch": 512},
            f"pod name '{'a' * 54}-worker-14' would be 64 characters, over Kubernetes' limit of 63; "
            "shorten name to at most 53 characters",
        ),
        ({"namespace": "ML"}, "namespace: 'ML' is not a namespace name"),
        ({"queue": "Team A"}, "queue: 'Team A' must be a lowercase RFC 1123 name"),
        ({"cpu_per_pod": "two"}, "cpu_per_pod: quantity 'two' is not a number"),
        ({"memory_per_pod": "0"}, "memory_per_pod: '0' must be greater than 0"),
        ({"max_retry": 0}, "max_retry: must be at least 1, got 0"),
        ({"env": {"WORLD_SIZE": "8"}}, "env: WORLD_SIZE is set by vcpilot or Volcano's pytorch plugin"),
        ({"labels": {"team": "nlp team"}}, "labels: value 'nlp team' must be"),
        ({"command": []}, "command: must not be empty"),
        ({"image": ""}, "image: must not be empty"),
        ({"total_gpus": True}, "total_gpus: expected a whole number, got True"),
        ({"avoid_nodes": [""]}, "avoid_nodes: node name '' must be a lowercase RFC 1123 name"),
        # names the API server refuses went into the pods' NotIn affinity, and the job could never be created
        ({"avoid_nodes": ["gpu-node-3\n"]}, "avoid_nodes: node name 'gpu-node-3\\n' must be a lowercase RFC 1123"),
        ({"avoid_nodes": ["n" * 10_000]}, f"avoid_nodes: node name '{'n' * 77}...' must be a lowercase RFC 1123"),
        (
            {"termination_grace_period_s": 10**20},  # past the int64 Kubernetes stores it in
            "termination_grace_period_s: value must be at most 9223372036854775807, got 100000000000000000000",
        ),
        ({"termination_grace_period_s": True}, "termination_grace_period_s: expected a whole number, got True"),
        # images the API server takes and no node can pull: the job was submitted and its pods waited forever
        ({"image": "ghcr.io/acme/train:1.0 "}, "image: the image is 'ghcr.io/acme/train:1.0 ', which is not an"),
        ({"image": "ghcr.io/acme/train:1.0\n"}, "image: the image is 'ghcr.io/acme/train:1.0\\n', which is not"),
        ({"image": ":evil.io/x"}, "image: the image is ':evil.io/x', which is not an image reference"),
        ({"image": "ghcr.io/acme/train:v\u0661"}, "image: the image is 'ghcr.io/acme/train:v\u0661', which is not"),
        ({"gpus": 8}, "unknown field gpus"),
        ({"micro_bach": 4}, "unknown field micro_bach (did you mean micro_batch?)"),
        ({"total_gpus": "eight"}, "total_gpus: expected a whole number, got 'eight'"),
    ],
)
def test_bad_request_gets_one_sentence(changes: dict[str, Any], expected: str) -> None:
    assert rejects(**changes).startswith(expected)


def test_missing_field_is_named() -> None:
    data = dict(BASE)
    del data["image"]
    with pytest.raises(ValueError, match=r"^image: field is required$"):
        parse_request(data)


def test_pod_name_limit_counts_the_last_worker() -> None:
    # 53 + len("-worker-14") = 63 fits exactly; one more character does not (see the case above).
    build_training_job(request(name="a" * 53, total_gpus=16, global_batch=512))


def test_keyword_construction_also_reports_one_sentence() -> None:
    with pytest.raises(ValueError) as caught:
        TrainingRequest(**{**BASE, "global_batch": 100})
    assert str(caught.value).startswith("global_batch 100 must equal")
    assert "\n" not in str(caught.value)


def test_request_is_frozen() -> None:
    req = request()
    with pytest.raises(ValueError):
        req.total_gpus = 2  # type: ignore[misc]


def test_a_job_with_min_available_above_replicas_is_refused() -> None:
    job = build_training_job(request(total_gpus=2, global_batch=64))
    job.spec.tasks[1].min_available = 2
    with pytest.raises(ValueError, match=r"spec.tasks\[1\].minAvailable 2 is greater than its replicas 1"):
        validate_job(job)


@pytest.mark.parametrize("path", ["/ckpt/step-1\x00", "/ckpt/\x1b[2Jstep-1", "/ckpt/step-1\n", "/c" * 3000])
def test_a_resume_checkpoint_that_is_no_path_is_refused(path: str) -> None:
    # it went as it was into the pods' VCPILOT_RESUME, whoever asked (a flag, the LLM, an MCP client)
    assert "resume_checkpoint" in rejects(resume_checkpoint=path)
    assert env_of(build_training_job(request(resume_checkpoint="/ckpt/step-1")))["VCPILOT_RESUME"] == "/ckpt/step-1"


def test_the_grace_period_may_be_as_long_as_kubernetes_stores() -> None:
    spec = build_training_job(request(termination_grace_period_s=2**63 - 1)).spec.tasks[0].template.spec
    assert spec.termination_grace_period_seconds == 2**63 - 1
