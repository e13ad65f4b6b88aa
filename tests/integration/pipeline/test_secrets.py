"""Secrets hygiene: plant credentials in the environment, run the pipeline once, find them nowhere afterwards.

One `vcpilot run` on LocalCluster against a real MLflow server, with an LLM API key (the agent's policy is the LLM,
whose fake endpoint echoes the key back in its errors, as a hostile or careless one might), MLflow credentials and
an Argo token in its environment. Then every file under the run's home (workspace, step outputs, logs, decision
records, rendered manifests, the cluster's state), the compiled Argo YAML, what the command printed, and every
MLflow param, tag, metric key and artifact are searched for each planted value.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from fake_llm import Reply, serve

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
_SALT = secrets.token_hex(6)
PLANTED = {
    "VCPILOT_LLM_API_KEY": f"sk-planted{_SALT}llmkey",
    "OPENAI_API_KEY": f"planted-openai-{_SALT}",
    "MLFLOW_TRACKING_PASSWORD": f"planted-mlflow-password-{_SALT}",
    "MLFLOW_TRACKING_TOKEN": f"planted-mlflow-token-{_SALT}",
    "ARGO_TOKEN": f"Bearer planted-argo-{_SALT}",
}
NEEDLES = {name: value.removeprefix("Bearer ").encode() for name, value in PLANTED.items()}


def leaks_in(where: str, data: bytes) -> list[str]:
    return [f"{name} in {where}" for name, needle in NEEDLES.items() if needle in data]


def files_under(root: Path) -> list[Path]:
    return [p for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()]


def mlflow_leaks(url: str, download: Path) -> tuple[list[str], int]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(url)
    leaks, fields = [], 0
    for experiment in client.search_experiments():
        for run in client.search_runs([experiment.experiment_id]):
            data = run.data
            for kind, values in (("param", data.params), ("tag", data.tags), ("metric", data.metrics)):
                for key, value in values.items():
                    fields += 1
                    leaks += leaks_in(f"MLflow {kind} {key} of run {run.info.run_name}", f"{key}={value}".encode())
            target = download / run.info.run_id
            target.mkdir(parents=True)
            client.download_artifacts(run.info.run_id, "", str(target))
            for path in files_under(target):
                fields += 1
                leaks += leaks_in(f"MLflow artifact {path.relative_to(download)}", path.read_bytes())
    for model in client.search_registered_models():
        for version in client.search_model_versions(f"name = '{model.name}'"):
            fields += 1
            leaks += leaks_in(f"model version {model.name}/{version.version}", repr(version).encode())
    return leaks, fields


def test_planted_secrets_appear_in_no_file_output_record_or_mlflow_field(tmp_path, mlflow_server, record_property):
    home = tmp_path / "home"
    with serve() as llm:
        # the endpoint echoes the key it was sent, in an error the policy records as its reason to fall back
        llm.script(*[Reply({"error": {"message": f"bad key {PLANTED['VCPILOT_LLM_API_KEY']}"}}, 401)] * 8)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("VCPILOT_", "MLFLOW_"))},
            **PLANTED,
            "VCPILOT_HOME": str(home),
            "VCPILOT_LLM_URL": f"{llm.url}/v1",
            "VCPILOT_LLM_MODEL": "planted-model",
            "PYTHONPATH": str(ROOT),
        }
        params = {
            "base-model": "tiny",
            # One training pod, not four: every pod gets the same environment and writes the same kinds of files,
            # and on two cores four ranks of torch cost a minute of this test.
            "gpus-wanted": "1",
            "global-batch": "8",
            "train-max-steps": "10",
            "checkpoint-every": "5",
            "agent-policy": "llm",
            "mlflow-tracking-uri": mlflow_server,
        }
        command = [sys.executable, "-m", "pipelines.cli", "run", "--scenario", "drift", "--name", "secrets"]
        command += [arg for name, value in params.items() for arg in ("-p", f"{name}={value}")]
        done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert any(f"Bearer {PLANTED['VCPILOT_LLM_API_KEY']}" == h.get("Authorization") for h in llm.headers), (
        "the key was planted where the agent reads it and sent to the endpoint"
    )

    leaks = leaks_in("the command's stdout", done.stdout) + leaks_in("the command's stderr", done.stderr)
    searched = files_under(home) + files_under(ROOT / "deploy" / "argo")
    assert any(p.suffix == ".json" and "decision" in str(p) for p in searched), "decision records were searched"
    for path in searched:
        leaks += leaks_in(str(path), path.read_bytes())
    mlflow, fields = mlflow_leaks(mlflow_server, tmp_path / "downloaded")
    leaks += mlflow
    print(f"secrets: {len(leaks)} leaks in {len(searched)} files and {fields} MLflow fields and artifacts")
    record_property("leaks", len(leaks))  # benchmarks/robustness.py reads it
    assert fields > 50
    assert leaks == []
