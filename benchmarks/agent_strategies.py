"""How each strategy of the agent benchmark lives through one fine-tuning request, attempt by attempt.

(a) `wait_full`, (b) `argo_retry`, (c) `volcano_ckpt` and (d) `elastic` are what a pipeline without the agent
does; (e) `rules` and (f) `llm` ask a `Policy` at plan and diagnose time, from an `Observation` built the way
`agent.observe` builds one from a real cluster. Progress, GPU time used, GPU time thrown away by failures and
reclaims, and the time checkpoints and restarts cost (`Costs`) are accounted here.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml

from agent.actions import Abort, Downscale, Proceed, RetryFromCheckpoint, Wait
from agent.failures import attempt_record
from agent.observation import AttemptRecord, CheckpointInfo, Observation, PlanRequest, Throughput
from agent.policy import Policy
from agent.policy_rules import RulePolicy, RulesConfig
from agent.run_bands import run_bands
from benchmarks.agent_sim import SimJob, Simulation
from benchmarks.agent_trace import FALLBACK_QUEUE, TARGET_QUEUE, Request
from components.volcano.cluster import Event, JobInfo, PodInfo
from components.volcano.resources import GPU

__all__ = [
    "ArgoRetry",
    "Costs",
    "Elastic",
    "Outcome",
    "Rules",
    "Training",
    "VolcanoCheckpoint",
    "WaitFull",
    "samples_per_s",
]

MAX_ATTEMPTS = 4  # Volcano's default maxRetry is 3 restarts; Argo's retryStrategy limit 3; the request's budget 4
STEP_S = 30.0  # an Argo script step (plan, diagnose): pod start and a few API calls
ARGO_BACKOFF_S = 60.0  # retryStrategy.backoff: duration 1m, factor 2
DEPLOY_CLASSES = Path(__file__).resolve().parents[1] / "deploy/volcano/priorityclasses.yaml"
# Measured with `benchmarks/train.py --rounds 1 --steps 8` (2026-12-01, the 2-core development machine, local disk):
# our Checkpointer saved the `small` model's 50.7 MB checkpoint (4.2 M parameters) in 52 ms and loaded it in 58 ms.
CHECKPOINT_BYTES_PER_PARAM, WEIGHT_BYTES_PER_PARAM = 12, 4
SAVE_BYTES_PER_S, LOAD_BYTES_PER_S = 971e6, 878e6
# The trainer's snapshot of that state to host memory, all a periodic checkpoint stops training for (the write goes
# on beside it), into the buffers of the snapshot before: `snapshot_7b_layer` of the same command, a 7 B decoder
# layer's fp32 weights and AdamW state (2.4 GB), 7,017 and 6,983 MB/s (2026-12-07, idle); per byte the `small`
# model's smaller tensors copy slower (4.6-5.2 GB/s), their fixed costs a larger part.
SNAPSHOT_BYTES_PER_S = 7.0e9
POD_START_S = 60.0  # scheduling to first step, before any loading: pod start, image cached, NCCL init
MODEL_PARAMS = 7e9  # what the benchmark's requests fine-tune: a 7 B model, fully (not LoRA)
BORROWER_PRIORITY = -1  # a run in the fallback queue has a lower PriorityClass than the queue owner's jobs


@dataclass(frozen=True)
class Costs:
    """What checkpoints and restarts cost, in seconds of the whole gang's time (`Costs.for_model` derives them)."""

    save_s: float = 0.0  # training stops while rank 0 copies the state to host memory (a synchronous trainer: writes)
    write_s: float = 0.0  # then rank 0 writes that copy beside training: the checkpoint is complete this much later
    resume_s: float = 0.0  # an attempt from a checkpoint: pod start, base model and checkpoint loaded
    scratch_s: float = 0.0  # an attempt from step 0: pod start and base model loaded
    grace_s: float = 300.0  # terminationGracePeriodSeconds (the job builder's default): time to save on SIGTERM

    @classmethod
    def for_model(cls, params: float) -> Costs:
        """The costs for a full fine-tune of `params` parameters, scaled from our trainer's measured checkpoint.

        A checkpoint holds 12 bytes a parameter (fp32 weights and AdamW's two moments, as our Checkpointer writes
        them); training stops while they are copied to host memory and the write goes on beside it; a fresh
        attempt loads the fp32 base weights (4 bytes a parameter); all at the measured speeds.
        """
        return cls(
            save_s=CHECKPOINT_BYTES_PER_PARAM * params / SNAPSHOT_BYTES_PER_S,
            write_s=CHECKPOINT_BYTES_PER_PARAM * params / SAVE_BYTES_PER_S,
            resume_s=POD_START_S + CHECKPOINT_BYTES_PER_PARAM * params / LOAD_BYTES_PER_S,
            scratch_s=POD_START_S + WEIGHT_BYTES_PER_PARAM * params / LOAD_BYTES_PER_S,
        )

    def stall_s(self, every_s: float) -> float:
        """Seconds training stops for each checkpoint taken every `every_s` seconds of training: the copy, and the
        wait for the write before it where that write outlasts the interval (one write at a time)."""
        return self.save_s + max(0.0, self.write_s - every_s)

    @property
    def sigterm_s(self) -> float:
        """The longest a checkpoint on SIGTERM takes: the write in flight, then the copy and its write, waited for."""
        return self.save_s + 2 * self.write_s


