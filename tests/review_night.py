"""A real night for the review: `vcpilot run --scenario node-failure` against a real `mlflow server`, read back.

`run_night` runs the command a user runs, with the server's URL as the run's `mlflow-tracking-uri`; `night_target`
reads what the run left on the server into the `ReviewTarget` the screenshots look for (`review_kit`): the parent
run, its nested runs, the training-loss plot, the trace of the agent's diagnosis after the node died, the model.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from review_kit import ReviewTarget

from components.tracking.adapter import PARENT_TAG, WORKFLOW_TAG

NAME = "night-node-failure"
EXPERIMENT = "llm-autopilot"
MODEL = "shop-assistant"
TRACED = "diagnose-1"  # the decision after the node died: its trace is the one docs/review.md shows
SPANS = ("observe", "candidates", "policy: rules", "guardrails", "action")


def vcpilot() -> list[str]:
    """The `vcpilot` command of this interpreter's environment (the module when no script is installed)."""
    script = Path(sys.executable).with_name("vcpilot")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "pipelines.cli"]


def run_night(tracking_uri: str, home: Path, timeout_s: float = 1800) -> subprocess.CompletedProcess[str]:
    """`vcpilot run --scenario node-failure` in `home`, recording to `tracking_uri`; its output, whatever it did."""
    env = {**os.environ, "VCPILOT_HOME": str(home)}
    env.pop("MLFLOW_TRACKING_URI", None)
    command = [*vcpilot(), "run", "--scenario", "node-failure", "--name", NAME]
    command += ["-p", f"mlflow-tracking-uri={tracking_uri}"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout_s)


def parent_run(client: Any) -> Any:
    """The night's one parent run (unpacking fails when there are none or two)."""
    experiment = client.get_experiment_by_name(EXPERIMENT)
    (run,) = client.search_runs([experiment.experiment_id], filter_string=f"tags.`{WORKFLOW_TAG}` = '{NAME}'")
    return run


def nested_runs(client: Any, parent: Any) -> list[Any]:
    """The parent's nested runs, oldest first."""
    found = client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.`{PARENT_TAG}` = '{parent.info.run_id}'", max_results=500
    )
    return sorted(found, key=lambda run: run.info.start_time)


def night_target(tracking_uri: str) -> ReviewTarget:
    """What the screenshots must find of the night on the server at `tracking_uri`."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    parent = parent_run(client)
    children = nested_runs(client, parent)
    (decision,) = [run for run in children if run.info.run_name == TRACED]
    (trace,) = client.search_traces(locations=[parent.info.experiment_id], run_id=decision.info.run_id)
    return ReviewTarget(
        tracking_uri=tracking_uri,
        experiment_id=parent.info.experiment_id,
        parent_run_name=NAME,
        child_run_names=tuple(run.info.run_name for run in children),
        plot_run_id=parent.info.run_id,
        plot_path="plots/training_loss.png",
        trace_id=trace.info.trace_id,
        trace_run_id=decision.info.run_id,
        trace_span_names=SPANS,
        model_name=MODEL,
    )
