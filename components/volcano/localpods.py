"""LocalCluster pods as real local processes: start one with Volcano's environment, see if it lives, kill it.

A pod runs under a tiny `sh` wrapper that records the command's exit code in a file and then lets the
cluster reconcile, so that a pod's end is noticed even when the process that started it is gone. What the pod
prints reaches its log through a filter forked from the starting process (`components.redact.pump`), a line at a
time: a secret it prints is stored masked.

A pod starts inside the transaction that binds it, and a process killed before that transaction commits leaves
a pod process that the database does not know. So a start leaves a launch record beside it first (`intent`: where
its exit code will be; the wrapper adds its pid once its log filter runs), which the controller removes once the
bind is committed; a bind that finds one `adopt`s that process instead of starting the pod a second time.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from components import redact

__all__ = ["adopt", "expand", "forget", "free_port", "is_alive", "kill", "read_exit_code", "resolve_command", "start"]

# The wrapper first waits for the pod's log filter (see `_start_filter`) to say on its standard input that it reads
# the pipe the wrapper's output goes to; no word (the start was cut short) and it ends without running anything.
# Then its pid goes to the launch record and the pod's command runs. Once the command has ended, the wrapper closes
# its own copy of the output pipe and waits for the filter to write the last line and exit (its standard input
# ends); only then is the exit code written (atomically) and a reconcile hook run (if any: a shell command line,
# its words quoted, which `eval` parses, so a home with spaces or quotes in its path stays one word).
_WRAPPER = (
    'read _ || exit 0; if [ -n "$VCPILOT_POD_PID_FILE" ]; then echo $$ > "$VCPILOT_POD_PID_FILE"; fi; '
    '"$@" </dev/null; code=$?; exec >/dev/null 2>&1; read _; '
    'printf "%s" "$code" > "$VCPILOT_EXIT_FILE.tmp" && mv -f "$VCPILOT_EXIT_FILE.tmp" "$VCPILOT_EXIT_FILE"; '
    'if [ -n "$VCPILOT_RECONCILE_HOOK" ]; then '
    'eval "$VCPILOT_RECONCILE_HOOK" </dev/null; fi; exit "$code"'
)

START_ERROR = 128  # the exit code containerd gives a container whose process could not be started

# Children this process started; polling them reaps zombies so liveness checks stay truthful.
_children: dict[int, subprocess.Popen[bytes]] = {}
_filters: list[int] = []  # the log filters this process forked, until they have ended (`_reap`)


def resolve_command(command: Sequence[str], args: Sequence[str]) -> list[str]:
    """The argv a container would run; `python`/`python3` mean this environment's interpreter."""
    argv = [*command, *args]
    if argv and argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    return argv


def expand(text: str, variables: Mapping[str, str]) -> str:
    """`text` with each `$(NAME)` of `variables` replaced, as the kubelet expands env values, command and args.

    `$$` is a literal `$` (so `$$(NAME)` stays `$(NAME)`); a `$(NAME)` that `variables` lacks stays as written.
    """

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return variables.get(match.group(1), match.group(0))

    return _REFERENCE.sub(replace, text) if "$" in text else text


