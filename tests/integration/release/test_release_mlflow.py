"""Release and evaluate against a real MLflow server: versions with lineage, champion/previous, rollback, failures."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest
import torch
from typer.testing import CliRunner

from components.evaluate.__main__ import main as evaluate_main
from components.lm.tiny import create_tiny_model, load
from components.release.__main__ import main as release_main
from components.release.cli import app
from components.release.register import Lineage, register, register_model
from components.release.registry import RegistryError, connect, download, find_alias, rollback, view
from components.release.verdict import Verdict
from components.tracking.runs import workflow_run

pytestmark = pytest.mark.integration

runner = CliRunner()


@pytest.fixture
def client(mlflow_server):
    return connect(mlflow_server)


def write_reports(tmp_path, name, *, candidate, champion, ttft=210.0, champion_version=None):
    """An evaluate and a load-test report as the steps write them (only the fields release reads, and a few more)."""
    evaluation = tmp_path / f"{name}-evaluate.json"
    evaluation.write_text(
        json.dumps(
            {"candidate_score": candidate, "champion_score": champion, "metric": "exact_match", "examples": 2}
            | {"candidate_perplexity": 3.5, "champion_perplexity": None if champion is None else 4.0}
            | {"champion_version": champion_version}
        )
    )
    loadtest = tmp_path / f"{name}-loadtest.json"
    loadtest.write_text(
        json.dumps({"ttft_p95_ms": ttft, "tpot_p95_ms": 12.0, "goodput_rps": 3.5, "errors": 0, "requests": 40})
    )
    return ["--evaluation", str(evaluation), "--loadtest", str(loadtest)]


BARS = ["--slo-ttft-ms", "500", "--slo-tpot-ms", "50", "--margin", "0.05"]


def test_promoting_twice_makes_v2_the_champion_and_v1_previous_with_lineage_scores_and_reasons(
    mlflow_server, client, model_dir, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "release-tests")
    monkeypatch.setenv("VCPILOT_WORKFLOW", "wf-lineage")
    train = tmp_path / "train.jsonl"
    train.write_text('{"prompt": "Q: price of red mug?\\nA:", "completion": " $12"}\n')
    parent = workflow_run(mlflow_server, "release-tests", "wf-lineage")
    experiment_id = client.get_run(parent).info.experiment_id
    tags = {"mlflow.parentRunId": parent, "vcpilot.step": "finetune"}
    training = client.create_run(experiment_id, run_name="train-1", tags=tags).info.run_id
    client.set_terminated(training, status="FINISHED")
    common = ["--model", str(model_dir), "--registered-model", "shop-lineage", "--dataset", str(train)]
    common += ["--base-model", "tiny", *BARS]
    first = write_reports(tmp_path, "v1", candidate=0.74, champion=None)
    assert release_main([*common, *first, "--checkpoint", "step-10", "--report", str(tmp_path / "r1.json")]) == 0
    second = write_reports(tmp_path, "v2", candidate=0.82, champion=0.74, champion_version="1")
    assert release_main([*common, *second, "--checkpoint", "step-20", "--report", str(tmp_path / "r2.json")]) == 0
    capsys.readouterr()

    report = json.loads((tmp_path / "r2.json").read_text())
    assert (report["version"], report["champion"], report["previous"]) == ("2", "2", "1")
    shown = view(client, "shop-lineage")
    assert shown.aliases == {"champion": "2", "previous": "1"}
    assert "shop-lineage: the language model that vcpilot's autopilot fine-tunes and serves" in shown.description
    assert shown.description.endswith("Version 2 is champion, made so by workflow wf-lineage.")
    v2, v1 = shown.versions
    assert v2.description == (
        "Promoted: exact match 0.82 vs champion 0.74 (+0.08 ≥ margin 0.05); p95 TTFT 210 ms ≤ SLO 500 ms; "
        "p95 TPOT 12 ms ≤ SLO 50 ms; 0 of 40 load-test requests failed."
    )
    assert v1.description.startswith("Promoted: exact match 0.74 with no champion to beat; p95 TTFT 210 ms")
    # The runs: the version's own (release, a child of the workflow's run), the workflow's, the training attempt.
    assert v2.tags["vcpilot.workflow"] == "wf-lineage" and v2.tags["vcpilot.parent_run"] == parent
    assert v2.tags["vcpilot.training_run"] == training
    run = client.get_run(v2.run_id)
    assert run.data.tags["mlflow.parentRunId"] == parent and run.data.tags["vcpilot.step"] == "release"
    assert v2.tags["vcpilot.dataset_digest"] == "sha256:" + hashlib.sha256(train.read_bytes()).hexdigest()
    assert v2.tags["vcpilot.base_model"] == "tiny" and v2.tags["vcpilot.checkpoint"] == "step-20"
    assert v2.tags["vcpilot.replaced"] == "1" and v2.tags["vcpilot.promoted"] == "true"
    scores = {k.removeprefix("vcpilot.metric."): t for k, t in v2.tags.items() if k.startswith("vcpilot.metric.")}
    assert scores == {
        "candidate_score": "0.82",
        "champion_score": "0.74",
        "candidate_perplexity": "3.5",
        "champion_perplexity": "4",
        "ttft_p95_ms": "210",
        "tpot_p95_ms": "12",
        "goodput_rps": "3.5",
        "errors": "0",
        "requests": "40",
    }
    assert (v2.tags["vcpilot.bar.slo_ttft_ms"], v2.tags["vcpilot.bar.margin"]) == ("500", "0.05")
    assert v2.tags["vcpilot.compared_with"] == "1" and v2.tags["vcpilot.metric_name"] == "exact_match"
    assert run.data.metrics["candidate_score"] == 0.82 and run.data.metrics["ttft_p95_ms"] == 210.0
    fetched = download(client, v2, tmp_path / "fetched")
    assert sorted(p.name for p in fetched.iterdir()) == ["config.json", "weights.bin"]
    assert (fetched / "weights.bin").read_bytes() == (model_dir / "weights.bin").read_bytes()

    text = runner.invoke(app, ["show", "--registered-model", "shop-lineage", "--tracking-uri", mlflow_server])
    assert text.exit_code == 0, text.output
    assert "aliases: champion → 2, previous → 1" in text.output
    assert "version 2 [champion]" in text.output and "version 1 [previous]" in text.output
    runs = f"release run {v2.run_id}; workflow wf-lineage; workflow run {parent}; training run {training}"
    assert runs in text.output
    assert "candidate_score=0.82" in text.output and "ttft_p95_ms=210" in text.output
    assert v2.description in text.output and "made so by workflow wf-lineage" in text.output
    as_json = runner.invoke(
        app, ["show", "--registered-model", "shop-lineage", "--tracking-uri", mlflow_server, "--json"]
    )
    data = json.loads(as_json.stdout)
    assert data["description"] == shown.description
    assert data["versions"][0]["description"] == v2.description and data["versions"][0]["aliases"] == ["champion"]
    assert data["versions"][0]["tags"]["vcpilot.training_run"] == training


def test_a_candidate_that_is_not_promoted_is_registered_without_an_alias_and_says_why(
    mlflow_server, client, model_dir, tmp_path
):
    base = ["register", "--model", str(model_dir), "--registered-model", "shop-held", "--tracking-uri", mlflow_server]
    first = runner.invoke(app, [*base, *BARS, *write_reports(tmp_path, "a", candidate=0.7, champion=None)])
    assert first.exit_code == 0, first.output
    slow = write_reports(tmp_path, "b", candidate=0.9, champion=0.7, ttft=900.0, champion_version="1")
    reason = "p95 TTFT 900 ms is over its SLO of 500 ms"
    held = runner.invoke(app, [*base, *BARS, *slow, "--no-promote", "--reason", reason, "--json"])
    assert held.exit_code == 0, held.output
    done = json.loads(held.stdout)
    assert (done["version"], done["promoted"], done["champion"], done["previous"]) == ("2", False, "1", None)

    shown = view(client, "shop-held")
    assert shown.aliases == {"champion": "1"}
    v2 = shown.versions[0]
    assert v2.aliases == [] and v2.tags["vcpilot.promoted"] == "false" and v2.tags["vcpilot.reason"] == reason
    assert "vcpilot.replaced" not in v2.tags
    assert v2.description == (
        "Not promoted: p95 TTFT 900 ms > SLO 500 ms; exact match 0.9 vs champion 0.7 (+0.20 ≥ margin 0.05); "
        "p95 TPOT 12 ms ≤ SLO 50 ms; 0 of 40 load-test requests failed."
    )
    assert shown.description.endswith("Version 1 is champion, made so by `vcpilot release register`.")
    text = runner.invoke(app, ["show", "--registered-model", "shop-held", "--tracking-uri", mlflow_server]).output
    assert "version 2\n" in text and "Not promoted: p95 TTFT 900 ms > SLO 500 ms" in text


def test_a_bad_report_is_one_sentence_and_nothing_is_registered(mlflow_server, client, model_dir, tmp_path):
    (tmp_path / "bad.json").write_text("{")
    done = runner.invoke(
        app, ["register", "--model", str(model_dir), "--registered-model", "shop-bad"]
        + ["--tracking-uri", mlflow_server, "--loadtest", str(tmp_path / "bad.json")]
    )  # fmt: skip
    assert done.exit_code == 1 and done.output.count("\n") == 1 and "is not JSON" in done.output
    assert find_alias(client, "shop-bad", "champion") is None


def test_rollback_makes_v1_the_champion_again(mlflow_server, model_dir):
    first = runner.invoke(
        app, ["register", "--model", str(model_dir), "--registered-model", "shop-rollback"]
        + ["--tracking-uri", mlflow_server, "--json"]
    )  # fmt: skip
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["champion"] == "1"
    register_model(model_dir, "shop-rollback", tracking_uri=mlflow_server)
    assert view(connect(mlflow_server), "shop-rollback").aliases == {"champion": "2", "previous": "1"}
    rolled = runner.invoke(app, ["rollback", "--registered-model", "shop-rollback", "--tracking-uri", mlflow_server])
    assert rolled.exit_code == 0, rolled.output
    assert "champion is version 1 again (was 2)" in rolled.output
    described = view(connect(mlflow_server), "shop-rollback").description
    assert described.endswith("Version 1 is champion, made so by a rollback from version 2.")
    shown = runner.invoke(
        app, ["show", "--registered-model", "shop-rollback", "--tracking-uri", mlflow_server, "--json"]
    )
    data = json.loads(shown.stdout)
    assert data["aliases"] == {"champion": "1"}
    assert [(v["version"], v["aliases"]) for v in data["versions"]] == [("2", []), ("1", ["champion"])]
    again = runner.invoke(app, ["rollback", "--registered-model", "shop-rollback", "--tracking-uri", mlflow_server])
    assert again.exit_code == 1 and "no previous version to roll back to" in again.output


def test_successive_rollbacks_walk_back_through_the_promotions(client, model_dir):
    versions = [register(client, "shop-walk", model_dir, Lineage()).version for _ in range(3)]
    assert versions == ["1", "2", "3"]
    first = rollback(client, "shop-walk")
    assert (first.champion, first.rolled_back, first.previous) == ("2", "3", "1")
    second = rollback(client, "shop-walk")
    assert (second.champion, second.previous) == ("1", None)
    with pytest.raises(RegistryError, match="no previous version") as err:
        rollback(client, "shop-walk")
    assert "\n" not in str(err.value)
    tagged = {v.version: v.tags.get("vcpilot.rolled_back") for v in view(client, "shop-walk").versions}
    assert tagged == {"3": "true", "2": "true", "1": None}


def test_a_version_registered_without_promotion_leaves_the_aliases_alone(client, model_dir, tmp_path):
    register(client, "shop-quiet", model_dir, Lineage())
    held = register(client, "shop-quiet", model_dir, Lineage(), Verdict(promoted=False))
    assert (held.version, held.promoted, held.champion, held.previous) == ("2", False, "1", None)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="is empty"):
        register(client, "shop-never", tmp_path / "empty", Lineage())
    with pytest.raises(RegistryError, match="there is no registered model shop-never"):
        view(client, "shop-never")


def test_mlflow_down_is_one_sentence_and_changes_nothing_locally(model_dir, tmp_path, closed_url):
    work = tmp_path / "work"
    work.mkdir()
    down = closed_url
    report = work / "release.json"
    done = subprocess.run(
        [sys.executable, "-m", "components.release", "--model", str(model_dir), "--registered-model", "shop"]
        + ["--report", str(report), "--tracking-uri", down],
        capture_output=True,
        text=True,
        cwd=work,
        timeout=120,
    )
    assert done.returncode == 3 and done.stdout == ""
    assert done.stderr.startswith(f"error: MLflow at {down} is unreachable") and done.stderr.count("\n") == 1
    assert list(work.iterdir()) == [], "no report, no ./mlruns, nothing"
    shown = runner.invoke(app, ["show", "--registered-model", "shop", "--tracking-uri", down])
    assert shown.exit_code == 3 and "unreachable" in shown.output


def test_evaluate_scores_the_registered_champion_on_the_same_set(
    mlflow_server, client, tmp_path, monkeypatch, capsys, one_thread
):
    torch.manual_seed(0)
    truth = {"Q: price of red mug?\nA:": " $12", "Q: price of oak bowl?\nA:": " $47"}
    champion = create_tiny_model(tmp_path / "champion", hidden=64)
    candidate, tok = load(create_tiny_model(tmp_path / "candidate", hidden=64))
    batch = tok([p + c + "\n" for p, c in truth.items()], return_tensors="pt", padding=True, add_special_tokens=False)
    labels = batch.input_ids.masked_fill(batch.attention_mask == 0, -100)
    opt = torch.optim.AdamW(candidate.parameters(), lr=1e-2)
    for _ in range(30):
        loss = candidate(input_ids=batch.input_ids, attention_mask=batch.attention_mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    candidate.save_pretrained(tmp_path / "candidate")
    register(client, "shop-eval", champion, Lineage())
    eval_set = tmp_path / "eval.jsonl"
    eval_set.write_text("".join(json.dumps({"prompt": p, "completion": c}) + "\n" for p, c in truth.items()))

    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    report = tmp_path / "report.json"
    args = ["--candidate", str(tmp_path / "candidate"), "--registered-model", "shop-eval", "--report", str(report)]
    assert evaluate_main([*args, "--eval-set", str(eval_set)]) == 0, capsys.readouterr().err
    written = json.loads(report.read_text())
    assert written["candidate_score"] >= 0.5 and written["champion_score"] == 0.0
    assert written["champion_version"] == "1"
    assert written["champion_perplexity"] > written["candidate_perplexity"]

    assert evaluate_main([*args, "--eval-set", str(eval_set), "--registered-model", "shop-nobody"]) == 0
    assert json.loads(report.read_text())["champion_score"] is None
