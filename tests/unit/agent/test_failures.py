"""Diagnose from the API objects as Kubernetes and Volcano leave them: preempted, reclaimed, node fault, stop, bug.

Each case builds the failed job as KubeCluster reads it (`k8s_status.job_info` over the pods and events the API
server returns) and asks the rule policy what to do. What the objects hold is what the sources write:

- Volcano's evictor (pkg/scheduler/cache/cache.go `defaultEvictor.Evict`, v1.15.1) records a Warning event
  `Evict` "Pod is evicted, because of <preempt|reclaim>", sets the pod's Ready condition False with reason
  `Evict` and that message, and DisruptionTarget True with reason `PreemptionByScheduler` (for both actions),
  then deletes the pod; the kubelet sends SIGTERM and the trainer exits 143 after its checkpoint.
- kube-scheduler's preemption records a `Preempted` event on the victim ("Preempted by pod <uid> on node <n>").
- The kubelet's graceful node shutdown (pkg/kubelet/nodeshutdown) leaves the pod Failed with reason
  `Terminated` and DisruptionTarget `TerminationByKubelet`; the taint-eviction controller sets
  `DeletionByTaintManager` before it deletes a pod from a NotReady node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest
from vcjob_factory import vcjob, vcjob_task

from agent.actions import Abort, RetryFromCheckpoint
from agent.failures import attempt_record, classify_failure
from agent.observation import CheckpointInfo, Observation, PlanRequest
from agent.policy_llm import check_answer
from agent.policy_rules import RulePolicy
from components.finetune.errors import EXIT_NO_ROOM, EXIT_STOPPED
from components.volcano.cluster import NodeInfo
from components.volcano.k8s_status import job_info
from components.volcano.resources import GPU

UID = "5f0c3c59-9d7e-4d5e-a0a4-7d1c2b0e9a11"
MASTER, WORKER = "train-master-0", "train-worker-0"
CKPT = CheckpointInfo(path="/ws/runs/wf/checkpoints/step-37", step=37)  # the SIGTERM checkpoint
NODES = [
    NodeInfo(name=f"gpu-node-{i}", ready=True, gpu_capacity=2, gpu_allocatable=2, gpu_allocated=0) for i in range(3)
]
POLICY = RulePolicy()

JOB = vcjob("train", namespace="team-a", queue="gpu-a", tasks=[vcjob_task(t, 1, gpus=2) for t in ("master", "worker")])
JOB["metadata"]["uid"] = UID
JOB["status"] = {"state": {"phase": "Failed", "reason": "PodEvicted"}, "retryCount": 1}


def pod(name: str, node: str, phase: str, *, code: int | None = None, deleting: bool = False, **status: Any):
    """A pod of job `train` as Volcano's controller labels it, with the given status and first container's exit."""
    task, index = name.rsplit("-", 2)[1:]
    labels = {"volcano.sh/job-name": "train", "volcano.sh/task-spec": task, "volcano.sh/task-index": index}
    meta: dict[str, Any] = {"name": name, "labels": labels, "ownerReferences": [{"kind": "Job", "uid": UID}]}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T10:00:30Z"
    states = [{"name": "trainer", "state": {"terminated": {"exitCode": code, "reason": "Error"}}}] if code else []
    return {
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"resources": {"limits": {GPU: "2"}}}]},
        "status": {"phase": phase, "containerStatuses": states, **status},
    }


def event(name: str, nanos: str, reason: str, message: str, type_: str = "Normal") -> dict[str, Any]:
    """A core/v1 Event about pod `name` as client-go names it (`<object>.<hex UnixNano>`)."""
    return {
        "metadata": {"name": f"{name}.{nanos}"},
        "involvedObject": {"kind": "Pod", "name": name},
        "reason": reason,
        "message": message,
        "type": type_,
        "count": 1,
        "lastTimestamp": "2026-12-01T10:00:00Z",
    }


PLACED = [
    event(MASTER, "187d0f4b2c000000", "Scheduled", f"Successfully assigned team-a/{MASTER} to gpu-node-0"),
    event(WORKER, "187d0f4b2c000001", "Scheduled", f"Successfully assigned team-a/{WORKER} to gpu-node-1"),
]
# The master stopped with the worker: at the same step, after the checkpoint, exit code 143.
STOPPED_MASTER = pod(MASTER, "gpu-node-0", "Failed", code=EXIT_STOPPED)


def volcano_evicted(action: str) -> dict[str, Any]:
    return event(WORKER, "187d0f4b2d000000", "Evict", f"Pod is evicted, because of {action}", "Warning")


def diagnose(pods: list[dict[str, Any]], events: Sequence[dict[str, Any]] = (), **fields: Any):
    """The failure and the rule policy's action for the job as KubeCluster reads it."""
    changes = fields.pop("request", {})
    request = PlanRequest(gpus=4, gpus_per_pod=2, global_batch=32, micro_batch=4, queue="gpu-a", **changes)
    job = job_info(JOB, pods, None, list(events))
    fields.setdefault("nodes", NODES)
    fields.setdefault("checkpoint", CKPT)
    observation = Observation(time=0.0, request=request, job=job, **fields)
    return classify_failure(job, observation), POLICY.diagnose(observation), observation


