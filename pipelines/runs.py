"""Finding runs again: what the local runner and the workspace keep of each workflow run, read back for people.

A run left two records on this machine, and neither needs MLflow:

- the runner's, `VCPILOT_HOME/runs/<name>/`: `status.json` (the Workflow with Argo's `status.nodes`) and
  `nodes/<id>/main.log`, each step's output;
- the workspace's, `<workspace>/runs/<name>/` (the run's `workspace` parameter): the reports, `decisions/` (the
  agent's records, `agent/records.py`), `release.json`, `summary.json`.

`vcpilot runs` (`pipelines/cli_runs.py`) prints what this module reads; the MLflow side is `pipelines/runs_mlflow.py`.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agent.records import read_decision
from components.errors import InputError
from components.tracking.spool import Spool
from components.volcano.locallogs import Follower
from pipelines.local.engine.status import parse_rfc3339
from pipelines.local.runner import delete_run, is_running, last_line, read_run_record, step_reason
from pipelines.local.workflow import WorkflowError, check_run_name
from pipelines.workspace import RunPaths

__all__ = [
    "DecisionView",
    "Removed",
    "RunDetail",
    "RunSummary",
    "StepView",
    "check_name",
    "follow_step_logs",
    "list_runs",
    "log_header",
    "load_run",
    "remove_run",
    "show_run",
    "step_logs",
]

# A run's name is checked by the runner's one rule (a workflow name; it keeps `..` and `/` out of paths).
check_name = check_run_name
_LEAVES = ("Pod", "Suspend", "Skipped")
DAMAGED = "Damaged"  # the phase `runs list` gives a run whose record cannot be read


class StepView(BaseModel):
    """One step (a leaf node) of a run: what it did, how long, and where its output is."""

    name: str  # the node's display name: `detect-logs`, `train(0)`, `[0].hello`
    template: str
    phase: str
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: float | None = None
    exit_code: int | None = None
    message: str = ""
    error: str = ""  # a failed step's last line of output: usually the sentence that says why
    log: str | None = None  # the step's own output (`main.log`); a VCJob step has its pods' logs instead
    job: str | None = None  # `namespace/name` of the VCJob a resource step created
    pod_logs: list[str] = []  # every run of every pod of that job, oldest first (LocalCluster keeps them)


class DecisionView(BaseModel):
    """One decision of the agent, from its record in the workspace."""

    stage: str
    attempt: int
    action: str
    policy: str
    rationale: str
    record: str


class RunSummary(BaseModel):
    """A run as `vcpilot runs list` shows it."""

    name: str
    phase: str
    running: bool = False  # a runner holds the run now (a `Running` run without one was interrupted)
    message: str = ""
    started_at: str | None = None
    finished_at: str | None = None
    decisions: list[DecisionView] = []
    released: str | None = None  # `shop-assistant version 2`, when the release step registered one
    release_reason: str = ""
    tracking_uri: str = ""  # the run's `mlflow-tracking-uri` parameter ("": this machine's store)
    experiment: str = ""
    mlflow_run_id: str | None = None
    mlflow_url: str | None = None


class RunDetail(RunSummary):
    """A run as `vcpilot runs show` shows it: its steps, and where everything it wrote is."""

    run_dir: str
    workspace_dir: str | None = None
    reports: list[str] = []
    steps: list[StepView] = []
    notes: list[str] = []  # what could not be read (a damaged record), one sentence each


class Removed(BaseModel):
    """What `remove_run` removed, one line each."""

    removed: list[str]


def load_run(home: Path, name: str) -> dict[str, Any]:
    """The run's status.json document; InputError in one sentence when there is no such run."""
    if not (home / "runs" / check_name(name) / "status.json").exists():
        known = ", ".join(_names(home)) or "none"
        raise InputError(f"there is no run named {name!r} in {home / 'runs'}; the runs there: {known}")
    return read_run_record(home, name, "the run's record is damaged")


