"""`vcpilot cluster …`: look at and drive the embedded LocalCluster from a shell."""

from __future__ import annotations

import functools
import json
import sys
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from components.entry import JsonOption, confirm, lazy_group, new_app
from components.errors import InputError
from components.files import dump_yaml, kind_of, load_documents, source_name

if TYPE_CHECKING:  # imported where they are used: pydantic, sqlite and rich take a while, `--help` needs none
    from rich.console import Console

    from components.volcano.cluster import JobInfo
    from components.volcano.cluster_local import LocalCluster
    from components.volcano.locallogs import PodLog

__all__ = ["app"]

FOLLOW_POLL_S = 0.5  # how often `logs --follow` looks for new lines

JsonFlag = JsonOption


def _namespace(value: str | None) -> str | None:
    """A namespace typed is checked first: `-n 'My NS'` is a mistake to say, not a job that "does not exist"."""
    from components.names import check_namespace

    return value if value is None else check_namespace(value, "--namespace")


Namespace = Annotated[str, typer.Option("--namespace", "-n", callback=_namespace, help="Namespace of the job.")]


def fail(message: str) -> NoReturn:
    """End the command on bad input: one sentence, exit code 1 (components.errors)."""
    raise InputError(message)


def _cluster() -> LocalCluster:
    from components.volcano.cluster_local import LocalCluster

    return LocalCluster()


@functools.cache
def _console() -> Console:
    from rich.console import Console

    return Console()


def _dump(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True))


def status(as_json: JsonFlag = False) -> None:
    """Show nodes, queues and jobs."""
    # Plain aligned columns, as `kubectl get` prints them: rich's tables would cost more than the rest of the
    # command together (benchmarks/cli.py), and these read the same in a pipe.
    from pipelines.cluster_describe import columns, section

    nodes, queues, jobs = _cluster().status()
    if as_json:
        _dump(
            {
                "nodes": [asdict(n) for n in nodes],
                "queues": [asdict(q) for q in queues],
                "jobs": [asdict(j) for j in jobs],
            }
        )
        return
    rows = [["NAME", "READY", "GPUS USED/ALLOCATABLE"]]
    for n in nodes:
        rows.append([n.name, "yes" if n.ready else "NotReady", f"{n.gpu_allocated}/{n.gpu_allocatable}"])
    lines = section("Nodes", columns(rows))
    rows = [["NAME", "STATE", "WEIGHT", "CAPABILITY", "PENDING", "INQUEUE", "RUNNING"]]
    for q in queues:
        cap = ", ".join(f"{k}={v:g}" for k, v in q.capability.items()) or "-"
        rows.append([q.name, q.state, str(q.weight), cap, str(q.pending), str(q.inqueue), str(q.running)])
    lines += section("Queues", columns(rows))
    rows = [["NAME", "QUEUE", "PHASE", "RETRIES", "PODS", "MESSAGE"]]
    for j in jobs:
        rows.append([f"{j.namespace}/{j.name}", j.queue, j.phase, str(j.retry_count), _pods(j), j.message or ""])
    lines += section("Jobs", columns(rows) if jobs else ["<none>"])
    print("\n".join(lines))


# More pods than this in a job are counted by phase in `status` (`cluster get NAME` lists them), as vcctl's job list
# counts them: a gang of thousands would otherwise be one line of thousands of names.
STATUS_PODS_LISTED = 4


def _pods(job: JobInfo) -> str:
    if len(job.pods) > STATUS_PODS_LISTED:
        counts = Counter(p.phase for p in job.pods)
        return f"{len(job.pods)}: " + ", ".join(f"{n} {phase}" for phase, n in sorted(counts.items()))
    return ", ".join(f"{p.name}:{p.phase}" + (f"@{p.node}" if p.node else "") for p in job.pods) or "-"


