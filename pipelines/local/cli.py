"""`vcpilot run-workflow FILE` and `vcpilot resume NAME`: the local runner with a live tree of its nodes.

Wire into the main CLI with `app.command("run-workflow")(run_workflow_command)` and
`app.command("resume")(resume_command)`; `python -m pipelines.local.cli` runs the same two commands alone.
The exit code is 0 only when the workflow Succeeded (1 when it did not or its input is wrong, 2 for a bad command
line, 130 when Ctrl-C stopped it). On a terminal the run's steps are a live tree; piped, one line per step that
starts or ends (`components/progress.py`); with `--json` those lines go to stderr and stdout gets the final status.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias

import typer

from components.entry import new_app
from components.errors import InputError

if TYPE_CHECKING:  # rich, the progress display and the runner are imported where they are used: `--help` needs none
    from rich.console import Console, ConsoleOptions, Group, RenderResult
    from rich.text import Text
    from rich.tree import Tree

    from components.progress import Progress
    from pipelines.local.runner import RunResult, StopRequest
    from pipelines.local.workflow import Workflow

__all__ = [
    "PARAMETER_CHECKS",
    "JsonStatus",
    "ParamFileOption",
    "ParamOption",
    "app",
    "check_template_parameters",
    "parse_params",
    "workflow_params",
    "render_status",
    "report_run",
    "resume_command",
    "run_workflow_command",
]

# `-p NAME=VALUE` of every command that starts a workflow: run-workflow, run and submit.
ParamOption = Annotated[
    list[str] | None,
    typer.Option("--param", "-p", metavar="NAME=VALUE", help="A workflow parameter; repeatable."),
]
# `-f FILE` beside it, as `argo submit --parameter-file`: a YAML or JSON mapping of parameter names to values.
ParamFileOption = Annotated[
    Path | None,
    typer.Option(
        "--parameter-file",
        "-f",
        metavar="FILE",
        help="A YAML or JSON file of workflow parameters, NAME: VALUE each, as for argo submit -f.",
        show_default=False,
    ),
]
JsonStatus = Annotated[bool, typer.Option("--json", help="Print only the final workflow status, as one JSON document.")]

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


def run_workflow_command(
    file: Annotated[
        Path,
        typer.Argument(
            help="A Workflow, WorkflowTemplate, ClusterWorkflowTemplate or CronWorkflow (run once) YAML file; "
            "`-` for standard input."
        ),
    ],
    param: ParamOption = None,
    parameter_file: ParamFileOption = None,
    json_output: JsonStatus = False,
    name: Annotated[
        str | None, typer.Option(help="Run name (default: metadata.name or generateName + suffix).")
    ] = None,
    entrypoint: Annotated[
        str | None,
        typer.Option(help="The template to start with instead of spec.entrypoint, as for argo submit --entrypoint."),
    ] = None,
    parameter: Annotated[list[str] | None, typer.Option("--parameter", hidden=True)] = None,  # its old spelling
) -> None:
    """Run an Argo workflow on this machine, as Argo's controller would; exit 0 only when it Succeeded."""
    from pipelines.local.runner import run_workflow

    params = workflow_params([*(param or []), *(parameter or [])], parameter_file)
    if entrypoint == "":
        raise InputError("--entrypoint is empty; name the template to start with, or leave it out")

    def check(workflow: Workflow) -> None:
        check_file(file)
        check_template_parameters(workflow)

    report_run(
        lambda on_update, stop, _progress: run_workflow(
            file, params, name=name, on_update=on_update, stop=stop, check=check, entrypoint=entrypoint
        ),
        json_output,
    )


def resume_command(
    name: Annotated[str, typer.Argument(help="The run to continue (its workflow name).")],
    output_parameter: Annotated[
        list[str] | None,
        typer.Option(
            "--output-parameter",
            metavar="NAME=VALUE",
            help="A value for a suspended step's supplied output parameter (as argo node set); repeatable.",
        ),
    ] = None,
    json_output: JsonStatus = False,
) -> None:
    """Continue a run whose runner was killed or stopped, and resume its suspended steps (as argo resume).

    Finished nodes are kept, interrupted ones run again. While the run's runner still runs, only its suspended
    steps are resumed, and the runner goes on.
    """
    from pipelines.local.runner import resume

    outputs = parse_params(output_parameter, "--output-parameter")
    report_run(
        lambda on_update, stop, _progress: resume(name, on_update=on_update, stop=stop, outputs=outputs), json_output
    )


