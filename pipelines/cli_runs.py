"""`vcpilot runs list|show|logs|replay|delete` and `vcpilot ui`: find a workflow run again, read it, remove it.

Wire into the main CLI with `app.add_typer(cli_runs.app, name="runs")` and `app.command("ui")(cli_runs.ui_command)`.
Everything but the MLflow link comes from this machine's files (`pipelines/runs.py`); MLflow is asked last
and its absence costs one note, never the command.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from components.entry import JsonOption, confirm, new_app, print_json
from components.errors import InputError, Unavailable
from components.tracking.adapter import TrackingUnavailable, experiment_name, local_store_uri, resolve_uri
from components.untrusted import printable
from pipelines import runs_mlflow

if TYPE_CHECKING:
    from pipelines.runs import RunDetail, RunSummary

__all__ = ["app", "delete_command", "list_command", "logs_command", "replay_command", "show_command", "ui_command"]

app = new_app(help="Workflow runs on this machine: list, show, logs, replay, delete.")
NameArgument = Annotated[str, typer.Argument(help="The run's name (its workflow name; see `vcpilot runs list`).")]


@app.command("list")
def list_command(
    json_output: JsonOption = False,
    limit: Annotated[int, typer.Option(min=1, help="Show at most this many, newest first.")] = 20,
) -> None:
    """The recent workflow runs: outcome, the agent's decisions, the released version, the MLflow run."""
    from pipelines.runs import list_runs

    home = default_home()
    found = list_runs(home, limit)
    note = _link(home, found)
    if json_output:
        print(json.dumps([r.model_dump(mode="json") for r in found], indent=2))
        return
    if not found:
        typer.echo(f"no runs in {home / 'runs'}; `vcpilot run` makes one")
        return
    for run in found:
        _echo(f"{run.name}  {_outcome(run)}  {run.started_at or '-'} → {run.finished_at or '-'}")
        if run.decisions:
            _echo("  decisions: " + ", ".join(f"{d.stage}-{d.attempt}: {d.action}" for d in run.decisions))
        if run.released or run.release_reason:
            _echo(f"  released: {run.released or 'nothing'}")
        if run.mlflow_url or run.mlflow_run_id:
            _echo(f"  mlflow: {run.mlflow_url or run.mlflow_run_id}")
    if note:
        typer.echo(note, err=True)


@app.command("show")
def show_command(name: NameArgument, json_output: JsonOption = False) -> None:
    """A run's steps, the agent's decisions and their reasons, where its reports, logs and MLflow run are."""
    from pipelines.runs import show_run

    home = default_home()
    detail = show_run(home, name)
    note = _link(home, [detail])
    if note:
        detail.notes.append(note)
    if json_output:
        print(json.dumps(detail.model_dump(mode="json"), indent=2))
        return
    _print_detail(detail)


@app.command("logs")
def logs_command(
    name: NameArgument,
    step: Annotated[str | None, typer.Argument(help="A step's display or template name (default: every step).")] = None,
    tail: Annotated[int | None, typer.Option("--tail", min=0, help="Only the last N lines of each log.")] = None,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            "-f",
            help="Keep printing new lines, and steps as they start, until the run ends (Ctrl-C stops).",
        ),
    ] = False,
) -> None:
    """Print a step's log, or every step's log in the order they ran."""
    from components.volcano.locallogs import tail_lines
    from pipelines.runs import follow_step_logs, log_header, step_logs

    home = default_home()
    if follow:
        follow_step_logs(home, name, step, tail)
        return
    chosen = step_logs(home, name, step)
    for view, log in chosen:
        if len(chosen) > 1 or step is None:
            typer.secho(log_header(view, log), dim=True)
        sys.stdout.write(tail_lines(log.read_text(errors="replace"), tail))
        sys.stdout.flush()


