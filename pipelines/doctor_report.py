"""What `vcpilot doctor` found: one result per check, printed one line each or as JSON, and the exit code."""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

__all__ = ["Check", "exit_code", "render_json", "render_text", "skipped"]


class Check(BaseModel):
    """The outcome of one check; a failure says in `fix` what to do about it."""

    model_config = ConfigDict(frozen=True)

    check: str
    ok: bool
    detail: str
    fix: str | None = None


def skipped(check: str, why: str, fix: str) -> Check:
    """A check that could not run because something it needs failed first: a failure, since nothing was verified."""
    return Check(check=check, ok=False, detail=f"skipped: {why}", fix=fix)


def render_text(checks: Sequence[Check]) -> str:
    """One line per check: name, ok or FAIL, what was found, and for a failure what to fix."""
    width = max((len(c.check) for c in checks), default=0)
    lines = []
    for c in checks:
        line = f"{c.check:<{width}}  {'ok' if c.ok else 'FAIL':<4}  {c.detail}"
        if not c.ok and c.fix:
            line += f"; fix: {c.fix}"
        lines.append(line)
    return "\n".join(lines)


def render_json(checks: Sequence[Check]) -> str:
    """The checks as a JSON list of {check, ok, detail, fix} (fix null for a check that passed)."""
    return json.dumps([c.model_dump() for c in checks], indent=2)


def exit_code(checks: Sequence[Check]) -> int:
    """0 when every check passed, 1 when any failed (or none ran)."""
    return 0 if checks and all(c.ok for c in checks) else 1