# Where the parameter rules of known WorkflowTemplates are found, beyond what their declarations say (types,
# sizes): asked with the template's name before a run starts. `pipelines.cli` adds llm-autopilot's
# (pipelines.parameters), above this package; each finder imports its rules only when asked.
PARAMETER_CHECKS: list[Callable[[str], Callable[[Mapping[str, str]], None] | None]] = []


# What Argo refuses at submit beyond what the loader checks, asked of the workflow's file before a run starts:
# `pipelines.cli` adds `vcpilot lint`'s rules (pipelines.lint), above this package. Each says its first problem.
FILE_CHECKS: list[Callable[[Path], str | None]] = []


def check_file(file: Path) -> None:
    """Refuse (WorkflowError) a workflow file that a FILE_CHECKS rule finds a problem in."""
    from pipelines.local.workflow import WorkflowError

    for rule in FILE_CHECKS:
        problem = rule(file)
        if problem is not None:
            raise WorkflowError(problem)


def check_template_parameters(workflow: Workflow) -> None:
    """Refuse (WorkflowError) parameters the workflow's template's own rules refuse, before the run starts."""
    from pipelines.local.workflow import WorkflowError

    for find in PARAMETER_CHECKS:
        rule = find(workflow.from_template)
        if rule is None:
            continue
        try:
            rule(workflow.parameters)
        except ValueError as err:
            raise WorkflowError(str(err)) from None


def parse_params(values: list[str] | None, option: str = "--param") -> dict[str, str]:
    """`name=value` pairs from a repeated option (`-p`); InputError names the malformed one, or a name given twice.

    As `argo submit`: the name is everything before the first `=` (a space in it is no parameter's), and a name given
    twice puts the parameter twice in the workflow's arguments, which Argo's validator refuses (not unique).
    """
    params: dict[str, str] = {}
    for item in values or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise InputError(f"{option} {item!r} is not NAME=VALUE; write {option} name=value")
        if name in params:
            raise InputError(f"{option} {name!r} is given twice ({params[name]!r} and {value!r}); give it once")
        params[name] = value
    return params


def workflow_params(values: list[str] | None, parameter_file: Path | None) -> dict[str, str]:
    """The parameters of `-p NAME=VALUE` and of `-f FILE`; InputError, one sentence, for a bad one.

    As `argo submit --parameter-file` reads the file (workflow/util.ReadParametersFile): a mapping whose string
    values are taken as they are and any other value as Go's JSON of it (`1e3` is 1000, `{a: 1}` is `{"a":1}`),
    added after the `-p` ones. A name given by both would be in the workflow's arguments twice, which Argo
    refuses; so it is here, before anything runs.
    """
    from components.files import load_document
    from pipelines.local.govalues import go_json

    params = parse_params(values)
    if parameter_file is None:
        return params
    label = f"--parameter-file {parameter_file}"
    for key, value in load_document(parameter_file, "parameter file").items():
        name = str(key)
        if not name or "=" in name:  # argo splits `NAME=VALUE` at the first '=': the name would lose its tail
            raise InputError(f"{label} names a parameter {name!r}; a parameter's name is not empty and has no '='")
        if name in params:
            raise InputError(f"{label} gives {name!r}, which --param gives too; give it once")
        try:
            params[name] = value if isinstance(value, str) else go_json(value)
        except ValueError:  # .nan, .inf: json.Marshal refuses them, and so argo submit
            raise InputError(f"{label} gives {name!r} a value JSON cannot hold ({value!r}); quote it") from None
    return params


Start: TypeAlias = "Callable[[Callable[[dict[str, Any]], None] | None, StopRequest, Progress], RunResult]"