@app.command("replay")
def replay_command(
    name: NameArgument,
    tracking_uri: Annotated[
        str, typer.Option("--tracking-uri", help="Send to this MLflow instead of the run's own tracking URI.")
    ] = "",
    timeout: Annotated[float, typer.Option(min=1, help="Give up after this many seconds; what is left waits.")] = 300,
    json_output: JsonOption = False,
) -> None:
    """Send the MLflow records a run's steps spooled and MLflow did not take (it was down); nothing goes twice."""
    from components.tracking.replay import replay_all
    from pipelines.runs import check_name, show_run

    home = default_home()
    detail = show_run(home, check_name(name))
    spools = Path(detail.workspace_dir) / "tracking" if detail.workspace_dir else None
    if spools is None or not spools.is_dir():
        raise InputError(f"run {name} has no tracking spools (it records nothing to MLflow, or its workspace is gone)")
    where = runs_mlflow.target(home, tracking_uri or detail.tracking_uri, detail.experiment)
    result = replay_all(spools, where.uri, timeout_s=timeout)
    if result.pending:  # what was sent is kept; the rest waits, said in the one sentence (or JSON error) of errors
        raise Unavailable(
            f"MLflow at {where.uri} took {result.sent} records of {name} but not {result.pending} ({result.reason}); "
            f"they wait in {spools}: run `vcpilot runs replay {name}` again when it answers"
        )
    if json_output:
        print_json({"run": name, "tracking_uri": where.uri, "spools": str(spools), **result.model_dump()})
    else:
        typer.echo(f"sent {result.sent} records of {name} to {where.uri}; {result.skipped} left out for good")


@app.command("delete")
def delete_command(
    name: NameArgument,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask first.")] = False,
    json_output: JsonOption = False,
) -> None:
    """Remove a run's local state (runner directory, its VCJobs, its workspace directory) and its MLflow run."""
    from pipelines.local.workflow import WorkflowError
    from pipelines.runs import check_name, remove_run, show_run

    home = default_home()
    check_name(name)
    try:
        detail = show_run(home, name)
    except WorkflowError as err:  # a damaged record can still be removed: the way out of it
        typer.echo(f"warning: {err}", err=True)
        detail = None
    if not yes:
        phase = detail.phase if detail else "its record damaged"
        confirm(
            f"delete run {name} ({phase}) and everything it wrote here?",
            f"runs delete would remove run {name} ({phase}): pass --yes when there is no terminal to confirm at.",
            f"run {name} left as it was",
        )
    removed = remove_run(home, name)
    if detail is None:
        mlflow = "its MLflow run, if any, is left as it is: the damaged record does not say where it is"
    else:
        mlflow = runs_mlflow.mark_deleted(runs_mlflow.target(home, detail.tracking_uri, detail.experiment), name)
    if json_output:
        print_json({"name": name, "removed": removed.removed, "mlflow": mlflow})
        return
    for line in removed.removed:
        typer.echo(f"removed {line}")
    typer.echo(mlflow)


def ui_command(
    port: Annotated[int, typer.Option(min=1, max=65535, help="The port to serve on.")] = runs_mlflow.UI_PORT,
    host: Annotated[str, typer.Option(help="The address to listen on (loopback unless you mean it).")] = (
        runs_mlflow.UI_HOST
    ),
) -> None:
    """Serve MLflow's UI on this machine's store (VCPILOT_HOME/mlflow.db) until Ctrl-C."""
    import signal

    from components.ports import check_port_free
    from pipelines.mlflow_ui import experiment_id, serve

    # Ctrl-C is how it stops, even where it was started with SIGINT ignored (a script's `&`, nohup): Python then
    # installs no KeyboardInterrupt of its own, and the UI would run on untouched. `run-workflow` sets its own too.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    uri = resolve_uri()
    if uri == local_store_uri():
        default_home()  # a VCPILOT_HOME that is a file is refused as every command refuses it
    if not uri.startswith("sqlite:///"):
        typer.echo(f"MLFLOW_TRACKING_URI is {uri}: open its own UI (unset it to serve the local store)")
        return
    home = Path(uri.removeprefix("sqlite:///")).parent
    check_port_free(host, port)  # before anything is said or started: a taken port is one sentence
    typer.echo(f"starting MLflow's UI on {uri} …", err=True)
    try:
        with serve(uri, host, port, home / "mlflow-ui.log") as server:
            experiment = experiment_name()
            found = experiment_id(server.url, experiment)
            typer.echo(f"MLflow UI: {server.url}")
            if found:
                typer.echo(f"experiment {experiment}: {server.url}/#/experiments/{found}")
            typer.echo("Ctrl-C stops it", err=True)
            server.process.wait()
            typer.echo(f"mlflow server exited with {server.process.returncode} (log: {server.log})", err=True)
            raise typer.Exit(1)
    except KeyboardInterrupt:
        typer.echo("MLflow UI stopped", err=True)