def test_a_pod_volcano_preempted_and_deleted_is_retried_from_the_sigterm_checkpoint_avoiding_no_node():
    failure, action, _ = diagnose([STOPPED_MASTER], [*PLACED, volcano_evicted("preempt")])
    assert failure.kind == "preempted" and failure.codes == ()
    assert isinstance(action, RetryFromCheckpoint)
    assert (action.checkpoint, action.checkpoint_step, action.avoid_nodes) == (CKPT.path, 37, [])
    assert action.rationale == (
        f"pod {WORKER} preempted (a higher-priority job took its place): neither a bug nor a fault of its nodes; "
        f"retrying from step 37 ({CKPT.path})"
    )


def test_a_pod_volcano_is_reclaiming_reads_as_reclaimed_while_it_is_still_being_deleted():
    reclaiming = pod(
        WORKER,
        "gpu-node-1",
        "Running",
        deleting=True,
        conditions=[
            {"type": "Ready", "status": "False", "reason": "Evict", "message": "Pod is evicted, because of reclaim"},
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "PreemptionByScheduler",
                "message": "volcano: preempting to accommodate a higher priority pod",
            },
        ],
    )
    failure, action, _ = diagnose([STOPPED_MASTER, reclaiming])
    assert failure.kind == "preempted"
    assert isinstance(action, RetryFromCheckpoint) and action.avoid_nodes == []
    assert action.rationale.startswith(f"pod {WORKER} reclaimed (another queue took back its share): ")


def test_kube_scheduler_preemption_is_a_preemption_too():
    preempted = event(WORKER, "187d0f4b2d000000", "Preempted", "Preempted by pod 1b2c on node gpu-node-1")
    failure, _, _ = diagnose([STOPPED_MASTER], [*PLACED, preempted])
    assert (failure.kind, failure.bad_nodes) == ("preempted", ())


def test_preemption_attempt_after_attempt_is_never_the_same_failure_twice():
    _, _, first = diagnose([STOPPED_MASTER], [*PLACED, volcano_evicted("preempt")])
    record = attempt_record(first)
    assert record is not None and record.exit_codes == [] and record.nodes == []
    _, again, _ = diagnose(
        [STOPPED_MASTER], [*PLACED, volcano_evicted("preempt")], history=[record], request={"attempt": 2}
    )
    assert isinstance(again, RetryFromCheckpoint) and "preempted" in again.rationale


def test_a_node_shutting_down_is_a_node_fault_though_its_trainers_exit_143_as_when_preempted():
    shutdown = pod(
        WORKER,
        "gpu-node-1",
        "Failed",
        code=EXIT_STOPPED,
        reason="Terminated",
        message="Pod was terminated in response to imminent node shutdown.",
        conditions=[
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "TerminationByKubelet",
                "message": "Pod was terminated in response to imminent node shutdown.",
            }
        ],
    )
    failure, action, _ = diagnose([STOPPED_MASTER, shutdown])
    assert (failure.kind, failure.bad_nodes) == ("node", ("gpu-node-1",))
    assert isinstance(action, RetryFromCheckpoint) and action.avoid_nodes == ["gpu-node-1"]
    assert action.rationale.startswith(f"pod {WORKER} NodeShutdown on gpu-node-1: an infrastructure fault; ")


def test_a_node_eviction_still_blames_the_node_even_alongside_a_preemption():
    tainted = event(WORKER, "187d0f4b2d000000", "TaintManagerEviction", f"Marking for deletion Pod team-a/{WORKER}")
    failure, action, _ = diagnose([STOPPED_MASTER], [*PLACED, tainted])
    assert (failure.kind, failure.bad_nodes) == ("node", ("gpu-node-1",))
    assert isinstance(action, RetryFromCheckpoint) and action.avoid_nodes == ["gpu-node-1"]


def test_ranks_that_stopped_on_sigterm_are_not_a_bug_however_often_it_happens():
    """Every rank exits 143 (a deleted pod, or one whose eviction left no trace): told to stop, not crashed."""
    stopped = [STOPPED_MASTER, pod(WORKER, "gpu-node-1", "Failed", code=EXIT_STOPPED)]
    failure, action, first = diagnose(stopped)
    assert (failure.kind, failure.codes) == ("external", ())
    assert f"pods {MASTER}, {WORKER} ended from outside the job (stopped on SIGTERM)" in action.rationale
    record = attempt_record(first)
    _, again, _ = diagnose(stopped, history=[record], request={"attempt": 2})
    assert isinstance(again, RetryFromCheckpoint) and again.avoid_nodes == []


