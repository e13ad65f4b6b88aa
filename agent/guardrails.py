"""The limits no policy and no tool call may cross, whoever asks: a person, the rules, an LLM or an MCP client.

Every action a policy returns and every tool call the agent or the MCP server serves passes through one
`Guardrails`: allowed namespaces, queues, images and priority classes, a GPU cap per job, a read-only switch, and
the time an LLM may take to decide.
A refusal is a `GuardrailViolation` whose message names the rule, so the person reading a decision record or an
MCP client's error knows which line of the guardrails file to change. The limits come from a YAML or JSON file
(`VCPILOT_GUARDRAILS`) or from the defaults below; they are data, checked by pure functions.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent.actions import Abort, Action, Wait
from agent.observation import PlanRequest
from agent.run_bands import RUN_BAND_PREFIX
from components.errors import InputError, VcpilotError
from components.files import load_document
from components.volcano.builder import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from components.volcano.models import Job, PodSpec
from components.volcano.resources import GPU, parse_quantity
from components.volcano.validation import describe_validation_error

__all__ = ["ANY", "DEFAULT_IMAGE", "ENV_VAR", "Guardrails", "GuardrailViolation", "pod_gpus"]

ANY = "*"  # in a list of allowed names: anything goes
ENV_VAR = "VCPILOT_GUARDRAILS"
# The image every step of the pipeline runs (pipelines/autopilot.py DEFAULT_IMAGE), any tag or digest of it.
# Repeated here because the agent may not import the pipeline.
DEFAULT_IMAGE = "ghcr.io/vcpilot/vcpilot"


# A ValueError too: guardrails are checked inside pydantic validators and by callers that catch a bad value.
class GuardrailViolation(VcpilotError, ValueError):
    """A refusal: `rule` is the guardrail's name (e.g. "max_gpus_per_job"), the message one sentence naming it."""

    def __init__(self, rule: str, detail: str) -> None:
        super().__init__(f"refused by guardrail {rule}: {detail}")
        self.rule = rule


