"""The `vcpilot` command: one entry point for every capability, each in its own sub-app.

Every command's module imports only typer and the standard library at its top: a command imports what it needs
(hera, mlflow, torch, the cluster) inside its body, so `vcpilot --help` costs about what `import typer` does
(`benchmarks/cli.py` measures it; tests/unit/test_cli_surface.py keeps it so), and a command's module is imported
only when the command is named (or `--help` lists it). Errors end in `components.entry`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated

import typer

from components.entry import DEBUG_ENV, LazyTarget, enable_debug, lazy_group, new_app
from pipelines.local import cli as local_cli

__all__ = ["app"]


def _autopilot_rules(template: str) -> Callable[[Mapping[str, str]], None] | None:
    """llm-autopilot's parameter rules for `run-workflow deploy/argo/llm-autopilot.yaml`, imported when asked."""
    from pipelines.parameters import TEMPLATE_NAME, check_parameters

    return check_parameters if template == TEMPLATE_NAME else None


def _lint_problem(path: Path) -> str | None:
    """`vcpilot lint`'s first problem in a workflow file, as a sentence; None when it has none."""
    from pipelines.lint import lint_files

    problems = lint_files([path])
    if not problems:
        return None
    first = problems[0]
    more = f"; {len(problems) - 1} more: vcpilot lint {path}" if len(problems) > 1 else ""
    where = f"{first.path}: " if first.path else ""
    return f"Argo would refuse {first.file}: {where}{first.message.rstrip('.')}{more}."


local_cli.PARAMETER_CHECKS.append(_autopilot_rules)
local_cli.FILE_CHECKS.append(_lint_problem)

# Each command is imported and built when it is named (components.entry.LazyGroup): `--help` reads the docstrings.
_COMMANDS: dict[str, LazyTarget] = {
    "run": "pipelines.cli_run:run_command",
    "run-workflow": local_cli.run_workflow_command,
    "resume": local_cli.resume_command,
    "runs": "pipelines.cli_runs:app",
    "ui": "pipelines.cli_runs:ui_command",
    "plan": "pipelines.cli_plan:plan_command",
    "cluster": "pipelines.cli_cluster:app",
    "lint": "pipelines.cli_lint:lint",
    "compile": "pipelines.cli_workflows:compile_command",
    "submit": "pipelines.cli_workflows:submit_command",
    "logs": "components.logs.cli:app",
    "finetune": "components.finetune.cli:finetune_command",
    "serve": "components.serving.cli:serve_command",
    "loadtest": "components.loadtest.cli:loadtest_command",
    "evaluate": "components.evaluate.cli:evaluate_command",
    "release": "components.release.cli:app",
    "demo": "pipelines.cli_run:demo_app",  # components.demo's app with `seed`, which runs the pipeline
    "mcp": "agent.cli_mcp:mcp_command",
    "doctor": "pipelines.cli_doctor:doctor_command",
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