def list_runs(home: Path, limit: int | None = None) -> list[RunSummary]:
    """The runs under `home`, newest first.

    A run whose status.json is unreadable is listed as `Damaged`, with the sentence that says why and the way out,
    where it last wrote: a listing that left it out would hide it.
    """
    found: list[tuple[tuple[str, float], RunSummary]] = []
    for name in _names(home):
        written = (home / "runs" / name / "status.json").stat().st_mtime
        try:
            document = load_run(home, name)
        except InputError as err:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(written))
            message = f"{str(err).rstrip('.')}; `vcpilot runs delete {name} --yes` removes it"
            found.append(((stamp, written), RunSummary(name=name, phase=DAMAGED, message=message)))
            continue
        summary = RunSummary.model_validate(_detail(home, name, document).model_dump(include=_SUMMARY_FIELDS))
        # Argo's times are to the second; among runs started in one second, the one that wrote last is newer.
        found.append(((_started(document), written), summary))
    found.sort(key=lambda pair: pair[0], reverse=True)
    return [summary for _, summary in found[:limit]]


def show_run(home: Path, name: str) -> RunDetail:
    """Everything the runner and the workspace hold of one run; InputError when there is no such run."""
    return _detail(home, name, load_run(home, name))


def step_logs(home: Path, name: str, step: str | None = None) -> list[tuple[StepView, Path]]:
    """The steps' logs, in the order they ran: all of them, or those whose display or template name is `step`."""
    detail = show_run(home, name)
    chosen = _logs_of(detail, step)
    if step is not None and not chosen:
        steps = [s for s in detail.steps if s.log or s.pod_logs]
        names = sorted({s.name for s in steps} | {s.template for s in steps if s.template})
        raise InputError(f"run {name!r} has no step {step!r} with a log; its steps: {', '.join(names) or 'none'}")
    return chosen


def follow_step_logs(home: Path, name: str, step: str | None, tail: int | None, poll_s: float = 0.5) -> None:
    """Print the steps' logs as they are written, steps as they start, until no runner holds the run.

    `step` may name a step that has not started yet, but it must be one the workflow has (a display name seen,
    a template, or a step or task of one): a typo is refused at once instead of waiting for the run to end.
    """
    document = load_run(home, name)
    if step is not None and step not in (known := _step_names(document)):
        raise InputError(f"run {name!r} has no step {step!r}; its steps and templates: {', '.join(sorted(known))}")
    follower = Follower(tail)
    while True:
        # Read before the pass: once no runner holds the run, everything its steps wrote is on disk.
        running = is_running(name, home=home)
        for view, log in _logs_of(show_run(home, name), step):
            ended = not running or view.phase not in ("Pending", "Running")
            follower.show(log, log_header(view, log), ended)
        if not running:
            return
        time.sleep(poll_s)


def _logs_of(detail: RunDetail, step: str | None) -> list[tuple[StepView, Path]]:
    steps = [s for s in detail.steps if (s.log or s.pod_logs) and step in (None, s.name, s.template)]
    return [(s, Path(log)) for s in steps for log in ([s.log] if s.log else []) + s.pod_logs]


def log_header(view: StepView, log: Path) -> str:
    """The line above a step's log: which step, its template and phase, and the file."""
    return f"── {view.name} ({view.template}, {view.phase}) {log}"


def _step_names(document: dict[str, Any]) -> set[str]:
    """Every name `runs logs STEP` may be given for a run.

    Its nodes' display names and templates, and the templates, steps and tasks its workflow declares (those not
    started yet included).
    """
    names: set[str] = set()
    for node in ((document.get("status") or {}).get("nodes") or {}).values():
        names.update(str(node[key]) for key in ("displayName", "templateName") if node.get(key))
    for template in (document.get("spec") or {}).get("templates") or []:
        names.add(str(template.get("name", "")))
        for group in template.get("steps") or []:
            names.update(str(s.get("name", "")) for s in group or [] if isinstance(s, dict))
        names.update(str(t.get("name", "")) for t in (template.get("dag") or {}).get("tasks") or [])
    return names - {""}


