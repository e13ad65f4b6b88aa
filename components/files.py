"""Writing a step's report: atomically, so a reader (the next step, a retry, a person) never sees half of it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["write_bytes", "write_json", "write_text"]


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write `data` at `path` through a temporary file beside it and `os.replace`: the old file or the new one."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)
    return target


def write_text(path: str | Path, text: str) -> Path:
    """Write `text` (UTF-8) at `path`, atomically."""
    return write_bytes(path, text.encode("utf-8"))


def write_json(path: str | Path, data: Any) -> Path:
    """Write `data` as indented JSON (one trailing newline) at `path`, atomically."""
    return write_text(path, json.dumps(data, indent=2) + "\n")
