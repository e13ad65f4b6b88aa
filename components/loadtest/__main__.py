"""`python -m components.loadtest --port N --report FILE …`: the `client` task of the load-test VCJob (see cli.py)."""

from __future__ import annotations

import sys

from components.entry import run
from components.loadtest.cli import step_app

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the pipeline's load-test client; the exit code says whether it ran (not whether the SLOs held)."""
    return run(step_app, argv, "python -m components.loadtest")


if __name__ == "__main__":
    sys.exit(main())