_REFERENCE = re.compile(r"\$\$|\$\(([^()]*)\)")


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    import socket  # here, not at the top: only a pod that starts needs it

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: str,
    log_path: Path,
    exit_path: Path,
    hook: str | None,
    intent: Path | None = None,
) -> tuple[int, str]:
    """Start a pod in its own session; return its pid and a token that tells it apart from a reused pid.

    With `intent`, the launch record is written there before the process starts (see `adopt`).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    exit_path.parent.mkdir(parents=True, exist_ok=True)
    full_env = {**env, "VCPILOT_EXIT_FILE": str(exit_path), "VCPILOT_RECONCILE_HOOK": hook or ""}
    if intent is not None:
        intent.parent.mkdir(parents=True, exist_ok=True)
        _pid_file(intent).unlink(missing_ok=True)
        tmp = intent.with_name(intent.name + ".tmp")
        tmp.write_text(json.dumps({"exit_file": str(exit_path)}))
        os.replace(tmp, intent)
        full_env["VCPILOT_POD_PID_FILE"] = str(_pid_file(intent))
    out_r, out_w = os.pipe()
    done_r, done_w = os.pipe()
    try:
        if cwd and not os.path.isdir(cwd):
            raise FileNotFoundError(f"working directory {cwd} does not exist")
        # the wrapper before the filter: a fork leaves this process's memory shared, and a Popen after it copies
        # every page it writes (2-10 ms here)
        proc = subprocess.Popen(
            ["/bin/sh", "-c", _WRAPPER, "vcpilot-pod", *argv],
            cwd=cwd,
            env=full_env,
            stdin=done_r,
            stdout=out_w,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        with open(log_path, "ab") as log:
            _filters.append(_start_filter(out_r, log.fileno(), done_w))
    except (OSError, ValueError) as err:
        # A process that cannot be started (a NUL byte in its command or environment, a missing working directory)
        # is what a container runtime reports as StartError: the container ends at once with exit code 128.
        with open(log_path, "a") as log:
            log.write(f"vcpilot: the container could not start: {err}\n")
        exit_path.write_text(str(START_ERROR))
        return 0, ""
    finally:  # the filter ends once the pod's copies of its pipe are closed, not this process's
        for fd in (out_r, out_w, done_r, done_w):
            os.close(fd)
    _children[proc.pid] = proc
    return proc.pid, _start_token(proc.pid) or ""


def _start_filter(source: int, log: int, done: int) -> int:
    """Fork the pod's log filter (`redact.pump` from the pipe `source` to `log`), which says so on `done` first.

    A fork of this process, not a new interpreter: it has `redact` loaded already, so it costs the pod's start
    next to nothing (a Python filter started beside each pod made submit-to-Running 1.7x a direct start on a busy
    machine). In a session of its own, it outlives this process and the pod's process group (a pod killed with
    SIGKILL still has what it printed stored); it keeps no other file descriptor (another pod's pipe kept open would
    never end). Returns its pid, for `_reap`.
    """
    _reap()
    redact.redact_text("")  # its patterns compiled here once, not again in every pod's filter
    pid = os.fork()
    if pid:
        return pid
    try:  # the child never returns into the caller's code
        # First, close what it inherited: a copy of the caller's descriptors holds their locks too (a runner's
        # run lock would outlive a killed runner for as long as this filter ran).
        gc.disable()  # nothing of the caller's is collected here: its objects may own file descriptors
        low = 0
        for fd in sorted({source, log, done}):
            os.closerange(low, fd)
            low = fd + 1
        os.closerange(low, os.sysconf("SC_OPEN_MAX"))
        os.setsid()
        for stop in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(stop, signal.SIG_IGN)
        os.write(done, b"\n")  # the pod waits for this word
        redact.pump(source, log)
    finally:
        os._exit(0)


def _reap() -> None:
    """Collect the filters that have ended (after their pods), so none lingers as a zombie of a long-lived caller."""
    for pid in list(_filters):
        try:
            ended = os.waitpid(pid, os.WNOHANG)[0] != 0
        except ChildProcessError:  # collected by someone else
            ended = True
        if ended:
            with contextlib.suppress(ValueError):  # or by another thread here
                _filters.remove(pid)


def adopt(intent: Path, wait_s: float = 2.0) -> tuple[int, str, Path] | None:
    """The pod process a launch record at `intent` names, as (pid, token, exit file); None: start the pod.

    A record without a pid is a start cut short before the wrapper ran, or one still starting: its pid is awaited
    `wait_s`. A pid that is no longer that pod's process (it ended; the pid may be reused) gets a token that never
    matches, so the pod reads as ended and its exit file says how.
    """
    try:
        exit_file = Path(json.loads(intent.read_text())["exit_file"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    pid_file, deadline = _pid_file(intent), time.monotonic() + wait_s
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        pid = int(pid_file.read_text())
    except (OSError, ValueError):
        return None
    try:
        ours = f"VCPILOT_EXIT_FILE={exit_file}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        ours = False
    return pid, (_start_token(pid) or "ended") if ours else "ended", exit_file


def forget(intent: Path) -> None:
    """Remove a launch record once its bind is committed."""
    intent.unlink(missing_ok=True)
    _pid_file(intent).unlink(missing_ok=True)


def _pid_file(intent: Path) -> Path:
    return intent.with_name(intent.name + ".pid")


def _start_token(pid: int) -> str | None:
    """The process start time from /proc (field 22), or None when the process is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return fields[19]


def is_alive(pid: int | None, token: str | None) -> bool:
    """True while the pod process started with `token` still runs."""
    if not pid:
        return False
    child = _children.get(pid)
    if child is not None and child.poll() is not None:
        _children.pop(pid, None)
        return False
    current = _start_token(pid)
    return current is not None and (not token or current == token)


def kill(pid: int | None, token: str | None) -> None:
    """SIGKILL the pod's whole process group (the wrapper and everything the command started)."""
    if not pid or not is_alive(pid, token):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    child = _children.pop(pid, None)
    if child is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)


def read_exit_code(exit_path: str | Path) -> int | None:
    """The exit code the wrapper recorded, or None while the pod has not ended."""
    try:
        return int(Path(exit_path).read_text().strip())
    except (OSError, ValueError):
        return None
