"""The typed tools the agent offers an LLM and an MCP client: read the cluster, explain, plan, submit, cancel.

Each tool has a pydantic input and output model (their JSON schemas are what the LLM and the MCP client see)
and says whether it changes the cluster. `call_tool` is the one door: the guardrails' read-only switch first,
then the arguments, then the tool's own checks (namespace, queue, images, GPU cap) — and it never raises for a
bad argument, a refusal or a cluster error: it answers `ToolResult(ok=False, error=<one sentence>)`, naming the
guardrail rule when one refused.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from agent.guardrails import Guardrails, GuardrailViolation
from agent.observation import adapter, as_json
from agent.observe import find_checkpoint
from agent.pending import PendingExplanation, explain
from components.errors import VcpilotError
from components.errors import explain as explain_error
from components.finetune.checkpoint_layout import METADATA
from components.names import is_dns1123_label, is_dns1123_subdomain
from components.untrusted import printable
from components.volcano.builder import TrainingRequest, build_training_job
from components.volcano.cluster import Cluster, ClusterError, JobInfo, NodeInfo, QueueSnapshot
from components.volcano.models import Job, parse_job
from components.volcano.validation import describe_validation_error

__all__ = [
    "Cancelled",
    "CheckpointQuery",
    "JobRef",
    "LatestCheckpoint",
    "NoArguments",
    "NodeList",
    "PendingExplanation",
    "PlannedJob",
    "QueueRef",
    "TOOLS",
    "Tool",
    "ToolContext",
    "ToolResult",
    "call_tool",
    "input_schema",
    "openai_tools",
]


_MAX_ERROR = 1000  # characters of one error sentence: a 100 KB name is not echoed back whole

# ---- inputs --------------------------------------------------------------------------------------------


class _Input(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _object_name(value: str) -> str:
    # Checked before any cluster sees it: "." or ".." in a URL path would name the collection or its parent.
    if not is_dns1123_subdomain(value):
        raise ValueError("must be a Kubernetes object name: lower-case letters, digits, '-' and '.' (DNS-1123)")
    return value


def _namespace_name(value: str) -> str:
    if not is_dns1123_label(value):
        raise ValueError("must be a Kubernetes namespace: lower-case letters, digits and '-', at most 63 (DNS-1123)")
    return value


def _path(value: str) -> str:
    # A NUL stops the OS (Python's "embedded null byte"); no other control character belongs in a path we look in.
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise ValueError("must be a path without control characters")
    return value


ObjectName = Annotated[str, AfterValidator(_object_name)]
NamespaceName = Annotated[str, AfterValidator(_namespace_name)]


class NoArguments(_Input):
    """The tool takes no arguments."""


class QueueRef(_Input):
    """Which Volcano queue."""

    queue: ObjectName = Field(default="default", min_length=1, description="Name of the Volcano queue.")


class JobRef(_Input):
    """Which Volcano Job."""

    name: ObjectName = Field(min_length=1, description="Name of the Volcano Job.")
    namespace: NamespaceName = Field(default="default", min_length=1, description="Namespace of the job.")


class CheckpointQuery(_Input):
    """Where a run keeps its `step-N/` checkpoints."""

    directory: Annotated[str, AfterValidator(_path)] = Field(
        min_length=1,
        description="Checkpoint directory, relative to the checkpoints root (or absolute, but under it).",
    )


# ---- outputs -------------------------------------------------------------------------------------------


class NodeList(BaseModel):
    """Every node with its readiness and GPU accounting."""

    nodes: list[NodeInfo]


class LatestCheckpoint(BaseModel):
    """The newest complete checkpoint under `directory`; `found` is false (path "") when there is none."""

    directory: str
    found: bool
    path: str = ""
    step: int = 0


class PlannedJob(BaseModel):
    """A rendered, validated Volcano Job that passed the guardrails; `submitted` says whether it was sent."""

    name: str
    namespace: str
    queue: str
    gpus: int
    pods: int
    submitted: bool = False
    manifest: dict[str, Any]


class Cancelled(BaseModel):
    """A job whose deletion the cluster accepted; its pods stop within their grace period."""

    name: str
    namespace: str
    deleted: bool = True
    phase_before: str


# ---- the registry --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolContext:
    """What a tool call runs against: the cluster, the guardrails, and the root every checkpoint lies under."""

    cluster: Cluster
    guardrails: Guardrails = field(default_factory=Guardrails)
    checkpoints_root: Path | None = None


@dataclass(frozen=True)
class Tool:
    """One tool: its name and description for the model, typed input and output, and whether it mutates."""

    name: str
    description: str
    input_model: type[BaseModel]
    output_model: type[Any]  # a model, or a cluster's answer (a dataclass)
    mutating: bool
    run: Callable[[ToolContext, Any], Any]

    def output_schema(self) -> dict[str, Any]:
        """The JSON schema of the tool's output, as it is serialized."""
        return adapter(self.output_model).json_schema(mode="serialization")


