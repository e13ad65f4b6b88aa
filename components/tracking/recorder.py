"""What a step writes to MLflow, through its spool: appended at once, sent in the background and at the step's end.

A `Recorder` is the only way a step program writes to MLflow. Each call appends one record to the step's spool
(`components.tracking.spool`) and returns: the train loop pays for one `write`, never for a request. A flusher
thread replays the spool every few seconds while the server answers; `close` replays what is left within a bounded
time. What is still unsent then stays in the workspace, and the workflow's exit handler sends it
(`components.tracking.runs.close_workflow_run`). An unreachable MLflow costs one warning line per step.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from components.tracking.adapter import SPOOL_ENV, WORKFLOW_ENV, WORKSPACE_ENV
from components.tracking.replay import ReplayResult, encode_value, replay
from components.tracking.spool import Spool
from components.tracking.traces import PlannedSpan

__all__ = ["FLUSH_EVERY_S", "Recorder", "environment_spool", "spool_dir"]

FLUSH_EVERY_S = 5.0


def spool_dir(env: Mapping[str, str]) -> Path:
    """Where this process's spools go: `VCPILOT_TRACKING_SPOOL` (a pod), else the run's in the workspace, else home."""
    if explicit := env.get(SPOOL_ENV):
        return Path(explicit)
    workflow = env.get(WORKFLOW_ENV) or "standalone"
    if workspace := env.get(WORKSPACE_ENV):
        return Path(workspace) / "runs" / workflow / "tracking"
    home = Path(env.get("VCPILOT_HOME") or ".vcpilot")
    return home / "tracking" / workflow


class Recorder:
    """One process's writes to MLflow, spooled in `spool` and sent to `tracking_uri`.

    `flush_every_s` None starts no flusher (a step that logs everything at its end); `clock` gives the time of each
    record in seconds, the timestamp MLflow keeps (and dedupes metrics by).
    """

    def __init__(
        self,
        spool: Spool,
        tracking_uri: str,
        *,
        flush_every_s: float | None = FLUSH_EVERY_S,
        warn: TextIO | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Start the flusher, unless `flush_every_s` is None."""
        self.spool = spool
        self.tracking_uri = tracking_uri
        self.warn = warn
        self.clock = clock
        self.warned = False
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        if flush_every_s is not None:
            self._flusher = threading.Thread(target=self._flush_loop, args=(flush_every_s,), daemon=True)
            self._flusher.start()

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    # ---- what steps record ------------------------------------------------------------------------------

    def start_run(
        self,
        key: str,
        name: str,
        experiment: str,
        tags: Mapping[str, str] | None = None,
        *,
        parent: str | None = None,
        workflow: str | None = None,
    ) -> None:
        """The run named for good by `key`: found if it exists (a parent also by `workflow`), else created."""
        record = {"op": "run", "key": key, "name": name, "experiment": experiment, "tags": dict(tags or {})}
        self.spool.append({**record, "parent": parent, "workflow": workflow, "time": self._now_ms()})

    def log_params(self, key: str, params: Mapping[str, Any]) -> None:
        """Settings of the run, as text."""
        self.spool.append({"op": "params", "key": key, "params": {k: str(v) for k, v in params.items()}})

    def log_metrics(
        self, key: str, metrics: Mapping[str, float], step: int = 0, *, timestamp_ms: int | None = None
    ) -> None:
        """Figures of `step`, stamped now (or at `timestamp_ms`): the timestamp that makes a replay of them a no-op."""
        now = self._now_ms() if timestamp_ms is None else timestamp_ms
        rows = [[name, encode_value(float(value)), now, step] for name, value in metrics.items()]
        self.spool.append({"op": "metrics", "key": key, "metrics": rows})

    def set_tags(self, key: str, tags: Mapping[str, str]) -> None:
        """Tags of the run."""
        self.spool.append({"op": "tags", "key": key, "tags": {k: str(v) for k, v in tags.items()}})

    def log_artifact(self, key: str, path: str | Path, directory: str | None = None) -> None:
        """A file as the run's artifact (under `directory`); the spool sends a copy taken now."""
        copy = self.spool.keep_file(path)
        self.spool.append({"op": "artifact", "key": key, "file": str(copy), "dir": directory})

    def log_trace(self, key: str, root: PlannedSpan, tags: Mapping[str, str] | None = None) -> None:
        """A trace linked to the run, from spans planned now with their own times; sent once, however often replayed."""
        span = json.loads(root.model_dump_json())  # what JSON cannot hold (NaN) as JSON's null
        named = {k: str(v) for k, v in (tags or {}).items()}
        self.spool.append({"op": "trace", "key": key, "span": span, "tags": named})

    def end_run(self, key: str, status: str = "FINISHED") -> None:
        """End the run FINISHED, FAILED or KILLED."""
        self.spool.append({"op": "end", "key": key, "status": status, "time": self._now_ms()})

    # ---- sending ----------------------------------------------------------------------------------------

    def flush(self, timeout_s: float | None = None, wait_s: float = 0.0) -> ReplayResult:
        """Send what the spool holds, now (within `timeout_s`)."""
        return replay(self.spool, self.tracking_uri, wait_s=wait_s, timeout_s=timeout_s)

    def close(self, timeout_s: float = 30.0, *, what: str = "the step") -> ReplayResult:
        """Stop the flusher and send what is left within `timeout_s`; what is not sent stays, said in one line."""
        deadline = time.monotonic() + timeout_s
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join(timeout=max(deadline - time.monotonic(), 0.0))
        left = max(deadline - time.monotonic(), 0.1)
        result = self.flush(timeout_s=left, wait_s=min(left, 5.0))
        if result.pending:
            self._say(
                f"warning: MLflow at {self.tracking_uri} is unreachable or failing ({result.reason}); {what}'s "
                f"{result.pending} tracking records wait in {self.spool.path}; the workflow's exit handler sends them"
            )
        return result

    def _flush_loop(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            result = self.flush()
            if result.pending and result.reason != "timeout":
                self._say(
                    f"warning: MLflow at {self.tracking_uri} is not taking records ({result.reason}); "
                    f"they wait in {self.spool.path} and are sent when it answers"
                )

    def _say(self, line: str) -> None:
        """One warning line per recorder, however long MLflow stays away."""
        if self.warned:
            return
        self.warned = True
        print(line, file=self.warn or sys.stderr, flush=True)


def environment_spool(env: Mapping[str, str], name: str) -> Spool:
    """The spool `name` (`<step>-<attempt>`) of this process, in `spool_dir(env)`."""
    return Spool(spool_dir(env) / f"{name}.jsonl")
