"""The other tenants' jobs from Microsoft's Philly trace: a window of it mapped onto the benchmark's 128 GPUs.

Philly ran ~2,500 GPUs for a dozen virtual clusters (VCs); the benchmark cluster has 16 nodes × 8 GPUs. A window
of the trace keeps its real arrivals, sizes and durations and is mapped in two steps (docs/agent-benchmark.md
says why): the four VCs with the most GPU-time in the window become queues of their own (the fourth owns the
fallback queue), the rest share one; and the jobs are thinned (or copied) by one factor so that the window's mean
GPU demand fills `TENANT_LOAD` of the cluster.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.agent_trace import (
    DAY,
    FALLBACK_QUEUE,
    GPUS_PER_NODE,
    HOUR,
    NODE_MTBF_S,
    NODES,
    TARGET_QUEUE,
    TenantJob,
    Trace,
    draw_outages,
    draw_requests,
)
from components.volcano.resources import GPU
from components.volcano.scheduler import QueueState

__all__ = [
    "PHILLY",
    "PhillyJob",
    "QueueMap",
    "load_philly",
    "map_queues",
    "philly_trace",
    "scale_factor",
    "tenant_jobs",
    "window",
]

PHILLY = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "philly" / "philly.csv"
CLUSTER_GPUS = NODES * GPUS_PER_NODE
TENANT_LOAD = 0.6  # the other tenants' mean GPU demand, as a share of the cluster (our requests add ~0.3)
NAMED_VCS = 4  # VCs with a queue of their own; the fourth owns the fallback queue
OVERCOMMIT = 1.5  # a queue's capability: its share of the cluster × this (Philly let VCs borrow idle GPUs)
REST = "vc-rest"
# Our target queue is not a Philly VC: its weight and capability are the team's quota, as before.
TARGET_WEIGHT, TARGET_CAPABILITY = 2, 48
NODE_NAMES = tuple(f"node-{i:02d}" for i in range(NODES))
REQUESTS_PER_DAY = 50  # our fine-tuning requests, uniformly over the window
WARMUP_S = 2 * DAY  # tenants submitted this long before the window are replayed too: the window starts busy
HORIZON_AFTER_S = 3 * DAY  # how long after the window the simulation runs; a request unfinished by then counts
# as finishing then (a lower bound on its time-to-finish)


@dataclass(frozen=True)
class PhillyJob:
    """One row of philly.csv: submitted at `submit_s` (UTC epoch seconds), ran `duration_s` on `gpus` GPUs."""

    submit_s: float
    duration_s: float
    gpus: int
    vc: str


@dataclass(frozen=True)
class QueueMap:
    """Which queue each VC's jobs go to, and the queues themselves (our target queue included)."""

    queue_of: dict[str, str]  # VC -> queue; a VC not named here goes to REST
    queues: tuple[QueueState, ...]
    shares: dict[str, float]  # queue -> its share of the window's GPU-time
    owner: str  # the VC that owns the fallback queue

    def queue(self, vc: str) -> str:
        """The queue `vc`'s jobs are submitted to."""
        return self.queue_of.get(vc, REST)


def load_philly(path: Path = PHILLY) -> list[PhillyJob]:
    """Every job of the trace, in submission order; ValueError in one sentence when the file is not that trace."""
    if not path.is_file():
        raise ValueError(f"{path} is missing: the benchmark needs the Philly trace from ../shared/datasets/philly")
    jobs = []
    with path.open(newline="") as file:
        for line, row in enumerate(csv.DictReader(file), start=2):
            try:
                submitted = dt.datetime.fromisoformat(row["timestamp"]).replace(tzinfo=dt.UTC)
                jobs.append(
                    PhillyJob(submitted.timestamp(), float(row["duration"]), int(row["num_gpus"]), row["cluster"])
                )
            except (KeyError, TypeError, ValueError):
                raise ValueError(
                    f"{path}:{line} is not a Philly row (timestamp,duration,num_gpus,gpu_time,cluster)"
                ) from None
    return sorted(jobs, key=lambda j: j.submit_s)