def submit(
    file: Annotated[
        Path,
        typer.Argument(
            help="A Volcano Job (batch.volcano.sh/v1alpha1) in YAML or JSON, `-` for standard input; "
            "`vcpilot cluster sample` prints one."
        ),
    ],
    as_json: JsonFlag = False,
) -> None:
    """Submit a Volcano Job."""
    documents = load_documents(file, "Volcano Job", stdin=True)
    name = source_name(file)
    if not documents:
        fail(f"{name} holds no document; `vcpilot cluster sample` prints a Volcano Job to start from.")
    if len(documents) > 1:
        fail(f"{name} holds {len(documents)} YAML documents; submit one Volcano Job per file (split it at its '---').")
    if not isinstance(documents[0], dict):
        fail(f"{name} holds {kind_of(documents[0])}, not a Volcano Job (a mapping of fields).")
    manifest = documents[0]
    kind = (manifest.get("apiVersion"), manifest.get("kind"))
    if kind != ("batch.volcano.sh/v1alpha1", "Job"):
        fail(
            f"{name} is a {kind[1] or 'document'} of {kind[0] or 'no apiVersion'}, not a batch.volcano.sh/v1alpha1 Job."
        )
    info = _cluster().submit(manifest)
    if as_json:
        _dump(asdict(info))
    else:
        _console().print(f"job {info.namespace}/{info.name} submitted: {info.phase}")


def get(
    name: Annotated[str, typer.Argument(help="The job to show.")],
    namespace: Namespace = "default",
    as_json: JsonFlag = False,
) -> None:
    """Show one job and its pods."""
    info = _cluster().get(name, namespace)
    if as_json:
        _dump(asdict(info))
        return
    _console().print(f"job {info.namespace}/{info.name}: {info.phase} (retries {info.retry_count}, queue {info.queue})")
    if info.message:
        _console().print(f"  {info.message}", highlight=False)
    for p in info.pods:
        code = f" exit {p.exit_code}" if p.exit_code is not None else ""
        code += f" ({p.restarts} restarts)" if p.restarts else ""  # restarted in place (OnFailure, Always)
        _console().print(f"  {p.name} [{p.task}#{p.index}] {p.phase}{code} {p.node or ''} {p.reason or ''}")


