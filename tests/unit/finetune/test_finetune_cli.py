"""`vcpilot finetune` refuses bad input with one sentence and exit code 1, before any training."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from components.finetune.checkpoint import Checkpointer
from components.finetune.checkpoint_layout import METADATA
from components.finetune.cli import app


def invoke(args, env=None):
    result = CliRunner().invoke(app, args, env={"WORLD_SIZE": "", "VCPILOT_RESUME": "", **(env or {})})
    return result


def refused(result, *fragments):
    assert result.exit_code == 1, result.output  # EXIT_INPUT
    assert result.stdout == ""
    line = result.stderr.strip()
    assert line.startswith("error: ") and "\n" not in line and "Traceback" not in line
    for fragment in fragments:
        assert fragment in line, line
    return line


@pytest.fixture
def base_args(tmp_path, dataset):
    return ["--data", str(dataset), "--out", str(tmp_path / "out"), "--max-steps", "2"]


def test_a_missing_dataset(tmp_path):
    refused(invoke(["--data", str(tmp_path / "nope"), "--out", str(tmp_path / "o"), "--max-steps", "2"]), "nope")


def test_an_empty_dataset(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text("\n")
    refused(invoke(["--data", str(tmp_path / "data"), "--out", str(tmp_path / "o"), "--max-steps", "2"]), "empty")


def test_a_global_batch_that_does_not_divide(base_args):
    refused(invoke([*base_args, "--micro-batch", "4", "--global-batch", "10"]), "global batch 10", "not divisible")
    # The pipeline passes the batch shape in the env; the same check applies.
    env = {"VCPILOT_MICRO_BATCH": "2", "VCPILOT_GRAD_ACCUM": "3", "VCPILOT_GLOBAL_BATCH": "8"}
    refused(invoke(base_args, env), "global batch 8 must equal")


def test_a_setting_out_of_range(base_args):
    refused(invoke([*base_args, "--keep", "0"]), "--keep")
    # the option as typed, not the config's field (stall_timeout_s); nan is no number of seconds
    refused(invoke([*base_args, "--stall-timeout", "-5"]), "--stall-timeout should be greater than or equal to 0")
    refused(invoke([*base_args, "--stall-timeout", "nan"]), "--stall-timeout should be a finite number, got nan")
    for seed in ("-1", str(2**32)):
        result = invoke([*base_args, "--seed", seed])  # numpy's range; was its ValueError as an internal error
        says = "error: --seed should be a whole number from 0 to 4294967295; see `"
        assert result.exit_code == 2 and result.stderr.strip().startswith(says)


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--lr", "inf", "--lr should be a finite number, got inf"),
        ("--lr", "nan", "--lr should be a finite number, got nan"),
        ("--lr", "0", "--lr should be greater than 0"),
        ("--lr", "-1e-3", "--lr should be greater than 0"),
        ("--weight-decay", "inf", "--weight-decay should be a finite number"),
        ("--weight-decay", "nan", "--weight-decay should be a finite number"),
    ],
)
def test_a_learning_rate_or_decay_that_is_no_finite_number(base_args, option, value, says):
    refused(invoke([*base_args, option, value]), says)


def test_an_empty_resume_is_refused_not_read_as_the_working_directory(base_args, tmp_path):
    # `--resume ''` said "checkpoint . is incomplete or missing": the working directory, read as a checkpoint
    refused(invoke([*base_args, "--resume", ""]), "--resume is empty; give none, auto or the path of a step-N")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("option", ["--out", "--checkpoint-dir"])
def test_an_output_that_is_the_dataset_is_refused_and_the_dataset_left_as_it_was(base_args, dataset, option):
    # `--out DATA` wrote the model, metrics.jsonl and summary.json among the training data
    before = sorted(p.name for p in dataset.iterdir())
    line = refused(invoke([*base_args, option, str(dataset)]), f"{option} {dataset} is the dataset being read")
    assert line.endswith(f"give another {option}")
    assert sorted(p.name for p in dataset.iterdir()) == before


def test_a_missing_base_model_directory(base_args, tmp_path):
    refused(invoke([*base_args, "--base-model", str(tmp_path / "no-model")]), "does not exist")


def test_a_distributed_env_without_a_rendezvous(base_args):
    refused(invoke(base_args, {"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "", "MASTER_PORT": ""}), "MASTER_ADDR")


def test_more_ranks_on_a_node_than_it_has_gpus(base_args, monkeypatch):
    # A one-GPU node given a second local rank (deploy/image/gpu-check.sh checks it on a real GPU, docs/image.md).
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    env = {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    refused(invoke(base_args, env), "LOCAL_RANK 1 has no GPU", "this node has 1")


def test_a_fresh_start_over_existing_checkpoints_and_a_missing_resume_checkpoint(base_args, tmp_path):
    (tmp_path / "out-checkpoints" / "step-5").mkdir(parents=True)
    (tmp_path / "out-checkpoints" / "step-5" / METADATA).write_text("{}")
    assert Checkpointer(tmp_path / "out-checkpoints").latest() is not None
    refused(invoke(base_args), "step-5", "--resume auto")
    refused(invoke(base_args, {"VCPILOT_RESUME": str(tmp_path / "step-9")}), "step-9")


def test_the_checkpoint_named_by_the_pipeline_wins_and_the_run_ends_on_the_same_loss(base_args, tmp_path):
    args = [*base_args[:-1], "4", "--checkpoint-every", "2", "--micro-batch", "2", "--global-batch", "4", "--json"]
    first = invoke(args)
    assert first.exit_code == 0, first.output
    chosen = tmp_path / "out-checkpoints" / "step-2"
    again = invoke(
        [*args, "--out", str(tmp_path / "again"), "--checkpoint-dir", str(chosen.parent)],
        {"VCPILOT_RESUME": str(chosen)},
    )
    assert again.exit_code == 0, again.output
    summary, original = json.loads(again.stdout), json.loads(first.stdout)
    assert summary["resumed_from"] == str(chosen) and summary["steps_run"] == 2
    assert summary["final_loss"] == original["final_loss"]


def test_a_dead_tracking_server_costs_a_warning_not_the_training(base_args, tmp_path):
    env = {
        "MLFLOW_TRACKING_URI": "http://127.0.0.1:9",
        "VCPILOT_WORKFLOW": "wf-1",
        "VCPILOT_TRACKING_SPOOL": str(tmp_path / "spool"),
    }
    result = invoke([*base_args, "--json"], env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["steps_run"] == 2
    assert (tmp_path / "out" / "config.json").is_file()
    warnings = [line for line in result.stderr.splitlines() if "MLflow" in line]
    assert len(warnings) == 1 and "wait in" in warnings[0], "one line; the metrics are spooled, not lost"
    assert (tmp_path / "spool" / "finetune-1.jsonl").is_file()