def default_home() -> Path:
    """`VCPILOT_HOME`, or `./.vcpilot`; refused when it is a file (components.files.state_home)."""
    from components.files import state_home

    return state_home()


def _link(home: Path, found: list[RunSummary] | list[RunDetail]) -> str:
    """Fill in each run's MLflow run id and URL where MLflow answers; a note when it does not, else ""."""
    by_target: dict[runs_mlflow.Target, list[RunSummary]] = {}
    for run in found:
        where = runs_mlflow.target(home, run.tracking_uri, run.experiment)
        by_target.setdefault(where, []).append(run)
    notes = []
    for where, group in by_target.items():
        try:
            parents = runs_mlflow.find_parent_runs(where, [r.name for r in group] if len(group) == 1 else None)
        except TrackingUnavailable as err:
            notes.append(f"note: no MLflow links: {err.reason}")
            continue
        for run in group:
            if parent := parents.get(run.name):
                run.mlflow_run_id, run.mlflow_url = parent.run_id, parent.url
    return "; ".join(notes)


def _outcome(run: RunSummary) -> str:
    if run.phase in ("Running", "Pending") and not run.running:
        return f"{run.phase} (interrupted: `vcpilot resume {run.name}`)"
    if (run.message or "").startswith("Stopped with strategy"):  # Ctrl-C (pipelines/local/runner.py)
        return f"{run.phase}: {run.message} (`vcpilot resume {run.name}` continues it)"
    return run.phase + (f": {run.message}" if run.message else "")


def _echo(text: str, err: bool = False) -> None:
    """One line for a terminal: what a step, an LLM or a log put in it is escaped, never acted on (ANSI, bidi)."""
    typer.echo(printable(text, limit=20_000), err=err)


def _print_detail(run: RunDetail) -> None:
    echo = _echo
    echo(f"{run.name}  {_outcome(run)}")
    echo(f"  started {run.started_at or '-'}, finished {run.finished_at or '-'}")
    echo("steps:")
    for step in run.steps:
        took = f"{step.duration_s:.0f}s" if step.duration_s is not None else "-"
        code = f"  exit {step.exit_code}" if step.exit_code is not None else ""
        job = f"  VCJob {step.job}" if step.job else ""
        echo(f"  {step.name}  {step.template}  {step.phase}  {took}{code}{job}")
        if step.phase in ("Failed", "Error"):
            for line in dict.fromkeys(x for x in (step.message, step.error) if x):
                echo(f"    {line}")
            for log in ([step.log] if step.log else []) + step.pod_logs[-2:]:
                echo(f"    log: {log}")
    if run.decisions:
        echo("decisions:")
        for d in run.decisions:
            echo(f"  {d.stage}-{d.attempt}: {d.action} ({d.policy}): {d.rationale}")
            echo(f"    {d.record}")
    if run.released or run.release_reason:
        echo(f"released: {run.released or 'nothing'}" + (f" ({run.release_reason})" if run.release_reason else ""))
    if run.reports:
        echo("reports:")
        for report in run.reports:
            echo(f"  {report}")
    echo(f"runner's record: {run.run_dir}")
    if run.mlflow_run_id:
        echo(f"mlflow run: {run.mlflow_run_id}" + (f"  {run.mlflow_url}" if run.mlflow_url else ""))
    for note in run.notes:
        echo(note, err=True)
