"""`python -m components.demo --out DIR [--seed N]`: `vcpilot demo data`, for a pod or a Makefile without the CLI."""

from __future__ import annotations

import sys

from components.demo.cli import app
from components.entry import run

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Generate the demo data as `vcpilot demo data` does; the exit code says whether it worked."""
    return run(app, argv, "python -m components.demo", default="data")


if __name__ == "__main__":
    sys.exit(main())
