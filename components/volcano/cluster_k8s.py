"""KubeCluster: the Cluster protocol over a real API server running Volcano, through the official `kubernetes` client.

Calls go through `k8s_api.Api` (bounded retries, errors as one sentence); objects travel as the API server's
JSON and `k8s_status` turns them into the protocol's models. `wait` watches the job and survives a dropped
watch and 410 Gone.

Submission does what Volcano's admission webhooks would (defaults, validation, an Open queue), because a
cluster may run without them (our e2e control plane does), and records a hash of the submitted spec in an
annotation, so that resubmitting the same manifest is recognised as such although the API server adds
defaults to what it stores.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from components.volcano import k8s_status
from components.volcano.cluster import (
    FINISHED_PHASES,
    ClusterError,
    Conflict,
    Event,
    Invalid,
    JobInfo,
    JobNotFound,
    NodeInfo,
    NodeNotFound,
    QueueNotFound,
    QueueSnapshot,
    Timeout,
)
from components.volcano.k8s_api import BATCH, MERGE_PATCH, REQUEST_TIMEOUT, SCHEDULING, Api, backoff_delay, is_retryable
from components.volcano.k8s_status import JOB_NAME, Obj
from components.volcano.models import Job, apply_volcano_defaults, parse_job, validate_job
from components.volcano.objects import BATCH_JOB
from components.volcano.scheduling_models import Queue, parse_queue
from components.volcano.validation import is_dns1123_label, is_dns1123_subdomain

__all__ = ["KWOK_NODE_NOT_READY", "KWOK_POD_FAILED", "SPEC_HASH", "KubeCluster", "spec_hash", "spec_matches"]

SPEC_HASH = "vcpilot.io/spec-hash"
# kwok's chaos labels in deploy/e2e/config/kwok.yaml: a labelled node turns NotReady, a labelled pod fails.
KWOK_NODE_NOT_READY = "node-not-ready.stage.kwok.x-k8s.io"
KWOK_POD_FAILED = "pod-failed.stage.kwok.x-k8s.io"


def spec_hash(spec: Mapping[str, Any]) -> str:
    """A stable digest of a job spec as submitted (canonical JSON), to recognise a resubmission."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:32]


def spec_matches(stored: Any, submitted: Any) -> bool:
    """Whether every field of `submitted` is in `stored` (which may carry defaults the API server added)."""
    if isinstance(submitted, dict):
        return isinstance(stored, dict) and all(
            k in stored and spec_matches(stored[k], v) for k, v in submitted.items()
        )
    if isinstance(submitted, list):
        return isinstance(stored, list) and len(stored) == len(submitted) and all(map(spec_matches, stored, submitted))
    return bool(stored == submitted)


def bad_name(name: str, namespace: str | None = None) -> str:
    """Why `name` (in `namespace`) can name no object, so must not go into a URL path; "" when it can.

    The client quotes a '/' but not a dot segment, and urllib3 resolves those: job "." would read (or delete)
    `.../namespaces/default/jobs/`, the whole collection, and namespace ".." would leave the namespace.
    """
    if namespace is not None and not is_dns1123_label(namespace):
        return f"{namespace[:100]!r} is not a namespace name (a DNS-1123 label: a-z, 0-9 and '-', at most 63)"
    if not is_dns1123_subdomain(name):
        return f"{name[:100]!r} is not an object name (a DNS-1123 subdomain: a-z, 0-9, '-' and '.', at most 253)"
    return ""


def _check_namespace(namespace: str | None) -> None:
    if namespace is not None and (why := bad_name("x", namespace)):
        raise Invalid(f"{why}.")


@contextlib.contextmanager
def _reading(what: str) -> Iterator[None]:
    """Turn an object the API server returned that cannot be read into a ClusterError in one sentence.

    A quantity out of range or a field of another type is then like a failed call: whoever observes says that it
    cannot see, and goes on.
    """
    try:
        yield
    except ClusterError:
        raise
    except KeyError as err:
        raise ClusterError(f"{what} from the API server cannot be read: a field {err.args[0]!r} is missing.") from None
    except (ValueError, TypeError, AttributeError, ArithmeticError) as err:
        raise ClusterError(f"{what} from the API server cannot be read: {' '.join(str(err).split())[:300]}.") from None


