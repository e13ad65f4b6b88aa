"""The rule policy: plan the size that finishes first, and retry an infrastructure fault but never a bug twice.

Pure: it reads the observation and nothing else, so replaying a recorded observation gives the same decision.
docs/agent.md explains the model: at plan time, for every GPU count the request allows in the target and the
fallback queue, finish = expected wait for the gang + remaining work ÷ throughput at that size; at diagnose
time, the failed pods' reasons and exit codes tell an infrastructure fault (retried from the latest complete
checkpoint, off the bad nodes, smaller when the healthy GPUs no longer suffice) from a deterministic failure
(aborted the second time it happens the same way) and from a full checkpoint volume (stopped at once: a retry would
fail the same way; the abort says how to continue from the latest complete checkpoint once there is room). What
the nodes and queues offer a gang is `agent.capacity`'s reading of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypedDict

from pydantic import BaseModel, ConfigDict, Field

from agent.actions import Abort, Action, Candidate, Downscale, Proceed, RetryFromCheckpoint, Wait
from agent.capacity import (
    Pool,
    QueueRoom,
    left_out,
    missing_priority_class,
    queue_rooms,
    remedy,
    say_gpus,
    usable_nodes,
    whole_pods,
)
from agent.failures import Failure, attempt_record, classify_failure, same_failure
from agent.observation import Observation, PlanRequest
from agent.policy import Decision, Stage
from agent.run_bands import band_for
from components.volcano.cluster import NodeInfo

__all__ = ["LLAMA3_NODE_MTBF_S", "RulePolicy", "RulesConfig", "allowed_sizes", "checkpoint_interval_s", "usable_nodes"]

# The published fault rate the checkpoint interval assumes unless told the cluster's own: Meta's Llama 3 405B
# pre-training saw 419 unexpected interruptions in 54 days on 16,384 GPUs (2,048 nodes of 8), about half of them
# GPU or HBM faults; each taken as one node fault, a node fails every ~264 days.
LLAMA3_INTERRUPTIONS, LLAMA3_DAYS, LLAMA3_NODES = 419, 54, 2048
LLAMA3_NODE_MTBF_S = LLAMA3_DAYS * LLAMA3_NODES / LLAMA3_INTERRUPTIONS * 86400.0


class _Shape(TypedDict):
    """The fields every training action shares."""

    gpus: int
    micro_batch: int
    grad_accum: int
    queue: str
    priority_class: str
    checkpoint_every: int


class RulesConfig(BaseModel):
    """The rule policy's assumptions; the defaults suit a modest cluster and are all overridable."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Fraction of per-GPU throughput kept at each doubling of the GPU count (communication overhead).
    scaling_efficiency: float = Field(default=0.9, gt=0, le=1)
    # Samples per second one GPU trains when nothing was measured yet.
    prior_samples_per_gpu_s: float = Field(default=1.0, gt=0)
    # How long, on average, a running job still holds its GPUs: how fast busy GPUs free up. 2 h, tuned on the
    # agent benchmark's Sep/Oct 2017 Philly windows (30 min predicted starts hours too early on a full queue).
    mean_remaining_s: float = Field(default=7200.0, gt=0)
    # How soon a Wait looks again (never later than the wait it expects).
    recheck_s: float = Field(default=60.0, gt=0)
    # How long planning may answer Wait in all before the best candidate is submitted anyway (the pipeline's
    # `max-plan-wait-s`, `agent.policies.plan_within`). A gang submitted while it must wait holds its place in
    # Volcano's queue, but commits the run to that size and queue; one that waits for something to start now
    # keeps every choice open. 24 h: the best mean on the agent benchmark's Sep/Oct 2017 windows (60 s cost 4.5%;
    # docs/agent-benchmark.md, "The plan's wait bound"). On a cluster with run bands the rules never wait
    # (`_ordered_by_length`), so this bounds only the LLM's Waits there.
    max_plan_wait_s: float = Field(default=86400.0, ge=0)
    # The start deadline of a submitted attempt (`start_deadline_s`): a gang still pending after this many times
    # the wait the plan expected for it is deleted and planned again (nothing ran, nothing is lost), ...
    # (1.5, 15 min, one re-plan: the best mean on the Sep/Oct 2017 windows of docs/agent-benchmark.md)
    start_deadline_factor: float = Field(default=1.5, gt=0)
    # ... but never sooner than this: a gang expected to start now still takes sessions and pod starts, ...
    start_deadline_min_s: float = Field(default=900.0, ge=0)
    # ... and at most this many times a run: after that it waits as long as its gang takes.
    max_replans: int = Field(default=1, ge=0)
    # Only for a borrower in the fallback queue, whose place in line every later owner's job takes; a gang in
    # the run's own queue keeps its place, which a re-plan would give up.
    start_deadline_fallback_only: bool = True
    # Mean time between unexpected faults of one node, for the checkpoint interval (`checkpoint_every`): Llama 3's
    # (`LLAMA3_NODE_MTBF_S`) unless set to the cluster's own.
    node_mtbf_s: float = Field(default=LLAMA3_NODE_MTBF_S, gt=0)
    # terminationGracePeriodSeconds of the training pods (the job builder's default): a checkpoint that fits in it
    # is written on SIGTERM, so a preempted or reclaimed run loses nothing the interval has to bound.
    sigterm_grace_s: float = Field(default=300.0, ge=0)
    # The share of training time checkpoint stalls may take so that a fault loses less (`checkpoint_every`): Young's
    # interval, which weighs time lost to faults and to stalls alike, is shortened to stall ÷ this share where
    # that is shorter; 0 keeps Young's. 2%: of 0, 2, 3 and 4%, one of those that met the most goals of the agent
    # benchmark on its Sep/Oct 2017 tuning windows, and of them the shortest time to finish (docs/agent-benchmark.md).
    checkpoint_stall_share: float = Field(default=0.02, ge=0, le=1)
    # Shortest run first: a gang in the run's own queue, when the run names no priority class, gets the cluster's
    # run band for its estimated training (`agent.run_bands`; nothing changes on a cluster without them).
    shortest_run_first: bool = True

    def start_deadline_s(self, action: Action, request: PlanRequest, replans: int) -> float:
        """How long the gang `action` submits may stay pending before the run re-plans; 0: no deadline.

        From the plan's own estimate of that gang's wait (its candidate), so a queue the plan knew to be long
        gets a long deadline; an action without that estimate (an LLM's) gets the floor.
        """
        if replans >= self.max_replans or not isinstance(action, Proceed | Downscale):
            return 0.0
        if self.start_deadline_fallback_only and action.queue == request.queue:
            return 0.0
        waits = [c.wait_s for c in action.candidates if (c.gpus, c.queue) == (action.gpus, action.queue)]
        return max(self.start_deadline_min_s, self.start_deadline_factor * (waits[0] if waits else 0.0))


