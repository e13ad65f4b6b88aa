"""The seeded trace the agent benchmark replays: a contended 16-node GPU cluster over a simulated day.

Everything that happens whatever the strategy is drawn here, once per seed: the queues, other tenants' jobs, the
fine-tuning requests and the node outages. `docs/agent-benchmark.md` explains each number and why it was chosen.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from components.volcano.resources import GPU
from components.volcano.scheduler import QueueState

__all__ = ["Outage", "Request", "TenantJob", "Trace", "make_trace"]

HOUR = 3600.0
DAY = 24 * HOUR

NODES = 16
GPUS_PER_NODE = 8
TARGET_QUEUE = "ml-team"
FALLBACK_QUEUE = "ml-spare"
# name -> (weight, GPU capability). The capabilities add up to 184 of 128 GPUs: over-subscribed, as real quotas are.
QUEUES = {
    TARGET_QUEUE: (2, 48),
    FALLBACK_QUEUE: (1, 32),
    "research": (3, 72),
    "batch": (1, 32),
}
# Other tenants, per queue: arrivals per hour (daily mean), job shapes (pods, GPUs per pod) with their weights,
# median hold time in hours and its log-normal spread, and the priority of their PriorityClass.
TENANTS = {
    "research": (0.9, [((1, 8), 0.5), ((2, 8), 0.35), ((4, 8), 0.15)], 3.0, 0.6, 0),
    "batch": (3.0, [((1, 1), 0.25), ((1, 2), 0.25), ((1, 4), 0.25), ((1, 8), 0.25)], 1.0, 0.5, 100),
    TARGET_QUEUE: (0.5, [((1, 8), 0.5), ((2, 8), 0.5)], 2.5, 0.5, 0),
    FALLBACK_QUEUE: (0.5, [((1, 4), 0.5), ((1, 8), 0.5)], 2.0, 0.5, 0),
}
WARMUP_S = 12 * HOUR  # tenants start arriving this long before the first request, so the day starts busy
NODE_MTBF_S = 7 * DAY  # mean time between NotReady events of one node, all causes (see the docs)
OUTAGE_MEDIAN_S = 40 * 60.0


@dataclass(frozen=True)
class Request:
    """One fine-tuning run the pipeline must get trained: 8 GPUs wanted, a floor, a batch and an amount of work."""

    name: str
    arrival_s: float
    gpus: int
    gpus_min: int
    global_batch: int
    micro_batch: int
    max_steps: int
    per_gpu_samples_per_s: float  # the truth: one GPU's speed, before scaling losses
    measured_samples_per_s: float  # what MLflow holds from the last run of this model, at `gpus` GPUs
    checkpoint_every_s: float


@dataclass(frozen=True)
class TenantJob:
    """Another team's gang: it waits for its GPUs like ours do and holds them for `hold_s` once running."""

    name: str
    queue: str
    arrival_s: float
    pods: int
    gpus_per_pod: int
    hold_s: float
    priority: int


@dataclass(frozen=True)
class Outage:
    """A node NotReady from `start_s` to `end_s`: every pod on it dies at the start."""

    node: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Trace:
    """Everything the strategies face; times are seconds from the first request window's start."""

    seed: int
    nodes: tuple[str, ...]
    queues: tuple[QueueState, ...]
    requests: tuple[Request, ...]
    tenants: tuple[TenantJob, ...]
    outages: tuple[Outage, ...]
    horizon_s: float


def diurnal(t: float) -> float:
    """Tenant load over the day: 1.4x from 08:00 to 20:00, 0.6x at night (mean 1.0)."""
    hour = (t % DAY) / HOUR
    return 1.4 if 8 <= hour < 20 else 0.6


def make_trace(
    seed: int = 0,
    requests: int = 50,
    *,
    window_s: float = DAY,
    horizon_s: float = 7 * DAY,
    node_mtbf_s: float = NODE_MTBF_S,
) -> Trace:
    """Draw a trace: `requests` fine-tuning runs arriving over `window_s` among tenants and outages to `horizon_s`."""
    rng = random.Random(seed)
    nodes = tuple(f"node-{i:02d}" for i in range(NODES))
    queues = tuple(QueueState(name=q, weight=w, capability={GPU: float(c)}) for q, (w, c) in QUEUES.items())
    return Trace(
        seed=seed,
        nodes=nodes,
        queues=queues,
        requests=_requests(random.Random(rng.random()), requests, window_s),
        tenants=_tenants(random.Random(rng.random()), horizon_s),
        outages=_outages(random.Random(rng.random()), nodes, horizon_s, node_mtbf_s),
        horizon_s=horizon_s,
    )


def _requests(rng: random.Random, count: int, window_s: float) -> tuple[Request, ...]:
    out = []
    for i, arrival in enumerate(sorted(rng.uniform(0, window_s) for _ in range(count))):
        gpus, micro = 8, rng.choice([2, 4])
        global_batch = rng.choice([64, 128, 256])
        per_gpu = rng.lognormvariate(math.log(12.0), 0.4)  # samples/s on one GPU
        hours_at_8 = min(max(rng.lognormvariate(math.log(2.0), 0.5), 0.5), 8.0)  # its length on 8 ideal GPUs
        steps = max(1, round(hours_at_8 * HOUR * per_gpu * gpus / global_batch))
        out.append(
            Request(
                name=f"ft-{i:03d}",
                arrival_s=arrival,
                gpus=gpus,
                gpus_min=rng.choice([1, 2]),
                global_batch=global_batch,
                micro_batch=micro,
                max_steps=steps,
                per_gpu_samples_per_s=per_gpu,
                # MLflow's figure is the last run's, at 8 GPUs, with run-to-run noise; the caller applies scaling.
                measured_samples_per_s=per_gpu * rng.lognormvariate(0.0, 0.1),
                checkpoint_every_s=60.0 * rng.choice([10, 20, 30]),
            )
        )
    return tuple(out)


def _tenants(rng: random.Random, horizon_s: float) -> tuple[TenantJob, ...]:
    out: list[TenantJob] = []
    for queue, (rate_h, shapes, median_h, sigma, priority) in TENANTS.items():
        # A Poisson process thinned by the diurnal curve (peak 1.4x).
        t, peak = -WARMUP_S, rate_h * 1.4 / HOUR
        while True:
            t += rng.expovariate(peak)
            if t >= horizon_s:
                break
            if rng.random() * 1.4 > diurnal(t):
                continue
            (pods, per_pod), *_ = rng.choices([s for s, _ in shapes], weights=[w for _, w in shapes])
            hold = min(rng.lognormvariate(math.log(median_h * HOUR), sigma), 24 * HOUR)
            out.append(TenantJob(f"{queue}-{len(out):04d}", queue, t, pods, per_pod, hold, priority))
    return tuple(sorted(out, key=lambda j: (j.arrival_s, j.name)))


def _outages(rng: random.Random, nodes: tuple[str, ...], horizon_s: float, mtbf_s: float) -> tuple[Outage, ...]:
    out = []
    for node in nodes:
        t = -WARMUP_S
        while True:
            t += rng.expovariate(1.0 / mtbf_s)
            if t >= horizon_s:
                break
            down = min(max(rng.lognormvariate(math.log(OUTAGE_MEDIAN_S), 0.8), 300.0), 8 * HOUR)
            out.append(Outage(node, t, t + down))
            t += down
    return tuple(sorted(out, key=lambda o: (o.start_s, o.node)))
