"""core/v1's rules for a task's pod template, which Volcano's webhook runs (validateTaskTemplate), one sentence each."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from components.images import check_image
from components.names import check_label_key, check_label_value, is_dns1123_label, is_dns1123_subdomain, is_port_name
from components.volcano.resources import quantity_value

if TYPE_CHECKING:
    from components.volcano.models import Container, PodSpec

__all__ = ["check_pod"]

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


_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")


def check_pod(spec: PodSpec, where: str) -> None:
    """Raise ValueError, one sentence, for the first thing core/v1 ValidatePodSpec refuses in `spec` (at `where`)."""
    _check_node_affinity(f"{where}.affinity", spec.affinity)
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
    _check_host_ports(spec, where)
    _check_spread(spec.topology_spread_constraints or [], f"{where}.topologySpreadConstraints")
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
_HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")


def _check_container(container: Container, where: str) -> None:
    """core/v1 validateContainers beyond names: an image, known policies, environment variables, ports."""
    if not container.image:
        raise ValueError(f"{where}.image is required (LocalCluster runs the command, but Kubernetes needs an image)")
    check_image(container.image, f"{where}.image")  # the API server takes it, and the pod could never pull it
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
    for field, probe in (
        ("livenessProbe", container.liveness_probe),
        ("readinessProbe", container.readiness_probe),
        ("startupProbe", container.startup_probe),
    ):
        # validateProbe and validateHandler: one way to probe; only readiness may need more than one success
        if probe is None:
            continue
        if not isinstance(probe, dict) or sum(probe.get(handler) is not None for handler in _HANDLERS) != 1:
            raise ValueError(f"{where}.{field} must set exactly one of {', '.join(_HANDLERS)}")
        if field != "readinessProbe" and probe.get("successThreshold") not in (None, 1):
            raise ValueError(f"{where}.{field}.successThreshold must be 1, not {probe['successThreshold']!r}")


def _check_host_ports(spec: PodSpec, where: str) -> None:
    """A host port once per pod, its own port on hostNetwork (validatePodHostNetworkDeps, AccumulateUniqueHostPorts).

    With hostNetwork the API server's defaults make each containerPort a hostPort; an explicit other one is refused.
    """
    taken: set[tuple[Any, Any, Any]] = set()
    for kind, containers in (("initContainers", spec.init_containers or []), ("containers", spec.containers)):
        for position, container in enumerate(containers):
            for index, port in enumerate(container.ports or []):
                here = f"{where}.{kind}[{position}].ports[{index}]"
                host = port.get("hostPort")
                if spec.host_network:
                    if host is not None and host != port.get("containerPort"):
                        raise ValueError(
                            f"{here}.hostPort {host} must equal its containerPort {port.get('containerPort')} on "
                            "hostNetwork"
                        )
                    host = port.get("containerPort")
                if not host or kind == "initContainers":
                    continue
                key = (host, port.get("protocol") or "TCP", port.get("hostIP") or "")
                if key in taken:
                    raise ValueError(f"{here} asks for host port {host}/{key[1]}, which another port of the pod has")
                taken.add(key)


_WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")


def _check_spread(constraints: list[dict[str, Any]], where: str) -> None:
    """core/v1 validateTopologySpreadConstraints: a skew above 0, a key, a known action, each pair once."""
    seen: set[tuple[str, str]] = set()
    for index, constraint in enumerate(constraints):
        here = f"{where}[{index}]"
        if not isinstance(constraint, dict):
            raise ValueError(f"{here} must be a mapping of fields (maxSkew, topologyKey, whenUnsatisfiable)")
        skew, key, when = constraint.get("maxSkew"), constraint.get("topologyKey"), constraint.get("whenUnsatisfiable")
        if isinstance(skew, bool) or not isinstance(skew, int) or skew <= 0:
            raise ValueError(f"{here}.maxSkew must be a whole number greater than 0, got {skew!r}")
        if not isinstance(key, str) or not key:
            raise ValueError(f"{here}.topologyKey is required (a node label such as topology.kubernetes.io/zone)")
        try:
            check_label_key(key)
        except ValueError as err:
            raise ValueError(f"{here}.topologyKey: {err}") from None
        if when not in _WHEN_UNSATISFIABLE:
            raise ValueError(f"{here}.whenUnsatisfiable {when!r} is not one of {', '.join(_WHEN_UNSATISFIABLE)}")
        if (key, when) in seen:
            raise ValueError(f"{here} repeats topologyKey {key!r} with whenUnsatisfiable {when}")
        seen.add((key, when))
        domains = constraint.get("minDomains")
        if domains is not None and (isinstance(domains, bool) or not isinstance(domains, int) or domains <= 0):
            raise ValueError(f"{here}.minDomains must be a whole number greater than 0, got {domains!r}")
        if domains is not None and when != "DoNotSchedule":
            raise ValueError(f"{here} sets minDomains, which only whenUnsatisfiable DoNotSchedule may have")


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
        _check_volume_source(sources[0], volume[sources[0]], f"{where}[{index}].{sources[0]}")
        names.add(name)
    return names


# The field that names what a source reads (validatePersistentClaimVolumeSource, validateConfigMapVolumeSource …).
_SOURCE_NAMES = {"persistentVolumeClaim": "claimName", "configMap": "name", "secret": "secretName"}
_HOST_PATH_TYPES = ("", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice", "BlockDevice")


def _check_volume_source(kind: str, source: Any, where: str) -> None:
    """core/v1 validateVolumeSource for the sources a training pod uses: what each names, host paths, sizes."""
    if not isinstance(source, dict):
        raise ValueError(f"{where} must be a mapping of fields")
    field = _SOURCE_NAMES.get(kind)
    if field and not (isinstance(source.get(field), str) and source[field]):
        raise ValueError(f"{where}.{field} is required")
    if kind == "hostPath":
        path, host_type = source.get("path"), source.get("type") or ""
        if not isinstance(path, str) or not path:
            raise ValueError(f"{where}.path is required")
        if ".." in path.split("/"):
            raise ValueError(f"{where}.path {path!r} must not contain '..'")
        if host_type not in _HOST_PATH_TYPES:
            raise ValueError(f"{where}.type {host_type!r} is not one of {', '.join(t for t in _HOST_PATH_TYPES if t)}")
    if kind == "emptyDir" and source.get("sizeLimit") is not None:
        try:
            if quantity_value(source["sizeLimit"]) < 0:
                raise ValueError("negative")
        except ValueError:
            raise ValueError(f"{where}.sizeLimit {source['sizeLimit']!r} must be a size such as 1Gi") from None


_PROPAGATIONS = ("None", "HostToContainer", "Bidirectional")


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
        sub_path, sub_path_expr = mount.get("subPath") or "", mount.get("subPathExpr") or ""
        if sub_path and sub_path_expr:
            raise ValueError(f"{where}[{index}] must set subPath or subPathExpr, not both")
        for field, value in (("subPath", sub_path), ("subPathExpr", sub_path_expr)):
            # validateLocalDescendingPath: a path inside the volume
            if value and (not isinstance(value, str) or value.startswith("/") or ".." in value.split("/")):
                raise ValueError(f"{where}[{index}].{field} {value!r} must be a relative path without '..'")
        propagation = mount.get("mountPropagation")
        if propagation is not None and propagation not in _PROPAGATIONS:
            raise ValueError(
                f"{where}[{index}].mountPropagation {propagation!r} is not one of {', '.join(_PROPAGATIONS)}"
            )
        if not isinstance(mount.get("readOnly", False), bool):
            raise ValueError(f"{where}[{index}].readOnly must be true or false, not {mount['readOnly']!r}")
