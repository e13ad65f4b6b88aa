"""`vcpilot cluster describe KIND/NAME` and `cluster events`: what `kubectl describe` shows, for LocalCluster objects.

Each describer gathers one object's facts into a plain dict (the `--json` document) and renders the same facts as
aligned text, events last, so a person reads why a job is pending or a pod failed without opening the database.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from components.errors import InputError
from components.volcano.cluster import Event, NodeInfo, NodeNotFound
from components.volcano.cluster_local import JobEvent, LocalCluster

__all__ = ["KINDS", "columns", "describe", "event_rows", "node_events", "parse_ref", "render_events", "section"]

# The spellings kubectl accepts for each kind we describe.
_ALIASES = {
    "job": ("job", "jobs", "vcjob", "vcjobs", "vj"),
    "pod": ("pod", "pods", "po"),
    "queue": ("queue", "queues", "q"),
    "node": ("node", "nodes", "no"),
}
KINDS = tuple(_ALIASES)


def parse_ref(ref: str) -> tuple[str, str]:
    """("job" | "pod" | "queue" | "node", name) from `KIND/NAME`; InputError in one sentence otherwise."""
    kind, sep, name = ref.partition("/")
    canonical = next((k for k, names in _ALIASES.items() if kind.lower() in names), None)
    if not sep or not name or canonical is None:
        raise InputError(
            f"{ref!r} names no object: give KIND/NAME with KIND one of {', '.join(KINDS)} (for example job/hello)."
        )
    return canonical, name


def age(seconds: float) -> str:
    """A duration as kubectl prints ages: 45s, 12m, 3h, 2d."""
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def event_rows(events: Sequence[Event], now: float) -> list[dict[str, Any]]:
    """Events as JSON rows, with the namespace and job when the event carries them."""
    rows = []
    for e in events:
        row = asdict(e)
        row["age"] = age(now - e.time)
        rows.append(row)
    return rows


def render_events(events: Sequence[Event], now: float, *, with_job: bool = False) -> list[str]:
    """Aligned lines: AGE TYPE REASON OBJECT MESSAGE (and JOB first, across jobs)."""
    if not events:
        return ["<none>"]
    header = ["AGE", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    rows = [[age(now - e.time), e.type, e.reason, e.object, " ".join(e.message.split())] for e in events]
    if with_job:
        header.insert(0, "JOB")
        for row, e in zip(rows, events, strict=True):
            row.insert(0, f"{e.namespace}/{e.job}" if isinstance(e, JobEvent) else "")
    return columns([header, *rows])


def columns(rows: list[list[str]]) -> list[str]:
    """Rows (a header first) as aligned lines, as kubectl prints them; the last column is not padded."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return [
        "   ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]]).rstrip() for row in rows
    ]


def _fields(pairs: Sequence[tuple[str, Any]]) -> list[str]:
    width = max(len(label) for label, _ in pairs) + 2
    return [f"{label + ':':<{width}}{'-' if value in (None, '', {}, []) else value}" for label, value in pairs]


