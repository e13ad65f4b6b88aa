"""The `vcpilot` command: one entry point for every capability, each in its own sub-app.

Every module imported here imports only typer and the standard library at its top: a command imports what it
needs (hera, mlflow, torch, the cluster) inside its body, so `vcpilot --help` costs about what `import typer` does
(`benchmarks/cli.py` measures it; tests/unit/test_cli_surface.py keeps it so). Errors end in `components.entry`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any

import typer

from agent import cli_mcp
from components.demo import cli as demo_cli
from components.entry import DEBUG_ENV, enable_debug, lazy_group, new_app
from components.evaluate import cli as evaluate_cli
from components.finetune import cli as finetune_cli
from components.loadtest import cli as loadtest_cli
from components.logs import cli as logs_cli
from components.release import cli as release_cli
from components.serving import cli as serving_cli
from pipelines import cli_cluster, cli_doctor, cli_lint, cli_plan, cli_run, cli_runs, cli_workflows
from pipelines.local import cli as local_cli

__all__ = ["app"]

demo_cli.app.command("seed")(cli_run.seed_command)


def _autopilot_rules(template: str) -> Callable[[Mapping[str, str]], None] | None:
    """llm-autopilot's parameter rules for `run-workflow deploy/argo/llm-autopilot.yaml`, imported when asked."""
    from pipelines.parameters import TEMPLATE_NAME, check_parameters

    return check_parameters if template == TEMPLATE_NAME else None


local_cli.PARAMETER_CHECKS.append(_autopilot_rules)

# Each command is built when it is named (components.entry.LazyGroup): `--help` reads the docstrings only.
_COMMANDS: dict[str, typer.Typer | Callable[..., Any]] = {
    "run": cli_run.run_command,
    "run-workflow": local_cli.run_workflow_command,
    "resume": local_cli.resume_command,
    "runs": cli_runs.app,
    "ui": cli_runs.ui_command,
    "plan": cli_plan.plan_command,
    "cluster": cli_cluster.app,
    "lint": cli_lint.lint,
    "compile": cli_workflows.compile_command,
    "submit": cli_workflows.submit_command,
    "logs": logs_cli.app,
    "finetune": finetune_cli.finetune_command,
    "serve": serving_cli.serve_command,
    "loadtest": loadtest_cli.loadtest_command,
    "evaluate": evaluate_cli.evaluate_command,
    "release": release_cli.app,
    "demo": demo_cli.app,
    "mcp": cli_mcp.mcp_command,
    "doctor": cli_doctor.doctor_command,
}

app = new_app(
    name="vcpilot",  # what `Usage:` says under a test's CliRunner too
    cls=lazy_group(_COMMANDS),
    help="vcpilot: detect drift in LLM logs, fine-tune on Volcano, load-test, evaluate, release with MLflow.",
)


def _print_version(asked: bool) -> None:
    if asked:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"vcpilot {version('vcpilot')}")
        except PackageNotFoundError:  # a checkout on PYTHONPATH, not installed
            typer.echo("vcpilot (not installed: no version)")
        raise typer.Exit()


def _debug(asked: bool) -> None:
    if asked:
        enable_debug()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", is_eager=True, callback=_print_version, help="Print the version and exit.")
    ] = False,
    debug: Annotated[
        bool,
        typer.Option("--debug", is_eager=True, callback=_debug, help=f"Show an error's traceback ({DEBUG_ENV}=1 too)."),
    ] = False,
) -> None:
    """Autopilot for production LLMs on Kubernetes with Volcano, Argo Workflows and MLflow."""
    del version, debug  # acted on by their callbacks, before any command runs


if __name__ == "__main__":
    app()
