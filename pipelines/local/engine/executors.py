"""What a pod would do, done on this machine: run a container's or script's command, or wait out a suspend.

Images are ignored: a command starting with `python`/`python3` runs this environment's interpreter, anything
else runs from the host's PATH. Absolute paths under `/tmp` and `/argo` that the template itself spells out
(the script at `/argo/staging/script`, output files such as `/tmp/result.txt`, Hera's `/tmp/hera-outputs`) are
rewritten into the node's own directory — in the command, args, env values, script source and output paths —
so parallel nodes never share a file, and so are the literal paths of mounted claims and emptyDirs, into their
volume's directory (`pipelines.local.volumes`); values that arrive through parameters are host paths and stay as
they are. A node's stdout and stderr go to `main.log` in that directory (the end of stderr to `stderr.tail` too);
stdout, less one trailing newline, is `outputs.result` (its last 256 kB, as Argo's executor keeps of a longer
one). All three are redacted a line at a time as they are written (`components.redact`): a secret a step
prints is stored masked. Other volumes and resources are ignored: steps share the host's filesystem (env variables
and volumes from a Secret or ConfigMap are refused when the workflow loads).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.redact import LogRedactor
from pipelines.local.engine.resume_marker import supplied_outputs
from pipelines.local.engine.status import Artifact, Outputs, Parameter
from pipelines.local.volumes import NODE_DIR, localize, mounts, moved_mounts
from pipelines.local.workflow import HOST_ROOTS, NO_COMMAND, parse_duration, stringify

__all__ = [
    "DEADLINE_MESSAGE",
    "SHUTDOWN_MESSAGE",
    "STOPPED_MESSAGE",
    "LeafContext",
    "LeafResult",
    "ProcessTable",
    "STDERR_TAIL",
    "kill_stale",
    "mark_paths",
    "read_output_parameters",
    "run_container",
    "run_script",
    "run_suspend",
]

DEADLINE_MESSAGE = "Step exceeded its deadline"
RESUME_POLL_S = 0.25  # how often a suspended node looks for a resume request
# Argo's words for a supplied output with no value nor default (workflow/util OverrideOutputParametersWithDefault).
UNSET_OUTPUT = "raw output parameter '{name}' has not been set and does not have a default value"
# What Argo writes on the nodes whose pods it stops for `argo terminate` (controller/exec_control.go).
SHUTDOWN_MESSAGE = "workflow shutdown with strategy:  Terminate"
STOPPED_MESSAGE = "Stopped with strategy 'Terminate'"  # ... and on the workflow and its retry nodes (operator.go)
POD_DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"
# The last 4 kB a node wrote to stderr, beside main.log: where a failed step's reason is read from.
STDERR_TAIL = "stderr.tail"
MAX_RESULT_BYTES = 256 * 1024  # Argo's executor keeps the last 256 kB of a longer stdout as the result
MAX_PARAMETER_BYTES = 16 * 2**20  # the most of an output parameter's file read: past any value Argo could keep
# The roots a template's paths move from into its node's directory: /tmp, /argo and the first directory of each
# path the template declares for an output parameter or an artifact (`/outputs/x/data` moves /outputs), as
# each pod has its own filesystem; never the host's own directories, which the local process needs as they are.
_OWN_ROOTS = ("tmp", "argo")
# Where an output artifact on a volume shared beyond the pod (a claim) is copied as its step ends, in its node dir.
_SNAPSHOTS = ".artifacts"


@dataclass
class LeafContext:
    """Where and how one leaf node runs."""

    node_id: str
    node_dir: Path
    cwd: str
    env: Mapping[str, str]  # variables every node gets (VCPILOT_HOME, ARGO_POD_NAME, ...)
    deadline_s: float | None = None  # the template's activeDeadlineSeconds / timeout
    container: str = "main"  # which container of the pod: a containerSet's run side by side in one node directory

    @property
    def log(self) -> Path:
        """Where this container's stdout and stderr go: `main.log`, `<container>.log`."""
        return self.node_dir / f"{self.container}.log"

    def file(self, name: str) -> Path:
        """The node directory's `name` (`pid`, `stderr.tail`) for this container: `<container>.<name>` but main's."""
        return self.node_dir / (name if self.container == "main" else f"{self.container}.{name}")


@dataclass
class LeafResult:
    """How a leaf node ended."""

    phase: str
    message: str | None = None
    outputs: Outputs | None = None


