"""The front door every step program shares: one typer app behind `vcpilot X` and `python -m components.X`.

A command's body calls its component's service and prints; `reported` turns a `VcpilotError` into `error: <the
sentence of components.errors.explain>` on stderr and its exit code, and `run` is what each `__main__.py` calls, so
a pod and a person run the same command and see the same messages and exit codes.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from components.errors import VcpilotError, explain

if TYPE_CHECKING:
    import typer

__all__ = ["reported", "run"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def reported(command: Callable[_P, _R]) -> Callable[_P, _R]:
    """Make a command end a `VcpilotError` with its one sentence on stderr and its exit code, not a traceback."""

    @functools.wraps(command)
    def run_command(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return command(*args, **kwargs)
        except VcpilotError as err:
            sentence, code = explain(err)
            print(f"error: {sentence}", file=sys.stderr, flush=True)
            raise SystemExit(code) from None

    return run_command


def run(app: typer.Typer, argv: Sequence[str] | None, prog_name: str, *, default: str | None = None) -> int:
    """Run `app` on `argv` (default: the process's) and return its exit code instead of exiting.

    `default` names the command that runs when the first argument names none: the pod's spelling
    (`python -m components.logs --source …`) stays that of the step's command (`vcpilot logs step --source …`).
    """
    import typer.main

    args = list(sys.argv[1:] if argv is None else argv)
    command = typer.main.get_command(app)
    # An app of one command is that command (typer collapses it): then there is nothing to name.
    names = getattr(command, "commands", None)
    if default is not None and names and not (args and (args[0] in names or args[0] in ("--help", "-h"))):
        args.insert(0, default)
    try:
        command.main(args=args, prog_name=prog_name, standalone_mode=True)
    except SystemExit as done:  # standalone mode ends with sys.exit; usage errors are printed as click prints them
        return done.code if isinstance(done.code, int) else 0 if done.code is None else 1
    return 0