class KubeCluster:
    """The `Cluster` protocol over the API server (see the module docstring).

    `kubeconfig`/`context` choose a kubeconfig (default: `$KUBECONFIG` or `~/.kube/config`); `in_cluster`
    uses the pod's service account (default: when running in a pod and no kubeconfig is named).
    """

    def __init__(
        self,
        kubeconfig: str | Path | None = None,
        context: str | None = None,
        *,
        in_cluster: bool | None = None,
        attempts: int = 6,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = Api(kubeconfig, context, in_cluster=in_cluster, attempts=attempts, sleep=sleep)
        self._core, self._custom = self._api.core, self._api.custom
        self._clock = clock

    @property
    def host(self) -> str:
        """The API server's URL."""
        return self._api.host

    def close(self) -> None:
        """Close the client's connection pool."""
        self._api.close()

    def _job(self, name: str, namespace: str) -> Obj:
        if why := bad_name(name, namespace):
            raise JobNotFound(f"job {namespace[:100]}/{name[:100]} does not exist: {why}.")
        missing = JobNotFound(f"job {namespace}/{name} does not exist.")
        get = self._custom.get_namespaced_custom_object
        return dict(
            self._api.call(f"get job {namespace}/{name}", get, *BATCH, namespace, "jobs", name, missing=missing)
        )

    def _pods(self, namespace: str | None, **kw: Any) -> list[Obj]:
        _check_namespace(namespace)
        if namespace is None:
            return self._api.items("list pods", self._core.list_pod_for_all_namespaces, **kw)
        return self._api.items(f"list pods in {namespace}", self._core.list_namespaced_pod, namespace, **kw)

    def _podgroups(self, namespace: str | None) -> list[Obj]:
        _check_namespace(namespace)
        if namespace is None:
            return self._api.items("list podgroups", self._custom.list_cluster_custom_object, *SCHEDULING, "podgroups")
        list_ns = self._custom.list_namespaced_custom_object
        return self._api.items(f"list podgroups in {namespace}", list_ns, *SCHEDULING, namespace, "podgroups")

    def _info(
        self,
        job: Obj,
        pods: list[Obj] | None = None,
        podgroups: list[Obj] | None = None,
        events: dict[str, list[Obj]] | None = None,
    ) -> JobInfo:
        """JobInfo for a Job object, reading what the caller did not pass (events: a per-namespace cache)."""
        meta = job.get("metadata") or {}
        namespace, name = meta.get("namespace") or "default", meta.get("name")
        if pods is None:
            pods = self._pods(namespace, label_selector=f"{JOB_NAME}={name}")
        if podgroups is None:
            pg_name = k8s_status.podgroup_name(job)
            get = self._custom.get_namespaced_custom_object
            group = self._api.call(
                f"get podgroup {namespace}/{pg_name}", get, *SCHEDULING, namespace, "podgroups", pg_name, absent_ok=True
            )
            podgroups = [group] if group else []
        with _reading(f"job {namespace}/{name}"):
            group_name = k8s_status.podgroup_name(job)
            podgroup = next((pg for pg in podgroups if (pg.get("metadata") or {}).get("name") == group_name), None)
            phase = ((job.get("status") or {}).get("state") or {}).get("phase") or "Pending"
            # Events tell what the objects no longer do: pods that node eviction deleted from a finished job, and
            # why the scheduler refuses a pending gang (see k8s_status).
            missing = k8s_status.missing_pods(job, pods)
            waiting = phase == "Pending" and podgroup is not None and k8s_status.pending_reason(podgroup) is None
        seen: list[Obj] = []
        if (phase in FINISHED_PHASES and missing) or waiting:
            events = {} if events is None else events
            if namespace not in events:
                list_events = self._core.list_namespaced_event
                events[namespace] = self._api.items(f"list events in {namespace}", list_events, namespace)
            seen = events[namespace]
        with _reading(f"job {namespace}/{name}"):
            return k8s_status.job_info(job, pods, podgroup, seen)

    # -- the Cluster protocol ----------------------------------------------------------------------------

    def submit(self, job: Job | Mapping[str, Any]) -> JobInfo:
        """Create a Volcano Job with the name its manifest gives; the same spec again returns it, another Conflicts."""
        try:
            raw = job.to_dict() if isinstance(job, Job) else copy.deepcopy(dict(job))
            if (raw.get("apiVersion"), raw.get("kind")) == BATCH_JOB:
                raise ValueError("KubeCluster submits Volcano Jobs (batch.volcano.sh/v1alpha1), not batch/v1 Jobs")
            parsed = apply_volcano_defaults(parse_job(raw))
            validate_job(parsed)
        except ValueError as err:
            raise Invalid(f"{str(err).rstrip('.')}.") from None
        manifest = parsed.to_dict()
        manifest.pop("status", None)
        meta, spec = manifest.setdefault("metadata", {}), manifest["spec"]
        namespace = meta.setdefault("namespace", "default")
        name = meta.get("name") or meta.get("generateName")
        if not name:
            raise Invalid("metadata.name (or metadata.generateName) is required.")
        if spec.get("schedulerName") != "volcano":
            raise Invalid(f"job {name}: spec.schedulerName must be 'volcano', not {spec.get('schedulerName')!r}.")
        self._check_queue(name, spec.get("queue") or "default")
        digest = spec_hash(spec)
        meta.setdefault("annotations", {})[SPEC_HASH] = digest
        create = self._custom.create_namespaced_custom_object
        try:
            created = self._api.call(f"create job {namespace}/{name}", create, *BATCH, namespace, "jobs", manifest)
        except Conflict:
            existing = self._job(name, namespace)
            stored = ((existing.get("metadata") or {}).get("annotations") or {}).get(SPEC_HASH)
            if stored != digest and not (stored is None and spec_matches(existing.get("spec"), spec)):
                raise Conflict(f"job {namespace}/{name} already exists with a different spec.") from None
            return self._info(existing)
        return self._info(created, pods=[], podgroups=[])

    def _check_queue(self, job: str, queue: str) -> None:
        """What Volcano's validating webhook checks of the queue (admit_job.go `validateJobCreate`).

        The queue exists and is Open (one without a state yet counts as Open, as the queue controller's state
        machine reads it), is not `root`, and is a leaf: no queue names it as `spec.parent`.
        """
        try:
            state = (self.queue_object(queue).get("status") or {}).get("state") or "Open"
        except QueueNotFound:
            raise Invalid(f"job {job}: queue {queue!r} does not exist.") from None
        if state != "Open":
            raise Invalid(f"job {job}: queue {queue!r} is {state}, it accepts no new jobs.")
        if queue == "root":
            raise Invalid(f"job {job}: queue 'root' is the top of Volcano's queue tree and takes no jobs.")
        parents = [(q.get("metadata") or {}, q.get("spec") or {}) for q in self._queue_objects()]
        children = sorted(str(meta.get("name")) for meta, spec in parents if spec.get("parent") == queue)
        if children:
            raise Invalid(
                f"job {job}: queue {queue!r} is the parent of {', '.join(children)}; "
                "submit to a queue without child queues (a leaf)."
            )

    def get(self, name: str, namespace: str = "default") -> JobInfo:
        """A job's phase, retry count and pods."""
        return self._info(self._job(name, namespace))

    def get_object(self, name: str, namespace: str = "default") -> dict[str, Any]:
        """The job exactly as the API server returns it."""
        return self._job(name, namespace)

    def wait(
        self,
        name: str,
        phases: Collection[str] = FINISHED_PHASES,
        timeout: float = 600.0,
        namespace: str = "default",
    ) -> JobInfo:
        """Watch the job until it is in one of `phases`; Timeout after `timeout` seconds.

        A watch that drops is resumed from the last resourceVersion seen; one that expired (410 Gone) is
        replaced by a fresh read and a new watch, so no change is missed either way.
        """
        deadline = self._clock() + timeout
        job = self._job(name, namespace)
        version: str | None = job["metadata"].get("resourceVersion")
        failures = 0
        while True:
            phase = ((job.get("status") or {}).get("state") or {}).get("phase") or "Pending"
            if phase in phases:
                return self._info(job)
            remaining = deadline - self._clock()
            if remaining <= 0:
                raise Timeout(
                    f"job {namespace}/{name} is still {phase} after {timeout:g}s "
                    f"(waited for {', '.join(sorted(phases))})."
                )
            try:
                for event in watch.Watch().stream(
                    self._custom.list_namespaced_custom_object,
                    *BATCH,
                    namespace,
                    "jobs",
                    field_selector=f"metadata.name={name}",
                    resource_version=version,
                    allow_watch_bookmarks=True,
                    timeout_seconds=max(1, min(int(remaining) + 1, 60)),
                    _request_timeout=(REQUEST_TIMEOUT[0], min(remaining, 60) + 10),
                ):
                    obj = event["raw_object"]
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    if event["type"] == "DELETED":
                        raise JobNotFound(f"job {namespace}/{name} was deleted while waiting for it.")
                    if event["type"] in ("ADDED", "MODIFIED"):
                        job, failures = obj, 0
                        if (((obj.get("status") or {}).get("state") or {}).get("phase") or "Pending") in phases:
                            break
                    if self._clock() >= deadline:
                        break
                continue  # the watch ended by itself or found the phase: check the job as last seen
            except ApiException as err:
                if err.status != 410 and not is_retryable(err):
                    raise self._api.error(f"watch job {namespace}/{name}", err, None, 1) from None
                expired = err.status == 410
            except (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError):
                expired = False
            failures += 1
            if failures >= self._api.attempts:
                raise ClusterError(f"lost the watch on job {namespace}/{name} {failures} times in a row.")
            self._api.sleep(backoff_delay(failures))
            if expired:  # 410 Gone: that version is compacted away; read the job afresh and watch from there
                job = self._job(name, namespace)
                version = job["metadata"].get("resourceVersion")

    def delete(
        self,
        name: str,
        namespace: str = "default",
        *,
        missing_ok: bool = False,
        wait: bool = True,
        timeout: float = 120.0,
    ) -> None:
        """Delete a job with its pods and PodGroup.

        With `wait`, `Foreground` propagation: it returns once the job is gone, which the garbage collector allows
        only after its pods and PodGroup are (a Timeout after `timeout` s); without, `Background`: it returns once
        the API server accepted the deletion, and the pods go after.
        """
        if why := bad_name(name, namespace):
            if missing_ok:
                return
            raise JobNotFound(f"job {namespace[:100]}/{name[:100]} does not exist: {why}.")
        remove = self._custom.delete_namespaced_custom_object
        deleted = self._api.call(
            f"delete job {namespace}/{name}",
            remove,
            *BATCH,
            namespace,
            "jobs",
            name,
            propagation_policy="Foreground" if wait else "Background",
            missing=JobNotFound(f"job {namespace}/{name} does not exist."),
            absent_ok=missing_ok,
        )
        if deleted is None or not wait:
            return
        deadline = self._clock() + timeout
        delay = 0.1
        while True:
            try:
                self._job(name, namespace)
            except JobNotFound:
                return
            if self._clock() >= deadline:
                raise Timeout(f"job {namespace}/{name} is still being deleted after {timeout:g}s (its pods remain).")
            self._api.sleep(delay)
            delay = min(delay * 2, 1.0)

    def list_jobs(self, labels: Mapping[str, str] | None = None, namespace: str | None = None) -> list[JobInfo]:
        """Jobs carrying every given label (all namespaces when namespace is None), oldest first."""
        _check_namespace(namespace)
        selector = ",".join(f"{key}={value}" for key, value in (labels or {}).items()) or None
        if namespace is None:
            jobs = self._api.items(
                "list jobs", self._custom.list_cluster_custom_object, *BATCH, "jobs", label_selector=selector
            )
        else:
            list_ns = self._custom.list_namespaced_custom_object
            jobs = self._api.items(
                f"list jobs in {namespace}", list_ns, *BATCH, namespace, "jobs", label_selector=selector
            )
        if not jobs:
            return []
        pods = self._pods(namespace, label_selector=JOB_NAME)
        podgroups = self._podgroups(namespace)
        with _reading("the jobs"):
            jobs.sort(key=lambda j: (str(j["metadata"].get("creationTimestamp") or ""), str(j["metadata"]["name"])))
        events: dict[str, list[Obj]] = {}
        return [self._info(j, pods, podgroups, events) for j in jobs if not j["metadata"].get("deletionTimestamp")]

    def queue_object(self, name: str) -> Obj:
        """The Queue as the API server returns it; QueueNotFound when there is none."""
        if why := bad_name(name):
            raise QueueNotFound(f"queue {name[:100]!r} does not exist: {why}.")
        get = self._custom.get_cluster_custom_object
        missing = QueueNotFound(f"queue {name!r} does not exist.")
        return dict(self._api.call(f"get queue {name}", get, *SCHEDULING, "queues", name, missing=missing))

    def apply_queue(self, queue: Queue | Mapping[str, Any]) -> QueueSnapshot:
        """Create a Queue, or replace the spec of the one with that name."""
        try:
            parsed = queue if isinstance(queue, Queue) else parse_queue(dict(queue))
        except ValueError as err:
            raise Invalid(f"queue: {err}.") from None
        name = parsed.metadata.name
        if not name:
            raise Invalid("queue metadata.name is required.")
        body = {"apiVersion": parsed.api_version, "kind": "Queue", "metadata": {"name": name}}
        body["spec"] = parsed.spec.model_dump(by_alias=True, exclude_none=True, mode="json")
        try:
            self._api.call(
                f"create queue {name}", self._custom.create_cluster_custom_object, *SCHEDULING, "queues", body
            )
        except Conflict:
            existing = self.queue_object(name)
            existing["spec"] = body["spec"]
            replace = self._custom.replace_cluster_custom_object
            self._api.call(f"update queue {name}", replace, *SCHEDULING, "queues", name, existing)
        return self.queue(name)

    def _queue_objects(self) -> list[Obj]:
        return self._api.items("list queues", self._custom.list_cluster_custom_object, *SCHEDULING, "queues")

    def queue(self, name: str) -> QueueSnapshot:
        """One queue with its demand counted from PodGroups and its place in the queue tree."""
        queue = self.queue_object(name)
        podgroups, queues = self._podgroups(None), self._queue_objects()
        with _reading(f"queue {name}"):
            return k8s_status.queue_snapshot(queue, podgroups, queues)

    def queues(self) -> list[QueueSnapshot]:
        """Every queue, by name."""
        queues = self._queue_objects()
        podgroups = self._podgroups(None)
        with _reading("the queues"):
            return sorted((k8s_status.queue_snapshot(q, podgroups, queues) for q in queues), key=lambda q: q.name)

    def nodes(self) -> list[NodeInfo]:
        """Every node with readiness and the GPUs of the pods bound to it."""
        nodes = self._api.items("list nodes", self._core.list_node)
        pods = self._pods(None, field_selector="status.phase!=Succeeded,status.phase!=Failed")
        with _reading("the nodes"):
            return sorted((k8s_status.node_info(n, pods) for n in nodes), key=lambda n: n.name)

    def priority_classes(self) -> dict[str, int]:
        """Every PriorityClass by name, with its value."""
        found = self._api.items("list priority classes", self._api.scheduling.list_priority_class)
        with _reading("the priority classes"):
            return {str(p["metadata"]["name"]): int(p.get("value") or 0) for p in found}

    def events(self, name: str, namespace: str = "default", limit: int = 50) -> list[Event]:
        """The most recent events of the job, its PodGroup and its pods, oldest first."""
        job = self._job(name, namespace)
        events = self._api.items(f"list events in {namespace}", self._core.list_namespaced_event, namespace)
        with _reading(f"the events of job {namespace}/{name}"):
            return k8s_status.job_events(job, events, limit)

    # -- beyond the protocol: fault injection where kwok plays the kubelet ---------------------------------

    def fail_node(self, node: str) -> list[str]:
        """Turn a kwok node NotReady (its chaos label); the controller-manager then evicts its pods.

        Returns the pods bound to it now. On a node kwok does not manage, the label does nothing.
        """
        self._label_node(node, "true")
        pods = self._pods(None, field_selector=f"spec.nodeName={node},status.phase!=Succeeded,status.phase!=Failed")
        return sorted(p["metadata"]["name"] for p in pods)

    def recover_node(self, node: str) -> None:
        """Make a kwok node Ready again (removes its chaos label)."""
        self._label_node(node, None)

    def _label_node(self, node: str, value: str | None) -> None:
        if why := bad_name(node):
            raise NodeNotFound(f"node {node[:100]!r} does not exist: {why}.")
        patch = {"metadata": {"labels": {KWOK_NODE_NOT_READY: value}}}
        missing = NodeNotFound(f"node {node!r} does not exist.")
        self._api.call(
            f"label node {node}", self._core.patch_node, node, patch, missing=missing, _content_type=MERGE_PATCH
        )

    def kill_pod(self, pod: str, namespace: str = "default") -> None:
        """Make a running kwok pod fail as a SIGKILL would (exit code 137), through kwok's chaos label."""
        patch = {
            "metadata": {
                "labels": {KWOK_POD_FAILED: "true"},
                "annotations": {
                    f"{KWOK_POD_FAILED}/exit-code": "137",
                    f"{KWOK_POD_FAILED}/reason": "Killed",
                    f"{KWOK_POD_FAILED}/message": "killed by fault injection",
                    f"{KWOK_POD_FAILED}/delay": "0s",
                },
            }
        }
        if why := bad_name(pod, namespace):
            raise JobNotFound(f"pod {namespace[:100]}/{pod[:100]} is not running: {why}.")
        missing = JobNotFound(f"pod {namespace}/{pod} is not running.")
        patch_pod = self._core.patch_namespaced_pod
        self._api.call(
            f"label pod {namespace}/{pod}", patch_pod, pod, namespace, patch, missing=missing, _content_type=MERGE_PATCH
        )
