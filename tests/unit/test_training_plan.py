"""The training VCJob the plan step renders takes the agent's checkpoint interval when it chose one."""

from __future__ import annotations

import pytest

from agent.actions import Proceed
from agent.observation import Observation, PlanRequest
from agent.policy import Decision
from pipelines.training_plan import render_training_job
from pipelines.vcjobs import JobContext


@pytest.mark.parametrize(("chosen", "rendered"), [(77, "77"), (0, "50")])
def test_the_job_checkpoints_at_the_agents_interval_or_else_the_runs_parameter(chosen: int, rendered: str) -> None:
    request = PlanRequest(gpus=2, global_batch=8, micro_batch=4, queue="q", max_steps=200)
    action = Proceed(
        gpus=2, micro_batch=4, grad_accum=1, queue="q", checkpoint_every=chosen, rationale="the cluster is idle"
    )
    decision = Decision(stage="plan", policy="rules", action=action, observation=Observation(time=0, request=request))
    context = JobContext(workflow="wf", workspace="/workspace", image="img:1")
    job = render_training_job(context, decision, base_model="tiny", checkpoint_every=50)
    assert job is not None
    args = job.spec.tasks[0].template.spec.containers[0].args
    assert args[args.index("--checkpoint-every") + 1] == rendered


@pytest.mark.parametrize(("run_class", "chosen"), [("", "vcpilot-run-2h"), ("vcpilot-low", "vcpilot-low")])
def test_the_job_and_its_pods_take_the_class_the_agent_chose(run_class: str, chosen: str) -> None:
    # The run's class unless it named none: then the run band the rules gave it (agent/run_bands.py).
    request = PlanRequest(gpus=2, global_batch=8, micro_batch=4, queue="q", max_steps=200, priority_class=run_class)
    action = Proceed(gpus=2, micro_batch=4, grad_accum=1, queue="q", priority_class=chosen, rationale="idle")
    decision = Decision(stage="plan", policy="rules", action=action, observation=Observation(time=0, request=request))
    context = JobContext(workflow="wf", workspace="/workspace", image="img:1", priority_class=run_class)
    job = render_training_job(context, decision, base_model="tiny", checkpoint_every=50)
    assert job is not None and job.spec.priority_class_name == chosen
    assert {task.template.spec.priority_class_name for task in job.spec.tasks} == {chosen}
