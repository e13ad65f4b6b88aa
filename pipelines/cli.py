"""The `vcpilot` command: one entry point for every capability, each in its own sub-app."""

from __future__ import annotations

import typer

from agent import mcp_server
from components.demo import cli as demo_cli
from components.evaluate import cli as evaluate_cli
from components.finetune import cli as finetune_cli
from components.loadtest import cli as loadtest_cli
from components.logs import cli as logs_cli
from components.release import cli as release_cli
from components.serving import cli as serving_cli
from pipelines import cli_cluster, cli_doctor, cli_lint, cli_plan, cli_run, cli_runs, cli_workflows
from pipelines.local import cli as local_cli
from pipelines.parameters import TEMPLATE_NAME, check_parameters

__all__ = ["app"]

app = typer.Typer(
    help="vcpilot: detect drift in LLM logs, fine-tune on Volcano, load-test, evaluate, release with MLflow.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(cli_cluster.app, name="cluster")
app.command()(cli_lint.lint)
app.command("compile")(cli_workflows.compile_command)
app.command("submit")(cli_workflows.submit_command)
local_cli.PARAMETER_CHECKS[TEMPLATE_NAME] = check_parameters  # run-workflow deploy/argo/llm-autopilot.yaml
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
app.command("mcp")(mcp_server.mcp_command)
app.command("plan")(cli_plan.plan_command)
app.command("doctor")(cli_doctor.doctor_command)


@app.callback()
def main() -> None:
    """Autopilot for production LLMs on Kubernetes with Volcano, Argo Workflows and MLflow."""


if __name__ == "__main__":
    app()