@dataclass
class _Running:
    proc: subprocess.Popen[bytes]
    exempt: bool
    reason: str | None = None

    def kill(self, reason: str) -> None:
        if self.proc.poll() is None:
            self.reason = self.reason or reason
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)


@dataclass
class ProcessTable:
    """The processes of a run, so that a workflow deadline or a stop can end them all."""

    _entries: dict[int, _Running] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _shut: str | None = None
    _expired: str | None = None

    def add(self, proc: subprocess.Popen[bytes], exempt: bool) -> _Running:
        """Track a started process; `exempt` processes (exit handlers) survive `expire`, none survives `shut`."""
        entry = _Running(proc, exempt)
        with self._lock:
            self._entries[proc.pid] = entry
            # Started in the moment the run was stopped, or its deadline passed: it must not outlive either.
            reason = self._shut if self._shut is not None else None if exempt else self._expired
            if reason is not None:
                entry.kill(reason)
        return entry

    def expire(self, reason: str) -> None:
        """Kill every process but the exit handlers', and any such process that is added from now on."""
        with self._lock:
            self._expired = reason
        self.kill_all(reason)

    def shut(self, reason: str) -> None:
        """Kill every process, and any that is added from now on."""
        with self._lock:
            self._shut = reason
        self.kill_all(reason, exempt_too=True)

    def remove(self, entry: _Running) -> None:
        """Stop tracking a process that ended."""
        with self._lock:
            self._entries.pop(entry.proc.pid, None)

    def kill_all(self, reason: str, *, exempt_too: bool = False) -> None:
        """SIGKILL every tracked process group (exit handlers' only with `exempt_too`)."""
        with self._lock:
            entries = list(self._entries.values())
        for entry in entries:
            if exempt_too or not entry.exempt:
                entry.kill(reason)


