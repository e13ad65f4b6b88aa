"""Run an upstream Argo example on the real controller and through the local runner, and reduce both runs to what
they must agree on: the workflow's phase and, per node, its type, phase, outputs and what its main container printed.

A node is keyed by its name less the workflow's (`""` the root, `[1].hello2a`, `.B(0:foo)`, `.onExit`): Argo and
the local runner name nodes alike, so the key says where in the tree a node is. Pod names, times, ids and messages
are not compared, and the workflow's name reads `<wf>` in every value. An example that draws at random is reduced
to what every draw shows first (`Example.reduce`).
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from pipelines.local.runner import RunResult, delete_run, run_workflow

EXAMPLES = Path(__file__).resolve().parents[3] / "shared" / "argo-examples"
OURS = Path(__file__).resolve().parent / "workflows"  # what upstream's examples do not cover (test_argo_examples)
GROUP, VERSION = "argoproj.io", "v1alpha1"
FINISHED = ("Succeeded", "Failed", "Error")
NODE_NAME = "workflows.argoproj.io/node-name"  # the annotation naming a pod's node
# What Argo's emissary executor adds to a failed step's stderr (docs/local-runner.md): not the step's own output.
# A line of its own, usually the last; but the kubelet's log interleaves stdout and stderr as it reads them, and
# with other pods starting beside it the line came first ("Error: exit status 1\nintentional failure").
EMISSARY_ERROR = re.compile(r"(?m)^Error: exit status \d+(\n|\Z)")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")

Text = Callable[[str], str]


# ---- what a run shows -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Facts:
    """What a node shows a user: its type and phase, its outputs, and its main container's log."""

    type: str
    phase: str
    parameters: tuple[tuple[str, str | None], ...] = ()
    result: str | None = None
    exit_code: str | None = None
    log: str | None = None

    def texts(self, fn: Text) -> Facts:
        """These facts with `fn` applied to every value a step printed or wrote."""
        return replace(
            self,
            parameters=tuple((n, None if v is None else fn(v)) for n, v in self.parameters),
            result=None if self.result is None else fn(self.result),
            log=None if self.log is None else fn(self.log),
        )


Table = dict[str, Facts]


@dataclass(frozen=True)
class Run:
    """A finished run: its workflow's name and phase, and its nodes."""

    name: str
    phase: str
    nodes: Table

    def texts(self, fn: Text) -> Run:
        return replace(self, nodes={k: f.texts(fn) for k, f in self.nodes.items()})


def read_run(name: str, status: Mapping[str, Any], logs: Mapping[str, str]) -> Run:
    """A Run from a Workflow's status (either runner's) and its pods' logs by node name."""

    def clean(text: str) -> str:
        return _TIME.sub("<time>", text.replace(name, "<wf>"))

    nodes: Table = {}
    for node in (status.get("nodes") or {}).values():
        outputs = node.get("outputs") or {}
        log = logs.get(node["name"])
        nodes[node["name"][len(name) :]] = Facts(
            type=node["type"],
            phase=node["phase"],
            parameters=tuple((p["name"], p.get("value")) for p in outputs.get("parameters") or []),
            result=outputs.get("result"),
            exit_code=outputs.get("exitCode"),
            log=None if log is None else log.removesuffix("\n"),
        ).texts(clean)
    return Run(name, str(status.get("phase", "")), nodes)


def differences(real: Run, local: Run) -> list[str]:
    """What a user would see differ between the two runs, one line each; empty when they agree.

    Argo records `outputs.result` only for a node whose result its parent steps or DAG refers to (never for the
    root); the local runner records every pod's (docs/local-runner.md). So a result counts where Argo has one,
    and a log where the real pod's could be read; the log shows what every step printed.
    """
    lines = [f"workflow phase: real {real.phase}, local {local.phase}"] if real.phase != local.phase else []
    for key in sorted(real.nodes.keys() | local.nodes.keys()):
        theirs, ours = real.nodes.get(key), local.nodes.get(key)
        if theirs is None or ours is None:
            lines.append(f"node {key!r} only in the {'local' if theirs is None else 'real'} run: {theirs or ours}")
            continue
        if theirs.result is None:
            ours = replace(ours, result=None)
        if theirs.log is None:  # a Skipped node, or a log the kubelet lost (PodLogs)
            ours = replace(ours, log=None)
        elif ours.log is not None and ours.log.endswith(theirs.log):  # a log restarted mid-run (PodLogs)
            ours = replace(ours, log=theirs.log)
        if theirs != ours:
            lines.append(f"node {key!r}:\n    real  {theirs}\n    local {ours}")
    return lines


