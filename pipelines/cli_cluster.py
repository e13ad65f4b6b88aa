"""`vcpilot cluster …`: look at and drive the embedded LocalCluster from a shell."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from components.entry import JsonOption, new_app
from components.errors import InputError
from components.files import load_documents

if TYPE_CHECKING:
    from rich.console import Console

    from components.volcano.cluster_local import LocalCluster

__all__ = ["app"]

app = new_app(help="The embedded Volcano cluster (LocalCluster) under VCPILOT_HOME.")

JsonFlag = JsonOption
Namespace = Annotated[str, typer.Option("--namespace", "-n", help="Namespace of the job.")]
JobName = Annotated[str, typer.Argument(help="The job's name (see `vcpilot cluster status`).", show_default=False)]
NodeName = Annotated[str, typer.Argument(help="The node's name (see `vcpilot cluster status`).", show_default=False)]


def fail(message: str) -> NoReturn:
    """End the command on bad input: one sentence, exit code 1 (components.errors)."""
    raise InputError(message)


def _cluster() -> LocalCluster:
    from components.volcano.cluster_local import LocalCluster  # imported here: pydantic and sqlite take a while

    return LocalCluster()


@functools.cache
def _console() -> Console:
    from rich.console import Console

    return Console()


def _dump(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True))


@app.command()
def status(as_json: JsonFlag = False) -> None:
    """Show nodes, queues and jobs."""
    from rich.table import Table

    cluster = _cluster()
    nodes, queues, jobs = cluster.nodes(), cluster.queues(), cluster.list_jobs()
    if as_json:
        _dump(
            {
                "nodes": [n.model_dump() for n in nodes],
                "queues": [q.model_dump() for q in queues],
                "jobs": [j.model_dump() for j in jobs],
            }
        )
        return
    table = Table("node", "ready", "GPUs used/allocatable", title="Nodes")
    for n in nodes:
        table.add_row(n.name, "yes" if n.ready else "[red]NotReady[/red]", f"{n.gpu_allocated}/{n.gpu_allocatable}")
    _console().print(table)
    table = Table("queue", "state", "weight", "capability", "pending", "inqueue", "running", title="Queues")
    for q in queues:
        cap = ", ".join(f"{k}={v:g}" for k, v in q.capability.items()) or "-"
        table.add_row(q.name, q.state, str(q.weight), cap, str(q.pending), str(q.inqueue), str(q.running))
    _console().print(table)
    table = Table("job", "queue", "phase", "retries", "pods", "message", title="Jobs")
    for j in jobs:
        pods = ", ".join(f"{p.name}:{p.phase}" + (f"@{p.node}" if p.node else "") for p in j.pods) or "-"
        table.add_row(f"{j.namespace}/{j.name}", j.queue, j.phase, str(j.retry_count), pods, j.message or "")
    _console().print(table)


@app.command()
def submit(
    file: Annotated[Path, typer.Argument(help="A Volcano Job (batch.volcano.sh/v1alpha1) in YAML or JSON.")],
    as_json: JsonFlag = False,
) -> None:
    """Submit a Volcano Job."""
    documents = load_documents(file, "Volcano Job")
    if len(documents) != 1 or not isinstance(documents[0], dict):
        fail(f"{file} does not hold one Volcano Job object.")
    manifest = documents[0]
    kind = (manifest.get("apiVersion"), manifest.get("kind"))
    if kind != ("batch.volcano.sh/v1alpha1", "Job"):
        fail(
            f"{file} is a {kind[1] or 'document'} of {kind[0] or 'no apiVersion'}, not a batch.volcano.sh/v1alpha1 Job."
        )
    info = _cluster().submit(manifest)
    if as_json:
        _dump(info.model_dump())
    else:
        _console().print(f"job {info.namespace}/{info.name} submitted: {info.phase}")


@app.command()
def get(name: JobName, namespace: Namespace = "default", as_json: JsonFlag = False) -> None:
    """Show one job and its pods."""
    info = _cluster().get(name, namespace)
    if as_json:
        _dump(info.model_dump())
        return
    _console().print(f"job {info.namespace}/{info.name}: {info.phase} (retries {info.retry_count}, queue {info.queue})")
    if info.message:
        _console().print(f"  {info.message}", highlight=False)
    for p in info.pods:
        code = f" exit {p.exit_code}" if p.exit_code is not None else ""
        _console().print(f"  {p.name} [{p.task}#{p.index}] {p.phase}{code} {p.node or ''} {p.reason or ''}")


@app.command()
def logs(name: JobName, namespace: Namespace = "default") -> None:
    """Print the logs of every pod run of a job."""
    entries = _cluster().logs(name, namespace)
    for file_name, text in entries:
        print(f"==> {file_name} <==")
        print(text, end="" if text.endswith("\n") or not text else "\n")


@app.command()
def delete(name: JobName, namespace: Namespace = "default") -> None:
    """Delete a job and kill its pods."""
    _cluster().delete(name, namespace)
    _console().print(f"job {namespace}/{name} deleted")


@app.command("fail-node")
def fail_node(node: NodeName) -> None:
    """Turn a node NotReady: its pods are killed and evicted."""
    evicted = _cluster().fail_node(node)
    _console().print(f"node {node} is NotReady; evicted: {', '.join(evicted) or 'nothing'}")


@app.command("recover-node")
def recover_node(node: NodeName) -> None:
    """Make a failed node Ready again."""
    _cluster().recover_node(node)
    _console().print(f"node {node} is Ready")


@app.command()
def reset(
    config: Annotated[Path | None, typer.Option(help="Cluster YAML (nodes, queues, priorityClasses).")] = None,
) -> None:
    """Kill every pod and start an empty cluster (from --config, VCPILOT_HOME/cluster.yaml or the default).

    The config is checked first: a refused one leaves the cluster as it was. A damaged state is moved aside.
    """
    from components.volcano.cluster_local import LocalCluster  # imported here: pydantic and sqlite take a while

    where = LocalCluster.start_over(config=config)
    if where.name != "cluster.db":
        _console().print(f"the damaged state was moved to {where}", highlight=False)
    _console().print("cluster reset")
