"""`python -m components.logs`: the detect-logs step as VCJob pods run it, and the `parse`/`detect` commands.

`python -m components.logs --source PATH --report FILE [--state DIR]` judges the logs at PATH (comparing
`PATH/baseline` with `PATH/current` when both exist) and writes the report the pipeline's gate reads;
`python -m components.logs parse|detect ...` is `vcpilot logs parse|detect ...`.
"""

from __future__ import annotations

import sys

import typer

from components.logs.cli import app, step_app

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the command line; the exit code says whether it worked (not whether the logs drifted)."""
    args = sys.argv[1:] if argv is None else argv
    target = app if args and args[0] in {"parse", "detect"} else step_app
    command = typer.main.get_command(target)
    try:
        command.main(args=args, prog_name="python -m components.logs", standalone_mode=True)
    except SystemExit as done:  # standalone mode ends with sys.exit: usage errors are printed as Typer prints them
        return done.code if isinstance(done.code, int) else 0 if done.code is None else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
