"""Why a training attempt failed: a full disk, a node, preemption, a hang, one rank's GPU or memory, or a bug.

Pure, read from the failed job's pods and events (an outside end too). The rule policy retries every kind but a
full disk and a bug that repeats; the decision records keep each attempt's `AttemptRecord` (built here) so that the
next diagnose can tell a repeat from a first time. Pods that the job controller killed because another one failed
(reason `Terminated`) say nothing about the cause and are ignored.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from agent.observation import AttemptRecord, Observation
from components.finetune.errors import EXIT_NO_ROOM, EXIT_STALLED, EXIT_STOPPED
from components.volcano.cluster import JobInfo, PodInfo

__all__ = ["Failure", "FailureKind", "attempt_record", "classify_failure", "same_failure"]

# Pod reasons that blame the node, that say the scheduler took the pod's place for other work (components/volcano/
# k8s_status.py reads both from the pod's DisruptionTarget condition and Volcano's events), that say something
# outside the job ended the pod, and that the controller gives the pods it kills after another failed.
_NODE_FAULTS = frozenset({"Evicted", "NodeLost", "NodeShutdown"})
_PREEMPTED = {
    "Preempted": "preempted (a higher-priority job took its place)",
    "Reclaimed": "reclaimed (another queue took back its share)",
}
_EXTERNAL = frozenset({"Killed", "Lost"})
_COLLATERAL = frozenset({"Terminated"})
_OOM = "OOMKilled"
# How a GPU fault shows in a pod's reason or in a Warning event about the pod (NVIDIA Xid, ECC, CUDA errors).
_GPU_FAULT = re.compile(r"\bxid\b|gpu ?error|gpu has fallen off|\becc\b|cuda error|device error", re.IGNORECASE)

FailureKind = Literal["storage", "node", "preempted", "rank", "external", "bug", "other", "unseen"]


@dataclass(frozen=True)
class Failure:
    """What ended an attempt, in words (`cause`, `verdict`), and the nodes to blame."""

    kind: FailureKind
    cause: str
    verdict: str = "an infrastructure fault"
    codes: tuple[int, ...] = ()  # exit codes of the pods that failed by themselves
    failed_ranks: int = 0
    bad_nodes: tuple[str, ...] = ()


UNSEEN = Failure("unseen", "the failed job could not be inspected", verdict="the cause is unknown")


def classify_failure(job: JobInfo | None, observation: Observation) -> Failure:
    """Tell the kind of failure from the pods' reasons, exit codes and nodes, and the GPU warnings in the events.

    In order: a pod whose trainer found no room to write (exit code EXIT_NO_ROOM: the checkpoint volume is full,
    which no retry mends and no node is to blame for); pods Evicted, NodeLost, NodeShutdown or on a NotReady node (a
    node fault); pods Preempted or Reclaimed (the scheduler's doing: no fault, no node blamed); ranks whose watchdog
    ended them (exit code EXIT_STALLED: hung, an infrastructure fault however many ranks say so); exactly one rank out
    of memory or with a GPU error (that rank's fault, its node blamed for a GPU error); pods Killed, Lost or stopped
    on SIGTERM (exit code EXIT_STOPPED: ended from outside); every pod that failed by itself exited with the same
    non-zero code (a bug); anything else.
    """
    if job is None:
        return UNSEEN
    full = [p for p in job.pods if p.phase == "Failed" and p.exit_code == EXIT_NO_ROOM]
    if full:
        cause = f"{_pods(full)} found no room to write a checkpoint or the model (exit code {EXIT_NO_ROOM})"
        verdict = "the checkpoint volume is full: neither a bug nor a node's fault, and a retry would fail the same way"
        return Failure("storage", cause, verdict=verdict, codes=(EXIT_NO_ROOM,), failed_ranks=len(full))
    not_ready = {node.name for node in observation.nodes if not node.ready}
    by_itself = [
        p
        for p in job.pods
        if p.phase == "Failed"
        and p.reason not in _COLLATERAL | _EXTERNAL | _NODE_FAULTS | _PREEMPTED.keys()
        and p.node not in not_ready
        and not _stopped(p)
    ]
    exits = {p.exit_code for p in by_itself}
    codes = tuple(sorted(code for code in exits if code is not None))
    ranks = len(by_itself)
    # A pod still being deleted on a NotReady node (its kubelet cannot confirm) is the same evidence.
    node_faults = [p for p in (*job.pods, *job.ending) if p.node and (p.reason in _NODE_FAULTS or p.node in not_ready)]
    if node_faults:
        bad = tuple(sorted({p.node for p in node_faults if p.node}))
        reasons = "/".join(sorted({p.reason or "Failed" for p in node_faults}))
        down = [node for node in bad if node in not_ready]
        state = f" ({', '.join(down)} NotReady)" if down else ""
        cause = f"{_pods(node_faults)} {reasons} on {', '.join(bad)}{state}"
        return Failure("node", cause, codes=codes, failed_ranks=ranks, bad_nodes=bad)
    preempted = [p for p in job.pods if p.reason in _PREEMPTED]
    if preempted:
        how = " and ".join(sorted({_PREEMPTED[p.reason or ""] for p in preempted}))
        # No exit codes: the ranks that failed with the preempted ones never make a repeated bug of it.
        return Failure("preempted", f"{_pods(preempted)} {how}", verdict="neither a bug nor a fault of its nodes")
    stalled = [p for p in by_itself if p.exit_code == EXIT_STALLED]
    if stalled:
        # No exit codes: hangs attempt after attempt are never the repeated bug that aborts a run.
        cause = f"{_pods(stalled)} made no progress until the watchdog ended them (hung, exit code {EXIT_STALLED})"
        return Failure("rank", cause, failed_ranks=ranks)
    gpu_faulty = _gpu_faults(job, observation)
    if ranks == 1 and (by_itself[0].reason == _OOM or by_itself[0].name in gpu_faulty):
        pod = by_itself[0]
        gpu = pod.name in gpu_faulty
        what = "hit a GPU error" if gpu else "ran out of memory"
        cause = f"only rank {pod.name} {what} (on {pod.node or 'an unknown node'})"
        bad = (pod.node,) if gpu and pod.node else ()
        return Failure("rank", cause, codes=codes, failed_ranks=ranks, bad_nodes=bad)
    external = [p for p in job.pods if p.reason in _EXTERNAL or _stopped(p)]
    if external:
        stopped = sum(map(_stopped, external))
        if stopped == len(external):
            how = "stopped on SIGTERM"
        else:
            how = "killed, lost or stopped on SIGTERM" if stopped else "killed or lost"
        cause = f"{_pods(external)} ended from outside the job ({how})"
        return Failure("external", cause, codes=codes, failed_ranks=ranks)
    if by_itself and len(exits) == 1 and None not in exits and 0 not in exits:
        who = "the one rank that failed by itself" if ranks == 1 else f"all {ranks} ranks that failed by themselves"
        return Failure(
            "bug",
            f"{who} exited with code {codes[0]}",
            verdict="it looks like a bug, but a first failure is retried once in case it was transient",
            codes=codes,
            failed_ranks=ranks,
        )
    detail = f" ({job.message})" if job.message else ""
    cause = f"job {job.name} ended {job.phase}{detail}"
    return Failure("other", cause, verdict="the cause is unclear", codes=codes, failed_ranks=ranks)


def attempt_record(observation: Observation) -> AttemptRecord | None:
    """How the observed failed attempt ended, as the next attempts' history keeps it (None: no job seen)."""
    job = observation.job
    if job is None:
        return None
    failure = classify_failure(job, observation)
    return AttemptRecord(
        attempt=observation.request.attempt,
        job=job.name,
        gpus=observation.request.gpus,
        outcome=job.phase,
        exit_codes=list(failure.codes),
        failed_ranks=failure.failed_ranks,
        ranks=len(job.pods),
        checkpoint_step=observation.checkpoint.step if observation.checkpoint else 0,
        nodes=list(failure.bad_nodes),
    )


def same_failure(previous: AttemptRecord, current: AttemptRecord) -> bool:
    """The same non-zero exit codes, no node blamed, and no progress in between (the same checkpoint step)."""
    return (
        bool(current.exit_codes)
        and previous.exit_codes == current.exit_codes
        and not previous.nodes
        and not current.nodes
        and previous.checkpoint_step == current.checkpoint_step
    )


def _gpu_faults(job: JobInfo, observation: Observation) -> set[str]:
    """Pods whose reason, or a Warning event about them, reports a GPU fault."""
    faulty = {p.name for p in job.pods if p.reason and _GPU_FAULT.search(p.reason)}
    for event in observation.events:
        kind, _, name = event.object.partition("/")
        if kind == "Pod" and event.type == "Warning" and _GPU_FAULT.search(f"{event.reason} {event.message}"):
            faulty.add(name)
    return faulty


def _stopped(pod: PodInfo) -> bool:
    """Whether the pod's trainer exited because it was told to stop (SIGTERM), not because it crashed."""
    return pod.phase == "Failed" and pod.exit_code == EXIT_STOPPED and pod.reason not in _COLLATERAL


def _pods(pods: Sequence[PodInfo]) -> str:
    names = [p.name for p in pods]
    return f"pod {names[0]}" if len(names) == 1 else f"pods {', '.join(names)}"