# ---- how the runs of an example that draws at random are reduced to what every draw shows -----------------------

Reduce = Callable[[Run], Run]


def as_is(run: Run) -> Run:
    return run


def heads_up(flip: str) -> Reduce:
    """A coin flipped at node `flip` decides which branch runs: name everything as if it came up heads."""

    def reduce(run: Run) -> Run:
        side = run.nodes[flip].result
        assert side in ("heads", "tails"), f"{flip} flipped {side!r}"
        if side == "heads":
            return run
        swap = {"heads": "tails", "tails": "heads"}

        def turn(text: str) -> str:
            return re.sub(r"heads|tails", lambda m: swap[m.group()], text)

        return replace(run.texts(turn), nodes={turn(k): f.texts(turn) for k, f in run.nodes.items()})

    return reduce


def last_flip(run: Run) -> Run:
    """coinflip-recursive: every level but the last flipped tails and recursed; keep the last level only."""
    level = ""
    while (recursion := run.nodes.get(f"{level}[1].tails")) is not None and recursion.type != "Skipped":
        flipped = run.nodes[f"{level}[0].flip-coin"].result
        assert flipped == "tails" and run.nodes[f"{level}[1].heads"].phase == "Skipped", (
            f"level {level!r} recursed, but it flipped {flipped!r}"
        )
        level += "[1].tails"
    nodes = {k[len(level) :]: f for k, f in run.nodes.items() if k.startswith(level)}
    nodes[""] = run.nodes[""]
    return replace(run, nodes=nodes)


def drawn_number(node: str) -> Reduce:
    """The result of `node` is a random whole number: write it as <N> wherever it appears.

    (From 1 to 100 with coreutils' `od`, which the local runner's host has; busybox's, in the image the real
    nodes run it in, can read the two bytes as a negative number.)
    """

    def reduce(run: Run) -> Run:
        drawn = run.nodes[node].result or ""
        assert re.fullmatch(r"-?\d+", drawn), f"{node} drew {drawn!r}, not a whole number"
        return run.texts(lambda text: re.sub(rf"(?<![\w-]){re.escape(drawn)}(?!\w)", "<N>", text))

    return reduce


def last_attempts(run: Run) -> Run:
    """Retried nodes: every attempt but the last failed; keep the last one as `(last)`, drop the others."""
    nodes = dict(run.nodes)
    while retried := [k for k in sorted(nodes, key=len) if nodes[k].type == "Retry" and _attempts(nodes, k)]:
        retry = retried[0]
        attempts = _attempts(nodes, retry)
        for i in attempts[:-1]:
            phase = nodes[f"{retry}({i})"].phase
            assert phase in ("Failed", "Error"), f"{retry}({i}) {phase}, and yet it was retried"
        renamed: Table = {}
        for key, facts in nodes.items():
            match = re.fullmatch(rf"{re.escape(retry)}\((\d+)\)(.*)", key)
            if match is None:
                renamed[key] = facts
            elif int(match[1]) == attempts[-1]:
                renamed[f"{retry}(last){match[2]}"] = facts
        nodes = renamed
    return replace(run, nodes=nodes)


def _attempts(nodes: Table, retry: str) -> list[int]:
    pattern = re.compile(rf"{re.escape(retry)}\((\d+)\)")
    return sorted(int(m[1]) for k in nodes if (m := pattern.fullmatch(k)))


