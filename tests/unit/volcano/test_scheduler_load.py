"""The scheduling session of LocalCluster under load (issue 16): 1,000 queued gangs on 100 nodes stay correct.

benchmarks/scheduler.py times the same session, and a whole LocalCluster reconcile with 1,000 queued jobs.
"""

from __future__ import annotations

import random

from components.volcano.resources import GPU
from components.volcano.scheduler import Gang, NodeState, PodRequest, QueueState, schedule


def test_a_thousand_queued_gangs_on_a_hundred_nodes_are_placed_whole_or_not_at_all() -> None:
    rng = random.Random(16)
    nodes = [NodeState(name=f"node-{i:03d}", ready=True, allocatable={GPU: 8}, used={}, labels={}) for i in range(100)]
    queues = [QueueState(name=f"q{i}", weight=i + 1) for i in range(4)]
    gangs = []
    for g in range(1000):
        pods, gpus = rng.randint(1, 4), rng.randint(1, 2)
        gangs.append(
            Gang(
                key=f"default/job-{g}",
                queue=f"q{g % 4}",
                phase="Pending",
                min_member=pods,
                min_resources={GPU: float(gpus * pods)},
                pods=tuple(PodRequest(name=f"default/job-{g}-{p}", resources={GPU: float(gpus)}) for p in range(pods)),
                priority=rng.choice([0, 0, 100]),
                order=g,
            )
        )
    result = schedule(nodes, queues, gangs)

    bound: dict[str, list[str]] = {}
    for pod, node in result.bindings.items():
        bound.setdefault(pod.rsplit("-", 1)[0], []).append(node)
    by_key = {g.key: g for g in gangs}
    assert bound and all(len(nodes_) == by_key[key].min_member for key, nodes_ in bound.items()), "no partial gang"
    used: dict[str, float] = {}
    for gang_key, placed in bound.items():
        per_pod = by_key[gang_key].pods[0].resources[GPU]
        for node in placed:
            used[node] = used.get(node, 0) + per_pod
    assert max(used.values()) <= 8, "no node over its GPUs"
    assert sum(used.values()) > 800 - 8 * 2, "the cluster is filled, short of what no waiting gang fits"
