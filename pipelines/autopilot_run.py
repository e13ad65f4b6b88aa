"""`vcpilot run`: the real llm-autopilot WorkflowTemplate through the local runner, on LocalCluster, with scenarios.

The run executes `deploy/argo/llm-autopilot.yaml` — the very YAML Argo receives — with parameters pointing at
`VCPILOT_HOME` (workspace, logs, MLflow store). A scenario shapes what happens to it:

- `drift` (default): the current logs drift, the model is fine-tuned on 2 GPUs, load-tested, evaluated, released;
- `no-drift`: the logs are clean, the gate says so and nothing heavy runs;
- `node-failure`: the node running the first training attempt dies after a checkpoint; diagnose retries from
  that checkpoint on the healthy node, and the run still succeeds;
- `node-failure-again`: that node comes back once the retry runs off it, and then the node of the retry's master
  dies too; diagnose keeps off both and retries on the GPUs left (fewer, the global batch kept), or aborts when
  none are left;
- `pod-kill`: a pod of the first training attempt is SIGKILLed after a checkpoint; the same recovery;
- `code-bug`: training crashes the same way on every rank; diagnose aborts and the run fails.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path, PurePath
from typing import Any

from agent.observation import check_names
from components.logs.reader import LogSourceError, expand_sources
from components.progress import Progress
from components.tracking.adapter import experiment_name, local_store_uri
from components.tracking.runs import close_workflow_run
from components.volcano.cluster_local import LocalCluster, default_home
from components.volcano.localconfig import load_config
from pipelines.local.runner import Interrupted, RunResult, StopRequest, WorkflowError, run_workflow
from pipelines.local.workflow import check_run_name, load_workflow
from pipelines.parameters import DEFAULTS, check_parameters
from pipelines.scenarios import SCENARIOS, Scenario
from pipelines.vcjobs import check_workflow_name

__all__ = [
    "SCENARIOS",
    "Scenario",
    "TEMPLATE",
    "bootstrap_champion",
    "demo_log_source",
    "demo_parameters",
    "prepare_demo",
    "run_autopilot",
]

TEMPLATE = Path(__file__).resolve().parents[1] / "deploy" / "argo" / "llm-autopilot.yaml"


REGISTERED_MODEL = "shop-assistant"
# Enough steps for the tiny model to learn the shop's prices on two CPU cores (see docs/pipeline.md).
CHAMPION_STEPS = 100
FINETUNE_STEPS = 150


def demo_log_source(home: Path, drift: bool) -> Path:
    """Where `prepare_demo` puts the scenario's logs (nothing is written)."""
    return home / "demo" / ("logs" if drift else "calm-logs")


def prepare_demo(home: Path, drift: bool) -> Path:
    """Generate the demo's data once (deterministic); return the log source for the scenario.

    Drift compares the current window with the baseline; without drift the baseline is compared with itself.
    """
    from components.demo.data import DemoConfig, write_demo

    demo = home / "demo"
    if not (demo / "demo.json").is_file():
        write_demo(demo, DemoConfig())
    if drift:
        return demo / "logs"
    calm = demo_log_source(home, drift)
    for window in ("baseline", "current"):
        if not (calm / window).exists():
            shutil.copytree(demo / "logs" / "baseline", calm / window)
    return calm