def logs(
    name: Annotated[str, typer.Argument(help="The job whose pods' logs to print.")],
    namespace: Namespace = "default",
    pod: Annotated[str | None, typer.Option("--pod", help="Only this pod's runs (see `cluster get NAME`).")] = None,
    tail: Annotated[int | None, typer.Option("--tail", min=0, help="Only the last N lines of each run.")] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new lines until the job finishes (Ctrl-C stops).")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Print the logs of every run of the job's pods, in the order they ran (restarts after the runs before)."""
    from components.volcano.locallogs import tail_lines

    cluster = _cluster()
    if follow:
        if as_json:
            fail("--json prints one document once, --follow prints as lines come: use one of them.")
        _follow(cluster, name, namespace, pod, tail)
        return
    runs = cluster.pod_logs(name, namespace, pod)
    texts = [tail_lines(r.read().decode(errors="replace"), tail) for r in runs]
    if as_json:
        _dump(
            {
                "job": f"{namespace}/{name}",
                "runs": [
                    {"pod": r.pod, "generation": r.generation, "run": r.run, "path": str(r.path), "text": text}
                    for r, text in zip(runs, texts, strict=True)
                ],
            }
        )
        return
    for run, text in zip(runs, texts, strict=True):
        _print_run(run, text)


def _print_run(run: PodLog, text: str) -> None:
    sys.stdout.write(f"==> {run.path.name} <==\n")
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
    sys.stdout.flush()


def _follow(cluster: LocalCluster, name: str, namespace: str, pod: str | None, tail: int | None) -> None:
    """Print each run's lines as they are written, new runs as they start, until the job is finished."""
    from components.volcano.locallogs import Follower

    follower = Follower(tail)
    while True:
        # Finished before reading: whatever the pods wrote is then on disk, and this pass prints the rest of it.
        finished = cluster.get(name, namespace).finished
        for run in cluster.pod_logs(name, namespace, pod):
            follower.show(run.path, f"==> {run.path.name} <==", finished)
        if finished:
            return
        time.sleep(FOLLOW_POLL_S)


def events(
    of: Annotated[
        str | None,
        typer.Option(
            "--for",
            metavar="KIND/NAME",
            help="Only the events of job/NAME (with its pods'), pod/NAME, or node/NAME (those naming the node).",
        ),
    ] = None,
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace", "-n", callback=_namespace, help="Only this namespace's events (default: every one)."
        ),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many, the most recent.")] = 200,
    as_json: JsonFlag = False,
) -> None:
    """List the events LocalCluster recorded (submitted, scheduled, pod exits, restarts, evictions), oldest first."""
    cluster = _cluster()
    if of is None:
        found = cluster.all_events(namespace=namespace, limit=limit)
    else:
        from pipelines.cluster_describe import node_events, parse_ref

        kind, obj = parse_ref(of)
        ns = namespace or "default"
        if kind == "job":
            found = cluster.all_events(namespace=ns, job=obj, limit=limit)
            if not found:
                cluster.get(obj, ns)  # JobNotFound names it when it never existed
        elif kind == "pod":
            found = cluster.all_events(namespace=ns, obj=f"Pod/{obj}", limit=limit)
            if not found:
                cluster.find_pod(obj, ns)
        elif kind == "node":
            found = node_events(cluster, obj, limit)
        else:
            fail(f"queues have no events of their own: see `vcpilot cluster describe {of}` for the jobs in it.")
    from pipelines.cluster_describe import event_rows, render_events

    now = time.time()
    if as_json:
        _dump({"events": event_rows(found, now)})
        return
    for line in render_events(found, now, with_job=True):
        print(line)


def describe_command(
    ref: Annotated[
        str,
        typer.Argument(
            metavar="KIND/NAME",
            help="What to describe: job/NAME, pod/NAME, queue/NAME or node/NAME (kubectl's short names too).",
        ),
    ],
    namespace: Namespace = "default",
    as_json: JsonFlag = False,
) -> None:
    """Show one job, pod, queue or node in detail, with its events (as `kubectl describe` does)."""
    from pipelines.cluster_describe import describe, parse_ref

    kind, name = parse_ref(ref)
    data, text = describe(_cluster(), kind, name, namespace, time.time())
    if as_json:
        _dump(data)
    else:
        print(text)


def delete(
    name: Annotated[str, typer.Argument(help="The job to delete.")],
    namespace: Namespace = "default",
    as_json: JsonFlag = False,
) -> None:
    """Delete a job and kill its pods."""
    _cluster().delete(name, namespace)
    if as_json:
        _dump({"deleted": f"{namespace}/{name}"})
    else:
        _console().print(f"job {namespace}/{name} deleted")


def fail_node(
    node: Annotated[str, typer.Argument(help="The node to turn NotReady.")], as_json: JsonFlag = False
) -> None:
    """Turn a node NotReady: its pods are killed and evicted."""
    evicted = _cluster().fail_node(node)
    if as_json:
        _dump({"node": node, "ready": False, "evicted": evicted})
    else:
        _console().print(f"node {node} is NotReady; evicted: {', '.join(evicted) or 'nothing'}")


def recover_node(
    node: Annotated[str, typer.Argument(help="The failed node to make Ready.")], as_json: JsonFlag = False
) -> None:
    """Make a failed node Ready again."""
    _cluster().recover_node(node)
    if as_json:
        _dump({"node": node, "ready": True})
    else:
        _console().print(f"node {node} is Ready")


