"""`vcpilot run-workflow FILE` and `vcpilot resume NAME`: the local runner with a live tree of its nodes.

Wire into the main CLI with `app.command("run-workflow")(run_workflow_command)` and
`app.command("resume")(resume_command)`; `python -m pipelines.local.cli` runs the same two commands alone.
The exit code is 0 only when the workflow Succeeded (1 when it did not, 2 for input it cannot run, 130 when
Ctrl-C stopped it). On a terminal the run's steps are a live tree; piped, one line per step that starts or ends
(`components/progress.py`); with `--json` those lines go to stderr and stdout gets the final status only.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console, Group
from rich.text import Text
from rich.tree import Tree

from components.entry import reported
from components.errors import InputError
from components.progress import Progress
from pipelines.local.engine.status import parse_rfc3339
from pipelines.local.runner import Interrupted, RunResult, StopRequest, resume, run_workflow
from pipelines.local.watch import EXIT_INTERRUPTED, NodeEvents, interrupts, resume_hint
from pipelines.local.workflow import Workflow, WorkflowError

__all__ = [
    "PARAMETER_CHECKS",
    "app",
    "check_template_parameters",
    "parse_params",
    "render_status",
    "report_run",
    "resume_command",
    "run_workflow_command",
]

_ICONS = {
    "Succeeded": ("✔", "green"),
    "Failed": ("✖", "red"),
    "Error": ("⚠", "red"),
    "Running": ("●", "yellow"),
    "Pending": ("◷", "yellow"),
    "Skipped": ("○", "dim"),
    "Omitted": ("∅", "dim"),
}
_GROUPING = ("Retry", "TaskGroup", "StepGroup", "Steps", "DAG")


@reported
def run_workflow_command(
    file: Annotated[Path, typer.Argument(help="A Workflow or WorkflowTemplate YAML file (e.g. from deploy/argo/).")],
    parameter: Annotated[
        list[str] | None, typer.Option("--parameter", "-p", help="NAME=VALUE for a workflow parameter; repeatable.")
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print only the final workflow status as JSON.")] = False,
    name: Annotated[
        str | None, typer.Option(help="Run name (default: metadata.name or generateName + suffix).")
    ] = None,
) -> None:
    """Run an Argo workflow on this machine, as Argo's controller would; exit 0 only when it Succeeded."""
    params = parse_params(parameter)
    report_run(
        lambda on_update, stop, _progress: run_workflow(
            file, params, name=name, on_update=on_update, stop=stop, check=check_template_parameters
        ),
        json_output,
    )


@reported
def resume_command(
    name: Annotated[str, typer.Argument(help="The run to continue (its workflow name).")],
    json_output: Annotated[bool, typer.Option("--json", help="Print only the final workflow status as JSON.")] = False,
) -> None:
    """Continue a run whose runner was killed or stopped: finished nodes are kept, interrupted ones run again."""
    report_run(lambda on_update, stop, _progress: resume(name, on_update=on_update, stop=stop), json_output)


# The parameter rules of known WorkflowTemplates, by name, beyond what their declarations say (types, sizes):
# checked before a run starts. `pipelines.cli` adds llm-autopilot's (pipelines.parameters), above this package.
PARAMETER_CHECKS: dict[str, Callable[[Mapping[str, str]], None]] = {}


def check_template_parameters(workflow: Workflow) -> None:
    """Refuse (WorkflowError) parameters the workflow's template's own rules refuse, before the run starts."""
    rule = PARAMETER_CHECKS.get(workflow.from_template)
    if rule is None:
        return
    try:
        rule(workflow.parameters)
    except ValueError as err:
        raise WorkflowError(str(err)) from None


def parse_params(values: list[str] | None) -> dict[str, str]:
    """`name=value` pairs from repeated `-p` options; InputError names the malformed one."""
    params: dict[str, str] = {}
    for item in values or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InputError(f"-p {item!r} is not NAME=VALUE")
        params[name.strip()] = value
    return params


Start = Callable[[Callable[[dict[str, Any]], None] | None, StopRequest, Progress], RunResult]


