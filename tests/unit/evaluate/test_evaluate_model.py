"""Real tiny model directories scored end to end: the one that learned some answers wins, and the entry point works."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from components.entry import new_app
from components.evaluate.__main__ import main
from components.evaluate.cli import evaluate_command
from components.evaluate.evaluation import evaluate
from components.evaluate.model import CausalLM, ModelDirError
from components.lm.tiny import create_tiny_model, load

TRUTH = {"Q: price of red mug?\nA:": " $12", "Q: price of oak bowl?\nA:": " $47", "Q: price of blue pen?\nA:": " $8"}


def train(path, pairs, steps=30):
    """A handful of full-batch AdamW steps: enough for a small tiny model to memorise three answers."""
    model, tok = load(create_tiny_model(path, hidden=64, seed=0))
    texts = [prompt + completion + "\n" for prompt, completion in pairs.items()]
    batch = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    labels = batch.input_ids.masked_fill(batch.attention_mask == 0, -100)
    torch.manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(steps):
        loss = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Two test workers on two cores: more threads per worker only fight each other."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    wrong_on_one = {**TRUTH, "Q: price of blue pen?\nA:": " $93"}
    untrained = create_tiny_model(root / "untrained", hidden=64)
    return {"learned": train(root / "learned", wrong_on_one), "untrained": untrained}


@pytest.fixture
def eval_set(tmp_path):
    path = tmp_path / "eval.jsonl"
    path.write_text("".join(json.dumps({"prompt": p, "completion": c}) + "\n" for p, c in TRUTH.items()))
    return path


def test_the_model_that_learned_two_answers_scores_higher_than_one_that_learned_none(models, eval_set):
    learned = evaluate(models["learned"], eval_set)
    untrained = evaluate(models["untrained"], eval_set)
    assert learned.candidate_score == pytest.approx(2 / 3)
    assert untrained.candidate_score == 0.0
    assert learned.candidate_perplexity < untrained.candidate_perplexity
    assert learned.champion_score is None and learned.metric == "exact_match" and learned.examples == 3


def test_the_pipeline_entry_point_writes_the_report_the_release_step_reads(models, eval_set, tmp_path, capsys):
    report = tmp_path / "out" / "report.json"
    loadtest = tmp_path / "loadtest.json"
    loadtest.write_text(json.dumps({"ttft_p95_ms": 80.0, "tpot_p95_ms": 9.0, "errors": 0}))
    args = ["--candidate", str(models["learned"]), "--base-model", "tiny", "--report", str(report)]
    slo = ["--loadtest-report", str(loadtest), "--slo-ttft-ms", "100", "--slo-tpot-ms", "10"]
    assert main([*args, "--dataset-dir", str(eval_set.parent), *slo, "--json"]) == 0
    written = json.loads(report.read_text())
    assert json.loads(capsys.readouterr().out) == written
    assert written["candidate_score"] == pytest.approx(2 / 3) and written["champion_score"] is None
    assert written["metric"] == "exact_match" and written["base_model"] == "tiny"
    assert written["promote"] is True and "no champion yet" in written["reason"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "pass --eval-set FILE or --dataset-dir DIR"),
        (["--eval-set", "missing.jsonl"], "missing.jsonl does not exist"),
        (["--eval-set", "{empty}"], "has no examples"),
        (["--eval-set", "{eval}", "--loadtest-report", "{eval}"], "needs both --slo-ttft-ms and --slo-tpot-ms"),
    ],
)
def test_bad_input_gets_one_sentence_and_no_report(models, eval_set, tmp_path, capsys, extra, message):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    report = tmp_path / "report.json"
    extra = [arg.format(empty=empty, eval=eval_set) for arg in extra]
    assert main(["--candidate", str(models["learned"]), "--report", str(report), *extra]) == 1  # EXIT_INPUT
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not report.exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--margin", "inf"], "--margin should be a finite number, got inf"),
        (["--margin", "nan"], "--margin should be a finite number, got nan"),
        (["--slo-ttft-ms", "inf"], "--slo-ttft-ms should be a finite number, got inf"),
        (["--slo-tpot-ms", "nan"], "--slo-tpot-ms should be a finite number, got nan"),
        (["--slo-ttft-ms", "-5"], "--slo-ttft-ms should be greater than 0, got -5.0"),
        (["--slo-tpot-ms", "0"], "--slo-tpot-ms should be greater than 0, got 0.0"),
    ],
)
def test_a_bar_that_is_no_finite_number_is_refused_before_a_model_loads(tmp_path, capsys, extra, message):
    # they were taken (inf, nan, -5) and judged only after the models loaded; no model is needed to refuse them
    report = tmp_path / "report.json"
    assert main(["--candidate", str(tmp_path / "no-model"), "--report", str(report), *extra]) == 1
    assert capsys.readouterr().err == f"error: {message}\n"
    assert not report.exists()


def test_a_directory_that_is_not_a_model_gets_one_sentence(tmp_path):
    with pytest.raises(ModelDirError, match="does not exist"):
        CausalLM.load(tmp_path / "nowhere")
    with pytest.raises(ModelDirError, match="has no config.json"):
        CausalLM.load(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelDirError, match="cannot load the model") as err:
        CausalLM.load(tmp_path)
    assert "\n" not in str(err.value)


def test_the_cli_prints_the_scores_or_one_sentence(models, eval_set, tmp_path):
    app = new_app()  # the contract (components.entry) is in the app, not in the command
    app.command()(evaluate_command)
    runner = CliRunner()
    shown = runner.invoke(app, ["--model", str(models["learned"]), "--eval-set", str(eval_set)])
    assert shown.exit_code == 0 and "exact match 0.667" in shown.output
    as_json = runner.invoke(app, ["--model", str(models["learned"]), "--eval-set", str(eval_set), "--json"])
    assert json.loads(as_json.stdout)["candidate_score"] == pytest.approx(2 / 3)
    (tmp_path / "empty.jsonl").write_text("")
    empty = runner.invoke(app, ["--model", str(models["learned"]), "--eval-set", str(tmp_path / "empty.jsonl")])
    assert empty.exit_code == 1 and "has no examples" in empty.output and empty.output.count("\n") == 1