def samples_per_s(per_gpu: float, gpus: int, efficiency: float) -> float:
    """Training speed on `gpus` GPUs: each doubling of the GPUs keeps `efficiency` of the ideal speed-up."""
    return per_gpu * gpus * efficiency ** math.log2(gpus)


@dataclass
class Outcome:
    """What happened to one request under one strategy."""

    name: str
    arrival_s: float
    gpus: int  # asked for
    status: str = "unfinished"  # finished, aborted, unfinished (the horizon came first)
    end_s: float = 0.0
    first_start_s: float | None = None
    attempts: int = 0
    failures: int = 0
    gpu_s_used: float = 0.0
    gpu_s_lost: float = 0.0
    shapes: list[tuple[int, str]] = field(default_factory=list)  # (GPUs, queue) of each attempt that ran
    batches: list[int] = field(default_factory=list)  # the global batch each attempt that ran trained with
    reclaims: int = 0
    changed_batches: int = 0  # attempts that trained with another global batch than the request's
    gpu_s_overhead: float = 0.0  # of the GPU time used: restarts and checkpoint writes
    reason: str = ""


class Training:
    """One request's life under a strategy; subclasses choose each attempt's shape and what a failure leads to."""

    checkpoints = False  # whether attempts write (and pay for) checkpoints that a later attempt may resume from
    sigterm_checkpoint = False  # whether a reclaimed attempt checkpoints in its grace period (issue 7's trainer)

    def __init__(self, sim: Simulation, request: Request, efficiency: float, costs: Costs) -> None:
        self.sim, self.request, self.efficiency, self.costs = sim, request, efficiency, costs
        self.out = Outcome(request.name, request.arrival_s, request.gpus)
        self.steps_done = 0  # durable progress: what the next attempt starts from
        self.checkpoint_step = 0  # the latest complete checkpoint when the last attempt died
        self.batch = request.global_batch  # the global batch of the attempt launched last
        self._startup = 0.0  # the running attempt's startup_s
        self.every_s = request.checkpoint_every_s  # the running attempt's seconds of training between checkpoints
        sim.at(request.arrival_s, self.begin)

    def begin(self) -> None:
        """The request arrives; the first attempt is planned."""
        self.sim.at(self.sim.now + STEP_S, lambda: self.launch(self.request.gpus, TARGET_QUEUE))

    def launch(self, gpus: int, queue: str, avoid: tuple[str, ...] = (), priority_class: str = "") -> None:
        """Submit the next attempt as a new VCJob of `gpus` one-GPU pods (a borrower in the fallback queue)."""
        self.out.attempts += 1
        borrower = queue == FALLBACK_QUEUE
        priority, preempts = priority_classes().get(priority_class, (0, True))
        job = SimJob(
            key=f"default/{self.request.name}-{self.out.attempts}",
            queue=queue,
            pods=gpus,
            gpus_per_pod=1,
            priority=BORROWER_PRIORITY if borrower else priority,
            avoid_nodes=avoid,
            on_start=self._started,
            on_lost=self._lost,
            reclaimable=borrower,
            on_reclaimed=self._reclaimed,
            preempts=preempts,
        )
        self.sim.submit(job)

    def steps_per_s(self, gpus: int) -> float:
        """The true speed of this request at `gpus` GPUs, in optimizer steps of the request's global batch."""
        return samples_per_s(self.request.per_gpu_samples_per_s, gpus, self.efficiency) / self.request.global_batch

    def startup_s(self) -> float:
        """Seconds the attempt starting now spends before its first step."""
        return self.costs.resume_s if self.steps_done else self.costs.scratch_s

    def _started(self, job: SimJob) -> None:
        if self.out.first_start_s is None:
            self.out.first_start_s = self.sim.now
        self.out.shapes.append((job.gpus, job.queue))
        self.out.batches.append(self.batch)
        self.out.changed_batches += self.batch != self.request.global_batch
        self._startup = self.startup_s()
        run = job.run
        end = self.sim.now + self._startup + self.training_s(job.gpus)
        self.sim.at(end, lambda: self._completed(job, run))

    def training_s(self, gpus: int) -> float:
        """Seconds from the first step to the last on `gpus` GPUs, the checkpoint writes on the way included."""
        train_s = (self.request.max_steps - self.steps_done) / self.steps_per_s(gpus)
        saves = math.floor(train_s / self.every_s) if self.checkpoints else 0
        return train_s + saves * self.costs.stall_s(self.every_s)

    def progress_s(self, elapsed: float, *, write_finished: bool = False) -> tuple[float, float, float]:
        """Of a run `elapsed` seconds old: seconds trained, seconds trained that a complete checkpoint holds, and
        when (seconds into the run) the copy it was written from was taken: GPU time after that is lost.

        A checkpoint is complete once its write, `Costs.write_s` after the copy, is; a run that dies during a
        write falls back to the one before, unless `write_finished`: the writer outlived the run's end."""
        every = self.every_s
        cycle = every + self.costs.stall_s(every)
        training = max(0.0, elapsed - self._startup)
        if not self.checkpoints:
            return training, 0.0, 0.0
        copied = math.floor(training / cycle)
        trained = copied * every + min(training - copied * cycle, every)
        complete = copied if write_finished else max(0, math.floor((training - self.costs.write_s) / cycle))
        return trained, complete * every, (self._startup + complete * cycle) if complete else 0.0

    def _completed(self, job: SimJob, run: int) -> None:
        if job.run != run or job.phase != "Running":
            return  # that run died before it could finish
        elapsed = self.sim.now - job.started_s
        self._account(job, elapsed, elapsed)
        self.sim.finish(job)
        self.steps_done = self.request.max_steps
        self.end("finished")

    def _account(self, job: SimJob, held_s: float, kept_s: float) -> None:
        """Add one ended run: GPUs held `held_s`, of which `kept_s` went into work that survives it."""
        trained, _, _ = self.progress_s(held_s)
        self.out.gpu_s_used += job.gpus * held_s
        self.out.gpu_s_lost += job.gpus * (held_s - kept_s)
        self.out.gpu_s_overhead += job.gpus * max(0.0, held_s - trained)

    def _lost(self, job: SimJob, node: str) -> None:
        elapsed = self.sim.now - job.started_s
        # Rank 0 (pod 0) writes the checkpoints. Where its node lives, the write in flight is finished before its
        # process ends: the trainer waits for it when the dead peer fails a collective, and the job's kill gives it
        # the grace period (tests/integration/finetune/test_finetune_recovery.py). Where it died, so did the copy.
        finished = node != job.nodes[0] and self.costs.write_s <= self.costs.grace_s
        _, kept, kept_at = self.progress_s(elapsed, write_finished=finished)
        self.out.failures += 1
        self._account(job, elapsed, kept_at)
        self.checkpoint_step = self.steps_done + int(kept * self.steps_per_s(job.gpus))
        self.recover(job, node)

    def _reclaimed(self, job: SimJob) -> None:
        """The owner took the GPUs back: SIGTERM, then the grace period; a checkpoint there keeps all the work."""
        elapsed = self.sim.now - job.started_s
        trained, kept, kept_at = self.progress_s(elapsed)
        self.out.reclaims += 1
        if self.sigterm_checkpoint and self.checkpoints and self.costs.sigterm_s <= self.costs.grace_s:
            saved = elapsed + self.costs.save_s + self.costs.write_s
            self._account(job, saved, saved)
            kept = trained
        else:
            self._account(job, elapsed, kept_at)
        self.checkpoint_step = self.steps_done + int(kept * self.steps_per_s(job.gpus))
        self.recover(job, "")

    def recover(self, job: SimJob, node: str) -> None:
        """What a strategy does once a node failure (or, with `node` empty, a reclaim) ended `job`."""
        raise NotImplementedError

    def end(self, status: str, reason: str = "") -> None:
        """The request is finished or given up, now."""
        self.out.status, self.out.end_s, self.out.reason = status, self.sim.now, reason


