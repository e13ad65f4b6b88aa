"""How each strategy of the agent benchmark lives through one fine-tuning request, attempt by attempt.

`wait_full` and `argo_retry` are what a pipeline without the agent does; `rules` asks a `Policy` at plan and
diagnose time, from an `Observation` built the way `agent.observe` builds one from a real cluster. Progress,
GPU time used and GPU time thrown away by failures are accounted here.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from agent.actions import Abort, Downscale, Proceed, RetryFromCheckpoint, Wait
from agent.failures import attempt_record
from agent.observation import AttemptRecord, CheckpointInfo, Observation, PlanRequest, Throughput
from agent.policy import Policy
from benchmarks.agent_sim import SimJob, Simulation
from benchmarks.agent_trace import FALLBACK_QUEUE, TARGET_QUEUE, Request
from components.volcano.cluster import Event, JobInfo, PodInfo

__all__ = ["ArgoRetry", "Outcome", "Rules", "Training", "WaitFull", "samples_per_s"]

MAX_ATTEMPTS = 4  # Volcano's default maxRetry is 3 restarts; Argo's retryStrategy limit 3; the request's budget 4
STEP_S = 30.0  # an Argo script step (plan, diagnose): pod start and a few API calls
ARGO_BACKOFF_S = 60.0  # retryStrategy.backoff: duration 1m, factor 2
_PRIORITIES = {"": 0}  # PriorityClass name -> value; the requests ask for none


def samples_per_s(per_gpu: float, gpus: int, efficiency: float) -> float:
    """Training speed on `gpus` GPUs: each doubling of the GPUs keeps `efficiency` of the ideal speed-up."""
    return per_gpu * gpus * efficiency ** math.log2(gpus)


@dataclass
class Outcome:
    """What happened to one request under one strategy."""

    name: str
    arrival_s: float
    status: str = "unfinished"  # finished, aborted, unfinished (the horizon came first)
    end_s: float = 0.0
    first_start_s: float | None = None
    attempts: int = 0
    failures: int = 0
    gpu_s_used: float = 0.0
    gpu_s_lost: float = 0.0
    shapes: list[tuple[int, str]] = field(default_factory=list)  # (GPUs, queue) of each attempt that ran
    reason: str = ""


class Training:
    """One request's life under a strategy; subclasses choose each attempt's shape and what a failure leads to."""

    def __init__(self, sim: Simulation, request: Request, efficiency: float) -> None:
        self.sim, self.request, self.efficiency = sim, request, efficiency
        self.out = Outcome(request.name, request.arrival_s)
        self.steps_done = 0  # durable progress: what the next attempt starts from
        self.checkpoint_step = 0  # the latest complete checkpoint when the last attempt died
        sim.at(request.arrival_s, self.begin)

    def begin(self) -> None:
        """The request arrives; the first attempt is planned."""
        self.sim.at(self.sim.now + STEP_S, lambda: self.launch(self.request.gpus, TARGET_QUEUE))

    def launch(self, gpus: int, queue: str, avoid: tuple[str, ...] = (), priority: int = 0) -> None:
        """Submit the next attempt as a new VCJob of `gpus` one-GPU pods."""
        self.out.attempts += 1
        job = SimJob(
            key=f"default/{self.request.name}-{self.out.attempts}",
            queue=queue,
            pods=gpus,
            gpus_per_pod=1,
            priority=priority,
            avoid_nodes=avoid,
            on_start=self._started,
            on_lost=self._lost,
        )
        self.sim.submit(job)

    def steps_per_s(self, gpus: int) -> float:
        """The true speed of this request at `gpus` GPUs, in optimizer steps."""
        return samples_per_s(self.request.per_gpu_samples_per_s, gpus, self.efficiency) / self.request.global_batch

    def _started(self, job: SimJob) -> None:
        if self.out.first_start_s is None:
            self.out.first_start_s = self.sim.now
        self.out.shapes.append((job.gpus, job.queue))
        left = self.request.max_steps - self.steps_done
        run = job.run
        self.sim.at(self.sim.now + left / self.steps_per_s(job.gpus), lambda: self._completed(job, run))

    def _completed(self, job: SimJob, run: int) -> None:
        if job.run != run or job.phase != "Running":
            return  # that run died before it could finish
        self.out.gpu_s_used += job.gpus * (self.sim.now - job.started_s)
        self.sim.finish(job)
        self.steps_done = self.request.max_steps
        self.end("finished")

    def _lost(self, job: SimJob, node: str) -> None:
        elapsed = self.sim.now - job.started_s
        kept_s = self.kept_s(elapsed)
        self.out.failures += 1
        self.out.gpu_s_used += job.gpus * elapsed
        self.out.gpu_s_lost += job.gpus * (elapsed - kept_s)
        self.checkpoint_step = self.steps_done + int(kept_s * self.steps_per_s(job.gpus))
        self.recover(job, node)

    def kept_s(self, elapsed: float) -> float:
        """Seconds of the dead run that survive it: none when the strategy restarts from scratch."""
        return 0.0

    def recover(self, job: SimJob, node: str) -> None:
        """What a strategy does once a node failure killed `job`."""
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
        self.steps_done = 0
        self.sim.submit(job, keep_order=True)


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


class Rules(Training):
    """(c) The agent: plan and diagnose decided by a policy over what `agent.observe` would see."""

    def __init__(self, sim: Simulation, request: Request, efficiency: float, policy: Policy) -> None:
        super().__init__(sim, request, efficiency)
        self.policy = policy
        self.avoid: list[str] = []
        self.resume = ""
        self.history: list[AttemptRecord] = []
        self.kinds: Counter[str] = Counter()

    def begin(self) -> None:
        """The plan step runs first."""
        self.sim.at(self.sim.now + STEP_S, self.plan)

    def plan(self) -> None:
        """Ask the policy how to train now; a Wait asks again later."""
        action = self.policy.decide(self.observe(), "plan").action
        self.kinds[action.kind] += 1
        if isinstance(action, Proceed | Downscale):
            self.launch(action.gpus, action.queue, tuple(self.avoid), _PRIORITIES.get(action.priority_class, 0))
        elif isinstance(action, Wait):
            self.sim.at(self.sim.now + action.recheck_s, self.plan)
        elif isinstance(action, Abort):
            self.end("aborted", action.reason)
        else:
            raise RuntimeError(f"the policy answered {action.kind} at plan time")

    def kept_s(self, elapsed: float) -> float:
        """Everything up to the last complete checkpoint of this run survives it."""
        every = self.request.checkpoint_every_s
        return math.floor(elapsed / every) * every

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
            max_attempts=MAX_ATTEMPTS,
            avoid_nodes=self.avoid,
            resume_checkpoint=self.resume,
        )
        if self.out.shapes:  # MLflow has this run's own measurement at the size it last ran
            gpus = self.out.shapes[-1][0]
            throughput = Throughput(samples_per_s=self.steps_per_s(gpus) * req.global_batch, gpus=gpus, source="mlflow")
        else:  # the last run of this model, at the full size
            speed = samples_per_s(req.measured_samples_per_s, req.gpus, self.efficiency)
            throughput = Throughput(samples_per_s=speed, gpus=req.gpus, source="mlflow")
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
        )


def _failed_job(job: SimJob, node: str) -> JobInfo:
    """The dead attempt as LocalCluster reports it: pods on the node Evicted, the others killed by the job policy."""
    name = job.key.split("/", 1)[1]
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
