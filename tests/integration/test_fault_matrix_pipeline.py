"""The fault matrix's one row through the whole pipeline (issue 16; the others are in test_fault_matrix.py).

A node dies mid-training in `vcpilot run`'s node-failure scenario on LocalCluster, against a real MLflow server.
A file of its own so that `make test`'s two workers run it beside the component rows (`--dist loadfile`).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from fault_table import record_fault

from components.volcano.cluster_local import LocalCluster

pytestmark = pytest.mark.integration

MODEL = f"node-dies-{uuid.uuid4().hex[:8]}"


def step_of(checkpoint: str | Path | None) -> int:
    return int(Path(str(checkpoint)).name.removeprefix("step-")) if checkpoint else 0


# ---- the whole pipeline ------------------------------------------------------------------------------------


def test_a_node_dying_during_training_is_retried_off_it_and_the_model_is_released(
    tmp_path, mlflow_server, record_property
):
    from mlflow.tracking import MlflowClient

    from components.release.registry import connect, view
    from pipelines.autopilot_run import run_autopilot

    params = {
        "base-model": "tiny",
        "train-max-steps": "20",
        "checkpoint-every": "5",
        "mlflow-tracking-uri": mlflow_server,
        # A model of its own: the MLflow server is the session's, and other tests register shop-assistant there.
        "registered-model": MODEL,
        # The row is about the node; on a busy 2-core CI machine the tiny model's first token can pass 2 s,
        # and the load-test gate would then (rightly) release nothing.
        "slo-ttft-ms": "60000",
        "slo-tpot-ms": "10000",
    }
    result = run_autopilot("node-failure", params, home=tmp_path, name="node-dies", bootstrap=False)
    phases = {n["displayName"]: n["phase"] for n in result.status["nodes"].values() if n["type"] != "DAG"}
    assert result.phase == "Succeeded", phases
    run = tmp_path / "workspace" / "runs" / "node-dies"
    retry = json.loads((run / "decisions" / "diagnose-1.json").read_text())["action"]
    assert retry["kind"] == "retry" and len(retry["avoid_nodes"]) == 1, retry
    dead = retry["avoid_nodes"][0]
    assert f"on {dead} ({dead} NotReady)" in retry["rationale"]
    second = LocalCluster(tmp_path).get("node-dies-train-2")
    assert second.phase == "Completed" and all(p.node and p.node != dead for p in second.pods), second.pods

    # What the first attempt trained, and where the second began.
    resumed = json.loads((run / "train-2" / "model" / "summary.json").read_text())["resumed_from"]
    assert resumed == retry["checkpoint"]
    reached = max(json.loads(line)["step"] for line in (run / "train-1" / "model" / "metrics.jsonl").open())
    lost = reached - step_of(resumed)
    assert 0 <= lost <= 5, "at most one checkpoint interval is trained again"

    # Every training step of the attempt that counts is in MLflow exactly once; the model is the champion.
    client = MlflowClient(mlflow_server)
    experiment = client.get_experiment_by_name("llm-autopilot")
    (parent,) = client.search_runs([experiment.experiment_id], filter_string="tags.`vcpilot.workflow` = 'node-dies'")
    assert parent.data.tags["vcpilot.status"] == "Succeeded" and "evaluate.candidate_score" in parent.data.metrics
    children = client.search_runs(
        [experiment.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'"
    )
    (finetune,) = [c for c in children if c.info.run_name == "finetune-2"]
    steps = [m.step for m in client.get_metric_history(finetune.info.run_id, "loss")]
    assert sorted(steps) == list(range(step_of(resumed) + 1, 21)), "each step once, none missing"
    release = json.loads((run / "release.json").read_text())
    assert release["released"] is True, release
    assert view(connect(mlflow_server), MODEL).aliases["champion"] == "1"
    record_fault(
        record_property, "node-dies", f"{dead} died; resumed from step {step_of(resumed)} off it; released",
        str(lost), "none",
    )  # fmt: skip