class WaitFull(Training):
    """(a) The full GPUs or nothing; a failure restarts the same job from step 0, keeping its place in line."""

    def recover(self, job: SimJob, node: str) -> None:
        """Volcano's RestartJob, until maxRetry is spent."""
        if self.out.attempts >= MAX_ATTEMPTS:
            self.end("aborted", f"maxRetry reached after {self.out.attempts} attempts")
            return
        self.out.attempts += 1
        self.steps_done = self.checkpoint_step if self.checkpoints else 0
        self.sim.submit(job, keep_order=True)


class VolcanoCheckpoint(WaitFull):
    """(c) Volcano plus checkpointing: the full GPUs; RestartJob resumes from the latest checkpoint, same size."""

    checkpoints = True


class ArgoRetry(Training):
    """(b) Argo's retryStrategy: the failed step is run again, the same full-size job from step 0, after a backoff."""

    def recover(self, job: SimJob, node: str) -> None:
        """Resubmit after `duration × factor^(retry-1)`, until the limit is spent."""
        if self.out.attempts >= MAX_ATTEMPTS:
            self.end("aborted", f"retryStrategy limit reached after {self.out.attempts} attempts")
            return
        self.steps_done = 0
        backoff = ARGO_BACKOFF_S * 2 ** (self.out.attempts - 1)
        self.sim.at(self.sim.now + backoff, lambda: self.launch(self.request.gpus, TARGET_QUEUE))


