"""The Volcano Job `vcpilot cluster sample` prints: a first file for `cluster submit` that runs as it is.

Built from the models (components.volcano.models), so it is what LocalCluster and Volcano accept by construction;
a test submits it to a LocalCluster and waits for it to complete.
"""

from __future__ import annotations

from components.volcano.models import (
    Container,
    Job,
    JobSpec,
    LifecyclePolicy,
    ObjectMeta,
    PodSpec,
    PodTemplateSpec,
    ResourceRequirements,
    TaskSpec,
)
from components.volcano.resources import GPU

__all__ = ["SAMPLE_NAME", "sample_job"]

SAMPLE_NAME = "hello"

# Each pod says which rank of the gang it is: the environment Volcano's svc plugin and LocalCluster give every pod.
_SCRIPT = (
    "import os, socket\n"
    "rank = os.environ.get('VC_TASK_INDEX', '?')\n"
    "node = os.environ.get('VCPILOT_NODE_NAME') or socket.gethostname()\n"
    "print(f'hello from pod {rank} of the gang, on {node}')\n"
)


def sample_job(name: str = SAMPLE_NAME, pods: int = 2, gpus_per_pod: int = 1) -> Job:
    """A gang of `pods` pods, each asking `gpus_per_pod` GPUs, that print a line and exit 0."""
    container = Container(
        name="main",
        image="python:3.12-slim",
        command=["python", "-c", _SCRIPT],
        resources=ResourceRequirements(requests={GPU: gpus_per_pod}, limits={GPU: gpus_per_pod}),
    )
    task = TaskSpec(
        name="worker",
        replicas=pods,
        template=PodTemplateSpec(spec=PodSpec(containers=[container], restart_policy="Never")),
    )
    spec = JobSpec(
        scheduler_name="volcano",
        queue="default",
        min_available=pods,  # gang: every pod starts together or none does
        max_retry=1,
        policies=[LifecyclePolicy(event="PodEvicted", action="RestartJob")],
        tasks=[task],
    )
    return Job(metadata=ObjectMeta(name=name, labels={"app": "vcpilot-sample"}), spec=spec)
