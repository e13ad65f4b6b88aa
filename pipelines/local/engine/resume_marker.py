"""`argo resume` for the local runner: a request, written beside the run's record, that suspended nodes read.

`vcpilot resume NAME` writes `resume.json` in the run's directory: when it asked, and the output parameters it
supplies (`--output-parameter NAME=VALUE`, as `argo node set` does). Every suspend node that started before that
moment ends Succeeded, its `valueFrom.supplied` outputs taken from the request, else their default, else the
default of the input parameter of the same name (Argo's addRawOutputFields); one with none of them cannot be
resumed (Argo's OverrideOutputParametersWithDefault). A node that starts after the request waits for the next.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipelines.local.workflow import WorkflowError, stringify

__all__ = ["MARKER", "missing_output", "read_request", "supplied_outputs", "write_request"]

MARKER = "resume.json"


def supplied_outputs(template: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """The suspend template's `valueFrom.supplied` output parameters, each with its default (None: none)."""
    inputs = {
        p.get("name"): p.get("default")
        for p in (template.get("inputs") or {}).get("parameters") or []
        if isinstance(p, dict)
    }
    out = []
    for param in (template.get("outputs") or {}).get("parameters") or []:
        source = param.get("valueFrom") or {}
        if "supplied" in source:
            default = source.get("default", inputs.get(param.get("name")))
            out.append((str(param.get("name")), None if default is None else stringify(default)))
    return out


def missing_output(template: Mapping[str, Any], given: Mapping[str, str]) -> str | None:
    """The first supplied output parameter with neither a value in `given` nor a default, else None."""
    return next((name for name, default in supplied_outputs(template) if name not in given and default is None), None)


def write_request(run_dir: Path, outputs: Mapping[str, str]) -> None:
    """Ask the run's suspended nodes to resume now, with these supplied output values (atomically replaced)."""
    temporary = run_dir / f".{MARKER}.{os.getpid()}"
    temporary.write_text(json.dumps({"requested_at": time.time(), "outputs": dict(outputs)}))
    temporary.replace(run_dir / MARKER)


def read_request(run_dir: Path, started: float) -> dict[str, str] | None:
    """The supplied values of a resume asked after `started` (epoch seconds), or None when none was."""
    try:
        request = json.loads((run_dir / MARKER).read_text())
        if float(request["requested_at"]) <= started:
            return None
        return {str(k): str(v) for k, v in dict(request.get("outputs") or {}).items()}
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError, OSError) as err:
        raise WorkflowError(f"{run_dir / MARKER} is not a resume request ({err}); run vcpilot resume again.") from None
