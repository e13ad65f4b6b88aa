"""The template's parameter check: what Argo itself lets through (enums) and what our steps could not read."""

from __future__ import annotations

import pytest

from pipelines.parameters import PARAMETERS, check_parameters

DEFAULTS = {p.name or "": str(p.value) for p in PARAMETERS}


def test_the_defaults_pass() -> None:
    check_parameters(DEFAULTS)


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("mode", "bogus", "choose one of auto, force, dry-run"),
        ("gpus-per-pod", "3", "choose one of 1, 2, 4, 8"),
        ("agent-policy", "", "choose one of rules, llm"),
        ("gpus-wanted", "abc", "not a whole number"),
        ("gpus-wanted", "2.5", "not a whole number"),
        # what Python's int() and float() take and Argo's and Volcano's readers do not: spaces, `_`, other digits
        ("gpus-wanted", " 8 ", "not a whole number in digits 0-9"),
        ("global-batch", "1_024", "not a whole number in digits 0-9"),
        ("micro-batch", "４", "not a whole number in digits 0-9"),
        ("slo-ttft-ms", "1_000.5", "not a number in digits 0-9"),
        ("eval-margin", "٠.٥", "not a number in digits 0-9"),
        ("train-max-steps", "0", "at least 1"),
        ("slo-ttft-ms", "-5", "at least 0"),
        # 0 passed here and failed at the evaluate step, where an SLO of 0 ms judges nothing (release.verdict.Bars)
        ("slo-ttft-ms", "0", "parameter slo-ttft-ms is 0: input should be greater than 0"),
        ("slo-tpot-ms", "0.0", "parameter slo-tpot-ms is 0.0: input should be greater than 0"),
        ("slo-tpot-ms", "nan", "not a finite number"),
        ("loadtest-requests", "0", "at least 1"),
        ("eval-margin", "inf", "not a finite number"),
        ("cpu-per-gpu", "-1", "greater than 0"),
        ("memory-per-gpu", "lots", "greater than 0"),
        ("gpus-min", "9", "more than gpus-wanted"),
        ("current-window", "yesterday", "is not a time window: write START/END"),
        ("baseline-window", "2026-11-02/2026-11-01", "ends before it starts"),
        ("resume-checkpoint", "checkpoints/step-5", "give the absolute path of a checkpoint directory"),
        ("resume-checkpoint", "/ws/runs/a/checkpoints", "give the absolute path of a checkpoint directory"),
        ("workspace", "ws", "give the absolute path the workspace is mounted at"),
        # what the API server takes in a pod and containerd refuses when it pulls: the pod would never start
        ("image", "vcpilot latest", "not an image reference"),
        ("image", "Team/App:1", "lowercase/path"),
        ("image", "app:", "not an image reference"),
        ("image", "", "not an image reference"),
        ("base-model", "x y", "is not a model: give 'tiny'"),  # failed at the train step, after detect and plan
        ("base-model", "~/models/m", "is not a model"),
        ("mlflow-tracking-uri", "ftp://mlflow", "is not one MLflow can keep runs under"),
        ("mlflow-tracking-uri", "http://mlflow:0", "has a port that is not a number from 1 to 65535"),
        # the detect and evaluate steps read '' as their working directory: `.git` and all, taken for the logs
        ("log-source", "", "parameter log-source is empty; give a path"),
        ("dataset-dir", " ", "parameter dataset-dir is empty; give a path"),
    ],
)
def test_a_bad_value_gets_one_sentence_naming_the_parameter(name: str, value: str, says: str) -> None:
    with pytest.raises(ValueError, match=says) as caught:
        check_parameters({**DEFAULTS, name: value})
    assert "\n" not in str(caught.value) and name in str(caught.value)


def test_time_windows_are_checked_by_their_shape_and_read_when_detect_runs() -> None:
    check_parameters({**DEFAULTS, "baseline-window": "now-48h/now-24h", "current-window": "24h"})


def test_parameters_it_does_not_know_are_left_to_argo() -> None:
    check_parameters({"mode": "force", "something-else": "x"})


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"gpus-wanted": "3"}, "global-batch 32 is not a multiple of gpus-wanted × micro-batch = 3 × 4"),
        ({"gpus-wanted": "2", "gpus-per-pod": "4"}, "gpus-wanted 2 is not a multiple of gpus-per-pod 4"),
        ({"global-batch": "30"}, "global-batch 30 is not a multiple"),
        # sizes no run has: the plan step's request refuses them, so `vcpilot run` must before anything starts
        ({"gpus-wanted": "1000000000"}, "gpus-wanted: value must be at most 100000"),
        ({"train-max-steps": "1" + "0" * 20}, "train-max-steps: value must be at most 1000000000000"),
        ({"global-batch": "99999999999"}, "global-batch: value must be at most 1000000000"),
    ],
)
def test_sizes_the_plan_step_cannot_split_are_refused_before_it_runs(values: dict[str, str], says: str) -> None:
    with pytest.raises(ValueError, match="the training's sizes do not fit together: " + says):
        check_parameters(values)


@pytest.mark.parametrize("name", ["queue", "fallback-queue", "priority-class", "workspace-pvc", "job-service-account"])
@pytest.mark.parametrize("value", ["Big_Queue", "../x", "a/b"])
def test_parameters_that_name_kubernetes_objects_must_be_kubernetes_names(name: str, value: str) -> None:
    with pytest.raises(ValueError, match=f"parameter {name} is .*, which is not a Kubernetes name"):
        check_parameters({name: value})