def remove_run(home: Path, name: str) -> Removed:
    """Delete the run's local state: the runner's directory, its VCJobs, the workspace's directory for it.

    Refused (WorkflowError, from the runner) while a runner holds the run; nothing is removed then.
    """
    try:
        document = load_run(home, name)
    except WorkflowError:  # a damaged record is removed too; its jobs and workspace cannot be read from it
        document = {"local": {}, "spec": {}}
    run_dir = home / "runs" / name
    owned = [obj.get("name", "") for obj in (document.get("local") or {}).get("owned") or []]
    logs = len(list((run_dir / "nodes").glob("*/main.log")))
    delete_run(name, home=home)  # takes the runner's lock first: a running run is refused here, before anything
    removed = [f"{run_dir} (the runner's record: status.json and {logs} step logs)"]
    if owned:
        removed.append(f"the VCJobs it created on LocalCluster: {', '.join(owned)}")
    workspace = _workspace_dir(document, name)
    if workspace is not None and workspace.is_dir():
        shutil.rmtree(workspace)
        removed.append(f"{workspace} (its reports, decisions and models in the workspace)")
    return Removed(removed=removed)


_SUMMARY_FIELDS = set(RunSummary.model_fields)


def _names(home: Path) -> list[str]:
    root = home / "runs"
    return sorted(p.name for p in root.iterdir() if (p / "status.json").is_file()) if root.is_dir() else []


def _started(document: dict[str, Any]) -> str:
    status = document.get("status") or {}
    return str(status.get("startedAt") or (document.get("metadata") or {}).get("creationTimestamp") or "")


def _parameters(document: dict[str, Any]) -> dict[str, str]:
    """The run's workflow parameters as it was submitted with them."""
    params = ((document.get("spec") or {}).get("arguments") or {}).get("parameters") or []
    return {str(p.get("name")): str(p.get("value", "")) for p in params if "name" in p}


def _workspace_dir(document: dict[str, Any], name: str) -> Path | None:
    """`<workspace>/runs/<name>` when the run has a workspace parameter (llm-autopilot does; examples do not)."""
    workspace = _parameters(document).get("workspace")
    if not workspace:
        return None
    cwd = Path(str((document.get("local") or {}).get("cwd") or "."))
    return Path(RunPaths(workspace=str(cwd / workspace), workflow=name).run)


def _detail(home: Path, name: str, document: dict[str, Any]) -> RunDetail:
    status = document.get("status") or {}
    run_dir = home / "runs" / name
    workspace = _workspace_dir(document, name)
    notes: list[str] = []
    decisions = _decisions(workspace / "decisions", notes) if workspace else []
    released, reason = _release(workspace / "release.json", notes) if workspace else (None, "")
    if workspace and (waiting := _spooled(workspace / "tracking")):
        where = workspace / "tracking"
        notes.append(f"{waiting} MLflow records wait in {where}: `vcpilot runs replay {name}` sends them")
    params = _parameters(document)
    return RunDetail(
        name=name,
        phase=str(status.get("phase") or "Pending"),
        running=is_running(name, home=home),
        message=str(status.get("message") or ""),
        started_at=status.get("startedAt"),
        finished_at=status.get("finishedAt"),
        decisions=decisions,
        released=released,
        release_reason=reason,
        run_dir=str(run_dir),
        workspace_dir=str(workspace) if workspace and workspace.is_dir() else None,
        reports=_reports(workspace) if workspace else [],
        steps=_steps(status.get("nodes") or {}, run_dir, home, (document.get("metadata") or {}).get("namespace")),
        tracking_uri=params.get("mlflow-tracking-uri", ""),
        experiment=params.get("mlflow-experiment", ""),
        notes=notes,
    )


def _spooled(directory: Path) -> int:
    """How many records the run's spools hold that MLflow has not taken."""
    return sum(Spool(path).pending() for path in directory.glob("*.jsonl")) if directory.is_dir() else 0


