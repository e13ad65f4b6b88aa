"""`vcpilot run`: llm-autopilot end to end on this machine (local runner + LocalCluster), under a scenario."""

from __future__ import annotations

from typing import Annotated

import typer

from pipelines.autopilot_run import SCENARIOS, run_autopilot
from pipelines.cli_workflows import parse_params
from pipelines.local.cli import report_run

__all__ = ["run_command"]


def run_command(
    scenario: Annotated[
        str,
        typer.Option(
            help="What happens during the run: " + "; ".join(f"{k}: {v.description}" for k, v in SCENARIOS.items())
        ),
    ] = "drift",
    param: Annotated[list[str] | None, typer.Option("-p", "--param", help="Template parameter name=value.")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print only the final workflow status as JSON.")] = False,
    name: Annotated[str | None, typer.Option(help="Run name (default: llm-autopilot-<timestamp>).")] = None,
) -> None:
    """Run the llm-autopilot WorkflowTemplate through the local runner on LocalCluster; exit 0 when it Succeeded."""
    params = parse_params(param)
    report_run(lambda on_update: run_autopilot(scenario, params, name=name, on_update=on_update), json_output)
