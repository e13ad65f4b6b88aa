"""A night's run written to MLflow the way the pipeline writes it, for the review screenshots until the real one.

`populate` stands in for `vcpilot run --scenario node-failure` (issue 13): a parent run per workflow, a nested run
per step and per training attempt, a loss plot under `plots/`, the trace of the agent's decision after the node
failure, and `shop-assistant` with two versions and the aliases champion and previous. It returns the
`ReviewTarget` the screenshots look for; nothing in `review_kit` depends on how the data was made.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from review_kit import ReviewTarget

from components.tracking.plots import AttemptLoss, plot_training_loss
from components.tracking.runs import WORKFLOW_TAG, workflow_run
from components.tracking.steps import DEFAULT_EXPERIMENT

EXPERIMENT = DEFAULT_EXPERIMENT
WORKFLOW = "autopilot-node-failure-x7k2p"
MODEL = "shop-assistant"
STEPS = ("detect-logs", "finetune (attempt 1)", "finetune (attempt 2)", "loadtest", "evaluate", "release")
SPANS = ("observe", "candidates", "policy", "guardrails", "action")


def _losses(steps: range, start: float) -> tuple[float, ...]:
    return tuple(round(start * 0.93**i + 0.4, 3) for i, _ in enumerate(steps))


def populate(tracking_uri: str) -> ReviewTarget:
    """Write one workflow run, its decision trace and the registered model to the server at `tracking_uri`."""
    import mlflow
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    parent = workflow_run(tracking_uri, EXPERIMENT, WORKFLOW)
    experiment_id = client.get_run(parent).info.experiment_id
    client.set_tag(parent, "vcpilot.trigger", "local")
    children = {}
    for step in STEPS:
        run = client.create_run(
            experiment_id, run_name=step, tags={"mlflow.parentRunId": parent, "vcpilot.step": step.split(" ")[0]}
        )
        children[step] = run.info.run_id

    first, second = children["finetune (attempt 1)"], children["finetune (attempt 2)"]
    attempts = [
        AttemptLoss(attempt=1, steps=tuple(range(0, 40, 4)), losses=_losses(range(0, 40, 4), 2.2), gpus=4),
        AttemptLoss(
            attempt=2,
            steps=tuple(range(30, 80, 4)),
            losses=_losses(range(30, 80, 4), 0.95),
            gpus=2,
            began="downscale",
            resumed_from_step=30,
        ),
    ]
    for attempt, run_id in zip(attempts, (first, second), strict=True):
        client.log_param(run_id, "gpus", attempt.gpus)
        for step, loss in zip(attempt.steps, attempt.losses, strict=True):
            client.log_metric(run_id, "loss", loss, step=step)
    with tempfile.TemporaryDirectory() as tmp:
        plot = plot_training_loss(attempts, Path(tmp) / "training_loss.png")
        client.log_artifact(second, str(plot), artifact_path="plots")
        model = Path(tmp) / "model"
        model.mkdir()
        (model / "config.json").write_text("{}")
        for run_id in (first, second):
            client.log_artifacts(run_id, str(model), artifact_path="model")

    # The agent's decision after attempt 1 lost a node, as a trace linked to that attempt's run.
    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_experiment(experiment_id=experiment_id)
    with mlflow.start_run(run_id=first), mlflow.start_span("decide", span_type="AGENT") as root:
        root.set_inputs({"workflow": WORKFLOW, "attempt": 1, "event": "node lost: gpu-node-2"})
        with mlflow.start_span("observe") as span:
            span.set_outputs({"free_gpus": 2, "checkpoint_step": 30})
        with mlflow.start_span("candidates") as span:
            span.set_outputs({"actions": ["retry", "downscale", "abort"]})
        with mlflow.start_span("policy") as span:
            span.set_outputs({"choice": "downscale", "why": "2 GPUs free, checkpoint at step 30"})
        with mlflow.start_span("guardrails") as span:
            span.set_outputs({"allowed": True})
        with mlflow.start_span("action") as span:
            span.set_outputs({"action": "downscale", "gpus": 2, "resume_from_step": 30})
        root.set_outputs({"action": "downscale"})
        trace_id = root.trace_id
    mlflow.flush_trace_async_logging()  # traces are exported in the background; the screenshot must find this one

    client.create_registered_model(MODEL, description="Registered by vcpilot release; see its aliases.")
    for run_id in (first, second):
        source = f"{client.get_run(run_id).info.artifact_uri}/model"
        client.create_model_version(MODEL, source=source, run_id=run_id, tags={WORKFLOW_TAG: WORKFLOW})
    client.set_registered_model_alias(MODEL, "previous", "1")
    client.set_registered_model_alias(MODEL, "champion", "2")

    for run_id in (*children.values(), parent):
        client.set_terminated(run_id, status="FINISHED")
    return ReviewTarget(
        tracking_uri=tracking_uri,
        experiment_id=experiment_id,
        parent_run_name=WORKFLOW,
        child_run_names=STEPS,
        plot_run_id=second,
        plot_path="plots/training_loss.png",
        trace_id=trace_id,
        trace_run_id=first,
        trace_span_names=SPANS,
        model_name=MODEL,
    )
