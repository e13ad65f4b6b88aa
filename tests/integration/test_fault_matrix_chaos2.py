"""Five rows of the fault matrix through one whole `vcpilot run` (issue 16): a rank hangs, the latest checkpoint is
truncated, the training is preempted, the load-test server dies, and LocalCluster's controller is SIGKILLed again
and again throughout.

Every fault comes from outside, as a real one would: a signal to a trainer process (SIGSTOP: a rank that neither
progresses nor exits; SIGTERM to every rank: what the kubelet sends a preempted pod), half a checkpoint file cut
away, SIGKILL to the serving process, and a reconciler (`LocalCluster.reconcile`, what the pods' hook runs) started
and SIGKILLed every second or so, somewhere in its transactions. The only setting is one a user has:
`VCPILOT_STALL_TIMEOUT`, the trainer's hang timeout. A file of its own, so that `make test`'s two workers run it
beside the other whole-run rows (`--dist loadfile`).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from fault_table import record_fault

from components.finetune.checkpoint_layout import latest
from components.finetune.errors import EXIT_STALLED, EXIT_STOPPED
from components.volcano.cluster_local import LocalCluster

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
NAME = "chaos2"
STEPS = 30
STALL_S = 8
VCPILOT = [sys.executable, "-m", "pipelines.cli"]
_RECONCILER = """
import sys
from components.volcano.cluster_local import LocalCluster
cluster = LocalCluster(sys.argv[1])
print("ready", flush=True)
while True:
    cluster.reconcile()
