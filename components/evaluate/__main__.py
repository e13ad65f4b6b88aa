"""`python -m components.evaluate --candidate DIR --report FILE …`: the evaluate VCJob's command (see cli.py)."""

from __future__ import annotations

import sys

from components.entry import run
from components.evaluate.cli import app

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run `vcpilot evaluate` as a pod does; the exit code says whether it worked."""
    return run(app, argv, "python -m components.evaluate")


if __name__ == "__main__":
    sys.exit(main())