def created_job(run: Run) -> Run:
    """k8s-jobs: the Job it created has a generated name, and its JSON a uid, times and whatever the job
    controller added; keep what the manifest and the success condition decide. The resource template's pod
    logs only the executor's own lines (the local runner has no pod), so no log is compared."""
    root = run.nodes[""]
    params = dict(root.parameters)
    job = json.loads(params.get("job-obj") or "{}")
    kept = {
        "apiVersion": job.get("apiVersion"),
        "kind": job.get("kind"),
        "spec": {k: job.get("spec", {}).get(k) for k in ("completions", "parallelism")},
        "status": {"succeeded": job.get("status", {}).get("succeeded")},
    }
    assert re.fullmatch(r"rand-num-[a-z0-9]{5}", params.get("job-name") or ""), params
    assert job.get("metadata", {}).get("name") == params["job-name"], "job-obj is another Job"
    parameters = (("job-name", "rand-num-<id>"), ("job-obj", json.dumps(kept, sort_keys=True)))
    return replace(run, nodes={"": replace(root, parameters=parameters, log=None)})


def masked(pattern: str, replacement: str) -> Reduce:
    """A value that depends on timing (a duration): replace what `pattern` matches wherever it appears."""
    return lambda run: run.texts(lambda text: re.sub(pattern, replacement, text))


@dataclass(frozen=True)
class Example:
    """An upstream example compared with the real controller, and how its runs are reduced before they are.

    `redraw`: the outcome itself is drawn (how many attempts fail in a row): the local runner draws again until
    its reduced run agrees with the real one, and the real run again (test_argo_examples.REAL_REDRAWS) when that
    never happens (it drew something rare, such as every attempt failing, or ran out of a wall-time bound on the
    busy cluster). `rules`: what the pods' account may do besides reporting
    outputs (a resource template's objects). `generate_name`: for an example that has no name at all, which
    the API server refuses (the local runner makes one up). `local_cluster`: run its resource templates on a
    LocalCluster.
    """

    name: str
    reduce: Reduce = as_is
    redraw: bool = False
    timeout_s: float = 180.0
    rules: tuple[dict[str, Any], ...] = ()
    generate_name: str | None = None
    local_cluster: bool = False
    directory: Path = EXAMPLES  # upstream's; OURS for workflows written here

    @property
    def path(self) -> Path:
        return self.directory / f"{self.name}.yaml"


def compared(example: Example, real_runs: Iterable[Run], local_runs: Callable[[], Run]) -> tuple[Run, Run]:
    """The reduced real and local runs to compare: one of each, or for `redraw` the first pair that agrees.

    The last pair drawn is returned when none agrees, so that the difference shows.
    """
    pair: tuple[Run, Run] | None = None
    for real_run in real_runs:
        real = example.reduce(real_run)
        for _ in range(8 if example.redraw else 1):  # a local run takes about a second
            pair = (real, example.reduce(local_runs()))
            if not differences(*pair) or not example.redraw:
                return pair
    assert pair is not None, "no real run"
    return pair


# ---- the local runner ------------------------------------------------------------------------------------------


def run_locally(example: Example, home: Path) -> Run:
    """The example through pipelines.local, in its own VCPILOT_HOME; each leaf's log is its main.log."""
    if not example.local_cluster:
        return _read_local(run_workflow(example.path, {}, home=home))
    from components.volcano.cluster_local import LocalCluster

    cluster = LocalCluster(home)
    try:
        result = run_workflow(example.path, {}, home=home, cluster=cluster)
        run = _read_local(result)
        delete_run(result.name, home=home, cluster=cluster)  # and the Job it owns, as deleting the namespace does
        return run
    finally:
        cluster.close()


def _read_local(result: RunResult) -> Run:
    logs = {
        node["name"]: path.read_text()
        for node in result.status["nodes"].values()
        if (path := result.node_dir(node["id"]) / "main.log").is_file()
    }
    return read_run(result.name, result.status, logs)


# ---- the real controller ---------------------------------------------------------------------------------------


def for_the_nodes(workflow: dict[str, Any]) -> dict[str, Any]:
    """The example as the real nodes can run it: they hold its images, and there is no registry.

    `busybox` means `busybox:latest`, which the kubelet pulls every time (imagePullPolicy Always) and cannot;
    Never runs what the node holds (image.sh's `examples` image; the step image as python:alpine3.23, nodes.sh).
    Nothing else changes.
    """
    for template in workflow["spec"]["templates"]:
        for kind in ("container", "script"):
            if kind in template:
                template[kind]["imagePullPolicy"] = "Never"
    return workflow