def bootstrap_champion(
    home: Path,
    tracking_uri: str,
    registered_model: str = REGISTERED_MODEL,
    *,
    progress: Progress | None = None,
    stop: StopRequest | None = None,
) -> Path:
    """The first champion: the tiny model trained on the baseline catalog and registered with alias `champion`.

    Done once per VCPILOT_HOME; later runs fine-tune from it. Training takes minutes: its step lines are
    reported to `progress`; `stop` ends it (Interrupted) and the next run starts it over.
    """
    from components.release.register import register_model
    from components.release.registry import connect, find_alias

    model = home / "demo" / "champion"
    if (model / "config.json").is_file() and find_alias(connect(tracking_uri), registered_model, "champion"):
        return model
    data = home / "demo" / "data" / "baseline"
    command = [
        sys.executable, "-m", "components.finetune", "--base-model", "tiny", "--data", str(data), "--out", str(model),
        "--max-steps", str(CHAMPION_STEPS), "--checkpoint-every", str(CHAMPION_STEPS),
        "--checkpoint-dir", str(home / "demo" / "champion-checkpoints"), "--micro-batch", "16", "--global-batch", "48",
        "--json",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "VCPILOT_STEP_DELAY")}
    env["VCPILOT_PROGRESS"] = "plain"  # its step lines are read here, not drawn
    reporter = progress or Progress.off()
    with reporter.status(f"training the first champion ({CHAMPION_STEPS} steps, once per VCPILOT_HOME)") as update:
        code, tail = _train(command, env, update, stop)
    if code != 0:
        raise WorkflowError(f"training the first champion failed: {tail or 'no output'}")
    reporter.event("registering the first champion in MLflow")
    register_model(
        model, registered_model, dataset=data, base_model="tiny", workflow="bootstrap", tracking_uri=tracking_uri
    )
    # The registration's run nests under a "bootstrap" parent run: end it, or MLflow shows it RUNNING for ever.
    close_workflow_run(tracking_uri, experiment_name(), "bootstrap", "Succeeded", {})
    return model


_STEP_LINE = re.compile(r"step (\d+)/(\d+)\s+loss ([0-9.]+)")


def _train(
    command: list[str], env: dict[str, str], update: Callable[[str], None], stop: StopRequest | None
) -> tuple[int, str]:
    """Run the training process, reporting its step lines; (exit code, its last line of output)."""
    lines: queue.Queue[str | None] = queue.Queue()
    proc = subprocess.Popen(
        command,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # the step lines are on stderr, the JSON summary on stdout: both end here
        text=True,
        start_new_session=True,  # Ctrl-C reaches this process, which decides what the child does
    )

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    tail: deque[str] = deque(maxlen=1)
    try:
        while True:
            if stop is not None and stop.is_set():
                raise Interrupted("stopped while training the first champion")
            try:
                line = lines.get(timeout=0.2)
            except queue.Empty:
                continue
            if line is None:
                return proc.wait(), tail[-1] if tail else ""
            if line.strip():
                tail.append(line.strip())
            if found := _STEP_LINE.search(line):
                update(f"step {found[1]}/{found[2]}, loss {float(found[3]):.3f}")
    finally:
        if proc.poll() is None:  # stopped, or the caller was interrupted: the child must not train on alone
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def demo_parameters(home: PurePath) -> dict[str, str]:
    """Template parameters that run the demo from `home` (prepare_demo, bootstrap_champion): data, model, sizes.

    The same for `vcpilot run` on this machine and for a cluster whose workspace holds the demo (`vcpilot demo
    seed`, deploy/e2e/install.py).
    """
    return {
        "log-source": str(home / "demo" / "logs"),
        "dataset-dir": str(home / "demo" / "data" / "drifted"),
        "base-model": str(home / "demo" / "champion"),
        "registered-model": REGISTERED_MODEL,
        "gpus-wanted": "2",
        "gpus-min": "1",
        "gpus-per-pod": "1",
        "global-batch": "8",
        "micro-batch": "4",
        "train-max-steps": str(FINETUNE_STEPS),
        "checkpoint-every": "25",
        "slo-ttft-ms": "2000",
        "slo-tpot-ms": "500",
    }


def local_parameters(home: Path) -> dict[str, str]:
    """Template parameters that point the run at this machine: workspace, data and MLflow under VCPILOT_HOME."""
    return {
        "workspace": str(home / "workspace"),
        "workspace-pvc": "",
        "job-service-account": "",  # LocalCluster runs no sidecars, and `vcpilot run` needs no guard
        **demo_parameters(home),
        "mlflow-tracking-uri": local_store_uri(home),
    }


