"""A real `mlflow server` on loopback for tests: sqlite store and proxied artifacts in a directory of the test's.

It runs in a session of its own (it forks uvicorn workers; the whole group must go at the end). A test may pause
it (SIGSTOP: it accepts nothing and answers nothing, as a server that hangs or a network that drops) and let it
go on (SIGCONT): restarting the process instead takes longer than a tiny fine-tune on a busy machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from net_kit import free_port


class MlflowServer:
    """`mlflow server` on one port and one database under `root`, which a test may pause, resume and stop."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def start(self, timeout_s: float = 120) -> str:
        """Start it (again, on the same port and database) and wait for /health; RuntimeError with its log if not."""
        self.root.mkdir(parents=True, exist_ok=True)
        command = [
            *(sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(self.port)),
            *("--workers", "1", "--backend-store-uri", f"sqlite:///{self.root / 'mlflow.db'}"),
            *("--artifacts-destination", str(self.root / "artifacts")),
        ]
        with self.log.open("a") as log:
            self.proc = subprocess.Popen(
                command, cwd=self.root, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited with {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{self.url}/health", timeout=1) as response:
                if response.status == 200:
                    return self.url
            if time.monotonic() > deadline:
                tail = self.log.read_text()[-2000:]
                raise RuntimeError(f"mlflow server did not answer /health in {timeout_s:g} s: {tail}")
            time.sleep(0.25)

    def pause(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        """Stop the whole group (a paused one too): TERM, then KILL after 5 s (uvicorn waits for idle keep-alives)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
            os.killpg(self.proc.pid, signal.SIGCONT)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def downloaded_review(tracking_uri: str, run_id: str, out: Path) -> dict[str, object]:
    """The review on a workflow's parent run, downloaded to `out`: summary.md's text and what plots/, decisions/ and
    manifests/ hold; every picture is checked to be a real PNG of some size."""
    from mlflow.tracking import MlflowClient

    MlflowClient(tracking_uri).download_artifacts(run_id, "", str(out))
    for png in (out / "plots").glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000, png
    listing = {d: sorted(p.name for p in (out / d).glob("*")) for d in ("plots", "decisions", "manifests")}
    return {**listing, "summary.md": (out / "summary.md").read_text()}