class Elastic(Training):
    """(d) Elastic without batch care: each attempt takes the GPUs free now, at the same micro-batch and
    accumulation, so the global batch shrinks with it (Kueue's partial admission); resumes from checkpoints."""

    checkpoints = True

    def begin(self) -> None:
        """The first attempt is sized when its plan step has run."""
        self.sim.at(self.sim.now + STEP_S, self.launch_free)

    def launch_free(self) -> None:
        """The most GPUs (up to the request's) free now on ready nodes and in the queue's room; fewer than the
        request's floor free means the full size is submitted and waits."""
        req = self.request
        free = sum(n.gpu_allocatable - n.gpu_allocated for n in self.sim.node_infos() if n.ready)
        snapshot = self.sim.queue_snapshot(TARGET_QUEUE)
        room = snapshot.capability.get(GPU, math.inf) - snapshot.allocated.get(GPU, 0.0)
        gpus = int(min(req.gpus, free, room))
        gpus = gpus if gpus >= req.gpus_min else req.gpus
        accum = req.global_batch // (req.gpus * req.micro_batch)
        self.batch = gpus * req.micro_batch * accum
        self.launch(gpus, TARGET_QUEUE)

    def recover(self, job: SimJob, node: str) -> None:
        """Resubmit from the latest checkpoint at whatever is free then, until the budget is spent."""
        if self.out.attempts >= MAX_ATTEMPTS:
            self.end("aborted", f"retry limit reached after {self.out.attempts} attempts")
            return
        self.steps_done = self.checkpoint_step
        self.sim.at(self.sim.now + STEP_S, self.launch_free)


