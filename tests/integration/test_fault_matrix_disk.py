"""A row of the fault matrix through the whole pipeline (issue 16): the checkpoint volume fills up mid-run.

`vcpilot run` on LocalCluster, against the session's real MLflow server, with the run's checkpoint directory on a
tmpfs of its own sized from the tiny model: the checkpoint of step 5 fits, the one of step 10 does not. The trainer
removes its partial checkpoint, says so in one sentence and exits EXIT_NO_ROOM; diagnose reads a full volume — no bug
to confirm, no node to avoid — and stops the run at once with the way on in its reason. Then the volume grows (room
is freed) and the run that reason names, `-p resume-checkpoint=…/step-5`, trains steps 6 to 10 and releases the
model. Mounting needs root (this machine and CI are root); elsewhere the test says why it skips. A file of its own
so that `make test`'s two workers run it beside the other rows (`--dist loadfile`).
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from fault_table import record_fault

from components.finetune.checkpoint_layout import damage, latest
from components.finetune.errors import EXIT_NO_ROOM
from components.volcano.locallogs import pod_logs

pytestmark = pytest.mark.integration

NAME = "disk-full"
MODEL = f"disk-full-{uuid.uuid4().hex[:8]}"


def steps_trained(run: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (run / "train-1" / "model" / "metrics.jsonl").open()]


def mount_tmpfs(where: Path, size: int) -> None:
    """A tmpfs of `size` bytes at `where`; a skip that says why when this machine cannot mount one."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs as the checkpoint volume needs root (this machine and CI are root)")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "vcpilot-disk-full", str(where)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs at {where}: {done.stderr.strip()}")


def test_a_full_checkpoint_volume_stops_the_run_at_once_and_the_named_resume_releases_the_model(
    tmp_path, mlflow_server, record_property
):
    from components.lm.tiny import create_tiny_model
    from components.release.registry import connect, view
    from pipelines.autopilot_run import run_autopilot

    params = {
        "base-model": "tiny",
        "train-max-steps": "10",
        "checkpoint-every": "5",
        "mlflow-tracking-uri": mlflow_server,
        "registered-model": MODEL,
        "slo-ttft-ms": "60000",  # the row is about the disk, not a busy machine's first token
        "slo-tpot-ms": "10000",
    }
    # A checkpoint of the tiny model holds its weights and AdamW's two moments: about 3 weights. 4.5 weights of
    # room take step 5's and step 10's weights, not step 10's optimizer state.
    weights = (create_tiny_model(tmp_path / "sizing") / "model.safetensors").stat().st_size
    run = tmp_path / "workspace" / "runs" / NAME
    checkpoints = run / "checkpoints"
    checkpoints.mkdir(parents=True)
    mount_tmpfs(checkpoints, weights * 9 // 2)
    try:
        first = run_autopilot("drift", params, home=tmp_path, name=NAME, bootstrap=False)
        kept = checkpoints / "step-5"
        phases = {n["displayName"]: n["phase"] for n in first.status["nodes"].values() if n["type"] != "DAG"}
        assert first.phase == "Failed", phases
        assert (phases["give-up"], phases["recurse"]) == ("Failed", "Skipped"), "stopped at once: no second attempt"
        assert sorted(p.name for p in checkpoints.iterdir()) == ["step-5"], "the partial checkpoint is gone"
        assert latest(checkpoints) == kept and damage(kept) is None, "the previous checkpoint is intact"
        size = sum(f.stat().st_size for f in kept.iterdir())
        assert 2.5 * weights < size < 3.5 * weights, (size, weights)
        reached = max(steps_trained(run))
        assert reached in (9, 10), "step 10's checkpoint found no room (its metrics line may not be written yet)"

        # The trainer said it in one sentence and exited EXIT_NO_ROOM, as the failed job diagnose observed shows.
        diagnose = json.loads((run / "decisions" / "diagnose-1.json").read_text())
        pods = {p["task"]: (p["phase"], p["exit_code"]) for p in diagnose["observation"]["job"]["pods"]}
        assert pods["master"] == ("Failed", EXIT_NO_ROOM), pods
        logs = pod_logs(tmp_path / "logs" / "default" / f"{NAME}-train-1", f"{NAME}-train-1-master-0")
        master = "\n".join(log.read().decode() for log in logs)
        (said,) = [line for line in master.splitlines() if line.startswith("error:")]
        assert said.startswith(f"error: could not write the checkpoint of step 10 under {checkpoints} (the disk is "
                               "full: [Errno 28] No space left on device; "), said  # fmt: skip
        assert "MB free there, step-5 took" in said and "Traceback" not in master
        assert len(logs) == 1, "one training attempt, run once"

        # Diagnose read a full volume, not a bug (no confirming attempt) nor a node (none avoided), and said so.
        abort = diagnose["action"]
        assert diagnose["policy"] == "rules" and abort["kind"] == "abort", diagnose
        assert "the checkpoint volume is full: neither a bug nor a node's fault" in abort["reason"], abort
        assert abort["reason"].endswith(f": -p resume-checkpoint={kept}, the same parameters otherwise"), abort
        assert sorted(p.stem for p in (run / "decisions").glob("*.json")) == ["diagnose-1", "plan-1"]

        # Room is freed (the volume grows); the run the reason names continues from step 5 and releases the model.
        subprocess.run(["mount", "-o", f"remount,size={weights * 20}", str(checkpoints)], check=True)
        resumed = {**params, "resume-checkpoint": str(kept)}
        second = run_autopilot("drift", resumed, home=tmp_path, name=f"{NAME}-resumed", bootstrap=False)
    finally:
        subprocess.run(["umount", str(checkpoints)], check=False)
    phases = {n["displayName"]: n["phase"] for n in second.status["nodes"].values() if n["type"] != "DAG"}
    assert second.phase == "Succeeded", phases
    again = tmp_path / "workspace" / "runs" / f"{NAME}-resumed"
    summary = json.loads((again / "train-1" / "model" / "summary.json").read_text())
    assert summary["resumed_from"] == str(kept) and summary["steps"] == 10, summary
    assert steps_trained(again) == [6, 7, 8, 9, 10]
    assert json.loads((again / "release.json").read_text())["released"] is True
    assert view(connect(mlflow_server), MODEL).aliases["champion"] == "1"
    record_fault(
        record_property, "disk-full",
        "step 10's save found no room: stopped at once, step-5 kept; resumed from it, released",
        str(steps_trained(again)[-1] - 5), "none",  # steps 6-10, trained again by the resumed run
    )  # fmt: skip
