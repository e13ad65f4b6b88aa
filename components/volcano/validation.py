"""What Volcano's admission checks would refuse, caught before a manifest ever reaches the cluster."""

from __future__ import annotations

import difflib
import types
from typing import TYPE_CHECKING, Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from components.names import (
    check_label_key,
    check_label_value,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_port_name,
)
from components.volcano.resources import parse_quantity

if TYPE_CHECKING:
    from components.volcano.models import (
        Container,
        Job,
        LifecyclePolicy,
        NetworkTopology,
        TaskSpec,
        VolumeSpec,
    )

__all__ = [
    "KNOWN_PLUGINS",
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


def validate_job(job: Job) -> None:
    """Raise ValueError, one sentence, for the first thing Volcano's admission would refuse in `job`.

    Covers the CRD schema, the ValidatingAdmissionPolicy and the validating webhook of v1.15 as far as
    they need no cluster (queue existence and state are checked at submit time).
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
        _check_task(job, index, task)

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


_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _check_node_affinity(where: str, affinity: dict[str, Any] | None) -> None:
    """Refuse a node affinity of another shape than Kubernetes' (what the scheduler reads), naming the field."""
    node_affinity = (affinity or {}).get("nodeAffinity")
    if node_affinity is None:
        return
    if not isinstance(node_affinity, dict):
        raise ValueError(f"{where}.nodeAffinity must be an object (requiredDuringSchedulingIgnoredDuringExecution …)")
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    where = f"{where}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    if required is None:
        return
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    if not isinstance(terms, list) or not terms or not all(isinstance(term, dict) for term in terms):
        raise ValueError(f"{where} must be an object whose nodeSelectorTerms lists at least one term")
    for t, term in enumerate(terms):
        for kind in ("matchExpressions", "matchFields"):
            expressions = term.get(kind) or []
            if not isinstance(expressions, list):
                raise ValueError(f"{where}.nodeSelectorTerms[{t}].{kind} must be a list")
            for e, expression in enumerate(expressions):
                at = f"{where}.nodeSelectorTerms[{t}].{kind}[{e}]"
                if not isinstance(expression, dict) or not isinstance(expression.get("key"), str):
                    raise ValueError(f"{at} must be an object with a key, an operator and values")
                if expression.get("operator") not in _OPERATORS:
                    raise ValueError(
                        f"{at}.operator {expression.get('operator')!r} is not one of {', '.join(_OPERATORS)}"
                    )
                values = expression.get("values") or []
                if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                    raise ValueError(f"{at}.values must be a list of strings")


def _check_task(job: Job, index: int, task: TaskSpec) -> None:
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
    # Pods are named <job>-<task>-<index> and that name becomes the pod's hostname, a 63-character label.
    # The webhook only checks the task's position as index; the longest real name uses replicas - 1.
    if job.metadata.name:
        pod_name = f"{job.metadata.name}-{task.name}-{max(task.replicas - 1, 0)}"
        if len(pod_name) > _POD_NAME_MAX:
            raise ValueError(
                f"pod name {pod_name!r} would be {len(pod_name)} characters, over Kubernetes' limit of "
                f"{_POD_NAME_MAX}; shorten the job or task name"
            )
    if not task.template.spec.containers:
        raise ValueError(f"{where}.template.spec.containers must list at least one container")
    _check_node_affinity(f"{where}.template.spec.affinity", task.template.spec.affinity)
    _check_pod(task, f"{where}.template.spec")
    if task.topology_policy not in (None, "none"):
        for position, container in enumerate(task.template.spec.containers):
            resources = container.resources
            amounts = {**(resources.limits or {}), **(resources.requests or {})} if resources else {}
            cpu = parse_quantity(amounts.get("cpu", 0))
            if cpu <= 0 or cpu != int(cpu):
                raise ValueError(
                    f"{where}.template.spec.containers[{position}] needs a whole number of CPUs because "
                    f"topologyPolicy is {task.topology_policy!r}"
                )
    _check_partition_policy(task, where)


_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")


def _check_pod(task: TaskSpec, where: str) -> None:
    """The API server's rules for a pod's containers and restart policy (core/v1 ValidatePodSpec), one sentence."""
    spec = task.template.spec
    # An empty policy is unset: the API server's defaults (SetDefaults_PodSpec) fill it in before validating.
    for field, value, allowed in (
        ("restartPolicy", spec.restart_policy, _RESTART_POLICIES),
        ("dnsPolicy", spec.dns_policy, _DNS_POLICIES),
    ):
        if value and value not in allowed:
            raise ValueError(f"{where}.{field} {value!r} is not one of {', '.join(allowed)}")
    seen: set[str] = set()
    for kind, containers in (("initContainers", spec.init_containers or []), ("containers", spec.containers)):
        for position, container in enumerate(containers):
            if not is_dns1123_label(container.name):
                raise ValueError(
                    f"{where}.{kind}[{position}].name {container.name!r} must be a lowercase RFC 1123 label (a-z, "
                    "0-9 and '-', at most 63 characters)"
                )
            if container.name in seen:
                raise ValueError(f"{where}.{kind}[{position}].name {container.name!r} is used by two containers")
            seen.add(container.name)
            _check_container(container, f"{where}.{kind}[{position}]")
    for field, value in (
        ("serviceAccountName", spec.service_account_name),
        ("schedulerName", spec.scheduler_name),
        ("nodeName", spec.node_name),
        ("priorityClassName", spec.priority_class_name),
    ):
        if value and not is_dns1123_subdomain(value):
            raise ValueError(f"{where}.{field} {value!r} must be a lowercase RFC 1123 name (a-z, 0-9, '-' and '.')")
    for field, value in (("hostname", spec.hostname), ("subdomain", spec.subdomain)):
        if value is not None and not is_dns1123_label(value):
            raise ValueError(f"{where}.{field} {value!r} must be a lowercase RFC 1123 label (a-z, 0-9 and '-')")
    _check_tolerations(spec.tolerations or [], f"{where}.tolerations")
    volumes = _check_pod_volumes(spec.volumes or [], f"{where}.volumes")
    for kind, containers in (("initContainers", spec.init_containers or []), ("containers", spec.containers)):
        for position, container in enumerate(containers):
            _check_mounts(container.volume_mounts or [], volumes, f"{where}.{kind}[{position}].volumeMounts")


_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")
# core/v1 validateEnvVarValueFrom: where a variable's value comes from, one of these exactly.
_ENV_SOURCES = ("configMapKeyRef", "fieldRef", "resourceFieldRef", "secretKeyRef")
_PROTOCOLS = ("TCP", "UDP", "SCTP")


def _check_container(container: Container, where: str) -> None:
    """core/v1 validateContainers beyond names: an image, known policies, environment variables, ports."""
    if not container.image:
        raise ValueError(f"{where}.image is required (LocalCluster runs the command, but Kubernetes needs an image)")
    for field, value, allowed in (
        ("imagePullPolicy", container.image_pull_policy, _PULL_POLICIES),
        ("terminationMessagePolicy", container.termination_message_policy, _MESSAGE_POLICIES),
    ):
        if value and value not in allowed:  # empty is unset: defaulted before validation
            raise ValueError(f"{where}.{field} {value!r} is not one of {', '.join(allowed)}")
    for index, env in enumerate(container.env or []):
        # The relaxed rule (Kubernetes 1.32+): printable ASCII but '='; a '=' also cannot be passed to a process.
        if not env.name or "=" in env.name or not all(" " <= char <= "~" for char in env.name):
            raise ValueError(f"{where}.env[{index}].name {env.name!r} must be printable ASCII without '='")
        if env.value and env.value_from:
            raise ValueError(f"{where}.env[{index}] {env.name!r} must set value or valueFrom, not both")
        if env.value_from is not None and (len(env.value_from) != 1 or set(env.value_from) - set(_ENV_SOURCES)):
            raise ValueError(
                f"{where}.env[{index}].valueFrom of {env.name!r} must set exactly one of {', '.join(_ENV_SOURCES)}"
            )
    port_names: set[str] = set()
    for index, port in enumerate(container.ports or []):
        here = f"{where}.ports[{index}]"
        name = port.get("name")
        if name is not None and name != "":
            if not isinstance(name, str) or not is_port_name(name):
                raise ValueError(
                    f"{here}.name {name!r} must be at most 15 of a-z, 0-9 and '-', with a letter, no '--' and "
                    "no '-' at either end"
                )
            if name in port_names:
                raise ValueError(f"{here}.name {name!r} names two ports of the container")
            port_names.add(name)
        for field in ("containerPort", "hostPort"):
            number = port.get(field)
            if (number is not None or field == "containerPort") and (
                isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= 65535
            ):
                raise ValueError(f"{here}.{field} must be a port number from 1 to 65535, got {number!r}")
        if port.get("protocol", "TCP") not in _PROTOCOLS:
            raise ValueError(f"{here}.protocol {port['protocol']!r} is not one of {', '.join(_PROTOCOLS)}")


_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _check_tolerations(tolerations: list[dict[str, Any]], where: str) -> None:
    """core/v1 ValidateTolerations: a qualified key, Equal or Exists, a label-like value, a known effect."""
    for index, toleration in enumerate(tolerations):
        here = f"{where}[{index}]"
        for field in ("key", "operator", "value", "effect"):
            if not isinstance(toleration.get(field, ""), str):
                raise ValueError(f"{here}.{field}: expected text, got {toleration[field]!r}")
        key, value, effect = toleration.get("key", ""), toleration.get("value", ""), toleration.get("effect", "")
        operator = toleration.get("operator") or "Equal"
        try:
            if key:
                check_label_key(key)
            check_label_value(value)
        except ValueError as err:
            raise ValueError(f"{here}: {err}") from None
        if operator not in ("Equal", "Exists"):
            raise ValueError(f"{here}.operator {operator!r} is not Equal or Exists")
        if operator == "Exists" and value:
            raise ValueError(f"{here} has operator Exists, so it must not set a value")
        if not key and operator != "Exists":
            raise ValueError(f"{here} has no key, so its operator must be Exists (to tolerate every taint)")
        if effect and effect not in _EFFECTS:
            raise ValueError(f"{here}.effect {effect!r} is not one of {', '.join(_EFFECTS)}")
        if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
            raise ValueError(f"{here} sets tolerationSeconds, which only a NoExecute effect may have")


def _check_pod_volumes(volumes: list[dict[str, Any]], where: str) -> set[str]:
    """core/v1 ValidateVolumes: unique DNS-1123 names, one source each. Returns the names."""
    names: set[str] = set()
    for index, volume in enumerate(volumes):
        name, sources = volume.get("name"), sorted(key for key in volume if key != "name")
        if not isinstance(name, str) or not is_dns1123_label(name):
            raise ValueError(f"{where}[{index}].name {name!r} must be a lowercase RFC 1123 label (a-z, 0-9 and '-')")
        if name in names:
            raise ValueError(f"{where}[{index}].name {name!r} is used by two volumes")
        if len(sources) != 1:
            found = f"sets {' and '.join(sources)}" if sources else "has none"
            raise ValueError(
                f"{where}[{index}] needs exactly one source such as emptyDir or persistentVolumeClaim; it {found}"
            )
        names.add(name)
    return names


def _check_mounts(mounts: list[dict[str, Any]], volumes: set[str], where: str) -> None:
    """core/v1 ValidateVolumeMounts: each mounts a volume of the pod at a path, no path twice."""
    paths: set[str] = set()
    for index, mount in enumerate(mounts):
        name, path = mount.get("name"), mount.get("mountPath")
        if name not in volumes:
            raise ValueError(f"{where}[{index}].name {name!r} is not a volume of the pod (spec.volumes)")
        if not isinstance(path, str) or not path:
            raise ValueError(f"{where}[{index}].mountPath is required")
        if path in paths:
            raise ValueError(f"{where}[{index}].mountPath {path!r} is mounted twice")
        paths.add(path)


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
    names = {task.name for task in job.spec.tasks}
    # The webhook checks mpi's master task; pytorch without its master task silently sets no MASTER_ADDR.
    for plugin in ("mpi", "pytorch"):
        if plugin in plugins:
            master = _plugin_task(plugins[plugin], "master", "master")
            if master not in names:
                raise ValueError(f"the {plugin} plugin needs a task named {master!r}, but the job has none")


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
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
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