"""


def processes(home: Path, module: str, **env: str) -> dict[int, dict[str, str]]:
    """The pid and environment of every process of this cluster that runs `python -m module` (not its wrapper)."""
    found = {}
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError):
            argv = (entry / "cmdline").read_bytes().decode().split("\0")
            if argv[0] != sys.executable or argv[1:3] != ["-m", module]:
                continue
            environ = dict(v.split("=", 1) for v in (entry / "environ").read_bytes().decode().split("\0") if "=" in v)
            if environ.get("VCPILOT_HOME") == str(home) and all(environ.get(k) == v for k, v in env.items()):
                found[int(entry.name)] = environ
    return found


def trainers(home: Path, attempt: int) -> dict[int, int]:
    """Rank -> pid of the trainer processes of training attempt `attempt`."""
    ranks = processes(home, "components.finetune", VCPILOT_ATTEMPT=str(attempt))
    return {int(env["RANK"]): pid for pid, env in ranks.items()}


def alive(pid: int) -> bool:
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    return False


def answers(url: str) -> bool:
    import httpx

    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(url, timeout=1).status_code == 200
    return False


def steps(run: Path, attempt: int) -> list[int]:
    path = run / f"train-{attempt}" / "model" / "metrics.jsonl"
    return [json.loads(line)["step"] for line in path.read_text().splitlines()] if path.is_file() else []


def step_of(checkpoint: str | Path | None) -> int:
    return int(Path(str(checkpoint)).name.removeprefix("step-")) if checkpoint else 0


class ControllerKiller(threading.Thread):
    """Start a reconciler, SIGKILL it 10-200 ms later (inside a pass or between two), again every ~1 s."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.home, self.env, self.kills = home, env, 0
        self.stop = threading.Event()
        self.rng = random.Random(16)

    def run(self) -> None:
        while not self.stop.wait(self.rng.uniform(0.5, 1.5)):
            # The pods a reconciler starts get its environment, as they get the runner's: the user's shell.
            controller = subprocess.Popen(
                [sys.executable, "-c", _RECONCILER, str(self.home)], cwd=ROOT, env=self.env,
                stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
            assert controller.stdout is not None
            if controller.stdout.readline().strip() == "ready":
                time.sleep(self.rng.uniform(0.01, 0.2))
            controller.kill()
            controller.wait()
            controller.stdout.close()
            self.kills += 1


def test_a_hang_a_truncated_checkpoint_a_preemption_and_a_dead_load_test_server_under_a_dying_controller(
    tmp_path, mlflow_server, record_property
):
    model = f"chaos2-{uuid.uuid4().hex[:8]}"
    params = {
        "base-model": "tiny",
        "train-max-steps": str(STEPS),
        "checkpoint-every": "5",
        "mlflow-tracking-uri": mlflow_server,
        "registered-model": model,
        "slo-ttft-ms": "60000",  # only the dead server may fail the gate, not a busy machine's first token
        "slo-tpot-ms": "10000",
        "loadtest-requests": "400",  # some seconds of requests, for the server to die in the middle of
    }
    home, log = tmp_path / "home", tmp_path / "vcpilot.log"
    run = home / "workspace" / "runs" / NAME
    checkpoints = run / "checkpoints"
    env = {**os.environ, "VCPILOT_HOME": str(home), "VCPILOT_STEP_DELAY": "0.3", "VCPILOT_STALL_TIMEOUT": str(STALL_S)}
    killer = ControllerKiller(home, env)
    with log.open("ab") as out:
        runner = subprocess.Popen(
            [*VCPILOT, "run", "--name", NAME, *(a for k, v in params.items() for a in ("-p", f"{k}={v}"))],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    deadline = time.monotonic() + 600

    def until(what: str, check):  # noqa: ANN001, ANN202 - a poll of the test's own
        while not (found := check()):
            assert runner.poll() is None, f"the run ended before {what}: " + log.read_text()[-3000:]
            assert time.monotonic() < deadline, f"no {what} in time: " + log.read_text()[-3000:]
            time.sleep(0.1)
        return found

    killer.start()
    try:
        # Attempt 1: rank 1 stops dead (SIGSTOP) once two checkpoints exist; rank 0 waits for it in an all-reduce.
        until("second checkpoint of attempt 1", lambda: step_of(latest(checkpoints)) >= 10)
        ranks = until("both ranks of attempt 1", lambda: (r := trainers(home, 1)) and len(r) == 2 and r)
        os.kill(ranks[1], signal.SIGSTOP)
        hung_at = time.monotonic()
        until("end of the hung attempt's rank 0", lambda: not alive(ranks[0]))
        detected_s = time.monotonic() - hung_at
        reached_1 = max(steps(run, 1))
        # The newest checkpoint's weights lose their second half (a disk, a copy, a bit of storage gone bad).
        corrupted = latest(checkpoints)
        assert corrupted is not None and step_of(corrupted) >= 10
        weights = corrupted / "model.pt"
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])

        # Attempt 2: preempted two steps in; the kubelet sends every pod SIGTERM.
        until("two steps of attempt 2", lambda: len(steps(run, 2)) >= 2)
        ranks_2 = trainers(home, 2)
        assert len(ranks_2) == 2, ranks_2
        for pid in ranks_2.values():
            os.kill(pid, signal.SIGTERM)
        until("end of the preempted attempt", lambda: not any(alive(p) for p in ranks_2.values()))
        reached_2 = max(steps(run, 2))
        stopped_at = latest(checkpoints)  # attempt 3's checkpoints will have pushed it out (keep 3) by the end
        assert stopped_at is not None and step_of(stopped_at) == reached_2, "a checkpoint of the step it stopped at"
        assert json.loads((stopped_at / "metadata.json").read_text())["reason"] == "stop-signal"

        # The load test: its server dies once it answers and the client is sending.
        (server_pid,) = until("load-test server", lambda: processes(home, "components.serving"))
        argv = Path(f"/proc/{server_pid}/cmdline").read_bytes().decode().split("\0")
        health = f"http://{argv[argv.index('--host') + 1]}:{argv[argv.index('--port') + 1]}/health"  # its pod's
        until("a healthy load-test server", lambda: answers(health))
        until("load-test client", lambda: processes(home, "components.loadtest"))
        time.sleep(2.5)  # it has seen the server healthy and had answers to some of its requests
        os.kill(server_pid, signal.SIGKILL)
        assert runner.wait(timeout=max(1.0, deadline - time.monotonic())) == 0, log.read_text()[-3000:]
    finally:
        killer.stop.set()
        killer.join(timeout=30)
        if runner.poll() is None:
            runner.kill()
        for pids in (trainers(home, 1), trainers(home, 2)):
            for pid in pids.values():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    cluster = LocalCluster(home)
    try:
        status = json.loads((home / "runs" / NAME / "status.json").read_text())["status"]
        phases = {n["displayName"]: n["phase"] for n in status["nodes"].values() if n["type"] != "DAG"}
        assert status["phase"] == "Succeeded", phases
        decisions = {p.stem: json.loads(p.read_text()) for p in (run / "decisions").glob("*.json")}
        jobs = {j.name: j for j in cluster.list_jobs()}

        # The hang: noticed within the timeout and a poll, an infrastructure fault, retried from a checkpoint.
        assert detected_s < STALL_S + 5, f"the hang took {detected_s:.1f} s to be noticed"
        first = decisions["diagnose-1"]["action"]
        assert first["kind"] == "retry", first
        hung = {p.task: p.exit_code for p in jobs[f"{NAME}-train-1"].pods}
        assert hung["master"] == EXIT_STALLED, hung
        (master_log,) = (home / "logs" / "default" / f"{NAME}-train-1").glob(f"{NAME}-train-1-master-0.run*.log")
        assert f"no training step ended for {STALL_S} s (rank 0 after step" in master_log.read_text()
        assert "made no progress until the watchdog ended them" in first["rationale"], first["rationale"]
        assert "an infrastructure fault" in first["rationale"], first["rationale"]
        # The truncated checkpoint fails its checksum: the retry and its trainer use the one before it.
        resumed_2 = first["checkpoint"]
        assert step_of(resumed_2) == step_of(corrupted) - 5, (resumed_2, corrupted)
        assert steps(run, 2)[0] == step_of(resumed_2) + 1, "attempt 2 began after the checkpoint before it"

        # The preemption: a checkpoint of the step it stopped at, retried as external, resumed from it.
        second = decisions["diagnose-2"]["action"]
        assert second["kind"] == "retry", second
        stopped = jobs[f"{NAME}-train-2"].pods  # the failed pods the job keeps
        assert stopped and all(p.exit_code == EXIT_STOPPED for p in stopped), stopped
        assert "ended from outside the job (stopped on SIGTERM)" in second["rationale"], second["rationale"]
        assert "bug" not in second["rationale"], second["rationale"]
        resumed_3 = json.loads((run / "train-3" / "model" / "summary.json").read_text())["resumed_from"]
        assert second["checkpoint"] == resumed_3 == str(stopped_at), (second, resumed_3)
        assert steps(run, 3) == list(range(reached_2 + 1, STEPS + 1)), "every step after it, once"

        # The dead server: its requests counted as errors, the gate fails, nothing released.
        report = json.loads((run / "loadtest" / "report.json").read_text())
        assert report["errors"] > 0 and report["completed"] > 0 and report["slo_passed"] is False, report
        assert report["errors"] + report["completed"] == 400, report
        release = json.loads((run / "release.json").read_text())
        assert release["released"] is False, release
        assert release["reason"] == f"{report['errors']} load-test requests failed", release["reason"]

        # The controller died again and again: every pod of every job ran once, none lost, none doubled.
        assert killer.kills >= 10, killer.kills
        trains = sorted(j for j in jobs if "-train-" in j)
        assert trains == [f"{NAME}-train-{i}" for i in (1, 2, 3)], list(jobs)
        assert jobs[f"{NAME}-train-3"].phase == "Completed"
        runs: dict[str, int] = {}  # each pod's process per generation, by its log: `<pod>.run<gen>-<id>.log`
        for path in (home / "logs").rglob("*.log"):
            started = f"{path.parent.name}/{path.name.rsplit('-', 1)[0]}"
            runs[started] = runs.get(started, 0) + 1
        assert all(n == 1 for n in runs.values()), {p: n for p, n in runs.items() if n != 1}
        trained = {f"{NAME}-train-{i}/{NAME}-train-{i}-{t}-0.run0" for i in (1, 2, 3) for t in ("master", "worker")}
        assert trained <= set(runs), sorted(runs)
        for job in jobs.values():
            assert all(p.node for p in job.pods), (job.name, job.pods)
        assert all(n.gpu_allocated == 0 for n in cluster.nodes())
    finally:
        cluster.close()
    lost_hang = reached_1 - step_of(resumed_2)
    record_fault(
        record_property, "rank-hang", f"exit {EXIT_STALLED} after {detected_s:.1f} s; retried as a fault",
        str(lost_hang), "none",
    )  # fmt: skip
    record_fault(
        record_property, "corrupt-checkpoint",
        f"step-{step_of(corrupted)} failed its checksum; resumed from step-{step_of(resumed_2)}", "5", "none",
    )  # fmt: skip
    record_fault(
        record_property, "preemption", f"SIGTERM at step {reached_2}: exit {EXIT_STOPPED}, resumed there", "0", "none"
    )
    record_fault(
        record_property, "loadtest-server-dies",
        f"{report['errors']} of {report['errors'] + report['completed']} requests failed; gate failed; not released",
        "0", "none",
    )  # fmt: skip
    record_fault(
        record_property, "controller-killed", f"{killer.kills} SIGKILLs; {len(runs)} pods ran once each", "0", "none"
    )
