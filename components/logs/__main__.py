"""`python -m components.logs --source PATH --report FILE [--state DIR]`: the detect-logs VCJob's command.

That is `vcpilot logs step`; `python -m components.logs parse|detect …` is `vcpilot logs parse|detect …` (cli.py).
"""

from __future__ import annotations

import sys

from components.entry import run
from components.logs.cli import app

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run `vcpilot logs` as a pod does; the exit code says whether it worked (not whether the logs drifted)."""
    return run(app, argv, "python -m components.logs", default="step")


if __name__ == "__main__":
    sys.exit(main())
