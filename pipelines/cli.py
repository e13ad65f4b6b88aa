"""The `vcpilot` command: one entry point for every capability, each in its own sub-app.

Every module imported here imports only typer and the standard library at its top: a command imports what it
needs (hera, mlflow, torch, the cluster) inside its body, so `vcpilot --help` costs about what `import typer` does
(`benchmarks/cli.py` measures it; tests/unit/test_cli_surface.py keeps it so). Errors end in `components.entry`.
"""

from __future__ import annotations

from typing import Annotated

import typer

from agent import cli_mcp
from components.demo import cli as demo_cli
from components.entry import DEBUG_ENV, enable_debug, new_app
from components.evaluate import cli as evaluate_cli
from components.finetune import cli as finetune_cli
from components.loadtest import cli as loadtest_cli
from components.logs import cli as logs_cli
from components.release import cli as release_cli
from components.serving import cli as serving_cli
from pipelines import cli_cluster, cli_doctor, cli_lint, cli_plan, cli_run, cli_runs, cli_workflows
from pipelines.local import cli as local_cli

__all__ = ["app"]

app = new_app(help="vcpilot: detect drift in LLM logs, fine-tune on Volcano, load-test, evaluate, release with MLflow.")
app.add_typer(cli_cluster.app, name="cluster")
app.command()(cli_lint.lint)
app.command("compile")(cli_workflows.compile_command)
app.command("submit")(cli_workflows.submit_command)
app.command("run-workflow")(local_cli.run_workflow_command)
app.command("resume")(local_cli.resume_command)
app.command("run")(cli_run.run_command)
app.add_typer(cli_runs.app, name="runs")
app.command("ui")(cli_runs.ui_command)
app.command("finetune")(finetune_cli.finetune_command)
app.command("loadtest")(loadtest_cli.loadtest_command)
app.command("serve")(serving_cli.serve_command)
app.command("evaluate")(evaluate_cli.evaluate_command)
app.add_typer(release_cli.app, name="release")
demo_cli.app.command("seed")(cli_run.seed_command)
app.add_typer(demo_cli.app, name="demo")
app.add_typer(logs_cli.app, name="logs")
app.command("mcp")(cli_mcp.mcp_command)
app.command("plan")(cli_plan.plan_command)
app.command("doctor")(cli_doctor.doctor_command)


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