def sample(
    name: Annotated[str | None, typer.Option(help="The job's name (default: the sample's own).")] = None,
    pods: Annotated[int, typer.Option(min=1, help="Pods in the gang.")] = 2,
    gpus: Annotated[int, typer.Option(min=0, help="GPUs each pod asks.")] = 1,
    as_json: JsonFlag = False,
) -> None:
    """Print a Volcano Job to start from: `vcpilot cluster sample > job.yaml; vcpilot cluster submit job.yaml`."""
    from pydantic import ValidationError

    from components.entry import option_error
    from components.volcano.validation import validate_job
    from pipelines.cluster_sample import SAMPLE_NAME, sample_job

    name = SAMPLE_NAME if name is None else name  # `--name ''` is refused below, not taken for the default
    try:
        job = sample_job(name, pods, gpus)
    except ValidationError as err:  # what the models bound: more pods than a task's replicas (an int32) holds
        raise option_error(err, {"replicas": "pods", "min_available": "pods"}) from None
    try:  # what `cluster submit` would refuse: a name that is not a DNS-1123 subdomain of at most 63 characters
        validate_job(job)
    except ValueError as err:
        fail(f"--name is invalid: {err}")
    manifest = job.to_dict()
    if as_json:
        _dump(manifest)
        return
    print("# A gang of pods that each print a line; submit it with `vcpilot cluster submit FILE`,")
    print(f"# then watch it with `vcpilot cluster describe job/{name}` and `vcpilot cluster logs {name}`.")
    print(dump_yaml(manifest), end="")


def reset(
    config: Annotated[Path | None, typer.Option(help="Cluster YAML (nodes, queues, priorityClasses).")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before deleting jobs and killing pods.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Kill every pod and start an empty cluster (from --config, VCPILOT_HOME/cluster.yaml or the default).

    The config is checked first: a refused one leaves the cluster as it was. When jobs would be lost it asks
    first; without a terminal to ask at, it refuses unless --yes is given. A damaged state is moved aside.
    """
    from components.volcano.cluster import StateDamaged
    from components.volcano.cluster_local import LocalCluster
    from components.volcano.localconfig import load_config

    if config is not None:
        load_config(config)  # a refused config changes nothing, and is said before anything is asked
    try:
        jobs = _cluster().list_jobs()
    except StateDamaged:  # nothing can be read of it to lose: start over
        jobs = []
    if jobs and not yes:
        running = sum(p.phase == "Running" for j in jobs for p in j.pods)
        loss = f"delete {len(jobs)} job(s) and kill {running} running pod(s)"
        confirm(
            f"cluster reset will {loss}. Reset?",
            f"cluster reset would {loss}: pass --yes to reset when there is no terminal to confirm at.",
            "cluster left as it was",
        )
    where = LocalCluster.start_over(config=config)
    cluster = _cluster()
    if as_json:
        _dump(
            {
                "deleted_jobs": [f"{j.namespace}/{j.name}" for j in jobs],
                "nodes": [n.name for n in cluster.nodes()],
                "queues": [q.name for q in cluster.queues()],
                "damaged_state_moved_to": None if where.name == "cluster.db" else str(where),
            }
        )
        return
    if where.name != "cluster.db":
        _console().print(f"the damaged state was moved to {where}", highlight=False)
    _console().print("cluster reset" + (f": {len(jobs)} job(s) deleted" if jobs else ""))


def _group() -> None:
    pass  # typer makes a group of an app with a callback; the commands come from the LazyGroup


# Built as `vcpilot` itself is (components.entry.LazyGroup): `cluster status` builds its own command only.
app = new_app(
    help="The embedded Volcano cluster (LocalCluster) under VCPILOT_HOME.",
    cls=lazy_group(
        {
            "status": status,
            "submit": submit,
            "get": get,
            "logs": logs,
            "events": events,
            "describe": describe_command,
            "delete": delete,
            "fail-node": fail_node,
            "recover-node": recover_node,
            "sample": sample,
            "reset": reset,
        }
    ),
)
app.callback()(_group)
