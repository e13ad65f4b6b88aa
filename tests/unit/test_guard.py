"""The guard of a heavy step's pods: when it ends their job, and the sidecar every pod of a guarded job carries."""

from __future__ import annotations

import pytest

from pipelines.guard import should_end
from pipelines.vcjobs import JobContext, TrainingShape, build_detect_job, build_loadtest_job, build_training_job_for


@pytest.mark.parametrize(
    ("workflow", "ends"),
    [
        ({"status": {"phase": "Running"}}, ""),
        ({"status": {}}, ""),
        ({"spec": {"shutdown": "Terminate"}, "status": {"phase": "Running"}}, "being shut down (Terminate)"),
        ({"spec": {"shutdown": "Stop"}, "status": {"phase": "Running"}}, "being shut down (Stop)"),
        ({"status": {"phase": "Failed"}}, "ended Failed"),
        ({"status": {"phase": "Succeeded"}}, "ended Succeeded"),
        (None, "was deleted"),
    ],
)
def test_the_job_ends_once_its_workflow_has_ended_or_is_shutting_down(workflow: dict | None, ends: str) -> None:
    assert (ends in should_end(workflow)) and bool(should_end(workflow)) == bool(ends)


def _jobs(context: JobContext) -> list:
    shape = TrainingShape(attempt=1, gpus=2, gpus_per_pod=1, micro_batch=4, grad_accum=1, global_batch=8, queue="q")
    return [
        build_detect_job(context, log_source="/workspace/logs"),
        build_loadtest_job(context, model_uri="/m", slo_ttft_ms=500, slo_tpot_ms=50),
        build_training_job_for(context, shape, base_model="tiny", dataset_dir="/d", max_steps=10, checkpoint_every=5),
    ]


def test_every_pod_of_a_guarded_job_runs_the_guard_as_a_native_sidecar_under_the_job_account() -> None:
    context = JobContext(
        workflow="wf", workspace="/workspace", image="img:1", job_service_account="vcpilot-job",
        mlflow_tracking_uri="http://mlflow:5000",
    )  # fmt: skip
    for job in _jobs(context):
        for task in job.spec.tasks:
            spec = task.template.spec.model_dump(by_alias=True, exclude_none=True)
            assert spec["serviceAccountName"] == "vcpilot-job"
            (guard,) = spec["initContainers"]
            assert guard["restartPolicy"] == "Always" and guard["image"] == "img:1"
            assert guard["command"] == ["python", "-m", "pipelines.guard"]
            env = {e["name"]: e.get("value") for e in guard["env"]}
            assert env["VCPILOT_JOB"] == job.metadata.name and env["VCPILOT_WORKFLOW"] == "wf"
            assert env["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"


def test_without_an_account_no_guard_is_added() -> None:
    for job in _jobs(JobContext(workflow="wf", workspace="/workspace", image="img:1")):
        for task in job.spec.tasks:
            assert not task.template.spec.init_containers and not task.template.spec.service_account_name