def report_run(start: Start, json_output: bool) -> None:
    """Run `start(on_update, stop, progress)` showing its steps; exit 0 only when it Succeeded, 130 when stopped.

    The first Ctrl-C sets `stop` (the runner stops the run's pods and records it stopped), a second one exits
    at once (`pipelines/local/watch.py`). A `VcpilotError` (a `WorkflowError`: bad file, parameter or name) ends
    as `components.entry` ends every error.
    """
    from rich.console import Console
    from rich.text import Text

    from components.progress import Progress
    from pipelines.local.runner import Interrupted, StopRequest
    from pipelines.local.watch import EXIT_INTERRUPTED, NodeEvents, interrupts, resume_hint

    progress = Progress.for_command(json_output)
    stop = StopRequest()
    try:
        with interrupts(stop):

            def logs(node_id: str) -> Path | None:
                return stop.run_dir / "nodes" / node_id / "main.log" if stop.run_dir else None

            if progress.mode == "live":
                with progress.display(Text("starting…")) as show:
                    result = start(lambda status: show(render_status(status, logs)), stop, progress)
            elif progress.mode == "plain":
                events = NodeEvents(progress.event, lambda: stop.run_name, logs)
                with events.saying():
                    result = start(events, stop, progress)
            else:
                result = start(None, stop, progress)
    except Interrupted:
        typer.echo("stopped before the workflow started: nothing ran, nothing to resume", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED) from None
    if result.resumed:  # the run's own runner goes on with them
        if json_output:
            print(json.dumps({"name": result.name, "resumed": list(result.resumed)}, indent=2))
        else:
            typer.echo(f"resumed {', '.join(result.resumed)} of {result.name}; its runner goes on")
        raise typer.Exit(0)
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
    from rich.text import Text

    icon, style = _ICONS.get(result.phase, ("?", ""))
    line = Text(f"{icon} {result.name} {result.phase}", style=style)
    if result.status.get("message"):
        line.append(f": {result.status['message']}")
    line.append(f"  ({result.home / 'runs' / result.name / 'status.json'})", style="dim")
    return line


def _failures(result: RunResult) -> list[Text]:
    """Each failed step with why (the last line of its output) and where its log is: the reason, not only a code."""
    from rich.text import Text

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
    from rich.text import Text

    return Text.assemble(
        "look at it again: ",
        (f"vcpilot runs show {name}", "bold"),
        " (steps, decisions, reports) · ",
        (f"vcpilot runs logs {name} [STEP]", "bold"),
        " · ",
        ("vcpilot ui", "bold"),
        " (MLflow)",
    )


def render_status(status: dict[str, Any], logs: Callable[[str], Path | None] | None = None) -> Group:
    """The nodes of a status as a tree: each node under its step group, loop, retry or DAG.

    With `logs` (a node id to its log), a running step shows the last line it wrote, read again each time the
    live display draws: the plan step's `waiting: …`, the trainer's steps.
    """
    from rich.console import Group
    from rich.tree import Tree

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
        tree = Tree(_label(nodes[root], logs))
        _grow(tree, root, nodes, kids, logs)
        trees.append(tree)
    return Group(*trees)


def _grow(
    tree: Tree,
    nid: str,
    nodes: dict[str, dict[str, Any]],
    kids: dict[str | None, list[str]],
    logs: Callable[[str], Path | None] | None,
) -> None:
    for child in kids.get(nid, []):
        _grow(tree.add(_label(nodes[child], logs)), child, nodes, kids, logs)


class _LastLine:
    """A running step's label and the last line of its log, read when drawn (escaped: a step writes anything)."""

    def __init__(self, label: Text, log: Path) -> None:
        self.label, self.log = label, log
        self._seen: tuple[tuple[int, int], str] | None = None  # (mtime, size) of the log and its last line then

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from components.untrusted import printable
        from pipelines.local.runner import last_line

        try:
            stat = self.log.stat()
            version = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            version = (0, 0)
        if self._seen is None or self._seen[0] != version:  # drawn 8 times a second: read only what changed
            self._seen = (version, last_line(self.log))
        text = self.label.copy()
        if self._seen[1]:
            text.append(f"  · {printable(self._seen[1], 160)}", style="dim")
        yield text


def _label(node: dict[str, Any], logs: Callable[[str], Path | None] | None = None) -> Text | _LastLine:
    from rich.text import Text

    from components.untrusted import printable
    from pipelines.local.engine.status import parse_rfc3339

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
        text.append(f"  → {printable(first, 160)}", style="italic")
    if node.get("type") == "Pod" and node.get("phase") == "Running" and logs and (log := logs(str(node.get("id")))):
        return _LastLine(text, log)
    return text


app = new_app(help="The local Argo runner.")
app.command("run-workflow")(run_workflow_command)
app.command("resume")(resume_command)

if __name__ == "__main__":
    app()
