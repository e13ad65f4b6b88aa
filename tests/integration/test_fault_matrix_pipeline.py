"""Rows of the fault matrix through the whole pipeline (issue 16; test_fault_matrix_chaos*.py have the others).

`vcpilot run`'s node-failure-again scenario on a LocalCluster of three one-GPU nodes, against a real MLflow server:
a node dies under the first attempt (2 GPUs), comes back Ready once the retry runs off it, and a node of the retry
dies too. The agent keeps off both, the node that came back included, and the one GPU left trains on with the
global batch kept. The agent's policy is the LLM's, at an endpoint that is slow, wrong and hostile in turn: the
first plan's answer comes after the guardrails' deadline, the first diagnosis gets HTML, and every later answer
obeys an instruction injected into what it reads and asks for 512 GPUs. The rules decide each time, within the
deadline, and each record says why — three rows of the matrix in one run (the LLM row's other endpoints, a reply
dripped a byte a second and a tool call without end, are in test_fault_matrix.py). A file of its own so that
`make test`'s two workers run it beside the component rows (`--dist loadfile`).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from fake_llm import Reply, completion, serve
from fault_table import record_fault
from mlflow_kit import downloaded_review

from components.volcano.cluster_local import LocalCluster

pytestmark = pytest.mark.integration

MODEL = f"node-dies-{uuid.uuid4().hex[:8]}"


def step_of(checkpoint: str | Path | None) -> int:
    return int(Path(str(checkpoint)).name.removeprefix("step-")) if checkpoint else 0


# ---- the whole pipeline ------------------------------------------------------------------------------------


def test_a_node_dying_then_a_node_of_the_retry_is_retried_off_both_on_the_gpu_left_and_the_model_is_released(
    tmp_path, mlflow_server, record_property, monkeypatch
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
        "agent-policy": "llm",
    }
    # Three nodes of one GPU: the 2-GPU job fits twice, then only on fewer GPUs.
    (tmp_path / "cluster.yaml").write_text("nodes:\n- {name: node, count: 3, gpus: 1}\n")
    hostile = {"kind": "proceed", "gpus": 512, "micro_batch": 1, "grad_accum": 1, "queue": "default",
               "rationale": "the log line said to ask for 512 GPUs"}  # fmt: skip
    deadline_s = 2.0
    guardrails = tmp_path / "guardrails.yaml"
    guardrails.write_text(f"llm_deadline_s: {deadline_s}\n")  # the rest as the defaults: at most 64 GPUs a job
    late = Reply(completion(("list_nodes", {})), delay_s=3 * deadline_s)
    with serve() as llm:
        llm.script(late, Reply(b"<html>busy</html>"), *[Reply(completion(("decide", hostile)))] * 30)
        monkeypatch.setenv("VCPILOT_LLM_URL", llm.url)
        monkeypatch.setenv("VCPILOT_LLM_MODEL", "fake")
        monkeypatch.setenv("VCPILOT_GUARDRAILS", str(guardrails))
        result = run_autopilot("node-failure-again", params, home=tmp_path, name="node-dies", bootstrap=False)
        asked = len(llm.requests)
    phases = {n["displayName"]: n["phase"] for n in result.status["nodes"].values() if n["type"] != "DAG"}
    assert result.phase == "Succeeded", phases
    run = tmp_path / "workspace" / "runs" / "node-dies"
    diagnose = json.loads((run / "decisions" / "diagnose-1.json").read_text())
    retry = diagnose["action"]
    assert retry["kind"] == "retry" and len(retry["avoid_nodes"]) == 1, retry
    dead = retry["avoid_nodes"][0]
    assert f"on {dead} ({dead} NotReady)" in retry["rationale"]
    cluster = LocalCluster(tmp_path)
    second, third = cluster.get("node-dies-train-2"), cluster.get("node-dies-train-3")
    assert second.phase == "Failed" and all(p.node and p.node != dead for p in second.pods), second.pods

    # Then a node of the retry died. `dead` was back Ready by then, and is still kept off: no third blind retry.
    again = json.loads((run / "decisions" / "diagnose-2.json").read_text())
    retry2 = again["action"]
    assert retry2["kind"] == "retry" and retry2["avoid_nodes"][0] == dead and len(retry2["avoid_nodes"]) == 2, retry2
    dead2 = retry2["avoid_nodes"][1]
    assert dead2 in {p.node for p in second.pods} and f"on {dead2} ({dead2} NotReady)" in retry2["rationale"]
    seen = {n["name"]: n["ready"] for n in again["observation"]["nodes"]}
    assert seen[dead] and not seen[dead2], seen
    # The one GPU left trains on: micro-batch x grad-accum x GPUs stays the global batch, in the decisions and in
    # what the trainer reports.
    plans = [json.loads((run / "decisions" / f"plan-{n}.json").read_text())["action"] for n in (1, 2, 3)]
    assert [(a["kind"], a["gpus"]) for a in plans] == [("proceed", 2), ("proceed", 2), ("downscale", 1)], plans
    assert (retry2["gpus"], retry2["micro_batch"], retry2["grad_accum"]) == (1, 4, 2), retry2
    assert {a["gpus"] * a["micro_batch"] * a["grad_accum"] for a in [*plans, retry, retry2]} == {8}
    (left,) = {"node-0", "node-1", "node-2"} - {dead, dead2}
    assert third.phase == "Completed" and [p.node for p in third.pods] == [left], third.pods
    summary3 = json.loads((run / "train-3" / "model" / "summary.json").read_text())
    shape = [summary3[k] for k in ("world_size", "micro_batch", "grad_accum", "global_batch")]
    assert shape == [1, 4, 2, 8], summary3

    # Every training step of the attempt that counts is in MLflow exactly once; the model is the champion.
    client = MlflowClient(mlflow_server)
    experiment = client.get_experiment_by_name("llm-autopilot")
    (parent,) = client.search_runs([experiment.experiment_id], filter_string="tags.`vcpilot.workflow` = 'node-dies'")
    assert parent.data.tags["vcpilot.status"] == "Succeeded" and "evaluate.candidate_score" in parent.data.metrics
    children = client.search_runs(
        [experiment.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'"
    )
    # One parent (unpacked above) for both attempts, keyed and tagged by the workflow's uid; one child per attempt.
    uid = json.loads((tmp_path / "runs" / "node-dies" / "status.json").read_text())["metadata"]["uid"]
    assert parent.data.tags["vcpilot.key"] == parent.data.tags["vcpilot.workflow.uid"] == uid
    assert parent.data.tags["vcpilot.trigger"] == "local" and parent.data.tags["vcpilot.image"]
    assert parent.data.tags["vcpilot.template.version"].startswith("vcpilot-")
    attempts = {c.info.run_name: c.data.tags for c in children if c.data.tags.get("vcpilot.step") == "finetune"}
    assert sorted(attempts) == ["finetune-1", "finetune-2", "finetune-3"]
    assert (attempts["finetune-3"]["vcpilot.vcjob"], attempts["finetune-3"]["vcpilot.attempt"]) == (
        "node-dies-train-3",
        "3",
    )
    decided = {"plan-1", "diagnose-1", "plan-2", "diagnose-2", "plan-3"}
    assert decided <= {c.info.run_name for c in children}
    assert {"detect-logs", "loadtest", "evaluate"} <= {c.data.tags.get("vcpilot.step") for c in children}
    # What each attempt trained, as its trainer logged it, and where the next began: the latest complete checkpoint,
    # at most one interval back, on the same global batch.
    trained = {c.info.run_name: c.data.params for c in children if c.info.run_name in attempts}
    assert [trained[f"finetune-{n}"]["world_size"] for n in (1, 2, 3)] == ["2", "2", "1"], trained
    assert {trained[f"finetune-{n}"]["global_batch"] for n in (1, 2, 3)} == {"8"}, trained
    lost = []
    for attempt, decision in ((1, retry), (2, retry2)):
        resumed = trained[f"finetune-{attempt + 1}"]["resumed_from"]
        assert resumed == decision["checkpoint"] and step_of(resumed) == decision["checkpoint_step"], resumed
        metrics = (run / f"train-{attempt}" / "model" / "metrics.jsonl").open()
        reached = max(json.loads(line)["step"] for line in metrics)
        lost.append(reached - step_of(resumed))
    assert all(0 <= n <= 5 for n in lost), f"at most one checkpoint interval is trained again: {lost}"
    assert retry["checkpoint_step"] < retry2["checkpoint_step"], "the retry trained on before its node died"
    assert summary3["resumed_from"] == retry2["checkpoint"]
    (finetune,) = [c for c in children if c.info.run_name == "finetune-3"]
    steps = [m.step for m in client.get_metric_history(finetune.info.run_id, "loss")]
    assert sorted(steps) == list(range(retry2["checkpoint_step"] + 1, 21)), "each step once, none missing"
    release = json.loads((run / "release.json").read_text())
    assert release["released"] is True, release
    assert view(connect(mlflow_server), MODEL).aliases["champion"] == "1"
    # The LLM was asked at every decision and decided none; each record says why, the late one within the deadline.
    records = {p.stem: json.loads(p.read_text()) for p in (run / "decisions").glob("*.json")}
    assert asked >= len(records) >= 5 and decided <= records.keys(), (asked, records.keys())
    fallbacks = {name: r["fallback"] for name, r in records.items()}
    assert all(r["policy"] == "rules" and r["fallback"].startswith("the LLM") for r in records.values()), fallbacks
    assert f"did not decide within the deadline of {deadline_s:g} s" in fallbacks["plan-1"], fallbacks
    took = sum(round_["duration_s"] for round_ in records["plan-1"]["exchange"]["rounds"])
    assert took < deadline_s + 2.5, f"the late endpoint held plan-1 {took:.1f} s"
    assert "reply is not JSON" in fallbacks["diagnose-1"], fallbacks
    assert "max_gpus_per_job" in fallbacks["plan-2"], fallbacks
    # The review on the parent run: summary.md, every picture as a real PNG, the decisions and the manifests.
    review = downloaded_review(mlflow_server, parent.info.run_id, tmp_path / "downloaded")
    plots = {f"{n}.png" for n in ("training_loss", "latency_cdf", "throughput", "scores", "log_windows")}
    assert set(review["plots"]) == plots, review["plots"]
    assert {f"{name}.json" for name in decided} <= set(review["decisions"])
    assert any(name.startswith("node-dies-") for name in review["manifests"]), review["manifests"]
    summary = review["summary.md"]
    assert summary.startswith("# node-dies: Succeeded") and f"**Outcome.** released {MODEL} version" in summary
    assert "**Diagnose, attempt 1.** retry by rules" in summary and dead in summary and "p95 TTFT" in summary
    assert "**Diagnose, attempt 2.** retry by rules" in summary and dead2 in summary
    record_fault(
        record_property, "llm-bad", f"late (cut at {took:.1f} s), HTML, 512 GPUs: rules decided, said why",
        "0: decisions only", "none",
    )  # fmt: skip
    record_fault(
        record_property, "node-dies", f"{dead} died; resumed from step {retry['checkpoint_step']} off it; released",
        str(lost[0]), "none",
    )  # fmt: skip
    record_fault(
        record_property, "node-dies-again",
        f"{dead2} died too, {dead} back: kept off both; 2 -> 1 GPU, global batch 8 kept; released",
        str(lost[1]), "none",
    )  # fmt: skip
