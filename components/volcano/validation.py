"""What Volcano's admission checks would refuse, caught before a manifest ever reaches the cluster."""

from __future__ import annotations

import difflib
import types
from typing import TYPE_CHECKING, Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from components.names import is_dns1123_label, is_dns1123_subdomain
from components.volcano.podspec import check_pod
from components.volcano.resources import parse_quantity

if TYPE_CHECKING:
    from components.volcano.models import Job, LifecyclePolicy, NetworkTopology, TaskSpec, VolumeSpec

__all__ = [
    "KNOWN_PLUGINS",
    "SVC_PLUGINS",
    "USER_ACTIONS",
    "USER_EVENTS",
    "describe_validation_error",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "validate_job",
]


# The subsets of the CRD enums that pkg/webhooks/admission/jobs/validate/util.go lets users write; the
# others (PodRunning, OutOfSync, CommandIssued; SyncJob, EnqueueJob, the queue actions) are internal.
USER_EVENTS = frozenset(
    {"*", "PodFailed", "PodEvicted", "PodPending", "Unknown", "TaskCompleted", "TaskFailed", "JobUpdated"}
)
USER_ACTIONS = frozenset(
    {
        "AbortJob",
        "RestartJob",
        "RestartTask",
        "RestartPod",
        "RestartPartition",
        "TerminateJob",
        "CompleteJob",
        "ResumeJob",
    }
)
# Plugins registered in pkg/controllers/job/plugins/factory.go.
KNOWN_PLUGINS = frozenset({"ssh", "env", "svc", "tensorflow", "mpi", "pytorch", "hcclrank", "ray"})
_POD_NAME_MAX = 63
# The plugins that need the svc plugin: Volcano's mutating webhook adds it beside them (patchDefaultPlugins).
SVC_PLUGINS = frozenset({"pytorch", "tensorflow", "mpi", "ray"})


def validate_job(job: Job, *, batch: bool = False) -> None:
    """Raise ValueError, one sentence, for the first thing Volcano's admission would refuse in `job`.

    Covers the CRD schema, the ValidatingAdmissionPolicy and the validating webhook of v1.15 as far as
    they need no cluster (queue existence and state are checked at submit time). With `batch`, `job` stands for a
    batch/v1 Job (objects.batch_to_volcano): its pods are named by the Job controller, so Volcano's pod-name rule
    is not its.
    """
    spec = job.spec
    _check_job_name(job)
    if not spec.tasks:
        raise ValueError("spec.tasks must list at least one task")
    for field, value, low in (
        ("minAvailable", spec.min_available, 0),
        ("maxRetry", spec.max_retry, 0),
        ("ttlSecondsAfterFinished", spec.ttl_seconds_after_finished, 0),
        ("minSuccess", spec.min_success, 1),
    ):
        if value is not None and value < low:
            raise ValueError(f"spec.{field} is {value} but must be at least {low}")
    _check_network_topology(spec.network_topology, "spec.networkTopology")

    seen: set[str] = set()
    for index, task in enumerate(spec.tasks):
        if task.name in seen:
            raise ValueError(f"spec.tasks[{index}].name {task.name!r} is used by two tasks; task names must be unique")
        seen.add(task.name)
        _check_task(job, index, task, pod_names=not batch)

    total = sum(task.replicas for task in spec.tasks)
    if spec.min_available is not None and spec.min_available > total:
        raise ValueError(f"spec.minAvailable {spec.min_available} is greater than the {total} replicas of all tasks")
    _check_policies(spec.policies, "spec.policies")
    _check_plugins(job)
    _check_volumes(spec.volumes or [])
    _check_dependencies(spec.tasks)


def _check_job_name(job: Job) -> None:
    # A namespace is a DNS-1123 label on the API server; LocalCluster also makes it a folder of its pods' logs.
    namespace = job.metadata.namespace
    if namespace and not is_dns1123_label(namespace):
        raise ValueError(
            f"metadata.namespace {namespace!r} must be a lowercase RFC 1123 label (a-z, 0-9 and '-', at most 63 "
            "characters)"
        )
    name = job.metadata.name
    if not name:
        if job.metadata.generate_name:
            return
        raise ValueError("metadata.name is required")
    # The API server wants a DNS-1123 subdomain; the webhook adds IsQualifiedName's 63-character limit.
    if len(name) > 63 or not is_dns1123_subdomain(name):
        raise ValueError(
            f"job name {name!r} must be at most 63 characters of a-z, 0-9, '-' and '.', "
            "starting and ending with a letter or digit"
        )


