"""`vcpilot run`: llm-autopilot end to end on this machine (local runner + LocalCluster), under a scenario."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import typer

from components.demo import cli as demo_cli
from components.errors import VcpilotError, explain
from pipelines.cli_cluster import fail
from pipelines.local.cli import JsonStatus, ParamFileOption, ParamOption, report_run, workflow_params
from pipelines.scenarios import SCENARIOS

__all__ = ["ScenarioName", "demo_app", "run_command", "seed_command"]

# The names of pipelines.scenarios.SCENARIOS, written out so that typer shows them as the choices.
ScenarioName = Literal["drift", "no-drift", "node-failure", "node-failure-again", "pod-kill", "code-bug"]


def run_command(
    scenario: Annotated[
        ScenarioName,
        typer.Option(
            help="What happens during the run: " + "; ".join(f"{k}: {v.description}" for k, v in SCENARIOS.items())
        ),
    ] = "drift",
    param: ParamOption = None,
    parameter_file: ParamFileOption = None,
    json_output: JsonStatus = False,
    name: Annotated[str | None, typer.Option(help="Run name (default: llm-autopilot-<timestamp>).")] = None,
) -> None:
    """Run the llm-autopilot WorkflowTemplate through the local runner on LocalCluster; exit 0 when it Succeeded."""
    from pipelines.autopilot_run import run_autopilot

    params = workflow_params(param, parameter_file)
    report_run(
        lambda on_update, stop, progress: run_autopilot(
            scenario, params, name=name, on_update=on_update, stop=stop, progress=progress
        ),
        json_output,
    )


def seed_command(
    home: Annotated[Path, typer.Option(help="Where the demo goes: a cluster's workspace volume, e.g. /workspace.")],
    mlflow_tracking_uri: Annotated[str, typer.Option(help="The tracking server the champion is registered in.")],
) -> None:
    """Put the demo into a workspace for a cluster: its data, and a first champion trained and registered in MLflow.

    Prints, as JSON, the template parameters that run the demo from there. Done once; a second call finds both.
    """
    from components.files import check_output_dir
    from components.tracking.adapter import check_reachable, check_tracking_uri
    from pipelines.autopilot_run import bootstrap_champion, demo_parameters, prepare_demo

    check_output_dir(home, "--home")
    check_tracking_uri(mlflow_tracking_uri, "--mlflow-tracking-uri")
    check_reachable(mlflow_tracking_uri)  # before the data is written and the champion trained for it
    try:
        prepare_demo(home, drift=True)
        bootstrap_champion(home, mlflow_tracking_uri)
    except VcpilotError as err:  # a WorkflowError, a RegistryError: one sentence each
        fail(f"cannot seed the demo into {home}: {explain(err)[0]}")
    except OSError as err:
        fail(f"cannot seed the demo into {home}: {err}")
    typer.echo(json.dumps(demo_parameters(home)))


# `vcpilot demo`: components.demo's commands and `seed`, which runs the pipeline (a component cannot import it).
demo_app = demo_cli.app
demo_app.command("seed")(seed_command)
