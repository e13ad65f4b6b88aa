"""`python -m components.release --model DIR --registered-model NAME --report FILE …`: `vcpilot release register`.

Any of `register`, `rollback` or `show` may be named first; without one, `register` runs (see cli.py).
"""

from __future__ import annotations

import sys

from components.entry import run
from components.release.cli import app

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run `vcpilot release` as a pod does; the exit code says whether it worked."""
    return run(app, argv, "python -m components.release", default="register")


if __name__ == "__main__":
    sys.exit(main())