def _check_task(job: Job, index: int, task: TaskSpec, *, pod_names: bool) -> None:
    where = f"spec.tasks[{index}]"
    if not is_dns1123_label(task.name):
        raise ValueError(
            f"{where}.name {task.name!r} must be a lowercase RFC 1123 label (a-z, 0-9 and '-', "
            "at most 63 characters, starting and ending with a letter or digit)"
        )
    if task.replicas < 0:
        raise ValueError(f"{where}.replicas is {task.replicas} but must be at least 0")
    if task.min_available is not None:
        if task.min_available < 0:
            raise ValueError(f"{where}.minAvailable is {task.min_available} but must be at least 0")
        if task.min_available > task.replicas:
            raise ValueError(f"{where}.minAvailable {task.min_available} is greater than its replicas {task.replicas}")
    if task.max_retry is not None and task.max_retry < 0:
        raise ValueError(f"{where}.maxRetry is {task.max_retry} but must be at least 0")
    _check_policies(task.policies, f"{where}.policies")
    # Pods are named <job>-<task>-<i>. The webhook holds the name with the task's position as i to 63 characters
    # (validateK8sPodNameLength); a longer pod name is fine on its own. The svc plugin makes each pod's name its
    # hostname, a 63-character label the API server enforces on every pod, so with it the last replica's must fit.
    if job.metadata.name and pod_names:
        plugins = job.spec.plugins or {}
        hostname = "svc" in plugins or bool(SVC_PLUGINS & plugins.keys())
        pod_name = f"{job.metadata.name}-{task.name}-{max(task.replicas - 1, 0) if hostname else index}"
        if len(pod_name) > _POD_NAME_MAX:
            limit = "the hostname the svc plugin makes of it holds" if hostname else "Volcano allows"
            raise ValueError(
                f"pod name {pod_name!r} would be {len(pod_name)} characters, over the {_POD_NAME_MAX} {limit}; "
                "shorten the job or task name"
            )
    if not task.template.spec.containers:
        raise ValueError(f"{where}.template.spec.containers must list at least one container")
    check_pod(task.template.spec, f"{where}.template.spec")
    if task.topology_policy not in (None, "none"):
        # validateTaskTopoPolicy: every container, init containers too, requests whole CPUs; a container's limits
        # stand in for its requests only when it has no requests at all (the template is read before defaulting).
        spec = task.template.spec
        for kind, containers in (("containers", spec.containers), ("initContainers", spec.init_containers or [])):
            for position, container in enumerate(containers):
                resources = container.resources
                amounts = (resources.requests or resources.limits or {}) if resources else {}
                cpu = parse_quantity(amounts.get("cpu", 0))
                if cpu <= 0 or cpu != int(cpu):
                    raise ValueError(
                        f"{where}.template.spec.{kind}[{position}] needs a whole number of CPUs requested because "
                        f"topologyPolicy is {task.topology_policy!r}"
                    )
    _check_partition_policy(task, where)


def _check_partition_policy(task: TaskSpec, where: str) -> None:
    policy = task.partition_policy
    if policy is None:
        return
    total, size, minimum = policy.total_partitions or 0, policy.partition_size or 0, policy.min_partitions or 0
    if total <= 0 or size <= 0:
        raise ValueError(f"{where}.partitionPolicy needs totalPartitions and partitionSize greater than 0")
    if task.replicas != total * size:
        raise ValueError(
            f"{where}.replicas {task.replicas} must equal totalPartitions × partitionSize = {total} × {size}"
        )
    if task.min_available is not None and minimum > 0 and minimum * size != task.min_available:
        raise ValueError(
            f"{where}.minAvailable {task.min_available} must equal minPartitions × partitionSize = {minimum} × {size}"
        )
    _check_network_topology(policy.network_topology, f"{where}.partitionPolicy.networkTopology")