def report_run(start: Start, json_output: bool) -> None:
    """Run `start(on_update, stop, progress)` showing its steps; exit 0 only when it Succeeded, 130 when stopped.

    The first Ctrl-C sets `stop` (the runner stops the run's pods and records it stopped), a second one exits
    at once (`pipelines/local/watch.py`). A `VcpilotError` (a `WorkflowError`: bad file, parameter or name)
    reaches the command's `reported`.
    """
    progress = Progress.for_command(json_output)
    stop = StopRequest()
    try:
        with interrupts(stop):
            if progress.mode == "live":
                with progress.display(Text("starting…")) as show:
                    result = start(lambda status: show(render_status(status)), stop, progress)
            else:
                events = NodeEvents(progress.event, lambda: stop.run_name) if progress.mode == "plain" else None
                result = start(events, stop, progress)
    except Interrupted:
        typer.echo("stopped before the workflow started: nothing ran, nothing to resume", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED) from None
    if json_output:
        print(json.dumps(result.status, indent=2))
    else:
        console = Console()
        console.print(render_status(result.status))
        console.print(_summary(result))
        if result.phase != "Succeeded" and not result.stopped:
            for line in _failures(result):
                console.print(line, highlight=False, soft_wrap=True)
        console.print(_next_steps(result.name), highlight=False, soft_wrap=True)
    if result.stopped:
        typer.echo(f"stopped {result.name} and its pods; {resume_hint(result.name)}", err=True)
        raise typer.Exit(EXIT_INTERRUPTED)
    raise typer.Exit(0 if result.phase == "Succeeded" else 1)


def _summary(result: RunResult) -> Text:
    icon, style = _ICONS.get(result.phase, ("?", ""))
    line = Text(f"{icon} {result.name} {result.phase}", style=style)
    if result.status.get("message"):
        line.append(f": {result.status['message']}")
    line.append(f"  ({result.home / 'runs' / result.name / 'status.json'})", style="dim")
    return line


def _failures(result: RunResult) -> list[Text]:
    """Each failed step with why (the last line of its output) and where its log is: the reason, not only a code."""
    lines = []
    for step in result.failed_steps():
        icon, style = _ICONS.get(step.phase, ("?", ""))
        line = Text(f"  {icon} {step.name}", style=style)
        if step.template:
            line.append(f" ({step.template})", style="cyan")
        line.append(f" {step.phase}")
        for said in dict.fromkeys(x for x in (step.reason, step.message) if x):
            line.append(f": {said}")
        lines.append(line)
        if step.log is not None:
            lines.append(Text(f"      log: {step.log}", style="dim"))
    return lines


def _next_steps(name: str) -> Text:
    """How to look at the run again: the commands live in `pipelines/cli_runs.py`, above this package."""
    return Text.assemble(
        "look at it again: ",
        (f"vcpilot runs show {name}", "bold"),
        " (steps, decisions, reports) · ",
        (f"vcpilot runs logs {name} [STEP]", "bold"),
        " · ",
        ("vcpilot ui", "bold"),
        " (MLflow)",
    )


def render_status(status: dict[str, Any]) -> Group:
    """The nodes of a status as a tree: each node under its step group, loop, retry or DAG."""
    nodes: dict[str, dict[str, Any]] = status.get("nodes") or {}
    parents: dict[str, str | None] = {nid: None for nid in nodes}
    for nid, node in nodes.items():
        for child in node.get("children") or []:
            if child in nodes and parents[child] is None:
                hooked = (nodes[child].get("nodeFlag") or {}).get("hooked")
                if node.get("type") in _GROUPING or hooked:
                    parents[child] = nid
    for nid, node in nodes.items():
        if parents[nid] is None and node.get("boundaryID") in nodes:
            parents[nid] = node["boundaryID"]
    kids: dict[str | None, list[str]] = {}
    for nid in nodes:
        kids.setdefault(parents[nid], []).append(nid)
    trees = []
    for root in kids.get(None, []):
        tree = Tree(_label(nodes[root]))
        _grow(tree, root, nodes, kids)
        trees.append(tree)
    return Group(*trees)


def _grow(tree: Tree, nid: str, nodes: dict[str, dict[str, Any]], kids: dict[str | None, list[str]]) -> None:
    for child in kids.get(nid, []):
        _grow(tree.add(_label(nodes[child])), child, nodes, kids)


def _label(node: dict[str, Any]) -> Text:
    icon, style = _ICONS.get(node.get("phase", ""), ("?", ""))
    text = Text(f"{icon} ", style=style)
    text.append(str(node.get("displayName") or node.get("name")), style="bold")
    if node.get("templateName"):
        text.append(f"  {node['templateName']}", style="cyan")
    started, finished = parse_rfc3339(node.get("startedAt")), parse_rfc3339(node.get("finishedAt"))
    if started:
        text.append(f"  {int((finished or time.time()) - started)}s", style="dim")
    if node.get("message"):
        text.append(f"  {node['message']}", style="dim" if node.get("phase") == "Skipped" else style)
    elif node.get("type") == "Pod" and (result := str((node.get("outputs") or {}).get("result") or "")):
        # Deciding steps print their reason as their result: show it, so the tree explains the run.
        first = result.strip().splitlines()[0] if result.strip() else ""
        text.append(f"  → {first[:160]}{'…' if len(first) > 160 else ''}", style="italic")
    return text


app = typer.Typer(help="The local Argo runner.", no_args_is_help=True, pretty_exceptions_enable=False)
app.command("run-workflow")(run_workflow_command)
app.command("resume")(resume_command)

if __name__ == "__main__":
    app()
