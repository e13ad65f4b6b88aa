"""The rules the pipeline's deciding steps follow until the agent takes over: pure functions of typed inputs.

gate (train or not), plan (how to train), diagnose (retry or abort a failed attempt) and release (promote or
not) each call one function here; the workspace reports they read are modelled here too, as the contract with
the step programs in `components/` that write them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from components.volcano.cluster import JobInfo, NodeInfo, PodInfo
from pipelines.vcjobs import TrainingShape

__all__ = [
    "DetectReport",
    "EvaluationReport",
    "GateDecision",
    "LoadtestReport",
    "Recovery",
    "ReleaseDecision",
    "decide_gate",
    "decide_release",
    "decide_training",
    "diagnose_failure",
]

# Pod reasons that say the node failed the job, and pod reasons that say something outside the job ended it.
_NODE_FAULTS = frozenset({"Evicted", "NodeLost"})
_POD_FAULTS = frozenset({"Killed", "Lost", "OOMKilled"})
# Pods the job controller killed because another pod failed: they say nothing about the cause.
_COLLATERAL = frozenset({"Terminated"})


class _Report(BaseModel):
    model_config = ConfigDict(extra="allow")


class DetectReport(_Report):
    """What `components.logs` writes: whether the service drifted, and why."""

    drift: bool
    reason: str = ""


class LoadtestReport(_Report):
    """What the loadtest client writes: latency percentiles against the candidate's server."""

    ttft_p95_ms: float
    tpot_p95_ms: float
    errors: int = 0


class EvaluationReport(_Report):
    """What `components.evaluate` writes: candidate and champion scores (None: no champion yet); higher wins."""

    candidate_score: float
    champion_score: float | None = None
    metric: str = "score"


class _Decision(BaseModel):
    model_config = ConfigDict(frozen=True)


class GateDecision(_Decision):
    """Whether this run fine-tunes, and why."""

    trigger: bool
    reason: str


class Recovery(_Decision):
    """What a failed training attempt calls for: retry (from a checkpoint, off some nodes) or abort."""

    action: Literal["retry", "abort"]
    next_attempt: int
    avoid_nodes: list[str]
    resume_checkpoint: str
    reason: str


class ReleaseDecision(_Decision):
    """Whether the candidate becomes the champion, and why."""

    released: bool
    reason: str


def decide_gate(mode: str, report: DetectReport | None) -> GateDecision:
    """Mode force always trains; dry-run never does, after saying what auto would do; auto follows the drift."""
    if mode == "force":
        return GateDecision(trigger=True, reason="mode is force: fine-tuning whatever the logs say")
    if report is None:
        raise ValueError(f"mode {mode} needs the detect report, and there is none")
    finding = (
        f"the logs show drift ({report.reason or 'no reason given'})" if report.drift else "the logs show no drift"
    )
    if mode == "dry-run":
        action = "fine-tune" if report.drift else "do nothing"
        return GateDecision(trigger=False, reason=f"dry-run: {finding}, so auto mode would {action}")
    return GateDecision(trigger=report.drift, reason=finding)


def decide_training(
    *,
    attempt: int,
    gpus: int,
    gpus_min: int,
    gpus_per_pod: int,
    global_batch: int,
    micro_batch: int,
    queue: str,
    avoid_nodes: Sequence[str] = (),
    resume_checkpoint: str = "",
) -> TrainingShape:
    """Train on the GPUs asked for, with the gradient accumulation that keeps the global batch.

    global batch = gpus × micro-batch × grad-accum, so a retry on fewer GPUs trains the same model.
    """
    if gpus < gpus_min:
        raise ValueError(f"gpus {gpus} is below gpus-min {gpus_min}; ask for at least {gpus_min}")
    if gpus % gpus_per_pod:
        raise ValueError(f"gpus {gpus} is not a multiple of gpus-per-pod {gpus_per_pod}; every pod gets the same")
    if global_batch % (gpus * micro_batch):
        raise ValueError(
            f"global-batch {global_batch} is not a multiple of gpus × micro-batch = {gpus} × {micro_batch}; "
            "change micro-batch or global-batch so that gradient accumulation is a whole number"
        )
    return TrainingShape(
        attempt=attempt,
        gpus=gpus,
        gpus_per_pod=gpus_per_pod,
        micro_batch=micro_batch,
        grad_accum=global_batch // (gpus * micro_batch),
        global_batch=global_batch,
        queue=queue,
        avoid_nodes=list(avoid_nodes),
        resume_checkpoint=resume_checkpoint,
    )