def test_the_same_crash_on_every_rank_is_still_a_bug_aborted_the_second_time():
    crashed = [pod(MASTER, "gpu-node-0", "Failed", code=3), pod(WORKER, "gpu-node-1", "Failed", code=3)]
    failure, retry, first = diagnose(crashed)
    assert (failure.kind, failure.codes) == ("bug", (3,))
    assert isinstance(retry, RetryFromCheckpoint)
    _, abort, _ = diagnose(crashed, history=[attempt_record(first)], request={"attempt": 2})
    assert isinstance(abort, Abort) and abort.reason.startswith("training fails deterministically")


def test_a_rank_with_no_room_for_its_checkpoint_stops_the_run_at_once_and_no_answer_but_abort_passes():
    """The master exits EXIT_NO_ROOM, the worker lost its peer (exit 1): a full volume, not a bug, on the first try."""
    full = [pod(MASTER, "gpu-node-0", "Failed", code=EXIT_NO_ROOM), pod(WORKER, "gpu-node-1", "Failed", code=1)]
    failure, action, observation = diagnose(full)
    assert (failure.kind, failure.bad_nodes) == ("storage", ())
    assert isinstance(action, Abort)
    assert action.reason == (
        f"pod {MASTER} found no room to write a checkpoint or the model (exit code 28): the checkpoint volume is "
        "full: neither a bug nor a node's fault, and a retry would fail the same way; free space on the volume of "
        f"/ws/runs/wf/checkpoints, then run again from step 37, the latest complete checkpoint: "
        f"-p resume-checkpoint={CKPT.path}, the same parameters otherwise"
    )
    retry = POLICY._retry(observation, failure)  # what an LLM might answer instead: the guardrail refuses it
    with pytest.raises(ValueError, match=r"^a retry after pod .* would fail the same way: the checkpoint volume"):
        check_answer(retry, observation, "diagnose")
    check_answer(action, observation, "diagnose")
    _, nothing_yet, _ = diagnose(full, checkpoint=None)
    assert isinstance(nothing_yet, Abort) and nothing_yet.reason.endswith(
        "nothing was checkpointed yet: free space and run again"
    )


# ---- a node that dies: the healthy rank fails first, the dead node's pod stays Terminating -----------------------

# What the API server showed on the real-pods cluster seconds after real-node-1's kubelet and containers were killed:
# the master on the healthy node failed (its gloo collective lost the peer, exit 1), Volcano deleted the job's pods,
# and the worker on the dead node stays Running with a deletionTimestamp — its kubelet can never confirm.
LOST_PEER_MASTER = pod(MASTER, "gpu-node-0", "Failed", code=1)
SILENT_WORKER = pod(WORKER, "gpu-node-1", "Running", deleting=True)


def test_a_pod_being_deleted_on_a_ready_node_leaves_the_failure_unsettled():
    from agent.observe import unsettled

    job = job_info(JOB, [LOST_PEER_MASTER, SILENT_WORKER], None, list(PLACED))
    assert [p.name for p in job.pods] == [MASTER] and [p.name for p in job.ending] == [WORKER]
    assert unsettled(job, NODES) == [WORKER]
    dead = [dataclasses.replace(n, ready=n.name != "gpu-node-1") for n in NODES]
    assert unsettled(job, dead) == []


def test_a_failed_job_whose_pods_eviction_deleted_is_unsettled_until_the_events_tell_of_them():
    """Seen in CI on kwok: the job read Failed before the taint-eviction controller's event was written."""
    from agent.observe import unsettled

    evicted = [
        event(n, "187d0f4b2d00000" + str(i), "TaintManagerEviction", f"Marking for deletion Pod team-a/{n}")
        for i, n in enumerate((MASTER, WORKER))
    ]
    assert unsettled(job_info(JOB, [], None, list(PLACED)), NODES) == ["train"]
    told = job_info(JOB, [], None, [*PLACED, *evicted])
    assert [(p.name, p.reason) for p in told.pods] == [(MASTER, "Evicted"), (WORKER, "Evicted")]
    assert unsettled(told, NODES) == []
    aborted = {**JOB, "status": {"state": {"phase": "Aborted"}}}  # pods deleted on purpose: nothing to wait for
    assert unsettled(job_info(aborted, [], None, list(PLACED)), NODES) == []


def test_once_its_node_is_notready_the_silent_pod_makes_it_a_node_fault_not_the_masters_bug():
    dead = [dataclasses.replace(n, ready=n.name != "gpu-node-1") for n in NODES]
    failure, action, _ = diagnose([LOST_PEER_MASTER, SILENT_WORKER], PLACED, nodes=dead)
    assert failure.kind == "node" and failure.bad_nodes == ("gpu-node-1",)
    assert isinstance(action, RetryFromCheckpoint) and action.avoid_nodes == ["gpu-node-1"]


def test_read_too_early_the_same_job_looks_like_one_ranks_failure():
    failure, action, _ = diagnose([LOST_PEER_MASTER, SILENT_WORKER], PLACED)
    assert failure.kind != "node" and isinstance(action, RetryFromCheckpoint) and action.avoid_nodes == []
