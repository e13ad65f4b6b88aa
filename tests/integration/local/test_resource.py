"""Resource templates create Volcano Jobs on LocalCluster and wait for their conditions, as the pipeline does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from vcjob_factory import vcjob

from components.volcano.cluster_local import LocalCluster
from pipelines.local.runner import delete_run

pytestmark = pytest.mark.integration

VCJOB = yaml.safe_dump(vcjob("train-", "{{inputs.parameters.script}}", generate_name=True))

WORKFLOW = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "Workflow",
    "metadata": {"generateName": "train-pipeline-"},
    "spec": {
        "entrypoint": "main",
        "arguments": {"parameters": [{"name": "code", "value": "0"}]},
        "templates": [
            {
                "name": "main",
                "dag": {
                    "tasks": [
                        {"name": "plan", "template": "plan"},
                        {
                            "name": "train",
                            "template": "train",
                            "depends": "plan",
                            "arguments": {"parameters": [{"name": "script", "value": "{{tasks.plan.outputs.result}}"}]},
                        },
                        {
                            "name": "report",
                            "template": "report",
                            "depends": "train",
                            "arguments": {
                                "parameters": [
                                    {"name": "job", "value": "{{tasks.train.outputs.parameters.job-name}}"},
                                    {"name": "phase", "value": "{{tasks.train.outputs.parameters.phase}}"},
                                ]
                            },
                        },
                    ]
                },
            },
            {
                "name": "plan",
                "script": {
                    "image": "python",
                    "command": ["python"],
                    "source": "print('exit {{workflow.parameters.code}}')",
                },
            },
            {
                "name": "train",
                "inputs": {"parameters": [{"name": "script"}]},
                "resource": {
                    "action": "create",
                    "setOwnerReference": True,
                    "successCondition": "status.state.phase == Completed",
                    "failureCondition": "status.state.phase in (Failed,Aborted,Terminated)",
                    "manifest": VCJOB,
                },
                "outputs": {
                    "parameters": [
                        {"name": "job-name", "valueFrom": {"jsonPath": "{.metadata.name}"}},
                        {"name": "phase", "valueFrom": {"jsonPath": "{.status.state.phase}"}},
                    ]
                },
            },
            {
                "name": "report",
                "inputs": {"parameters": [{"name": "job"}, {"name": "phase"}]},
                "container": {
                    "image": "x",
                    "command": ["echo", "{{inputs.parameters.job}} {{inputs.parameters.phase}}"],
                },
            },
        ],
    },
}


def test_dag_creates_a_vcjob_and_waits_for_success(run, cluster: LocalCluster, home: Path) -> None:
    ran = run(WORKFLOW, cluster=cluster)
    assert ran.phase == "Succeeded", ran.nodes
    job_name = ran.param(".train", "job-name") or ""
    assert job_name.startswith("train-")
    assert ran.nodes[".train"]["outputs"]["exitCode"] == "0"  # Argo's `argoexec resource` pod exited 0
    assert ran.out(".report") == f"{job_name} Completed"
    info = cluster.get(job_name)
    assert info.phase == "Completed" and info.pods[0].gpus == 1
    document = json.loads((home / "runs" / ran.name / "status.json").read_text())
    assert document["local"]["owned"] == [
        {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": job_name, "namespace": "default"}
    ]
    delete_run(ran.name, home=home, cluster=cluster)
    assert cluster.list_jobs() == [] and not (home / "runs" / ran.name).exists()


def test_failure_condition_fails_the_node_without_outputs(run, cluster: LocalCluster) -> None:
    ran = run(WORKFLOW, {"code": "3"}, cluster=cluster)
    assert ran.phase == "Failed"
    assert ran.phases[".train"] == "Failed"
    assert (
        ran.message(".train") == "failure condition 'status.state.phase in (Failed,Aborted,Terminated)' evaluated true"
    )
    assert "outputs" not in ran.nodes[".train"]
    assert ran.phases[".report"] == "Omitted"
    assert [j.phase for j in cluster.list_jobs()] == ["Failed"]