def diagnose_failure(
    job: JobInfo | None,
    nodes: Sequence[NodeInfo],
    *,
    attempt: int,
    max_attempts: int,
    avoid_nodes: Sequence[str] = (),
    checkpoint: str = "",
) -> Recovery:
    """Decide what a failed attempt calls for: an infrastructure fault is retried, a code failure is not.

    - pods Evicted or NodeLost, or on a node that is NotReady: retry, keeping off those nodes;
    - pods Killed or Lost (something outside the job ended them): retry anywhere;
    - every pod that failed by itself (not one the controller killed after it) exited with the same non-zero
      code: abort, a retry would fail the same way;
    - anything else (mixed exit codes, a job nobody can see): retry, the attempt budget bounds it;
    - whatever the cause, no retry once `attempt` reaches `max_attempts`.
    """
    avoid = list(dict.fromkeys(avoid_nodes))
    retry, cause = True, "the job could not be inspected"
    if job is not None:
        not_ready = {node.name for node in nodes if not node.ready}
        node_faults = [p for p in job.pods if p.node and (p.reason in _NODE_FAULTS or p.node in not_ready)]
        pod_faults = [p for p in job.pods if p.reason in _POD_FAULTS]
        failed = [p for p in job.pods if p.phase == "Failed" and p.reason not in _COLLATERAL]
        codes = {p.exit_code for p in failed}
        if node_faults:
            bad = sorted({p.node for p in node_faults if p.node})
            avoid += [node for node in bad if node not in avoid]
            cause = f"{_pods(node_faults)} on node {', '.join(bad)}"
        elif pod_faults:
            cause = f"{_pods(pod_faults)}, ended from outside the job"
        elif failed and len(codes) == 1 and None not in codes and 0 not in codes:
            retry, cause = False, f"every pod that failed exited with code {codes.pop()}, which a retry would repeat"
        else:
            cause = f"job {job.name} ended {job.phase}" + (f" ({job.message})" if job.message else "")
    if retry and attempt >= max_attempts:
        retry, cause = False, f"{cause}, and attempt {attempt} of {max_attempts} was the last"
    if retry:
        reason = f"retry from {checkpoint if checkpoint else 'scratch'}: {cause}"
    else:
        reason = f"abort: {cause}"
    return Recovery(
        action="retry" if retry else "abort",
        next_attempt=attempt + 1,
        avoid_nodes=avoid,
        resume_checkpoint=checkpoint,
        reason=reason,
    )


def decide_release(
    loadtest: LoadtestReport, evaluation: EvaluationReport, *, slo_ttft_ms: float, slo_tpot_ms: float, margin: float
) -> ReleaseDecision:
    """Promote only a candidate that meets both latency SLOs and beats the champion by at least `margin`."""
    if loadtest.errors:
        return ReleaseDecision(released=False, reason=f"{loadtest.errors} load-test requests failed")
    for name, measured, slo in (
        ("TTFT", loadtest.ttft_p95_ms, slo_ttft_ms),
        ("TPOT", loadtest.tpot_p95_ms, slo_tpot_ms),
    ):
        if measured > slo:
            return ReleaseDecision(released=False, reason=f"p95 {name} {measured:g} ms is over its SLO of {slo:g} ms")
    metric, candidate, champion = evaluation.metric, evaluation.candidate_score, evaluation.champion_score
    if champion is None:
        return ReleaseDecision(released=True, reason=f"no champion yet; the candidate's {metric} is {candidate:g}")
    if candidate < champion + margin:
        return ReleaseDecision(
            released=False, reason=f"the candidate's {metric} {candidate:g} does not beat {champion:g} by {margin:g}"
        )
    return ReleaseDecision(released=True, reason=f"the candidate's {metric} {candidate:g} beats {champion:g}")


def _pods(pods: Sequence[PodInfo]) -> str:
    """`pod a (Evicted), pod b (NotReady node)` — who failed and how."""
    return ", ".join(f"pod {p.name} ({p.reason or 'NotReady node'})" for p in pods)