def _check_cluster_names(home: Path, arguments: Mapping[str, str]) -> None:
    """Refuse queues and a priority class the LocalCluster does not have, before anything starts.

    A home without a cluster yet is judged by the config its cluster will be built from; nothing is created.
    """
    if (home / "cluster.db").exists():
        cluster = LocalCluster(home)
        try:
            queues, classes = [q.name for q in cluster.queues()], list(cluster.priority_classes())
        finally:
            cluster.close()
    else:
        config = load_config(home / "cluster.yaml" if (home / "cluster.yaml").exists() else None)
        queues, classes = ["default", *(q.name for q in config.queues)], list(config.priority_classes)
    values = {**DEFAULTS, **arguments}
    check_names(values["queue"], values["fallback-queue"], values["priority-class"], queues, classes)


def _check_local_paths(given: Mapping[str, str]) -> None:
    """Refuse a log source or dataset directory the user gave that is not on this machine, before anything starts.

    Locally the steps' pods read this machine's files: a typo was found by the detect or evaluate step, after the
    first champion had trained for minutes. The demo's own paths are made by `prepare_demo` and not checked here.
    """
    if given.get("log-source"):
        try:
            expand_sources([given["log-source"]])
        except LogSourceError as err:
            raise WorkflowError(f"-p log-source: {err}.") from None
    if given.get("dataset-dir") and not (Path(given["dataset-dir"]) / "eval.jsonl").is_file():
        raise WorkflowError(
            f"-p dataset-dir {given['dataset-dir']!r} holds no eval.jsonl on this machine: give the directory of the "
            "evaluation set"
        )


@contextlib.contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables for the run (pods and steps inherit them), and restore them after."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


def run_autopilot(
    scenario: str = "drift",
    params: Mapping[str, str] | None = None,
    *,
    home: str | Path | None = None,
    name: str | None = None,
    on_update: Callable[[dict[str, Any]], None] | None = None,
    bootstrap: bool = True,
    stop: StopRequest | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """Run llm-autopilot locally under a scenario; WorkflowError for an unknown scenario or bad parameters.

    With `bootstrap` (and the default base model) a first champion is trained and registered when there is none,
    reported to `progress`. `stop` stops the run (see `pipelines/local/runner.py`); set before the workflow
    starts, it raises Interrupted.
    """
    if scenario not in SCENARIOS:
        raise WorkflowError(f"unknown scenario {scenario!r}; choose one of {', '.join(SCENARIOS)}.")
    chosen = SCENARIOS[scenario]
    home_path = Path(home).resolve() if home else default_home()
    run = check_run_name(name) if name is not None else f"llm-autopilot-{time.strftime('%Y%m%d-%H%M%S')}"
    try:
        check_workflow_name(run)
    except ValueError as err:
        raise WorkflowError(f"--name {err}.") from None
    # Everything is checked before anything is written: no demo data, champion, MLflow run or cluster state.
    arguments = {**local_parameters(home_path), "log-source": str(demo_log_source(home_path, chosen.drift))}
    arguments.update(params or {})
    try:
        check_parameters(arguments)  # what the workflow's first step checks, before anything runs here
    except ValueError as err:
        raise WorkflowError(str(err)) from None
    load_workflow(TEMPLATE, arguments, name=run)  # unknown parameters fail here
    _check_cluster_names(home_path, arguments)
    _check_local_paths(params or {})
    prepare_demo(home_path, chosen.drift)
    if bootstrap and arguments["base-model"] == str(home_path / "demo" / "champion"):
        bootstrap_champion(
            home_path, arguments["mlflow-tracking-uri"], arguments["registered-model"], progress=progress, stop=stop
        )
    if stop is not None and stop.is_set():
        raise Interrupted("stopped before the workflow started")
    with _environment({"VCPILOT_HOME": str(home_path), **chosen.env}):
        run_over = threading.Event()
        watcher = None
        if chosen.fault is not None:
            workspace = Path(arguments["workspace"])
            watcher = threading.Thread(target=chosen.fault, args=(home_path, run, workspace, run_over), daemon=True)
            watcher.start()
        try:
            return run_workflow(TEMPLATE, arguments, home=home_path, name=run, on_update=on_update, stop=stop)
        finally:
            run_over.set()
            if watcher is not None:
                watcher.join(timeout=30)
