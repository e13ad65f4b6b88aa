"""The llm-autopilot template's parameters — what the Argo UI's submit form shows — and the check of their values.

Real Argo does not hold a submission to a template's enums (the Argo Server's submit API and `argo submit` accept
`-p mode=bogus`), so the workflow's first step runs `check_parameters`; `vcpilot run` calls it before it starts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime

from hera.workflows import Parameter
from pydantic import ValidationError

from agent.observation import PlanRequest
from agent.policy_rules import RulesConfig
from components.errors import InputError
from components.finetune.base_model import check_base_model
from components.images import check_image
from components.logs.interval import parse_window
from components.names import is_dns1123_subdomain
from components.release.verdict import Bars
from components.tracking.adapter import check_tracking_uri
from components.volcano.resources import parse_quantity
from components.volcano.validation import describe_validation_error
from pipelines.vcjobs import DEFAULT_IMAGE
from pipelines.workspace import check_resume_checkpoint, check_workspace

__all__ = ["DEFAULTS", "DEFAULT_IMAGE", "MODES", "PARAMETERS", "POLICIES", "TEMPLATE_NAME", "check_parameters"]

TEMPLATE_NAME = "llm-autopilot"
MODES = ["auto", "force", "dry-run"]
POLICIES = ["rules", "llm"]


def _param(name: str, value: str, description: str, enum: list[str] | None = None) -> Parameter:
    return Parameter(name=name, value=value, description=description, enum=enum)


# The run's parameters, as the Argo UI's submit form shows them. Every value is a string on the wire.
PARAMETERS: tuple[Parameter, ...] = (
    _param("mode", "auto", "auto: fine-tune on drift; force: always; dry-run: detect and report only", MODES),
    _param("base-model", "Qwen/Qwen2.5-0.5B-Instruct", "Model to fine-tune: a Hugging Face id or a path"),
    _param("log-source", "/workspace/logs", "The service's logs: a file, a directory or a glob"),
    _param(
        "baseline-window",
        "",
        "Time of the baseline (without log-source/baseline: cut from the same logs), e.g. now-48h/now-24h; empty: all",
    ),
    _param("current-window", "", "Time of the logs to judge, e.g. 24h or 2026-11-02T00:00/P1D; empty: every line"),
    _param(
        "dataset-dir",
        "/workspace/datasets/eval",
        "Evaluation data: candidate and champion are scored on <dataset-dir>/eval.jsonl",
    ),
    _param("workspace", "/workspace", "Directory every step shares (the workspace PVC is mounted here)"),
    _param("workspace-pvc", "vcpilot-workspace", "PersistentVolumeClaim mounted at the workspace (ReadWriteMany)"),
    _param("gpus-wanted", "4", "GPUs to train on when the cluster has them"),
    _param("gpus-min", "1", "Fewest GPUs worth training on; the planner never goes below"),
    _param("gpus-per-pod", "1", "GPUs per training pod", ["1", "2", "4", "8"]),
    _param("global-batch", "32", "Sequences per optimizer step; kept whatever the GPU count (= gpus × micro × accum)"),
    _param("micro-batch", "4", "Sequences per GPU per forward pass"),
    _param("queue", "default", "Volcano queue for the heavy steps"),
    _param("fallback-queue", "default", "Volcano queue the planner may move training to when the first is crowded"),
    _param("priority-class", "", "PriorityClass of the heavy steps' pods; empty for none"),
    _param("slo-ttft-ms", "500", "Load-test SLO: p95 time to first token, milliseconds"),
    _param("slo-tpot-ms", "50", "Load-test SLO: p95 time per output token, milliseconds"),
    _param("loadtest-requests", "20", "Requests the load test sends (more: a steadier p95, a longer test)"),
    _param("eval-margin", "0.01", "How much the candidate's score must beat the champion's to be released"),
    _param("max-recovery-attempts", "3", "Training attempts (the first included) before giving up"),
    _param("agent-policy", "rules", "Who decides plan and diagnose: the rules, or an LLM (VCPILOT_LLM_URL)", POLICIES),
    _param(
        "max-plan-wait-s",
        f"{RulesConfig().max_plan_wait_s:g}",
        "Longest the planner waits for the cluster to free up before it takes the best size it can get",
    ),
    _param("mlflow-tracking-uri", "", "MLflow tracking server; empty for MLflow's default (sqlite under VCPILOT_HOME)"),
    _param("mlflow-experiment", TEMPLATE_NAME, "MLflow experiment of the run"),
    _param(
        "argo-ui-url",
        "",
        "Base URL of the Argo UI (https://argo.example.com), for the MLflow run's link to the workflow; empty: none",
    ),
    _param("registered-model", TEMPLATE_NAME, "MLflow registered model whose champion alias the release moves"),
    _param("image", DEFAULT_IMAGE, "Image of every step (it contains vcpilot)"),
    _param("train-max-steps", "200", "Optimizer steps of a fine-tuning run"),
    _param("checkpoint-every", "50", "Steps between checkpoints (a retry resumes from the latest)"),
    _param(
        "resume-checkpoint",
        "",
        "A complete checkpoint (.../checkpoints/step-N) the first training attempt continues from, as after a run that "
        "stopped on a full checkpoint volume; empty: from scratch",
    ),
    _param("cpu-per-gpu", "4", "CPU of a heavy step's pod per GPU it uses (a pod without a GPU gets one share)"),
    _param(
        "memory-per-gpu", "16Gi", "Memory of a heavy step's pod per GPU it uses (a pod without a GPU gets one share)"
    ),
    _param(
        "job-service-account",
        "vcpilot-job",
        "Account of the heavy steps' pods, whose guard ends them when the workflow ends; empty for no guard",
    ),
)


# Each parameter's value when a run gives none.
DEFAULTS: dict[str, str] = {p.name: str(p.value) for p in PARAMETERS if p.name}

# What each typed parameter must hold, beyond its enum: (kind, least value).
_NUMBERS: dict[str, tuple[type[int] | type[float], float]] = {
    "gpus-wanted": (int, 1),
    "gpus-min": (int, 1),
    "global-batch": (int, 1),
    "micro-batch": (int, 1),
    "train-max-steps": (int, 1),
    "checkpoint-every": (int, 1),
    "max-recovery-attempts": (int, 1),
    "max-plan-wait-s": (float, 0),
    "slo-ttft-ms": (float, 0),
    "slo-tpot-ms": (float, 0),
    "loadtest-requests": (int, 1),
    "eval-margin": (float, float("-inf")),
}
# Numbers as every step reads them (Go's strconv, Python's argparse, a manifest's field): ASCII digits, no spaces,
# no `_` separators; Python's int() and float() alone would take ` 8 `, `1_000` and `８`. inf and nan are refused
# as not finite below.
_WHOLE = r"[+-]?\d+"
_DECIMAL = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?|[+-]?(?:inf|infinity|nan)"
_QUANTITIES = ("cpu-per-gpu", "memory-per-gpu")
# Parameters that name Kubernetes objects (empty: none, or the default).
_OBJECT_NAMES = ("queue", "fallback-queue", "priority-class", "workspace-pvc", "job-service-account")
# Parameters that hold a time window (empty: none); a relative one (`24h`) is read when detect-logs runs.
_WINDOWS = ("baseline-window", "current-window")
# Paths a step reads, never empty: the step's `--source ''` read its working directory, `.git` and all, as logs.
_PATHS = ("log-source", "dataset-dir")


def check_parameters(values: Mapping[str, str]) -> None:
    """Refuse, in one sentence, the first value that breaks its parameter's enum, number or quantity."""
    for parameter in PARAMETERS:
        name = parameter.name or ""
        if name not in values:
            continue
        value = values[name]
        if parameter.enum and value not in parameter.enum:
            raise ValueError(f"parameter {name} is {value!r}; choose one of {', '.join(map(str, parameter.enum))}")
        if name in _NUMBERS:
            kind, least = _NUMBERS[name]
            what = "whole number" if kind is int else "number"
            if not re.fullmatch(_WHOLE if kind is int else _DECIMAL, value, re.ASCII | re.IGNORECASE):
                raise ValueError(f"parameter {name} is {value!r}, which is not a {what} in digits 0-9")
            number = kind(value)
            if not math.isfinite(number):
                raise ValueError(f"parameter {name} is {value!r}, which is not a finite {what}")
            if number < least:
                raise ValueError(f"parameter {name} is {value}; it must be at least {least:g}")
        if name in _QUANTITIES:
            try:
                positive = parse_quantity(value) > 0
            except ValueError:
                positive = False
            if not positive:
                raise ValueError(
                    f"parameter {name} is {value!r}; give a quantity greater than 0, such as 4, 1500m or 16Gi"
                )
        if name in _PATHS and not value.strip():
            raise ValueError(f"parameter {name} is empty; give a path ({parameter.description})")
        if name in _WINDOWS and value:
            try:
                parse_window(value, datetime.now(UTC), option=f"parameter {name}")
            except InputError as err:
                raise ValueError(str(err)) from None
        if name == "resume-checkpoint":
            check_resume_checkpoint(value, f"parameter {name}")
        if name == "workspace":
            check_workspace(value, f"parameter {name}")
        if name in _OBJECT_NAMES and value and not is_dns1123_subdomain(value):
            raise ValueError(
                f"parameter {name} is {value!r}, which is not a Kubernetes name (lower-case letters, digits, '-' "
                "and '.')"
            )
        if name == "image":
            check_image(value, f"parameter {name}")
        if name == "base-model":
            check_base_model(value, f"parameter {name}")
        if name == "mlflow-tracking-uri" and value:
            check_tracking_uri(value, f"parameter {name}")
    _check_bars(values)
    wanted, fewest = values.get("gpus-wanted"), values.get("gpus-min")
    if wanted and fewest and int(fewest) > int(wanted):
        raise ValueError(f"parameter gpus-min ({fewest}) is more than gpus-wanted ({wanted})")
    _check_sizes({**DEFAULTS, **values})