def executor_rbac(namespace: str, rules: Iterable[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """The Role and RoleBinding the emissary executor needs as the namespace's `default` account: it reports each
    pod's outputs as a WorkflowTaskResult (docs/e2e.md); `rules` adds to it."""
    meta = {"name": "argo-executor", "namespace": namespace}
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta,
            "rules": [
                {"apiGroups": [GROUP], "resources": ["workflowtaskresults"], "verbs": ["create", "patch"]},
                *rules,
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "argo-executor"},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": namespace}],
        },
    ]


def prepare_namespace(admin: Any, namespace: str, example: Example, eventually: Callable[..., Any]) -> None:
    """Grant the executor its RBAC, and wait for the `default` service account the pods run as."""
    from kubernetes import client, utils

    for obj in executor_rbac(namespace, example.rules):
        utils.create_from_dict(admin, obj, namespace=namespace)
    core: Any = client.CoreV1Api(admin)

    def account() -> list[Any]:
        return core.list_namespaced_service_account(namespace, field_selector="metadata.name=default").items

    eventually(f"namespace {namespace} has its default service account", account, timeout=30)


def create_on_cluster(admin: Any, namespace: str, example: Example) -> tuple[str, PodLogs]:
    """Create the example as a Workflow in `namespace`: its name, and the reader of its pods' logs."""
    from kubernetes import client

    workflow = for_the_nodes(yaml.safe_load(example.path.read_text()))
    if example.generate_name:
        workflow["metadata"]["generateName"] = example.generate_name
    api: Any = client.CustomObjectsApi(admin)
    name = api.create_namespaced_custom_object(GROUP, VERSION, namespace, "workflows", workflow)["metadata"]["name"]
    return name, PodLogs(client.CoreV1Api(admin), namespace, name)


def ended_status(admin: Any, namespace: str, name: str) -> dict[str, Any] | None:
    """The workflow's status once the controller has ended it, else None."""
    from kubernetes import client

    api: Any = client.CustomObjectsApi(admin)
    status = api.get_namespaced_custom_object(GROUP, VERSION, namespace, "workflows", name).get("status") or {}
    return status if status.get("phase") in FINISHED else None


def run_on_cluster(admin: Any, namespace: str, example: Example, eventually: Callable[..., Any]) -> Run:
    """Create the example as a Workflow in `namespace`, and wait until the real controller ends it."""
    name, logs = create_on_cluster(admin, namespace, example)

    def ended() -> dict[str, Any] | None:
        logs.collect()
        return ended_status(admin, namespace, name)

    status = eventually(f"workflow {namespace}/{name} ends", ended, timeout=example.timeout_s)
    logs.collect(every_s=0)
    return read_run(name, status, logs.by_node)