def _check_network_topology(topology: NetworkTopology | None, where: str) -> None:
    if topology and topology.highest_tier_allowed is not None and topology.highest_tier_name:
        raise ValueError(f"{where} must not set both highestTierAllowed and highestTierName")


def _check_policies(policies: list[LifecyclePolicy] | None, where: str) -> None:
    events_seen: set[str] = set()
    codes_seen: set[int] = set()
    for index, policy in enumerate(policies or []):
        here = f"{where}[{index}]"
        events = list(dict.fromkeys([*(policy.events or []), *([policy.event] if policy.event else [])]))
        if events and policy.exit_code is not None:
            raise ValueError(f"{here} must not set both an event and an exitCode")
        if not events and policy.exit_code is None:
            raise ValueError(f"{here} must set an event, events or an exitCode")
        if policy.exit_code is not None:
            # validatePolicies checks neither the action of an exitCode policy nor that it has one: the job
            # controller syncs the job on a matching exit instead (its default), and so does LocalCluster.
            if policy.exit_code == 0:
                raise ValueError(f"{here}.exitCode 0 is not an error code; use a non-zero exit code")
            if policy.exit_code in codes_seen:
                raise ValueError(f"{here}.exitCode {policy.exit_code} appears in two policies")
            codes_seen.add(policy.exit_code)
            continue
        if not policy.action:
            raise ValueError(f"{here} needs an action such as RestartJob")
        if policy.action not in USER_ACTIONS:
            raise ValueError(f"{here}.action {policy.action!r} is not one of {', '.join(sorted(USER_ACTIONS))}")
        for event in events:
            if event not in USER_EVENTS:
                raise ValueError(f"{here} event {event!r} is not one of {', '.join(sorted(USER_EVENTS))}")
            if event in events_seen:
                raise ValueError(f"{here} event {event!r} appears in two policies")
            events_seen.add(event)
    if "*" in events_seen and len(events_seen) > 1:
        raise ValueError(f"{where} uses the '*' event, so it must not name any other event")


def _plugin_task(args: list[str], flag: str, default: str) -> str:
    for arg in args:
        if arg.startswith(f"--{flag}="):
            return arg.split("=", 1)[1]
    return default


def _check_plugins(job: Job) -> None:
    plugins = job.spec.plugins or {}
    for name in plugins:
        if name not in KNOWN_PLUGINS:
            raise ValueError(f"spec.plugins names {name!r}, which is not one of {', '.join(sorted(KNOWN_PLUGINS))}")
    # The webhook checks mpi's master task alone: the pytorch plugin, finding none, sets no MASTER_ADDR (localstate.py
    # does the same) and the job is admitted.
    if "mpi" in plugins:
        master = _plugin_task(plugins["mpi"], "master", "master")
        if master not in {task.name for task in job.spec.tasks}:
            raise ValueError(f"the mpi plugin needs a task named {master!r}, but the job has none")


def _check_volumes(volumes: list[VolumeSpec]) -> None:
    """Volcano's validateIO and the CRD's mountPath pattern: a path each, none twice, one claim each."""
    paths: set[str] = set()
    for index, volume in enumerate(volumes):
        where = f"spec.volumes[{index}]"
        path = volume.mount_path
        if not path:
            raise ValueError(f"{where}.mountPath is required")
        if ":" in path:
            raise ValueError(f"{where}.mountPath {path!r} must not contain ':'")
        if path in paths:
            raise ValueError(f"{where}.mountPath {path!r} is mounted twice")
        paths.add(path)
        claim, claim_name = volume.volume_claim, volume.volume_claim_name
        if claim is None and not claim_name:
            raise ValueError(f"{where} needs volumeClaimName (an existing PVC) or volumeClaim (a new one)")
        if claim is not None and claim_name:
            raise ValueError(f"{where} must set volumeClaimName or volumeClaim, not both")