def window(jobs: Sequence[PhillyJob], start: dt.date, warmup_s: float, horizon_s: float) -> list[PhillyJob]:
    """The jobs submitted from `warmup_s` before midnight UTC of `start` to `horizon_s` after it."""
    origin = dt.datetime.combine(start, dt.time(), tzinfo=dt.UTC).timestamp()
    return [j for j in jobs if origin - warmup_s <= j.submit_s < origin + horizon_s]


def mean_demand(jobs: Iterable[PhillyJob], begin_s: float, end_s: float) -> float:
    """The mean number of GPUs the jobs hold between `begin_s` and `end_s` (epoch seconds), had they never waited."""
    held = sum(j.gpus * max(0.0, min(j.submit_s + j.duration_s, end_s) - max(j.submit_s, begin_s)) for j in jobs)
    return held / (end_s - begin_s)


def scale_factor(demand_gpus: float, load: float = TENANT_LOAD, cluster_gpus: int = CLUSTER_GPUS) -> float:
    """The thinning factor that turns the window's mean GPU demand into `load` of the benchmark cluster."""
    if demand_gpus <= 0:
        raise ValueError("the Philly window holds no GPU-time: pick a start date between 2017-09-10 and 2017-12-15")
    return load * cluster_gpus / demand_gpus


def map_queues(
    jobs: Sequence[PhillyJob], cluster_gpus: int = CLUSTER_GPUS, gpus_per_node: int = GPUS_PER_NODE
) -> QueueMap:
    """The VCs with most GPU-time become queues weighted by their share, the fourth of them `ml-spare`.

    Weight: the share in tenths (at least 1). Capability: the share of what the tenants use (`TENANT_LOAD` of the
    cluster) × `OVERCOMMIT`, at least one node and at most the cluster. Our target queue keeps 48/128 of the
    cluster, at least one node.
    """
    gpu_time: dict[str, float] = {}
    for job in jobs:
        gpu_time.setdefault(job.vc, 0.0)
        gpu_time[job.vc] += job.gpus * job.duration_s
    total = sum(gpu_time.values())
    if not total:
        raise ValueError("the Philly window holds no jobs: pick a start date between 2017-09-10 and 2017-12-15")
    ranked = sorted(gpu_time, key=lambda vc: -gpu_time[vc])[:NAMED_VCS]
    queue_of = {vc: f"vc-{vc}" for vc in ranked[:-1]}
    queue_of[ranked[-1]] = FALLBACK_QUEUE
    shares = {REST: 0.0}  # VCs first seen after the window go here too
    for vc, seconds in gpu_time.items():
        queue = queue_of.get(vc, REST)
        shares[queue] = shares.get(queue, 0.0) + seconds / total
    target = max(gpus_per_node, round(TARGET_CAPABILITY * cluster_gpus / CLUSTER_GPUS))
    queues = [QueueState(TARGET_QUEUE, weight=TARGET_WEIGHT, capability={GPU: float(target)})]
    for name, share in sorted(shares.items(), key=lambda item: -item[1]):
        capability = min(cluster_gpus, max(gpus_per_node, math.ceil(share * TENANT_LOAD * cluster_gpus * OVERCOMMIT)))
        queues.append(QueueState(name, weight=max(1, round(10 * share)), capability={GPU: float(capability)}))
    return QueueMap(queue_of, tuple(queues), {q: round(s, 4) for q, s in shares.items()}, ranked[-1])


def tenant_jobs(
    jobs: Sequence[PhillyJob],
    mapping: QueueMap,
    origin_s: float,
    factor: float,
    rng: random.Random,
    *,
    owner_factor: float = 1.0,
    gpus_per_node: int = GPUS_PER_NODE,
) -> tuple[TenantJob, ...]:
    """The window's jobs as tenants' gangs, times from `origin_s`: each kept `factor` times on average.

    `owner_factor` multiplies the factor for the fallback queue's owner (the contention on `ml-spare`). A job of
    more than 8 GPUs is a gang of 8-GPU pods; one larger than its queue's capability could never run and is left
    out. Copies of one job (a factor above 1) are spread over the 10 minutes after its submission.
    """
    capability = {q.name: q.capability[GPU] for q in mapping.queues}
    out: list[TenantJob] = []
    for job in jobs:
        queue = mapping.queue(job.vc)
        if job.gpus > capability[queue]:
            continue
        keep = factor * (owner_factor if queue == FALLBACK_QUEUE else 1.0)
        copies = math.floor(keep) + (rng.random() < keep - math.floor(keep))
        per_node = gpus_per_node
        pods, per_pod = (1, job.gpus) if job.gpus <= per_node else (math.ceil(job.gpus / per_node), per_node)
        for copy in range(copies):
            arrival = job.submit_s - origin_s + (rng.uniform(0, 600) if copy else 0.0)
            name = f"{queue}-{len(out):05d}"
            out.append(TenantJob(name, queue, arrival, pods, per_pod, max(1.0, job.duration_s), priority=0))
    return tuple(sorted(out, key=lambda t: (t.arrival_s, t.name)))