class ToolResult(BaseModel):
    """A tool's answer: `data` (the output model as JSON) when ok, else one sentence in `error`.

    `rule` names the guardrail that refused the call, "" when none did.
    """

    model_config = ConfigDict(frozen=True)

    ok: bool
    data: dict[str, Any] = Field(default_factory=dict)
    error: str = ""
    rule: str = ""


def _get_queue_status(ctx: ToolContext, args: QueueRef) -> QueueSnapshot:
    return ctx.cluster.queue(args.queue)


def _list_nodes(ctx: ToolContext, args: NoArguments) -> NodeList:
    return NodeList(nodes=ctx.cluster.nodes())


def _get_job_status(ctx: ToolContext, args: JobRef) -> JobInfo:
    ctx.guardrails.check_namespace(args.namespace)
    return ctx.cluster.get(args.name, args.namespace)


def _explain_pending(ctx: ToolContext, args: JobRef) -> PendingExplanation:
    ctx.guardrails.check_namespace(args.namespace)
    cluster = ctx.cluster
    info = cluster.get(args.name, args.namespace)
    if info.phase != "Pending":
        return explain(info, None, [], None)
    try:
        job: Job | None = parse_job(cluster.get_object(args.name, args.namespace))
    except ValueError:
        job = None  # a manifest we cannot read still leaves the queue and node reasons
    try:
        queue: QueueSnapshot | None = cluster.queue(info.queue)
    except ClusterError:
        queue = None
    try:  # a queue is cluster-wide, but listing every namespace may be forbidden: then count only this one
        jobs = cluster.list_jobs()
    except ClusterError:
        jobs = cluster.list_jobs(namespace=info.namespace)
    ahead: list[JobInfo] = []
    for other in jobs:  # oldest first: those before this job were queued before it
        if (other.namespace, other.name) == (info.namespace, info.name):
            break
        if other.queue == info.queue and other.phase == "Pending":
            ahead.append(other)
    try:
        classes: list[str] | None = list(cluster.priority_classes())
    except ClusterError:
        classes = None  # unread: no class is called missing
    return explain(info, job, cluster.nodes(), queue, ahead, classes)


def _find_latest_checkpoint(ctx: ToolContext, args: CheckpointQuery) -> LatestCheckpoint:
    if ctx.checkpoints_root is None:
        raise ValueError("no checkpoints root is configured, so no directory can be searched")
    root = ctx.checkpoints_root.resolve()
    directory = (root / args.directory).resolve()  # an absolute `directory` replaces root here, then is checked
    if directory != root and root not in directory.parents:
        raise ValueError(f"directory {args.directory!r} is outside the checkpoints root {root}; give a path under it")
    latest = find_checkpoint(str(directory))
    if latest is None:
        return LatestCheckpoint(directory=str(directory), found=False)
    path, step = Path(latest.path), latest.step
    if root not in path.resolve().parents:  # a step-N symlink pointing elsewhere is not ours to hand out
        raise ValueError(f"checkpoint {path} resolves outside the checkpoints root {root}")
    return LatestCheckpoint(directory=str(directory), found=True, path=str(path), step=step)


def _plan(ctx: ToolContext, request: TrainingRequest) -> PlannedJob:
    # The cap before rendering: 10^30 GPUs is the guardrail's refusal, not a manifest's field out of range.
    ctx.guardrails.check_gpus(request.total_gpus, f"job {request.name}")
    job = build_training_job(request)
    ctx.guardrails.check_job(job)
    return PlannedJob(
        name=request.name,
        namespace=request.namespace,
        queue=request.queue,
        gpus=request.total_gpus,
        pods=request.pods,
        manifest=job.to_dict(),
    )


def _submit_training_job(ctx: ToolContext, request: TrainingRequest) -> JobInfo:
    planned = _plan(ctx, request)
    return ctx.cluster.submit(planned.manifest)


def _cancel_job(ctx: ToolContext, args: JobRef) -> Cancelled:
    ctx.guardrails.check_namespace(args.namespace)
    before = ctx.cluster.get(args.name, args.namespace)
    ctx.guardrails.check_cancel(f"{args.namespace}/{args.name}", before.labels)
    # Not waiting for the pods: a training pod may take minutes to checkpoint on SIGTERM, and the MCP server answers
    # one call at a time.
    ctx.cluster.delete(args.name, args.namespace, wait=False)
    return Cancelled(name=args.name, namespace=args.namespace, phase_before=before.phase)