def _steps(nodes: dict[str, dict[str, Any]], run_dir: Path, home: Path, namespace: str | None) -> list[StepView]:
    steps = []
    for node in nodes.values():
        if node.get("type") not in _LEAVES:
            continue
        started, finished = parse_rfc3339(node.get("startedAt")), parse_rfc3339(node.get("finishedAt"))
        code = str((node.get("outputs") or {}).get("exitCode") or "")
        log = run_dir / "nodes" / str(node.get("id")) / "main.log"
        phase = str(node.get("phase") or "")
        job = _job_of(node, namespace or "default")
        pod_logs = _pod_logs(home, job) if job else []
        last = pod_logs[-1] if pod_logs and not log.is_file() else log
        steps.append(
            StepView(
                name=str(node.get("displayName") or node.get("name")),
                template=str(node.get("templateName") or ""),
                phase=phase,
                started_at=node.get("startedAt"),
                finished_at=node.get("finishedAt"),
                duration_s=finished - started if started is not None and finished is not None else None,
                exit_code=int(code) if code.lstrip("-").isdigit() else None,
                message=str(node.get("message") or ""),
                error=(step_reason(log.parent) if log.is_file() else last_line(last))
                if phase in ("Failed", "Error")
                else "",
                log=str(log) if log.is_file() else None,
                job="/".join(job) if job else None,
                pod_logs=[str(p) for p in pod_logs],
            )
        )
    return sorted(steps, key=lambda s: s.started_at or "~")  # stable: nodes started in one second keep their order


def _job_of(node: dict[str, Any], namespace: str) -> tuple[str, str] | None:
    """(namespace, name) of the VCJob a resource node created, else None.

    From the manifest it was given (llm-autopilot's `vcjob` template takes it as the input `manifest`), else from
    its `job-name` output.
    """
    params = {p.get("name"): p.get("value") for p in (node.get("inputs") or {}).get("parameters") or []}
    try:
        meta = json.loads(str(params.get("manifest") or "")).get("metadata") or {}
    except (ValueError, AttributeError):
        meta = {}
    outputs = {p.get("name"): p.get("value") for p in (node.get("outputs") or {}).get("parameters") or []}
    name = meta.get("name") or outputs.get("job-name")
    return (str(meta.get("namespace") or namespace), str(name)) if name else None


def _pod_logs(home: Path, job: tuple[str, str]) -> list[Path]:
    """The job's pod logs, oldest first, where LocalCluster writes them.

    `LocalCluster.logs` reads the same files, but only while the job exists; they outlive it, and the exit
    handler deletes a failed run's jobs.
    """
    directory = home / "logs" / job[0] / job[1]
    files = directory.glob("*.log") if directory.is_dir() else ()
    return sorted(files, key=lambda p: p.stat().st_mtime)


def _decisions(directory: Path, notes: list[str]) -> list[DecisionView]:
    views = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else ():
        try:
            decision = read_decision(path)
        except ValueError as err:  # a damaged record is a note, not a failed listing
            notes.append(str(err))
            continue
        views.append(
            DecisionView(
                stage=decision.stage,
                attempt=decision.observation.request.attempt,
                action=decision.action.kind,
                policy=decision.policy,
                rationale=decision.action.rationale,
                record=str(path),
            )
        )
    return sorted(views, key=lambda d: (d.attempt, d.stage != "plan"))


def _release(path: Path, notes: list[str]) -> tuple[str | None, str]:
    """`(<model> version <n>, reason)` when the release step registered a version; (None, reason) when it did not."""
    if not path.is_file():
        return None, ""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        notes.append(f"cannot read the release record {path}: {err}")
        return None, ""
    version = record.get("version") if isinstance(record, dict) else None
    reason = str(record.get("reason") or "") if isinstance(record, dict) else ""
    if isinstance(version, dict) and version.get("version"):
        return f"{version.get('name') or record.get('registered_model')} version {version['version']}", reason
    return None, reason


def _reports(workspace: Path) -> list[str]:
    """The files a reviewer reads: the steps' reports, the release record, the summaries (not models, checkpoints)."""
    if not workspace.is_dir():
        return []
    found = [p for p in workspace.glob("*/report.*") if p.is_file()]
    found += [p for p in workspace.glob("*") if p.is_file() and p.suffix in (".json", ".md")]
    return [str(p) for p in sorted(set(found))]
