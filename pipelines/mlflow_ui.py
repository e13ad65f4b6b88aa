"""`vcpilot ui`'s service: MLflow's UI over this machine's store, started as a child server and stopped with it.

The store is the one every local command uses (`components.tracking.adapter.resolve_uri`: sqlite under
`VCPILOT_HOME`, artifacts beside it in `mlartifacts/`, `adapter.artifact_root`), so the UI shows what `vcpilot
run` logged. The server runs in its own process group: MLflow forks uvicorn workers, and all of them must go.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from components.errors import Unavailable
from components.ports import check_port_free
from components.tracking.adapter import artifact_root

__all__ = ["UiServer", "experiment_id", "serve", "server_command"]


@dataclass(frozen=True)
class UiServer:
    """A started UI: its address, the store it shows, and the log of the server process."""

    url: str
    tracking_uri: str
    log: Path
    process: subprocess.Popen[bytes]


def server_command(tracking_uri: str, host: str, port: int) -> list[str]:
    """`mlflow server` from this environment on `tracking_uri`, its artifacts where the store keeps them."""
    command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", tracking_uri]
    command += ["--host", host, "--port", str(port), "--workers", "1"]
    if root := artifact_root(tracking_uri):
        # The store's experiments name file:// artifact locations there; new ones made in the UI go there too.
        command += ["--artifacts-destination", root]
    return command


@contextlib.contextmanager
def serve(tracking_uri: str, host: str, port: int, log: Path, timeout_s: float = 120.0) -> Iterator[UiServer]:
    """Run the UI until the block ends; Unavailable when it exits or does not answer /health in `timeout_s`."""
    check_port_free(host, port)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        process = subprocess.Popen(
            server_command(tracking_uri, host, port),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C reaches us, not it: we stop the whole group ourselves
        )
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    try:
        _wait_healthy(url, process, log, timeout_s)
        yield UiServer(url, tracking_uri, log, process)
    finally:
        _stop(process)


def experiment_id(url: str, name: str) -> str | None:
    """The id of experiment `name` on the running server, or None when it has none by that name (yet)."""
    query = urllib.parse.urlencode({"experiment_name": name})
    try:
        with urllib.request.urlopen(f"{url}/api/2.0/mlflow/experiments/get-by-name?{query}", timeout=5) as response:  # noqa: S310
            return str(json.load(response)["experiment"]["experiment_id"])
    except (OSError, ValueError, KeyError):
        return None


def _wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise Unavailable(f"mlflow server exited with {process.returncode}: {tail[0]} (log: {log})")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1) as response:  # noqa: S310
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise Unavailable(f"mlflow server did not answer {url}/health within {timeout_s:.0f} s (log: {log})")
        time.sleep(0.25)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's group, SIGKILL what is left after 10 s."""
    for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=wait_s)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError):  # workers outlive their master for a moment
        os.killpg(process.pid, signal.SIGKILL)
