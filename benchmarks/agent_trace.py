"""What the agent benchmark replays: the trace's records, our fine-tuning requests and the node faults.

Everything that happens whatever the strategy is drawn once per seed: the other tenants' jobs (from Philly,
`benchmarks/agent_philly.py`), the fine-tuning requests and the node faults (here). `docs/agent-benchmark.md`
explains each number and why it was chosen.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from agent.policy_rules import LLAMA3_NODE_MTBF_S
from components.volcano.scheduler import QueueState

__all__ = ["Outage", "Request", "TenantJob", "Trace", "draw_outages", "draw_requests"]

HOUR = 3600.0
DAY = 24 * HOUR

NODES = 16
GPUS_PER_NODE = 8
TARGET_QUEUE = "ml-team"
FALLBACK_QUEUE = "ml-spare"
# Queues created `reclaimable: true`: Volcano's reclaim may take back what they hold above their deserved share
# for another queue's waiting gang. Only the fallback queue lends; a reclaimable training queue would see our own
# gangs evicted whenever it runs above its share (docs/agent-benchmark.md).
RECLAIMABLE_QUEUES = (FALLBACK_QUEUE,)
# Node faults at the rate Meta reports for Llama 3 405B's pre-training (agent.policy_rules.LLAMA3_NODE_MTBF_S,
# which the agent's checkpoint interval assumes too): ~264 node-days between faults of one node.
NODE_MTBF_S = LLAMA3_NODE_MTBF_S
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
    start_s: float  # the tenants' warm-up starts here, before the first request (time 0)
    about: dict[str, object]  # how the trace was made, for the report
    gpus_per_node: int = GPUS_PER_NODE


def draw_requests(rng: random.Random, count: int, window_s: float) -> tuple[Request, ...]:
    """`count` fine-tuning requests arriving uniformly over `window_s`, each with its own size, speed and work."""
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


def draw_outages(
    rng: random.Random, nodes: tuple[str, ...], start_s: float, horizon_s: float, mtbf_s: float
) -> tuple[Outage, ...]:
    """Each node's faults from `start_s` to `horizon_s`: exponential up-times of mean `mtbf_s`, log-normal repairs."""
    out = []
    for node in nodes:
        t = start_s
        while True:
            t += rng.expovariate(1.0 / mtbf_s)
            if t >= horizon_s:
                break
            down = min(max(rng.lognormvariate(math.log(OUTAGE_MEDIAN_S), 0.8), 300.0), 8 * HOUR)
            out.append(Outage(node, t, t + down))
            t += down
    return tuple(sorted(out, key=lambda o: (o.start_s, o.node)))