def _labels(labels: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _quantities(values: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in sorted(values.items()))


def _pod_rows(pods: Sequence[Any]) -> list[str]:
    if not pods:
        return ["<none>"]
    rows = [["NAME", "TASK", "PHASE", "NODE", "GPUS", "EXIT", "REASON"]]
    for p in pods:
        code = "" if p.exit_code is None else str(p.exit_code)
        rows.append([p.name, f"{p.task}#{p.index}", p.phase, p.node or "", str(p.gpus), code, p.reason or ""])
    return columns(rows)


def section(title: str, lines: list[str]) -> list[str]:
    """`title:` and the lines under it, indented."""
    return [f"{title}:", *(f"  {line}" for line in lines)]


def _job(cluster: LocalCluster, name: str, namespace: str, now: float) -> tuple[dict[str, Any], list[str]]:
    info = cluster.get(name, namespace)
    obj = cluster.get_object(name, namespace)
    events = cluster.events(name, namespace, limit=100)
    spec = obj.get("spec") or {}
    tasks = [
        {"name": t.get("name"), "replicas": t.get("replicas", 0), "policies": t.get("policies") or []}
        for t in spec.get("tasks") or []
    ]
    data = {
        "kind": "Job",
        "job": asdict(info),
        "spec": spec,
        "events": event_rows(events, now),
    }
    policies = [f"{p.get('event') or p.get('exitCode')} -> {p.get('action')}" for p in spec.get("policies") or []]
    lines = _fields(
        [
            ("Name", info.name),
            ("Namespace", info.namespace),
            ("Kind", f"{obj.get('kind')} ({obj.get('apiVersion')})"),
            ("UID", info.uid),
            ("Labels", _labels(info.labels)),
            ("Queue", info.queue),
            ("Priority class", spec.get("priorityClassName")),
            ("Phase", info.phase + (f" ({info.reason})" if info.reason and info.reason != info.phase else "")),
            ("PodGroup", info.podgroup_phase),
            ("Min available", info.min_available),
            ("Retries", f"{info.retry_count} of {spec.get('maxRetry', 3)}"),
            ("Policies", ", ".join(policies)),
            ("Message", info.message),
        ]
    )
    task_lines = [f"{t['name']}: {t['replicas']} replica(s)" for t in tasks] or ["<none>"]
    lines += section("Tasks", task_lines) + section("Pods", _pod_rows(info.pods))
    lines += section("Events", render_events(events, now))
    return data, lines


def _pod(cluster: LocalCluster, name: str, namespace: str, now: float) -> tuple[dict[str, Any], list[str]]:
    job, pod = cluster.find_pod(name, namespace)
    events = [e for e in cluster.events(job, namespace, limit=200) if e.object == f"Pod/{name}"]
    runs = cluster.pod_logs(job, namespace, pod=name)
    data = {
        "kind": "Pod",
        "namespace": namespace,
        "job": job,
        "pod": asdict(pod),
        "logs": [str(r.path) for r in runs],
        "events": event_rows(events, now),
    }
    lines = _fields(
        [
            ("Name", pod.name),
            ("Namespace", namespace),
            ("Job", job),
            ("Task", f"{pod.task} (index {pod.index})"),
            ("Phase", pod.phase),
            ("Node", pod.node),
            ("GPUs", pod.gpus),
            ("Exit code", pod.exit_code),
            ("Reason", pod.reason),
            (
                "Logs",
                f"vcpilot cluster logs {job} --pod {name}" + (f" -n {namespace}" if namespace != "default" else ""),
            ),
        ]
    )
    lines += section("Runs", [str(r.path) for r in runs] or ["<none>"])
    lines += section("Events", render_events(events, now))
    return data, lines


def _queue(cluster: LocalCluster, name: str, namespace: str, now: float) -> tuple[dict[str, Any], list[str]]:
    queue = cluster.queue(name)
    jobs = [j for j in cluster.list_jobs() if j.queue == name]
    data = {"kind": "Queue", "queue": asdict(queue), "jobs": [f"{j.namespace}/{j.name}" for j in jobs]}
    lines = _fields(
        [
            ("Name", queue.name),
            ("State", queue.state),
            ("Weight", queue.weight),
            ("Capability", _quantities(queue.capability)),
            ("Allocated", _quantities(queue.allocated)),
            ("Pending", f"{queue.pending} PodGroup(s), {queue.pending_gpus} GPU(s)"),
            ("Inqueue", f"{queue.inqueue} PodGroup(s), {queue.inqueue_gpus} GPU(s)"),
            ("Running", f"{queue.running} PodGroup(s), {queue.running_gpus} GPU(s)"),
        ]
    )
    rows = [["JOB", "PHASE", "MESSAGE"]] + [[f"{j.namespace}/{j.name}", j.phase, j.message or ""] for j in jobs]
    lines += section("Jobs", columns(rows) if jobs else ["<none>"])
    return data, lines


def _find_node(cluster: LocalCluster, name: str) -> NodeInfo:
    nodes = {n.name: n for n in cluster.nodes()}
    if name not in nodes:
        raise NodeNotFound(f"node {name!r} does not exist (nodes: {', '.join(sorted(nodes))}).")
    return nodes[name]


def node_events(cluster: LocalCluster, name: str, limit: int = 500) -> list[JobEvent]:
    """The events that name node `name` (pods assigned to it, evicted from it), oldest first, at most `limit`."""
    _find_node(cluster, name)
    mention = re.compile(rf"(?<![\w.-]){re.escape(name)}(?![\w.-])")
    return [e for e in cluster.all_events() if mention.search(e.message)][-limit:]


def _node(cluster: LocalCluster, name: str, namespace: str, now: float) -> tuple[dict[str, Any], list[str]]:
    node = _find_node(cluster, name)
    pods = [(j, p) for j in cluster.list_jobs() for p in j.pods if p.node == name and p.phase == "Running"]
    events = node_events(cluster, name)
    data = {
        "kind": "Node",
        "node": asdict(node),
        "pods": [{"job": f"{j.namespace}/{j.name}", **asdict(p)} for j, p in pods],
        "events": event_rows(events, now),
    }
    lines = _fields(
        [
            ("Name", node.name),
            ("Ready", "True" if node.ready else "False (NotReady)"),
            ("Labels", _labels(node.labels)),
            ("Taints", ", ".join(f"{t.get('key')}={t.get('value', '')}:{t.get('effect')}" for t in node.taints)),
            (
                "GPUs",
                f"{node.gpu_allocated} allocated of {node.gpu_allocatable} allocatable ({node.gpu_capacity} capacity)",
            ),
        ]
    )
    lines += section("Running pods", _pod_rows([p for _, p in pods]))
    lines += section("Events", render_events(events, now, with_job=True))
    return data, lines


_DESCRIBERS: dict[str, Callable[[LocalCluster, str, str, float], tuple[dict[str, Any], list[str]]]] = {
    "job": _job,
    "pod": _pod,
    "queue": _queue,
    "node": _node,
}


def describe(cluster: LocalCluster, kind: str, name: str, namespace: str, now: float) -> tuple[dict[str, Any], str]:
    """The object's facts as a JSON-ready dict and as text; the cluster's NotFound errors name what is missing."""
    data, lines = _DESCRIBERS[kind](cluster, name, namespace, now)
    return data, "\n".join(lines)
