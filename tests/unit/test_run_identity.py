"""What a workflow's MLflow parent run says about it: trigger, Argo UI link, and what its pods are told."""

from __future__ import annotations

import json

from pipelines.run_identity import argo_link, trigger_of, workflow_run_of
from pipelines.steps import RunInput
from pipelines.vcjobs import JobContext, TrainingShape, build_detect_job, build_training_job_for


def test_the_trigger_is_read_from_the_labels_argo_and_the_local_runner_set():
    assert trigger_of({"workflows.argoproj.io/cron-workflow": "llm-autopilot-nightly"}) == "cron"
    assert trigger_of({"vcpilot.io/trigger": "local"}) == "local"
    assert trigger_of({"vcpilot.io/trigger": "cli"}) == "cli"
    assert trigger_of({"workflows.argoproj.io/creator": "alice"}) == "submitted", "the UI and argo submit look alike"


def test_the_argo_ui_link_needs_a_base_url():
    assert argo_link("https://argo.example.com/", "ml", "llm-autopilot-x1") == (
        "https://argo.example.com/workflows/ml/llm-autopilot-x1"
    )
    assert argo_link("", "ml", "llm-autopilot-x1") == "", "locally there is no UI to link to"


def test_a_steps_inputs_make_the_parent_runs_tags():
    inputs = RunInput(
        workflow_name="llm-autopilot-x1",
        workflow_uid="3f2a",
        workflow_labels=json.dumps({"workflows.argoproj.io/cron-workflow": "llm-autopilot-nightly"}),
        template_version="vcpilot-0.1.0",
        argo_ui_url="https://argo.example.com",
        namespace="ml",
        workspace="/workspace",
        image="img:1",
    )
    assert inputs.workflow_run().tags() == {
        "vcpilot.workflow": "llm-autopilot-x1",
        "vcpilot.workflow.uid": "3f2a",
        "vcpilot.workflow.namespace": "ml",
        "vcpilot.workflow.url": "https://argo.example.com/workflows/ml/llm-autopilot-x1",
        "vcpilot.trigger": "cron",
        "vcpilot.template.version": "vcpilot-0.1.0",
        "vcpilot.image": "img:1",
    }
    bad = workflow_run_of(
        name="w", uid="u", namespace="n", labels_json="not json", argo_ui_url="", template_version="", image=""
    )
    assert bad.trigger == "submitted" and "vcpilot.workflow.url" not in bad.tags()


def test_every_pod_knows_its_workflow_run_step_attempt_vcjob_and_spool():
    context = JobContext(workflow="wf", workflow_uid="uid-1", trigger="local", workspace="/ws", image="img:1")
    detect = build_detect_job(context, log_source="/logs").to_dict()
    env = {e["name"]: e["value"] for e in detect["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["env"]}
    assert env["VCPILOT_WORKFLOW_UID"] == "uid-1" and env["VCPILOT_TRIGGER"] == "local"
    assert env["VCPILOT_JOB"] == detect["metadata"]["name"] and env["VCPILOT_ATTEMPT"] == "1"
    assert env["VCPILOT_TRACKING_SPOOL"] == "/ws/runs/wf/tracking"
    shape = TrainingShape(attempt=2, gpus=1, gpus_per_pod=1, micro_batch=1, grad_accum=1, global_batch=1, queue="q")
    train = build_training_job_for(
        context, shape, base_model="tiny", dataset_dir="/d", max_steps=2, checkpoint_every=1
    ).to_dict()
    env = {e["name"]: e.get("value") for e in train["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["env"]}
    assert env["VCPILOT_ATTEMPT"] == "2" and env["VCPILOT_JOB"] == train["metadata"]["name"] == "wf-train-2"