def checkpoint_interval_s(save_s: float, mtbf_s: float) -> float:
    """Young's interval, sqrt(2 × save time × MTBF): the fewest seconds lost to saves and faults together.

    Young 1974; Daly 2006 refines it by a few percent for short MTBFs.
    """
    return math.sqrt(2 * save_s * mtbf_s)


def _borrow_now_only(candidates: list[Candidate], request: PlanRequest) -> list[Candidate]:
    """After a re-plan, a queue other than the run's own only where the gang starts now.

    A re-plan means a gang of this run did not start by its deadline, in a queue the plan expected it to start in
    soon: a borrowed one, unless `start_deadline_fallback_only` is off. A borrower waits behind every job of the
    queue's owner, those still to come included, so the estimate that sent it there proved wrong and a second wait
    there may have no end (on the Sep/Oct 2017 windows of docs/agent-benchmark.md, runs waited there until the
    horizon). The run's own queue, where a gang keeps its place in line, stays; so do the others where nothing of
    the own queue can ever run.
    """
    if not any(c.feasible and c.queue == request.queue for c in candidates):
        return candidates
    why = "a gang of this run already missed its start deadline: borrowing only where it starts now"
    return [
        c.model_copy(update={"feasible": False, "note": f"{c.note}; {why}"})
        if c.feasible and c.queue != request.queue and c.wait_s > 0
        else c
        for c in candidates
    ]


def allowed_sizes(request: PlanRequest) -> list[int]:
    """GPU counts from gpus_min to gpus in whole pods that split the global batch evenly, largest first."""
    return [
        n
        for n in range(request.gpus, request.gpus_min - 1, -1)
        if n % request.gpus_per_pod == 0 and request.global_batch % (n * request.micro_batch) == 0
    ]