def _check_dependencies(tasks: list[TaskSpec]) -> None:
    names = {task.name for task in tasks}
    needs: dict[str, list[str]] = {}
    for task in tasks:
        needs[task.name] = list(task.depends_on.name or []) if task.depends_on else []
        for dependency in needs[task.name]:
            if dependency not in names:
                raise ValueError(f"task {task.name!r} depends on {dependency!r}, which is not a task of this job")
    done: set[str] = set()
    remaining = dict(needs)
    while remaining:
        ready = [name for name, deps in remaining.items() if all(dep in done for dep in deps)]
        if not ready:
            raise ValueError(f"the dependsOn of tasks {', '.join(sorted(remaining))} form a cycle")
        for name in ready:
            done.add(name)
            del remaining[name]


def describe_validation_error(error: ValidationError, model: type[BaseModel] | None = None) -> str:
    """Turn pydantic's multi-line report into one sentence about its first error.

    With `model`, an unknown field gets a "did you mean" from the fields that are allowed where it stands.
    """
    first = error.errors(include_url=False)[0]
    loc = tuple(first.get("loc", ()))
    path = _format_loc(loc)
    kind, ctx, value = first["type"], first.get("ctx") or {}, first.get("input")
    if kind == "extra_forbidden":
        message = f"unknown field {path}"
        if model is not None and loc and isinstance(loc[-1], str):
            close = difflib.get_close_matches(loc[-1], _fields_at(model, loc[:-1]), n=1)
            if close:
                message += f" (did you mean {close[0]}?)"
        return message
    if kind == "missing":
        detail = "field is required"
    elif kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        words = {
            "greater_than_equal": "at least",
            "greater_than": "greater than",
            "less_than_equal": "at most",
            "less_than": "less than",
        }[kind]
        bound = next(iter(ctx.values()))
        detail = f"value must be {words} {bound}, got {_short(value)}"
    elif kind in ("too_short", "string_too_short"):
        least = ctx.get("min_length", 1)
        detail = "must not be empty" if least == 1 else f"needs at least {least} items, got {_short(value)}"
    elif kind in _EXPECTED:
        detail = f"expected {_EXPECTED[kind]}, got {_short(value)}"
        if kind == "string_type" and isinstance(value, bool):  # `name: n` or `on: yes`, read as YAML 1.1 reads it
            detail += " (YAML reads y, n, yes, no, on, off, true and false as booleans: quote the text)"
    elif kind == "literal_error":
        detail = f"{_short(value)} is not allowed; use {ctx.get('expected', 'one of the listed values')}"
    elif kind in ("value_error", "assertion_error"):
        detail = str(ctx.get("error", first["msg"]))
    else:
        msg = first["msg"]
        detail = f"{msg[:1].lower()}{msg[1:]}, got {_short(value)}"
    detail = " ".join(detail.split())
    return f"{path}: {detail}" if path else detail


_EXPECTED = {
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "string_type": "text",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def _format_loc(loc: tuple[Any, ...]) -> str:
    """A field's place, `spec.tasks[0].name`, as an error sentence names it.

    A key that is empty or holds a space or a control character is quoted, as Python writes it, so that the
    sentence stays one line and the key can be found.
    """
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
            continue
        name = str(part)
        if not name or not name.isprintable() or any(c.isspace() for c in name):
            name = repr(name)
        text += f".{name}" if text else name
    return text


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _unwrap(annotation: Any) -> Any:
    """Strip Annotated and Optional so that what remains is a model, list or dict type."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            options = [arg for arg in get_args(annotation) if arg is not type(None)]
            annotation = options[0] if len(options) == 1 else annotation
            if len(options) != 1:
                return annotation
        else:
            return annotation


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Return the aliases of the model reached by following `loc` from `model`; [] if there is none."""
    current: Any = model
    for part in loc:
        current = _unwrap(current)
        origin = get_origin(current)
        if isinstance(current, type) and issubclass(current, BaseModel) and isinstance(part, str):
            field = next((f for n, f in current.model_fields.items() if part in (n, f.alias)), None)
            if field is None:
                return []
            current = field.annotation
        elif origin is list and isinstance(part, int):
            current = get_args(current)[0]
        elif origin is dict and isinstance(part, str):
            current = get_args(current)[1]
        else:
            return []
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [field.alias or name for name, field in current.model_fields.items()]
    return []