class ClusterRuns:
    """The examples' first real runs, `at_once` at a time, each in a namespace of its own (with the executor's RBAC).

    One by one, the upstream examples spent most of their time in sleeps and the controller's requeues: side by
    side they take a third of it. A thread creates the workflows in the order given, reads each pod's log as soon as
    its container ends (PodLogs says why that cannot wait), and records each run when the controller ends it;
    `first_run` waits for one. A run that does not end within twice its example's timeout (it shares the machine),
    counted from its creation, is recorded as that failure.
    """

    def __init__(self, admin: Any, examples: Iterable[Example], at_once: int = 8) -> None:
        self.admin, self.at_once = admin, at_once
        self.waiting = list(examples)
        self.namespaces: dict[str, str] = {}
        self.runs: dict[str, Run | str] = {}
        self._done = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="argo-examples", daemon=True)
        self._thread.start()

    def namespace(self, example: Example) -> str:
        with self._done:
            self._done.wait_for(lambda: example.name in self.namespaces or example.name in self.runs)
        assert example.name in self.namespaces, self.runs[example.name]
        return self.namespaces[example.name]

    def first_run(self, example: Example) -> Run:
        with self._done:
            self._done.wait_for(lambda: example.name in self.runs)
        run = self.runs[example.name]
        assert isinstance(run, Run), run
        return run

    def close(self) -> None:
        from kubernetes import client

        self._stop.set()
        self._thread.join()
        for namespace in self.namespaces.values():
            client.CoreV1Api(self.admin).delete_namespace(namespace)

    def _loop(self) -> None:
        running: dict[str, tuple[Example, str, PodLogs, float]] = {}
        starting: list[Example] = []
        try:
            while (self.waiting or running) and not self._stop.is_set():
                while self.waiting and len(running) < self.at_once:
                    starting = [self.waiting.pop(0)]
                    namespace = self._prepare(starting[0])
                    name, logs = create_on_cluster(self.admin, namespace, starting[0])
                    running[starting[0].name] = (starting[0], name, logs, time.monotonic() + 2 * starting[0].timeout_s)
                    starting = []
                for key, (example, name, logs, deadline) in list(running.items()):
                    logs.collect()
                    namespace = self.namespaces[key]
                    if (status := ended_status(self.admin, namespace, name)) is not None:
                        logs.collect(every_s=0)
                        self._record(key, read_run(name, status, logs.by_node))
                    elif time.monotonic() > deadline:
                        self._record(key, f"workflow {namespace}/{name} did not end in {2 * example.timeout_s:.0f}s")
                    else:
                        continue
                    del running[key]
                time.sleep(0.5)
        except Exception as err:  # every test still waiting gets the reason
            for example in [*starting, *self.waiting, *(e for e, *_ in running.values())]:  # none waits forever
                self._record(example.name, f"the examples' runner failed: {err!r}")
            raise

    def _prepare(self, example: Example) -> str:
        from kubernetes import client

        namespace = f"e2e-{uuid.uuid4().hex[:6]}"
        core: Any = client.CoreV1Api(self.admin)
        core.create_namespace({"metadata": {"name": namespace}})
        with self._done:
            self.namespaces[example.name] = namespace
            self._done.notify_all()
        prepare_namespace(self.admin, namespace, example, _poll)
        return namespace

    def _record(self, key: str, run: Run | str) -> None:
        with self._done:
            self.runs[key] = run
            self._done.notify_all()


def _poll(what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.3)
    return value


class PodLogs:
    """The main container's log of each pod of a workflow, read as soon as the container ends, by node name.

    As soon as, because on this machine the two kubelets share /var/log/pods, and each one's garbage collection
    removes the other's pod log directories within a minute (deploy/e2e). A log lost that way stays unknown and
    is not compared; a container still running then gets a new log file from its kubelet, so a log that lost
    its beginning counts as the end of the local one (`differences`).
    """

    def __init__(self, core: Any, namespace: str, workflow: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.core, self.namespace, self.workflow, self.clock = core, namespace, workflow, clock
        self.by_node: dict[str, str] = {}
        self.lost: list[str] = []
        self._last = -math.inf

    def collect(self, every_s: float = 2.0) -> None:
        """Read the logs of pods whose main container ended since the last call (at most every `every_s`)."""
        if self.clock() - self._last < every_s:
            return
        self._last = self.clock()
        selector = f"workflows.argoproj.io/workflow={self.workflow}"
        for pod in self.core.list_namespaced_pod(self.namespace, label_selector=selector).items:
            node = (pod.metadata.annotations or {}).get(NODE_NAME)
            main = [c for c in pod.status.container_statuses or [] if c.name == "main"]
            if node is None or node in self.by_node or node in self.lost or not main or not main[0].state.terminated:
                continue
            # Raw bytes: the client would parse a log that reads as JSON (`["1","2"]`) and print it as Python.
            response = self.core.read_namespaced_pod_log(
                pod.metadata.name, self.namespace, container="main", _preload_content=False
            )
            text = bytes(response.data).decode(errors="replace")
            if text.startswith("failed to try resolving symlinks in path") and "/var/log/pods/" in text:
                self.lost.append(node)  # the kubelet answers 200 with this when the file is gone
            else:
                self.by_node[node] = EMISSARY_ERROR.sub("", text)
