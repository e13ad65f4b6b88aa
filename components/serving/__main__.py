"""`python -m components.serving --model DIR --port N`: the load-test VCJob's `server` task (`vcpilot serve`)."""

from __future__ import annotations

import sys

from components.entry import run
from components.serving.cli import app

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Serve as `vcpilot serve` does; the exit code says whether it could."""
    return run(app, argv, "python -m components.serving")


if __name__ == "__main__":
    sys.exit(main())