class Rules(Training):
    """(e) The agent, (f) through the LLM policy: plan and diagnose decided by a policy over what `agent.observe`
    would see; the trainer checkpoints periodically and on SIGTERM."""

    checkpoints = True
    sigterm_checkpoint = True

    def __init__(
        self,
        sim: Simulation,
        request: Request,
        efficiency: float,
        costs: Costs,
        policy: Policy,
        config: RulesConfig | None = None,
    ) -> None:
        super().__init__(sim, request, efficiency, costs)
        self.policy = policy
        self.config = config or RulesConfig()  # its start deadline and wait bound, as the plan step reads them
        self.planning_since: float | None = None  # when the plan step now running began (it may Wait a while)
        self.replans = 0  # attempts deleted at their start deadline: neither failures nor in the retry budget
        self.avoid: list[str] = []
        self.resume = ""
        self.history: list[AttemptRecord] = []
        self.kinds: Counter[str] = Counter()

    def begin(self) -> None:
        """The plan step runs first."""
        self.sim.at(self.sim.now + STEP_S, self.plan)

    def plan(self) -> None:
        """Ask the policy how to train now; a Wait asks again later, for at most `max_plan_wait_s` in all, then the
        rules take the best candidate anyway: the plan step's `agent.policies.plan_within`."""
        if self.planning_since is None:
            self.planning_since = self.sim.now
        observation = self.observe()
        action = self.policy.decide(observation, "plan").action
        if isinstance(action, Wait):
            deadline = self.planning_since + self.config.max_plan_wait_s  # absolute: the clock is the trace's epoch
            if self.sim.now < deadline:
                self.kinds[action.kind] += 1
                self.sim.at(min(self.sim.now + action.recheck_s, deadline), self.plan)
                return
            rules = self.policy if isinstance(self.policy, RulePolicy) else RulePolicy(self.config)
            action = rules.plan(observation, may_wait=False)
            self.kinds["waited_out"] += 1
        self.planning_since = None
        self.kinds[action.kind] += 1
        if isinstance(action, Proceed | Downscale):
            self.batch = action.global_batch
            # The training job's checkpoint-every: the policy's steps (at this size's speed), else the request's.
            every = action.checkpoint_every / self.steps_per_s(action.gpus)
            self.every_s = every or self.request.checkpoint_every_s
            self.launch(action.gpus, action.queue, tuple(self.avoid), action.priority_class)
            deadline_s = self.config.start_deadline_s(action, observation.request, self.replans)
            if deadline_s:
                job = self.sim.jobs[f"default/{self.request.name}-{self.out.attempts}"]
                self.sim.at(self.sim.now + deadline_s, lambda: self.start_deadline(job))
        elif isinstance(action, Abort):
            self.end("aborted", action.reason)
        else:
            raise RuntimeError(f"the policy answered {action.kind} at plan time")

    def start_deadline(self, job: SimJob) -> None:
        """The pipeline's start-deadline step: a gang that never started is deleted, then diagnose, then plan."""
        if job.run or job.key not in self.sim.jobs:
            return  # it started (and may have ended since): the deadline is for pending gangs only
        self.sim.delete(job)
        self.replans += 1
        self.kinds["replan"] += 1
        self.sim.at(self.sim.now + 2 * STEP_S, self.plan)

    def recover(self, job: SimJob, node: str) -> None:
        """The diagnose step looks at the dead job; a retry goes back through plan (the recursive DAG)."""
        self.sim.at(self.sim.now + STEP_S, lambda: self.diagnose(job, node))

    def diagnose(self, job: SimJob, node: str) -> None:
        """Ask the policy whether and from where to retry."""
        observation = self.observe(job, node)
        action = self.policy.decide(observation, "diagnose").action
        self.kinds[action.kind] += 1
        record = attempt_record(observation)
        if record is not None:  # what the decision record keeps for the next diagnose
            self.history.append(record)
        if isinstance(action, RetryFromCheckpoint):
            self.avoid = list(action.avoid_nodes)
            self.resume = action.checkpoint
            self.steps_done = action.checkpoint_step if action.checkpoint else 0
            self.sim.at(self.sim.now + STEP_S, self.plan)
        elif isinstance(action, Abort):
            self.end("aborted", action.reason)
        else:
            raise RuntimeError(f"the policy answered {action.kind} at diagnose time")

    def observe(self, job: SimJob | None = None, node: str = "") -> Observation:
        """What `agent.observe` would read from the cluster, the workspace and MLflow right now."""
        req, now = self.request, self.sim.now
        request = PlanRequest(
            gpus=req.gpus,
            gpus_min=req.gpus_min,
            gpus_per_pod=1,
            global_batch=req.global_batch,
            micro_batch=req.micro_batch,
            queue=TARGET_QUEUE,
            fallback_queue=FALLBACK_QUEUE,
            max_steps=req.max_steps,
            attempt=self.out.attempts + (0 if job else 1),
            max_attempts=MAX_ATTEMPTS + self.replans,
            avoid_nodes=self.avoid,
            resume_checkpoint=self.resume,
            replans=self.replans,
        )
        if self.out.shapes:  # MLflow has this run's own measurement at the size it last ran
            gpus = self.out.shapes[-1][0]
            speed, at = self.steps_per_s(gpus) * req.global_batch, gpus
        else:  # the last run of this model, at the full size
            speed, at = samples_per_s(req.measured_samples_per_s, req.gpus, self.efficiency), req.gpus
        # MLflow also has the trainer's checkpoint stalls and writes, of this model on this storage.
        throughput = Throughput(
            samples_per_s=speed,
            gpus=at,
            source="mlflow",
            checkpoint_save_s=self.costs.save_s,
            checkpoint_write_s=self.costs.write_s,
        )
        step = self.checkpoint_step if job else self.steps_done
        checkpoint = CheckpointInfo(path=f"/workspace/{req.name}/checkpoints/step-{step}", step=step) if step else None
        info = _failed_job(job, node) if job else None
        events = _evicted(info, node, now) if info else []
        return Observation(
            time=now,
            request=request,
            queue=self.sim.queue_snapshot(TARGET_QUEUE),
            fallback_queue=self.sim.queue_snapshot(FALLBACK_QUEUE),
            nodes=self.sim.node_infos(),
            job=info,
            events=events,
            history=list(self.history),
            checkpoint=checkpoint,
            throughput=throughput,
            run_bands=run_bands(priority_classes()),
        )