class Guardrails(BaseModel):
    """What the agent may do. Lists of names take "*" for anything; a priority class "" means none at all."""

    # Finite numbers only: YAML's `.inf` as llm_deadline_s would lift the bound on an LLM's decision.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    namespaces: list[str] = Field(default_factory=lambda: ["default"])
    queues: list[str] = Field(default_factory=lambda: ["default"])
    # Allowed image prefixes: an entry matches itself, any tag or digest of it (`entry:tag`, `entry@sha256:…`),
    # and, when it ends with "/", every image under that registry path.
    images: list[str] = Field(default_factory=lambda: [DEFAULT_IMAGE])
    # An entry ending in "*" allows every class it begins: by default none, and the cluster's run bands
    # (`agent.run_bands`), which the rule policy gives a run that asks for none.
    priority_classes: list[str] = Field(default_factory=lambda: ["", f"{RUN_BAND_PREFIX}*"])
    # Strict: YAML's `"8"` or `yes` where a number or a switch belongs is a mistake worth naming.
    max_gpus_per_job: int = Field(default=8, gt=0, strict=True)
    read_only: bool = Field(default=False, strict=True)
    # `cancel_job` deletes only the Volcano Jobs vcpilot rendered (`app.kubernetes.io/managed-by: vcpilot`), not
    # a colleague's job or the pipeline's serving one that happen to share an allowed namespace; true lifts that.
    cancel_unmanaged: bool = Field(default=False, strict=True)
    # The whole of one LLM decision — every request, every tool call — after which the rules decide: three times
    # the policy's default timeout of one request, so a slow endpoint costs a bounded wait, not rounds × timeout.
    # At most a day: a "never" such as 1e10 s is past what a thread can wait for (threading.TIMEOUT_MAX).
    llm_deadline_s: float = Field(default=90.0, gt=0, le=86_400, strict=True)

    @field_validator("namespaces", "queues", "images")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError('must list at least one name, or "*" for any')
        if any(not name.strip() for name in value):
            raise ValueError('names must not be empty; use "*" for any')
        return value

    # -- loading -----------------------------------------------------------------------------------------

    @classmethod
    def from_file(cls, path: str | Path) -> Guardrails:
        """Read a YAML or JSON guardrails file; InputError in one sentence naming the file and the problem."""
        data = load_document(path, "the guardrails file", mapping=False)
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise InputError(f"the guardrails file {path} must be a mapping of rules, not {type(data).__name__}")
        try:
            return cls.model_validate(data)
        except ValidationError as err:
            raise InputError(f"the guardrails file {path}: {describe_validation_error(err, cls)}") from None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Guardrails:
        """The file named by VCPILOT_GUARDRAILS, or the defaults when it is unset or empty."""
        path = (os.environ if environ is None else environ).get(ENV_VAR, "")
        return cls.from_file(path) if path.strip() else cls()

    # -- single rules ------------------------------------------------------------------------------------

    def check_call(self, tool_name: str, mutating: bool) -> None:
        """Refuse a tool that changes the cluster when the switch `read_only` is on."""
        if self.read_only and mutating:
            raise GuardrailViolation("read_only", f"{tool_name} changes the cluster and read-only mode is on")

    def check_namespace(self, namespace: str) -> None:
        """Refuse a namespace that is not allowed."""
        _allowed("namespaces", "namespace", namespace, self.namespaces)

    def check_cancel(self, job: str, labels: Mapping[str, str]) -> None:
        """Refuse cancelling a job vcpilot did not render, unless `cancel_unmanaged` is on."""
        if not self.cancel_unmanaged and labels.get(MANAGED_BY_LABEL) != MANAGED_BY_VALUE:
            raise GuardrailViolation(
                "cancel_unmanaged",
                f"job {job} was not rendered by vcpilot (no label {MANAGED_BY_LABEL}={MANAGED_BY_VALUE}); "
                "cancel it with kubectl, or set cancel_unmanaged: true",
            )

    def check_queue(self, queue: str) -> None:
        """Refuse a queue that is not allowed."""
        _allowed("queues", "queue", queue, self.queues)

    def check_priority_class(self, priority_class: str | None) -> None:
        """Refuse a priority class that is not allowed ("" or None: the job asks for none)."""
        name = priority_class or ""
        if name in self.priority_classes or any(
            allowed.endswith(ANY) and name.startswith(allowed[:-1]) for allowed in self.priority_classes
        ):
            return
        if not name:
            raise GuardrailViolation(
                "priority_classes", f"a job must use one of the priority classes {_listing(self.priority_classes)}"
            )
        _allowed("priority_classes", "priority class", name, self.priority_classes)

    def check_image(self, image: str | None) -> None:
        """Refuse a container image that no allowed prefix covers."""
        if not image:
            raise GuardrailViolation("images", "a container names no image, so it cannot be checked")
        if not any(_image_matches(image, allowed) for allowed in self.images):
            raise GuardrailViolation(
                "images", f"image {image!r} is not under any allowed image ({_listing(self.images)})"
            )

    def check_gpus(self, gpus: int, what: str = "the job") -> None:
        """Refuse more GPUs than the cap per job."""
        if gpus > self.max_gpus_per_job:
            raise GuardrailViolation("max_gpus_per_job", f"{what} asks {gpus} GPUs, the cap is {self.max_gpus_per_job}")

    # -- whole actions and jobs --------------------------------------------------------------------------

    def check_action(self, action: Action, request: PlanRequest | None = None) -> None:
        """Refuse an action whose training shape breaks a rule; Wait and Abort always pass.

        With the run's `request`, an action may shrink the job but never grow it past the GPUs asked for,
        and its namespace (the request's) must be allowed.
        """
        if isinstance(action, Wait | Abort):
            return
        self.check_gpus(action.gpus, f"the {action.kind} action")
        if request is not None:
            if action.gpus > request.gpus:
                raise GuardrailViolation(
                    "requested_gpus",
                    f"the {action.kind} action asks {action.gpus} GPUs, more than the {request.gpus} the run asked "
                    "for; the agent may shrink a job, never grow it",
                )
            self.check_namespace(request.namespace)
        self.check_queue(action.queue)
        self.check_priority_class(action.priority_class)

    def check_job(self, job: Job) -> None:
        """Refuse a rendered Volcano Job that breaks a rule: namespace, queue, images, priority classes, GPUs."""
        name = job.metadata.name or job.metadata.generate_name or "(unnamed)"
        self.check_namespace(job.metadata.namespace or "default")
        self.check_queue(job.spec.queue or "default")
        self.check_priority_class(job.spec.priority_class_name)
        gpus = 0
        for task in job.spec.tasks:
            spec = task.template.spec
            if spec.priority_class_name and spec.priority_class_name != job.spec.priority_class_name:
                self.check_priority_class(spec.priority_class_name)
            for container in [*spec.containers, *(spec.init_containers or [])]:
                self.check_image(container.image)
            gpus += task.replicas * pod_gpus(spec)
        self.check_gpus(gpus, f"job {name}")


def pod_gpus(spec: PodSpec) -> int:
    """GPUs one pod asks for: its containers' sum, or its largest init container when that is more."""

    def one(container: Any) -> int:
        resources = container.resources
        if resources is None:
            return 0
        # For extended resources Kubernetes requires requests == limits, and a missing request defaults to the limit.
        amount = (resources.requests or {}).get(GPU, (resources.limits or {}).get(GPU, 0))
        return int(parse_quantity(amount))

    running = sum(one(c) for c in spec.containers)
    init = max((one(c) for c in spec.init_containers or []), default=0)
    return max(running, init)


def _allowed(rule: str, what: str, name: str, allowed: list[str]) -> None:
    if ANY not in allowed and name not in allowed:
        raise GuardrailViolation(rule, f"{what} {name!r} is not one of the allowed {_listing(allowed)}")


def _listing(names: list[str]) -> str:
    return ", ".join(repr(n) if n else "none" for n in names)


def _image_matches(image: str, allowed: str) -> bool:
    """True when `image` is `allowed` itself, a tag or digest of it, or under it when it ends with "/"."""
    if allowed == ANY or image == allowed:
        return True
    if allowed.endswith(("/", ":", "@")):
        return image.startswith(allowed)
    return image.startswith((allowed + ":", allowed + "@"))
