"""`python -m components.finetune …`: what a training pod runs, `vcpilot finetune` (see cli.py for flags and env).

Two things only a pod does: with several GPUs it relaunches itself under torchrun, one process per GPU, and it
resumes from the newest checkpoint by default, so a pod that Volcano restarts continues instead of failing.
"""

from __future__ import annotations

import os
import sys

from components.entry import run
from components.finetune.cli import app

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the trainer as a pod does; the pod's exit code."""
    from components.finetune.launch import run_torchrun, torchrun_args

    args = list(sys.argv[1:] if argv is None else argv)
    relaunch = torchrun_args(os.environ, args)
    if relaunch is not None:
        return run_torchrun(relaunch)
    # A later --resume on the command line overrides this one.
    return run(app, ["--resume", "auto", *args], "python -m components.finetune")


if __name__ == "__main__":
    sys.exit(main())
