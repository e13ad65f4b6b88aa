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
from components.tracking.runs import workflow_run

pytestmark = pytest.mark.integration

runner = CliRunner()


@pytest.fixture
def client(mlflow_server):
    return connect(mlflow_server)


def test_registering_twice_makes_v2_the_champion_and_v1_previous_with_lineage(
    mlflow_server, client, model_dir, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "release-tests")
    monkeypatch.setenv("VCPILOT_WORKFLOW", "wf-lineage")
    train = tmp_path / "train.jsonl"
    train.write_text('{"prompt": "Q: price of red mug?\\nA:", "completion": " $12"}\n')
    metrics = tmp_path / "evaluate.json"
    metrics.write_text(json.dumps({"candidate_score": 0.8, "champion_score": None, "metric": "exact_match"}))
    common = ["--model", str(model_dir), "--registered-model", "shop-lineage", "--dataset", str(train)]
    common += ["--base-model", "tiny", "--metrics", str(metrics)]
    assert release_main([*common, "--checkpoint", "step-10", "--report", str(tmp_path / "r1.json")]) == 0
    assert release_main([*common, "--checkpoint", "step-20", "--report", str(tmp_path / "r2.json")]) == 0
    capsys.readouterr()

    second = json.loads((tmp_path / "r2.json").read_text())
    assert (second["version"], second["champion"], second["previous"]) == ("2", "2", "1")
    shown = view(client, "shop-lineage")
    assert shown.aliases == {"champion": "2", "previous": "1"}
    v2 = find_alias(client, "shop-lineage", "champion")
    assert v2.tags["vcpilot.workflow"] == "wf-lineage"
    assert v2.tags["vcpilot.dataset_digest"] == "sha256:" + hashlib.sha256(train.read_bytes()).hexdigest()
    assert v2.tags["vcpilot.base_model"] == "tiny" and v2.tags["vcpilot.checkpoint"] == "step-20"
    assert v2.tags["vcpilot.metric.candidate_score"] == "0.8" and v2.tags["vcpilot.replaced"] == "1"

    run = client.get_run(v2.run_id)
    assert run.data.tags["mlflow.parentRunId"] == workflow_run(mlflow_server, "release-tests", "wf-lineage")
    assert run.data.metrics["candidate_score"] == 0.8
    fetched = download(client, v2, tmp_path / "fetched")
    assert sorted(p.name for p in fetched.iterdir()) == ["config.json", "weights.bin"]
    assert (fetched / "weights.bin").read_bytes() == (model_dir / "weights.bin").read_bytes()


def test_rollback_makes_v1_the_champion_again(mlflow_server, model_dir):
    first = runner.invoke(
        app, ["register", "--model", str(model_dir), "--registered-model", "shop-rollback"]
        + ["--tracking-uri", mlflow_server, "--json"]
    )  # fmt: skip
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["champion"] == "1"
    register_model(model_dir, "shop-rollback", tracking_uri=mlflow_server)
    rolled = runner.invoke(app, ["rollback", "--registered-model", "shop-rollback", "--tracking-uri", mlflow_server])
    assert rolled.exit_code == 0, rolled.output
    assert "champion is version 1 again (was 2)" in rolled.output
    shown = runner.invoke(
        app, ["show", "--registered-model", "shop-rollback", "--tracking-uri", mlflow_server, "--json"]
    )
    data = json.loads(shown.stdout)
    assert data["aliases"] == {"champion": "1"}
    assert [(v["version"], v["aliases"]) for v in data["versions"]] == [("2", []), ("1", ["champion"])]
    again = runner.invoke(app, ["rollback", "--registered-model", "shop-rollback", "--tracking-uri", mlflow_server])
    assert again.exit_code == 2 and "no previous version to roll back to" in again.output


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
    held = register(client, "shop-quiet", model_dir, Lineage(), promote=False)
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