def mark_paths(template: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
    """A container/script template whose own paths point where they are kept here (before parameters arrive).

    `/tmp/...`, `/argo/...` and the top directory of each declared output path move into the node's directory;
    the mount paths of claims and emptyDirs of `spec` (the workflow's) into their volume's. One pattern marks them
    all, longest first, so a rewritten path is never rewritten again. Output parameters and artifacts keep the
    path the template declares as `_declared_path`, the one Argo records and messages name.
    """
    targets = {f"/{root}": f"{NODE_DIR}/{root}" for root in _roots(template)}
    targets.update(moved_mounts(template, spec))
    alternatives = "|".join(map(re.escape, sorted(targets, key=len, reverse=True)))
    pattern = re.compile(rf"(?<![\w.~/$-])({alternatives})(?=/|[^\w.-]|$)")

    def mark(value: Any) -> Any:
        if isinstance(value, str):
            return pattern.sub(lambda m: targets[m.group(1)], value) if "/" in value else value
        if isinstance(value, Mapping):
            return {k: mark(v) for k, v in value.items()}
        if isinstance(value, list):
            return [mark(v) for v in value]
        return value

    def mark_path(holder: Mapping[str, Any]) -> dict[str, Any]:
        return {**holder, "path": mark(holder["path"]), "_declared_path": holder["path"]}

    out = dict(template)
    for kind in ("container", "script", "containerSet"):
        if isinstance(out.get(kind), Mapping):
            out[kind] = mark(out[kind])
    outputs = out.get("outputs")
    if isinstance(outputs, Mapping) and outputs.get("parameters"):
        params = [
            {**p, "valueFrom": mark_path(p["valueFrom"])}
            if isinstance(p.get("valueFrom"), Mapping) and p["valueFrom"].get("path")
            else p
            for p in outputs["parameters"]
        ]
        out["outputs"] = {**outputs, "parameters": params}
    for key in ("inputs", "outputs"):
        block = out.get(key)
        if isinstance(block, Mapping) and block.get("artifacts"):
            artifacts = [mark_path(a) if a.get("path") else a for a in block["artifacts"]]
            out[key] = {**block, "artifacts": artifacts}
    return out


def _declared(template: Mapping[str, Any], start: str = "/") -> list[str]:
    """The paths a template declares for output parameters and artifacts under `start`, cut to what follows it.

    ["/result.txt", "/tmp/out"]: each keeps the "/" after `start`.
    """
    declared = [
        *((p.get("valueFrom") or {}).get("path") for p in (template.get("outputs") or {}).get("parameters") or []),
        *(a.get("path") for key in ("inputs", "outputs") for a in (template.get(key) or {}).get("artifacts") or []),
    ]
    cut = len(start.rstrip("/"))
    return [p[cut:] for p in declared if isinstance(p, str) and p.startswith(start.rstrip("/") + "/") and p[cut + 1 :]]


def _roots(template: Mapping[str, Any]) -> set[str]:
    """The top directories that move into the node's directory: /tmp, /argo and those of declared paths."""
    return ({path.split("/")[1] for path in _declared(template)} - HOST_ROOTS) | set(_OWN_ROOTS)


def _argv(spec: Mapping[str, Any], ctx: LeafContext, kind: str) -> list[str]:
    command = [stringify(c) for c in spec.get("command") or []]
    if not command:
        raise _LeafError(f"the {kind} has {NO_COMMAND}.")
    argv = [localize(a, ctx.node_dir) for a in command + [stringify(a) for a in spec.get("args") or []]]
    if argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    return argv


class _LeafError(Exception):
    """A leaf that cannot start; its message becomes the node's (phase Error)."""


def _env(spec: Mapping[str, Any], ctx: LeafContext) -> dict[str, str]:
    env = {**os.environ, **ctx.env}
    for var in spec.get("env") or []:
        if "value" in var:
            env[str(var["name"])] = localize(stringify(var["value"]), ctx.node_dir)
    env.setdefault("hera__outputs_directory", f"{ctx.node_dir}/tmp/hera-outputs")
    return env


def _prepare_dir(template: Mapping[str, Any], node_dir: Path) -> None:
    """The node's own /tmp and /argo/staging, its volumes' directories, and its input artifacts where it reads them.

    As Argo's init container does: `raw` data is written, another step's artifact (`_source`) copied; the loader
    refused artifacts from anywhere else.
    """
    (node_dir / "tmp").mkdir(parents=True, exist_ok=True)
    (node_dir / "argo" / "staging").mkdir(parents=True, exist_ok=True)
    for mount in mounts(template):  # a volume that moved exists once mounted; a host path is never made here
        path = str(mount.get("mountPath") or "")
        if path != localize(path, node_dir):
            Path(localize(path, node_dir)).mkdir(parents=True, exist_ok=True)
    for artifact in (template.get("inputs") or {}).get("artifacts") or []:
        target = Path(localize(str(artifact["path"]), node_dir))
        target.parent.mkdir(parents=True, exist_ok=True)
        if "_source" not in artifact:
            target.write_text(artifact["raw"]["data"])
        elif Path(artifact["_source"]).is_dir():
            shutil.copytree(artifact["_source"], target, dirs_exist_ok=True)
        else:
            try:
                shutil.copyfile(artifact["_source"], target)
            except OSError as err:
                raise _LeafError(f"input artifact {artifact['name']!r}: {err.strerror or err}.") from None
        if isinstance(artifact.get("mode"), int):
            target.chmod(artifact["mode"])


def run_container(template: Mapping[str, Any], ctx: LeafContext, table: ProcessTable, exempt: bool) -> LeafResult:
    """Run a container template's command + args."""
    spec = template["container"]
    try:
        argv = _argv(spec, ctx, "container")
        _prepare_dir(template, ctx.node_dir)
    except _LeafError as err:
        return LeafResult("Error", str(err))
    return _run(argv, _env(spec, ctx), _cwd(spec, template, ctx), template, ctx, table, exempt)


def _cwd(spec: Mapping[str, Any], template: Mapping[str, Any], ctx: LeafContext) -> str:
    """The container's workingDir when it exists here (e.g. under its /tmp), else the runner's directory.

    Without a workingDir, a template that declares a path at the top of its filesystem (`/result.txt`) runs in
    its node's directory, its own `/`: there a file it writes by a relative name lands where that path reads it,
    as in the image's WORKDIR `/` of python, alpine or busybox (upstream's conditional-artifacts writes
    `result.txt` and outputs `/result.txt`).
    """
    working = spec.get("workingDir")
    if working:
        path = localize(str(working), ctx.node_dir)
        if path.startswith(str(ctx.node_dir)):
            Path(path).mkdir(parents=True, exist_ok=True)
        if Path(path).is_dir():
            return path
    elif any(path.count("/") == 1 for path in _declared(template, NODE_DIR)):
        return str(ctx.node_dir)
    return ctx.cwd


def run_script(template: Mapping[str, Any], ctx: LeafContext, table: ProcessTable, exempt: bool) -> LeafResult:
    """Write the script source into the node's `/argo/staging/script` and run command + args + that path."""
    spec = template["script"]
    try:
        argv = _argv(spec, ctx, "script")
        _prepare_dir(template, ctx.node_dir)
    except _LeafError as err:
        return LeafResult("Error", str(err))
    source = spec.get("source")
    if source:
        script = ctx.node_dir / "argo" / "staging" / "script"
        script.write_text(localize(stringify(source), ctx.node_dir))
        script.chmod(0o755)
        argv.append(str(script))
    return _run(argv, _env(spec, ctx), _cwd(spec, template, ctx), template, ctx, table, exempt)


def _run(
    argv: list[str],
    env: dict[str, str],
    cwd: str,
    template: Mapping[str, Any],
    ctx: LeafContext,
    table: ProcessTable,
    exempt: bool,
) -> LeafResult:
    log_path = ctx.log
    tail = bytearray()  # the end of stdout: what becomes the result
    said = bytearray()  # the end of stderr: why a failed step failed (STDERR_TAIL)
    writing = threading.Lock()
    with open(log_path, "ab") as log:
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as err:
            return LeafResult("Error", f"cannot start {argv[0]!r}: {err.strerror or err}.")
        except ValueError as err:  # a NUL byte, or an env name with '=': what execve refuses a container's runtime too
            return LeafResult("Error", f"cannot start {argv[0]!r}: {err} in its command, args or env.")

        def pump_stderr() -> None:
            assert proc.stderr is not None
            for masked in _redacted(proc.stderr.fileno()):
                with writing:
                    log.write(masked)
                    log.flush()
                said.extend(masked)
                del said[:-4096]
            proc.stderr.close()

        errors = threading.Thread(target=pump_stderr, daemon=True)
        errors.start()
        ctx.file("pid").write_text(f"{proc.pid} {_start_token(proc.pid) or ''}")
        entry = table.add(proc, exempt)
        timer = None
        if ctx.deadline_s is not None:
            timer = threading.Timer(ctx.deadline_s, entry.kill, args=(POD_DEADLINE_MESSAGE,))
            timer.daemon = True
            timer.start()
        assert proc.stdout is not None
        for masked in _redacted(proc.stdout.fileno()):
            with writing:
                log.write(masked)
                log.flush()
            tail += masked
            del tail[: -(MAX_RESULT_BYTES + 1)]  # one more: a trailing newline is dropped before the cut
        proc.stdout.close()
        errors.join()
        code = proc.wait()
        if timer is not None:
            timer.cancel()
        table.remove(entry)
    if said.strip():
        ctx.file(STDERR_TAIL).write_bytes(bytes(said))
    if code < 0:
        code = 128 - code
    if tail.endswith(b"\n"):
        del tail[-1:]
    result = tail[-MAX_RESULT_BYTES:].decode(errors="replace")
    outputs = Outputs(result=result, exitCode=str(code))
    if entry.reason is not None:
        return LeafResult("Failed", entry.reason, outputs)
    try:
        outputs.parameters = read_output_parameters(template, ctx) or None
        outputs.artifacts = read_output_artifacts(template, ctx) or None
    except _LeafError as err:
        if code == 0:
            return LeafResult("Error", str(err), outputs)
    if code != 0:
        # Argo names the container whose exit failed the pod, and the kubelet's reason for it.
        return LeafResult("Failed", f"{ctx.container}: Error (exit code {code})", outputs)
    return LeafResult("Succeeded", None, outputs)


def _redacted(fd: int) -> Iterator[bytes]:
    """What a pipe carries until it closes, redacted a line at a time (an unfinished line waits for its end)."""
    lines = LogRedactor()
    while chunk := os.read(fd, 65536):
        yield lines.feed(chunk)
    yield lines.close()


def read_output_parameters(template: Mapping[str, Any], ctx: LeafContext) -> list[Parameter]:
    """Output parameters read from files (`valueFrom.path`, one trailing newline trimmed) or their defaults."""
    out: list[Parameter] = []
    for param in (template.get("outputs") or {}).get("parameters") or []:
        source = param.get("valueFrom") or {}
        default = source.get("default")
        value: str | None = None
        if source.get("path"):
            path = Path(localize(str(source["path"]), ctx.node_dir))
            shown = source.get("_declared_path", source["path"])
            try:
                with open(path, "rb") as file:  # a bounded read: a link to /dev/zero never ends
                    data = file.read(MAX_PARAMETER_BYTES + 1)
            except OSError as err:
                if default is None:
                    why = "does not exist" if isinstance(err, FileNotFoundError) else f"cannot be read ({err.strerror})"
                    raise _LeafError(f"output parameter {param['name']!r}: {shown} {why} and has no default.") from None
                value = stringify(default)
            else:
                if len(data) > MAX_PARAMETER_BYTES:
                    raise _LeafError(
                        f"output parameter {param['name']!r}: {shown} holds more than {MAX_PARAMETER_BYTES // 2**20} "
                        "MiB, far more than Argo keeps of a parameter (its Workflow object is at most 1.5 MB): "
                        "output it as an artifact."
                    )
                value = data.decode(errors="replace")
                value = value[:-1] if value.endswith("\n") else value
        elif default is not None:
            value = stringify(default)
        elif "value" in param:
            value = stringify(param["value"])
        else:
            continue
        out.append(Parameter(name=param["name"], value=value, globalName=param.get("globalName")))
    return out


def read_output_artifacts(template: Mapping[str, Any], ctx: LeafContext) -> list[Artifact]:
    """The output artifacts the step wrote, kept in its node's directory.

    One on a volume shared beyond the pod (a claim) is copied there as the step ends, as Argo uploads it then:
    a later step that changes the volume does not change the artifact.
    """
    out: list[Artifact] = []
    run_dir = ctx.node_dir.parent.parent
    for artifact in (template.get("outputs") or {}).get("artifacts") or []:
        path = Path(localize(str(artifact["path"]), ctx.node_dir))
        declared = str(artifact.get("_declared_path", artifact["path"]))
        if not path.exists():
            if artifact.get("optional"):
                continue
            raise _LeafError(f"output artifact {artifact['name']!r}: {declared} does not exist.")
        if not path.is_relative_to(ctx.node_dir):
            path = _snapshot(path, ctx.node_dir / _SNAPSHOTS / str(artifact["name"]))
        local = str(path.relative_to(run_dir))
        out.append(Artifact(name=artifact["name"], path=declared, local=local, globalName=artifact.get("globalName")))
    return out


def _snapshot(source: Path, target: Path) -> Path:
    """A copy of the file or directory `source` at `target`."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            shutil.copyfile(source, target)
    except OSError as err:
        raise _LeafError(f"output artifact {target.name!r}: {err.strerror or err}.") from None
    return target


def run_suspend(
    template: Mapping[str, Any],
    started: float,
    cancel: threading.Event,
    resumed: Callable[[float], dict[str, str] | None],
) -> LeafResult:
    """Wait out a suspend: its duration, or until `vcpilot resume` asks (`resumed(started)`), as `argo resume`.

    Without a duration only a resume ends it. The `valueFrom.supplied` outputs take the resume's values, else
    their defaults (`resume_marker.supplied_outputs`); one with neither errors the node, as Argo's controller
    errors a suspend whose time ran out with such an output unset.
    """
    duration = (template.get("suspend") or {}).get("duration")
    try:
        seconds = None if duration in (None, "") else parse_duration(duration, "suspend duration")
    except ValueError as err:
        return LeafResult("Error", str(err))
    given: dict[str, str] | None = None
    while True:
        try:
            given = resumed(started)
        except ValueError as err:  # a damaged request (WorkflowError)
            return LeafResult("Error", str(err))
        if given is not None:
            break
        remaining = None if seconds is None else started + seconds - time.time()
        if remaining is not None and remaining <= 0:
            given = {}
            break
        if cancel.wait(RESUME_POLL_S if remaining is None else min(remaining, RESUME_POLL_S)):
            return LeafResult("Failed", DEADLINE_MESSAGE)
    params = []
    for name, default in supplied_outputs(template):
        value = given.get(name, default)
        if value is None:
            return LeafResult("Error", UNSET_OUTPUT.format(name=name))
        params.append(Parameter(name=name, value=value))
    return LeafResult("Succeeded", None, Outputs(parameters=params) if params else None)


def _start_token(pid: int) -> str | None:
    """The process start time from /proc (tells a live process apart from a reused pid)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()[19]


def kill_stale(node_dir: Path) -> None:
    """Kill what a previous runner left running for this node (it was SIGKILLed; the node runs again)."""
    for path in [node_dir / "pid", *node_dir.glob("*.pid")]:  # a containerSet's containers: one each
        try:
            pid_text, _, token = path.read_text().partition(" ")
            pid = int(pid_text)
        except (OSError, ValueError):
            continue
        if token and _start_token(pid) == token.strip():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
