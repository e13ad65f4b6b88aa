"""Guardrails hold whoever asks: each rule refuses by name, the file loader says what is wrong in one sentence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.actions import Abort, Downscale, Proceed, RetryFromCheckpoint, Wait
from agent.guardrails import DEFAULT_IMAGE, ENV_VAR, Guardrails, GuardrailViolation
from agent.observation import PlanRequest
from components.volcano.builder import TrainingRequest, build_training_job
from components.volcano.models import Job

IMAGE = f"{DEFAULT_IMAGE}:0.1.0"


def proceed(**changes: Any) -> Proceed:
    shape: dict[str, Any] = {"gpus": 8, "micro_batch": 4, "grad_accum": 1, "queue": "default", "rationale": "idle"}
    return Proceed(**{**shape, **changes})


def job(**changes: Any) -> Job:
    request: dict[str, Any] = {
        "name": "ft",
        "image": IMAGE,
        "command": ["python", "-m", "train"],
        "total_gpus": 4,
        "micro_batch": 1,
        "grad_accum": 1,
        "global_batch": 4,
    }
    return build_training_job(TrainingRequest(**{**request, **changes}))


def refused(rule: str, check: Any, *args: Any) -> str:
    with pytest.raises(GuardrailViolation) as caught:
        check(*args)
    assert caught.value.rule == rule
    message = str(caught.value)
    assert message.startswith(f"refused by guardrail {rule}: ") and "\n" not in message
    return message


def test_an_action_asking_512_gpus_is_refused_naming_the_cap():
    message = refused("max_gpus_per_job", Guardrails().check_action, proceed(gpus=512))
    assert "512 GPUs" in message and "the cap is 8" in message


def test_an_action_may_shrink_the_run_never_grow_it():
    request = PlanRequest(gpus=4, global_batch=16, micro_batch=4)
    rules = Guardrails(max_gpus_per_job=64)
    message = refused("requested_gpus", rules.check_action, proceed(gpus=8), request)
    assert "8 GPUs" in message and "the 4 the run asked for" in message
    rules.check_action(Downscale(gpus=2, from_gpus=4, micro_batch=4, grad_accum=2, queue="default", rationale="x"))
    rules.check_action(proceed(gpus=4), request)


def test_an_action_in_a_queue_or_priority_class_not_allowed_is_refused():
    rules = Guardrails(queues=["default", "fallback"], priority_classes=["", "low"])
    rules.check_action(proceed(queue="fallback", priority_class="low"))
    assert "'prod'" in refused("queues", rules.check_action, proceed(queue="prod"))
    assert "'critical'" in refused("priority_classes", rules.check_action, proceed(priority_class="critical"))


def test_the_request_namespace_must_be_allowed():
    request = PlanRequest(gpus=8, global_batch=32, micro_batch=4, namespace="team-b")
    refused("namespaces", Guardrails().check_action, proceed(), request)


def test_wait_and_abort_always_pass_even_read_only():
    rules = Guardrails(read_only=True, queues=["nothing"], max_gpus_per_job=1)
    rules.check_action(Wait(reason="queue full", recheck_s=60, rationale="wait"))
    rules.check_action(Abort(reason="code bug", rationale="same exit code twice"))


def test_a_retry_is_checked_like_any_shape():
    retry = RetryFromCheckpoint(gpus=16, micro_batch=1, grad_accum=1, queue="default", rationale="node died")
    refused("max_gpus_per_job", Guardrails().check_action, retry)


def test_a_rendered_job_is_checked_rule_by_rule():
    rules = Guardrails()
    rules.check_job(job())
    refused("namespaces", rules.check_job, job(namespace="kube-system"))
    refused("queues", rules.check_job, job(queue="prod"))
    refused("priority_classes", rules.check_job, job(priority_class="high"))
    assert "evil.io/miner:1" in refused("images", rules.check_job, job(image="evil.io/miner:1"))
    message = refused("max_gpus_per_job", rules.check_job, job(total_gpus=16, global_batch=16))
    assert "job ft asks 16 GPUs" in message


def test_gpus_are_counted_across_every_task_and_pod():
    # 3 pods of 4 GPUs: master ×1 + worker ×2 = 12 > 8, though each pod asks only 4.
    refused("max_gpus_per_job", Guardrails().check_job, job(total_gpus=12, gpus_per_pod=4, global_batch=12))
    Guardrails(max_gpus_per_job=12).check_job(job(total_gpus=12, gpus_per_pod=4, global_batch=12))


def test_every_container_image_is_checked_including_init_containers():
    manifest = job()
    manifest.spec.tasks[0].template.spec.init_containers = [
        manifest.spec.tasks[0].template.spec.containers[0].model_copy(update={"image": "docker.io/alpine"})
    ]
    refused("images", Guardrails().check_job, manifest)


@pytest.mark.parametrize(
    ("allowed", "image", "ok"),
    [
        (DEFAULT_IMAGE, IMAGE, True),
        (DEFAULT_IMAGE, DEFAULT_IMAGE, True),
        (DEFAULT_IMAGE, f"{DEFAULT_IMAGE}@sha256:abc", True),
        (DEFAULT_IMAGE, f"{DEFAULT_IMAGE}-evil:1", False),
        ("ghcr.io/acme/", "ghcr.io/acme/train:2", True),
        ("ghcr.io/acme/", "ghcr.io/acmecorp/train:2", False),
        ("*", "anything:latest", True),
    ],
)
def test_image_prefixes_match_at_name_boundaries(allowed, image, ok):
    rules = Guardrails(images=[allowed])
    if ok:
        rules.check_image(image)
    else:
        refused("images", rules.check_image, image)


def test_star_allows_any_name():
    rules = Guardrails(namespaces=["*"], queues=["*"], priority_classes=["*"], images=["*"])
    rules.check_job(job(namespace="anywhere", queue="any", priority_class="high", image="x:1"))


def test_read_only_refuses_mutating_calls_only():
    rules = Guardrails(read_only=True)
    rules.check_call("get_queue_status", mutating=False)
    assert "submit_training_job" in refused("read_only", rules.check_call, "submit_training_job", True)
    Guardrails().check_call("submit_training_job", mutating=True)


def test_a_guardrails_file_in_yaml_or_json(tmp_path: Path):
    yaml_file = tmp_path / "guardrails.yaml"
    yaml_file.write_text("namespaces: [ml]\nqueues: [default, spot]\nmax_gpus_per_job: 32\nread_only: true\n")
    rules = Guardrails.from_file(yaml_file)
    assert (rules.namespaces, rules.queues, rules.max_gpus_per_job, rules.read_only) == (
        ["ml"],
        ["default", "spot"],
        32,
        True,
    )
    assert rules.images == [DEFAULT_IMAGE]
    json_file = tmp_path / "guardrails.json"
    json_file.write_text('{"images": ["ghcr.io/acme/"]}')
    assert Guardrails.from_file(json_file).images == ["ghcr.io/acme/"]


def test_from_env_reads_the_named_file_or_uses_the_defaults(tmp_path: Path):
    path = tmp_path / "g.yaml"
    path.write_text("max_gpus_per_job: 2\nllm_deadline_s: 20\n")
    assert Guardrails.from_env({ENV_VAR: str(path)}) == Guardrails(max_gpus_per_job=2, llm_deadline_s=20.0)
    assert Guardrails.from_env({}) == Guardrails()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("max_gpu_per_job: 4\n", "unknown field max_gpu_per_job (did you mean max_gpus_per_job?)"),
        ("max_gpus_per_job: 0\n", "max_gpus_per_job: value must be greater than 0"),
        ('max_gpus_per_job: "8"\n', "max_gpus_per_job: expected a whole number"),
        ("read_only: maybe\n", "read_only: expected true or false"),
        ('llm_deadline_s: "90"\n', "llm_deadline_s: input should be a valid number, got '90'"),
        ("llm_deadline_s: 0\n", "llm_deadline_s: value must be greater than 0"),
        ("llm_deadline_s: .inf\n", "llm_deadline_s: input should be a finite number"),
        # past threading.TIMEOUT_MAX: the LLM policy's wait for its request raised OverflowError
        ("llm_deadline_s: 10000000000.0\n", "llm_deadline_s: value must be at most 86400.0, got 10000000000.0"),
        ("queues: []\n", 'queues: must list at least one name, or "*" for any'),
        ("- a\n- b\n", "must be a mapping of rules, not list"),
        ("queues: [a\n", "is not valid YAML or JSON"),
    ],
)
def test_a_bad_guardrails_file_gets_one_sentence(tmp_path: Path, text, expected):
    path = tmp_path / "guardrails.yaml"
    path.write_text(text)
    with pytest.raises(ValueError) as caught:
        Guardrails.from_file(path)
    message = str(caught.value)
    assert expected in message and str(path) in message
    assert "\n" not in message and not isinstance(caught.value, GuardrailViolation)


def test_a_missing_guardrails_file_is_named(tmp_path: Path):
    with pytest.raises(ValueError, match="cannot read the guardrails file .*missing.yaml"):
        Guardrails.from_env({ENV_VAR: str(tmp_path / "missing.yaml")})