def _failed_job(job: SimJob, node: str) -> JobInfo:
    """The dead attempt as LocalCluster reports it: pods on the node Evicted, the others killed by the job policy;
    with no `node`, every pod Reclaimed by the queue's owner."""
    name = job.key.split("/", 1)[1]
    if not node:
        return JobInfo(
            name=name,
            uid=f"uid-{name}",
            queue=job.queue,
            phase="Failed",
            min_available=job.pods,
            pods=[
                PodInfo(
                    name=f"{name}-{'master' if i == 0 else 'worker'}-{0 if i == 0 else i - 1}",
                    task="master" if i == 0 else "worker",
                    index=0 if i == 0 else i - 1,
                    node=pod_node,
                    phase="Failed",
                    reason="Reclaimed",
                    gpus=job.gpus_per_pod,
                )
                for i, pod_node in enumerate(job.nodes)
            ],
            podgroup_phase="Completed",
            reason="PodEvicted",
            message=f"pods reclaimed: queue {job.queue}'s owner took its GPUs back",
        )
    pods = [
        PodInfo(
            name=f"{name}-{'master' if i == 0 else 'worker'}-{0 if i == 0 else i - 1}",
            task="master" if i == 0 else "worker",
            index=0 if i == 0 else i - 1,
            node=pod_node,
            phase="Failed",
            reason="Evicted" if pod_node == node else "Terminated",
            exit_code=None if pod_node == node else 137,
            gpus=job.gpus_per_pod,
        )
        for i, pod_node in enumerate(job.nodes)
    ]
    return JobInfo(
        name=name,
        uid=f"uid-{name}",
        queue=job.queue,
        phase="Failed",
        min_available=job.pods,
        pods=pods,
        podgroup_phase="Completed",
        reason="PodEvicted",
        message=f"pods evicted: node {node} is NotReady",
    )


def _evicted(info: JobInfo, node: str, now: float) -> list[Event]:
    return [
        Event(time=now, object=f"Pod/{p.name}", type="Warning", reason="Evicted", message=f"node {node} is NotReady")
        for p in info.pods
        if p.node == node
    ]


@cache
def priority_classes() -> dict[str, tuple[int, bool]]:
    """The benchmark cluster's PriorityClasses, deploy/volcano/priorityclasses.yaml's: value, and whether it may
    preempt (`preemptionPolicy: Never` may not); the requests name none, the rule policy gives run bands."""
    with DEPLOY_CLASSES.open(encoding="utf-8") as f:
        classes = [doc for doc in yaml.safe_load_all(f) if doc and doc.get("kind") == "PriorityClass"]
    return {
        c["metadata"]["name"]: (int(c["value"]), c.get("preemptionPolicy", "PreemptLowerPriority") != "Never")
        for c in classes
    }