def _check_bars(values: Mapping[str, str]) -> None:
    """The SLOs and the margin as the evaluate step judges them (release.verdict.Bars): 0 ms judges nothing."""
    given = {name: values[name] for name in ("slo-ttft-ms", "slo-tpot-ms", "eval-margin") if values.get(name)}
    try:
        Bars.model_validate({"margin" if n == "eval-margin" else n.replace("-", "_"): v for n, v in given.items()})
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        name = {"margin": "eval-margin"}.get(str(first["loc"][0]), str(first["loc"][0]).replace("_", "-"))
        raise ValueError(f"parameter {name} is {given[name]}: {first['msg'][:1].lower()}{first['msg'][1:]}") from None


def _check_sizes(values: Mapping[str, str]) -> None:
    """The training's sizes together, as the plan step's request checks them (agent.observation.PlanRequest)."""
    try:
        PlanRequest(
            gpus=int(values["gpus-wanted"]),
            gpus_min=int(values["gpus-min"]),
            gpus_per_pod=int(values["gpus-per-pod"]),
            global_batch=int(values["global-batch"]),
            micro_batch=int(values["micro-batch"]),
            max_steps=int(values["train-max-steps"]),
        )
    except ValidationError as err:
        problem = re.sub(r"\bgpus\b(?!-)", "gpus-wanted", describe_validation_error(err, PlanRequest))
        problem = re.sub(r"\bmax_steps\b", "train-max-steps", problem).replace("global_batch", "global-batch")
        raise ValueError(f"the training's sizes do not fit together: {problem}") from None