class RulePolicy:
    """The `Policy` that decides by the rules of docs/agent.md; the LLM policy falls back to it."""

    name = "rules"

    def __init__(self, config: RulesConfig | None = None) -> None:
        self.config = config or RulesConfig()

    def decide(self, observation: Observation, stage: Stage) -> Decision:
        """Plan (Proceed, Downscale, Wait or Abort) or diagnose (RetryFromCheckpoint or Abort)."""
        action = self.plan(observation) if stage == "plan" else self.diagnose(observation)
        return Decision(stage=stage, policy=self.name, action=action, observation=observation)

    # ---- plan ------------------------------------------------------------------------------------------

    def plan(self, observation: Observation, *, may_wait: bool = True) -> Action:
        """The size and queue that finish first; Wait only when nothing can start now but something will.

        With `may_wait` False (the pipeline waited as long as it may) the best candidate is taken anyway.
        """
        request = observation.request
        if missing := missing_priority_class(observation):
            return Abort(reason=missing, rationale=f"{missing}; create it, or leave priority-class empty for none")
        if not observation.nodes:
            # The queues may still have been read: one Volcano's admission refuses is no place to send the job.
            rooms = queue_rooms(observation)
            refusals = [room.refusal for room in rooms if room.refusal]
            if len(refusals) == len(rooms):
                reason = f"no queue of the run takes jobs: {'; '.join(refusals)}"
                return Abort(reason=reason, rationale=f"{reason}; open the queue or name another one")
            queue = next(room.name for room in rooms if not room.refusal)
            seen = "; ".join(observation.notes) or "no nodes were observed"
            refused = f" ({'; '.join(refusals)})" if refusals else ""
            return Proceed(
                **_shape(request, request.gpus, queue),
                rationale=f"the cluster could not be observed ({seen}): training at {say_gpus(request.gpus)} asked "
                f"for in queue {queue}{refused} and letting Volcano queue it",
            )
        candidates = self.candidates(observation)
        feasible = [c for c in candidates if c.feasible]
        if not feasible:
            all_sizes = allowed_sizes(request.model_copy(update={"gpus_min": 1}))
            why = "; ".join(dict.fromkeys(c.note for c in candidates))
            if Pool.of(observation.nodes, request).never(candidates[-1].gpus):  # the nodes are short: say why
                why += _left_out(observation.nodes, request.avoid_nodes)
            return Abort(
                reason=f"no allowed size ({request.gpus_min}–{request.gpus} GPUs) can ever run: {why}",
                rationale=f"every candidate is impossible: {why}; {remedy(observation, all_sizes)}",
                candidates=candidates,
            )
        best = min(feasible, key=lambda c: (round(c.finish_s, 3), -c.gpus, c.queue != request.queue))
        situation = self._situation(observation)
        if may_wait and not self._ordered_by_length(observation) and all(c.wait_s > 0 for c in feasible):
            soonest = min(feasible, key=lambda c: c.wait_s)
            recheck = max(1.0, min(self.config.recheck_s, soonest.wait_s))
            reason = (
                f"nothing can start now ({situation}); the soonest, {say_gpus(soonest.gpus)} in queue {soonest.queue}, "
                f"should start in ~{_duration(soonest.wait_s)}"
            )
            return Wait(
                reason=reason,
                recheck_s=recheck,
                rationale=f"{reason}; looking again in {_duration(recheck)}",
                candidates=candidates,
            )
        rationale = f"{situation}; {self._comparison(best, candidates, request)}"
        if may_wait and best.wait_s > 0:  # only the run bands let the rules queue a gang that must wait
            rationale += "; queued now: the run bands start the queue's shorter runs first"
        if best.gpus < request.gpus:
            rationale += f" (grad-accum {best.grad_accum} keeps global batch {request.global_batch})"
            return Downscale(
                **self._shape(observation, best.gpus, best.queue),
                from_gpus=request.gpus,
                rationale=rationale,
                candidates=candidates,
            )
        return Proceed(**self._shape(observation, best.gpus, best.queue), rationale=rationale, candidates=candidates)

    def candidates(self, observation: Observation) -> list[Candidate]:
        """Every allowed size in the target queue, then in the fallback queue, with its estimated finish."""
        request = observation.request
        pool = Pool.of(observation.nodes, request)
        candidates = [
            self._estimate(observation, n, room, pool)
            for room in queue_rooms(observation)
            for n in allowed_sizes(request)
        ]
        return _borrow_now_only(candidates, request) if request.replans else candidates

    def run_s(self, observation: Observation, gpus: int) -> float:
        """Seconds to train what is left (from the latest checkpoint) on `gpus` GPUs."""
        request = observation.request
        work = max(0, request.max_steps - _done(observation)) * request.global_batch
        return work / self._samples_per_s(observation, gpus)

    def _samples_per_s(self, observation: Observation, gpus: int) -> float:
        measured = observation.throughput
        per_gpu = measured.samples_per_s / measured.gpus if measured else self.config.prior_samples_per_gpu_s
        at = measured.gpus if measured else 1
        return per_gpu * gpus * self.config.scaling_efficiency ** math.log2(gpus / at)

    def checkpoint_every(self, observation: Observation, gpus: int) -> int:
        """Steps between checkpoints at `gpus` GPUs (0: the run's own checkpoint-every); see docs/agent.md.

        Young's interval for the gang's fault rate and the measured stall (`checkpoint_interval_s`), or shorter:
        as often as `checkpoint_stall_share` of the training time allows (a trainer that stops only to copy the
        state to host memory checkpoints every few minutes for a 2% stall, and a fault then loses minutes, not
        hours); never shorter than a write (one at a time), at most the run's length. 0 when no save was measured,
        or when a checkpoint on SIGTERM (the write in flight, then a copy and its write) would not fit in the grace
        period: then a reclaim or preemption loses what the last periodic checkpoint does not hold, which the
        interval does not weigh. The gang's faults are those of the nodes it may span (one a pod at most):
        `node_mtbf_s` ÷ that many.
        """
        request, measured = observation.request, observation.throughput
        save_s = measured.checkpoint_save_s if measured else 0.0
        write_s = measured.checkpoint_write_s if measured else 0.0
        if save_s <= 0 or save_s + 2 * write_s > self.config.sigterm_grace_s:
            return 0
        nodes = max(1, min(gpus // request.gpus_per_pod, len(usable_nodes(observation.nodes, request.avoid_nodes))))
        interval_s = checkpoint_interval_s(save_s, self.config.node_mtbf_s / nodes)
        if share := self.config.checkpoint_stall_share:  # as often as the stalls' share allows, if more often
            interval_s = min(interval_s, save_s / share)
        interval_s = max(interval_s, write_s)  # one write at a time
        # One step's time, not what is left ÷ the steps left: a run whose checkpoint already holds every step
        # (it failed after its final save) has nothing left, and a step too fast to time checkpoints at the end.
        step_s = request.global_batch / self._samples_per_s(observation, gpus)
        if step_s <= 0:
            return request.max_steps
        return max(1, min(request.max_steps, math.ceil(interval_s / step_s)))

    def priority_class(self, observation: Observation, gpus: int, queue: str) -> str:
        """The PriorityClass of a gang of `gpus` in `queue`: the run's own, else its run band (`agent.run_bands`).

        A band only in the run's own queue: a borrower in the fallback queue stays below that queue's owner.
        """
        request = observation.request
        if request.priority_class or queue != request.queue or not self.config.shortest_run_first:
            return request.priority_class
        return band_for(self.run_s(observation, gpus), observation.run_bands)

    def _ordered_by_length(self, observation: Observation) -> bool:
        """Whether the run's gangs get run bands, so that Volcano's queue starts the shorter first.

        Then the rules never Wait: a gang queued at once holds its place among ours by its length, where one that
        waits outside the queue takes whatever room frees first, however long it trains (the Sep/Oct windows of
        docs/agent-benchmark.md: waiting cost 10% with the bands, where it saved 4.5% without them).
        """
        request = observation.request
        return self.config.shortest_run_first and not request.priority_class and bool(observation.run_bands)

    def _shape(self, observation: Observation, gpus: int, queue: str) -> _Shape:
        every = self.checkpoint_every(observation, gpus)
        return _shape(observation.request, gpus, queue, every, self.priority_class(observation, gpus, queue))

    def _estimate(self, observation: Observation, n: int, queue: QueueRoom, pool: Pool) -> Candidate:
        request = observation.request
        accum = request.global_batch // (n * request.micro_batch)
        run_s = self.run_s(observation, n)
        never = queue.never(n) or pool.never(n)
        if never:  # wait_s stays finite: JSON has no infinity, and a record must read back equal
            return Candidate(
                gpus=n, queue=queue.name, grad_accum=accum, wait_s=0, run_s=run_s, feasible=False, note=never
            )
        wait_s = queue.wait_s(n, pool, self.config.mean_remaining_s)
        note = f"{'starts now' if wait_s == 0 else f'waits ~{_duration(wait_s)}'}, trains ~{_duration(run_s)}"
        return Candidate(gpus=n, queue=queue.name, grad_accum=accum, wait_s=wait_s, run_s=run_s, note=note)

    def _situation(self, observation: Observation) -> str:
        request = observation.request
        queue = QueueRoom.of(request.queue, observation.queue, observation.nodes)
        facts = []
        if queue.ahead:
            facts.append(f"{say_gpus(queue.ahead)} pending ahead")
        if queue.capability is not None:
            facts.append(f"{queue.allocated:g} of its {queue.capability:g} GPUs allocated")
        if queue.tight:
            facts.append(queue.tight)
        free = Pool.of(observation.nodes, request).free
        queued = _join(facts or ["nothing pending ahead"])
        told = f"queue {request.queue} has {queued}"
        if request.queue in observation.missing_queues:
            told = f"queue {request.queue} does not exist on this cluster"
        told += f"; {say_gpus(free)} free on healthy nodes"
        return told + _left_out(observation.nodes, request.avoid_nodes)

    def _comparison(self, best: Candidate, candidates: Sequence[Candidate], request: PlanRequest) -> str:
        def where(c: Candidate) -> str:
            return "" if c.queue == request.queue else f" in queue {c.queue}"

        start = "now" if best.wait_s == 0 else f"after ~{_duration(best.wait_s)} waiting"
        told = f"{say_gpus(best.gpus)}{where(best)} {start} finishes in ~{_duration(best.finish_s)}"
        wanted = next(c for c in candidates if c.gpus == request.gpus and c.queue == request.queue)
        if wanted == best:
            runner_up = [c for c in candidates if c.feasible and c != best]
            if not runner_up:
                return told
            other = min(runner_up, key=lambda c: c.finish_s)
            return f"{told}, the fastest (next: {say_gpus(other.gpus)}{where(other)} in ~{_duration(other.finish_s)})"
        if not wanted.feasible:
            return f"{told}; {say_gpus(request.gpus)} can never run here: {wanted.note}"
        if wanted.wait_s > 0:
            return f"{told} vs ~{_duration(wanted.finish_s)} waiting for {request.gpus}"
        return f"{told} vs ~{_duration(wanted.finish_s)} at {request.gpus}"

    # ---- diagnose --------------------------------------------------------------------------------------

    def diagnose(self, observation: Observation) -> Action:
        """Retry a fault from the latest checkpoint off the bad nodes; abort a full disk or a bug seen twice."""
        request = observation.request
        failure = classify_failure(observation.job, observation)
        if failure.kind == "storage":
            reason = _storage_full(failure, observation)
            return Abort(reason=reason, rationale=reason)
        if failure.kind == "bug":
            previous = next((h for h in observation.history if h.attempt == request.attempt - 1), None)
            current = attempt_record(observation)
            if previous is not None and current is not None and same_failure(previous, current):
                reason = (
                    f"training fails deterministically: {failure.cause}, exactly as attempt {previous.attempt} did "
                    f"from the same checkpoint (step {current.checkpoint_step}); a retry would repeat it, so fix "
                    "the code or data and run again"
                )
                return Abort(reason=reason, rationale=reason)
        if request.attempt >= request.max_attempts:
            reason = (
                f"{failure.cause}, and attempt {request.attempt} of {request.max_attempts} was the last "
                "(max-recovery-attempts)"
            )
            return Abort(reason=reason, rationale=reason)
        return self._retry(observation, failure)

    def _retry(self, observation: Observation, failure: Failure) -> Action:
        request = observation.request
        if missing := missing_priority_class(observation):
            reason = f"{failure.cause}, and {missing}"
            return Abort(reason=reason, rationale=f"{reason}; create it, or leave priority-class empty, and run again")
        avoid = list(dict.fromkeys([*request.avoid_nodes, *failure.bad_nodes]))
        # The failed attempt's queue, unless the job (another run's, say) is in one the run does not name, or
        # Volcano's admission now refuses new jobs there (closed since): then the first of the run's that takes them.
        rooms = {room.name: room for room in queue_rooms(observation)}
        job = observation.job
        queue = job.queue if job and job.queue in rooms else request.queue
        queue_note = ""
        if refusal := rooms[queue].refusal:
            queue = next((name for name, room in rooms.items() if not room.refusal), "")
            if not queue:
                why = "; ".join(room.refusal for room in rooms.values())
                reason = f"{failure.cause}, and no queue of the run takes jobs: {why}"
                return Abort(reason=reason, rationale=f"{reason}; open the queue or name another one")
            queue_note = f" in queue {queue} ({refusal})"
        checkpoint = observation.checkpoint.path if observation.checkpoint else request.resume_checkpoint
        step = observation.checkpoint.step if observation.checkpoint else 0
        healthy = usable_nodes(observation.nodes, avoid)
        capacity = sum(whole_pods(node.gpu_allocatable, request.gpus_per_pod) for node in healthy)
        gpus, size_note = request.gpus, ""
        candidates: list[Candidate] = []
        if observation.nodes:
            for n in allowed_sizes(request):
                # The queue's limit as at plan: a gang above it is never admitted, however many GPUs are healthy.
                limit = rooms[queue].never(n)
                fits, fits_note = n <= capacity and not limit, "fits the healthy nodes"
                note = f"the healthy nodes offer only {say_gpus(capacity)}" if n > capacity else limit or fits_note
                candidates.append(
                    Candidate(
                        gpus=n,
                        queue=queue,
                        grad_accum=request.global_batch // (n * request.micro_batch),
                        wait_s=0,
                        run_s=self.run_s(observation, n),
                        feasible=fits,
                        note=note,
                    )
                )
            fitting = [c.gpus for c in candidates if c.feasible]
            offered = f"{say_gpus(capacity)}{_left_out(observation.nodes, ())}"
            if not fitting:
                smallest = candidates[-1].gpus
                if smallest > capacity:
                    short, then = f"the healthy nodes now offer only {offered}", "recover the nodes"
                else:
                    short, then = rooms[queue].never(smallest), rooms[queue].limit_fix
                reason = f"{failure.cause}, and {short}, fewer than gpus-min {request.gpus_min}"
                return Abort(reason=reason, rationale=f"{reason}; {then} and run again", candidates=candidates)
            if request.gpus not in fitting:
                gpus = fitting[0]
                short = f"the healthy nodes offer only {offered}"
                short = short if request.gpus > capacity else rooms[queue].never(request.gpus)
                size_note = (
                    f" at {say_gpus(gpus)} ({short}; grad-accum raised to keep global batch {request.global_batch})"
                )
        start = f"from step {step} ({checkpoint})" if checkpoint else "from scratch (no complete checkpoint)"
        off = f" off {', '.join(avoid)}" if avoid else ""
        rationale = f"{failure.cause}: {failure.verdict}; retrying {start}{off}{size_note}{queue_note}"
        return RetryFromCheckpoint(
            **self._shape(observation, gpus, queue),
            checkpoint=checkpoint,
            checkpoint_step=step,
            avoid_nodes=avoid,
            rationale=rationale,
            candidates=candidates,
        )


def _storage_full(failure: Failure, observation: Observation) -> str:
    """Why a run whose checkpoint volume is full stops, and how it continues once there is room."""
    checkpoint = observation.checkpoint
    path = checkpoint.path if checkpoint else observation.request.resume_checkpoint
    if not path:
        return f"{failure.cause}: {failure.verdict}; nothing was checkpointed yet: free space and run again"
    latest = f"step {checkpoint.step}, the latest complete checkpoint" if checkpoint else "the checkpoint it began at"
    volume = path.rstrip("/").rpartition("/")[0] or "/"  # the directory that holds step-N
    return (
        f"{failure.cause}: {failure.verdict}; free space on the volume of {volume}, then run "
        f"again from {latest}: -p resume-checkpoint={path}, the same parameters otherwise"
    )


# ---- helpers --------------------------------------------------------------------------------------------


def _shape(request: PlanRequest, gpus: int, queue: str, checkpoint_every: int = 0, priority_class: str = "") -> _Shape:
    return {
        "gpus": gpus,
        "micro_batch": request.micro_batch,
        "grad_accum": request.global_batch // (gpus * request.micro_batch),
        "queue": queue,
        "priority_class": priority_class or request.priority_class,
        "checkpoint_every": checkpoint_every,
    }


def _done(observation: Observation) -> int:
    """Steps the latest complete checkpoint holds."""
    return observation.checkpoint.step if observation.checkpoint else 0


def _left_out(nodes: Sequence[NodeInfo], avoid: Sequence[str], shown: int = 5) -> str:
    """` (left out: node-3 cordoned, node-5 NotReady)`: the GPU nodes a training pod cannot use; "" when none."""
    reasons = [f"{name} {why}" for name, why in left_out(nodes, avoid).items()]
    if not reasons:
        return ""
    more = f" and {len(reasons) - shown} more" if len(reasons) > shown else ""
    return f" (left out: {', '.join(reasons[:shown])}{more})"


def _join(parts: Sequence[str]) -> str:
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def _duration(seconds: float) -> str:
    """`45 s`, `12 min`, `2.1 h`: precise enough for a person comparing options."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