_TRAINING = (
    "Arguments: name, image, command, total_gpus, gpus_per_pod, micro_batch, grad_accum, global_batch "
    "(= total_gpus × micro_batch × grad_accum), queue, priority_class, avoid_nodes, resume_checkpoint, env, labels."
)

TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            "get_queue_status",
            "State of a Volcano queue: open or closed, GPU capability and allocation, and the PodGroups pending, "
            "inqueue and running in it with the GPUs they ask for.",
            QueueRef,
            QueueSnapshot,
            False,
            _get_queue_status,
        ),
        Tool(
            "list_nodes",
            "Every node: ready or not, GPUs allocatable and allocated, labels and taints.",
            NoArguments,
            NodeList,
            False,
            _list_nodes,
        ),
        Tool(
            "get_job_status",
            "A Volcano Job's phase, retry count, PodGroup phase and pods (node, phase, reason, exit code).",
            JobRef,
            JobInfo,
            False,
            _get_job_status,
        ),
        Tool(
            "explain_pending",
            "Why a Volcano Job is Pending: the gang short by N GPUs, the queue at its capability or closed, nodes "
            "excluded (NotReady, taints, affinity), PodGroups ahead of it.",
            JobRef,
            PendingExplanation,
            False,
            _explain_pending,
        ),
        Tool(
            "find_latest_checkpoint",
            f"The newest complete checkpoint (a step-N directory with its {METADATA}) under a directory of the "
            "checkpoints root, and its step.",
            CheckpointQuery,
            LatestCheckpoint,
            False,
            _find_latest_checkpoint,
        ),
        Tool(
            "plan_training_job",
            "Render and validate the Volcano Job of a distributed training run and check it against the "
            "guardrails, without submitting anything. " + _TRAINING,
            TrainingRequest,
            PlannedJob,
            False,
            _plan,
        ),
        Tool(
            "submit_training_job",
            "Render, validate, check against the guardrails and submit the Volcano Job of a distributed training "
            "run. " + _TRAINING,
            TrainingRequest,
            JobInfo,
            True,
            _submit_training_job,
        ),
        Tool(
            "cancel_job",
            "Delete a Volcano Job and its pods; it returns once the deletion is accepted, and the pods stop within "
            "their grace period.",
            JobRef,
            Cancelled,
            True,
            _cancel_job,
        ),
    )
}


def call_tool(ctx: ToolContext, name: str, arguments: Any) -> ToolResult:
    """Run tool `name` with `arguments` (a JSON object); never raises for bad input, a refusal or a cluster error."""
    tool = TOOLS.get(name)
    if tool is None:
        close = difflib.get_close_matches(name, TOOLS, n=1)
        hint = f"did you mean {close[0]}?" if close else f"use one of {', '.join(TOOLS)}"
        return ToolResult(ok=False, error=_sentence(f"there is no tool {name!r}; {hint}"))
    try:
        ctx.guardrails.check_call(name, tool.mutating)
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ValueError(f"the arguments of {name} must be a JSON object, not {type(arguments).__name__}")
        try:
            parsed = tool.input_model.model_validate(arguments)
        except ValidationError as err:
            raise ValueError(f"bad arguments for {name}: {describe_validation_error(err, tool.input_model)}") from None
        output = tool.run(ctx, parsed)
    except GuardrailViolation as refusal:
        return ToolResult(ok=False, error=_sentence(explain_error(refusal)[0]), rule=refusal.rule)
    except VcpilotError as err:
        return ToolResult(ok=False, error=_sentence(explain_error(err)[0]))
    except ValidationError as err:  # a model the tool builds: a max_retry past what a manifest's int32 holds
        return ToolResult(ok=False, error=_sentence(describe_validation_error(err)))
    except ValueError as err:  # a request or manifest check (pydantic validators, components.volcano.validation)
        return ToolResult(ok=False, error=_sentence(str(err)))
    except OSError as err:
        return ToolResult(
            ok=False, error=_sentence(f"{name} could not read {err.filename or 'a file'}: {err.strerror}")
        )
    return ToolResult(ok=True, data=as_json(output))


def openai_tools(read_only: bool) -> list[dict[str, Any]]:
    """The OpenAI chat `tools` specs; in read-only mode the mutating tools are left out (call_tool refuses them too)."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": input_schema(t)},
        }
        for t in TOOLS.values()
        if not (read_only and t.mutating)
    ]


def input_schema(tool: Tool) -> dict[str, Any]:
    """The JSON schema of a tool's arguments: always an object with `properties`."""
    schema = tool.input_model.model_json_schema()
    schema.setdefault("properties", {})
    return schema


def _sentence(text: str) -> str:
    # An error quotes what the caller sent: one line, cut short, escaped as a terminal or a model should see it.
    return printable(" ".join(text.split()), _MAX_ERROR)