def day_of(text: str) -> dt.date:
    """`YYYY-MM-DD` as a date; ValueError in one sentence otherwise."""
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--start {text!r} is not a date: give YYYY-MM-DD, e.g. 2017-10-02") from None


def philly_trace(
    jobs: Sequence[PhillyJob],
    start: dt.date,
    days: float,
    seed: int,
    *,
    fault_scale: float = 1.0,
    owner_factor: float = 1.0,
    requests_per_day: float = REQUESTS_PER_DAY,
    nodes: tuple[str, ...] = NODE_NAMES,
    gpus_per_node: int = GPUS_PER_NODE,
    warmup_s: float | None = None,
) -> Trace:
    """The trace of `days` from `start`: Philly's tenants, our requests over those days, node faults.

    The seed draws the thinning, the requests and the faults; `fault_scale` multiplies the Llama 3 fault rate.
    Another cluster (`nodes` × `gpus_per_node`, the e2e cluster's) scales the load and the queues to its size;
    requests larger than its nodes hold are cut to one node's GPUs.
    """
    warmup_s = WARMUP_S if warmup_s is None else warmup_s
    cluster_gpus = len(nodes) * gpus_per_node
    if days <= 0 or fault_scale < 0 or owner_factor < 0:
        raise ValueError("--days must be above 0, and the fault and contention scales at least 0")
    origin = dt.datetime.combine(start, dt.time(), tzinfo=dt.UTC).timestamp()
    horizon = days * DAY + HORIZON_AFTER_S
    jobs_in = window(jobs, start, warmup_s, horizon)
    measured = [j for j in jobs_in if j.submit_s < origin + days * DAY]
    demand = mean_demand(measured, origin, origin + days * DAY)
    factor = scale_factor(demand, cluster_gpus=cluster_gpus)
    mapping = map_queues(jobs_in, cluster_gpus, gpus_per_node)  # the shares of everything replayed
    rng = random.Random(seed)
    tenant_rng = random.Random(rng.random())
    tenants = tenant_jobs(
        jobs_in, mapping, origin, factor, tenant_rng, owner_factor=owner_factor, gpus_per_node=gpus_per_node
    )
    requests = draw_requests(random.Random(rng.random()), max(1, round(requests_per_day * days)), days * DAY)
    if gpus_per_node < GPUS_PER_NODE:
        requests = tuple(dataclasses.replace(r, gpus=gpus_per_node, gpus_min=1) for r in requests)
    mtbf = NODE_MTBF_S / fault_scale if fault_scale else math.inf
    outage_rng = random.Random(rng.random())
    outages = draw_outages(outage_rng, nodes, -warmup_s, horizon, mtbf) if fault_scale else ()
    about = {
        "source": "philly",
        "start": start.isoformat(),
        "days": days,
        "philly_jobs_in_window": len(measured),
        "philly_mean_gpu_demand": round(demand, 1),
        "scale_factor": round(factor, 4),
        "queue_of_vc": {**mapping.queue_of, "(others)": REST},
        "queue_gpu_time_share": mapping.shares,
        "fallback_owner_vc": mapping.owner,
        "fallback_owner_factor": owner_factor,
        "node_mtbf_h": round(mtbf / HOUR, 1) if fault_scale else None,
        "fault_scale": fault_scale,
    }
    return Trace(seed, nodes, mapping.queues, requests, tenants, outages, horizon, -warmup_s, about, gpus_per_node)
