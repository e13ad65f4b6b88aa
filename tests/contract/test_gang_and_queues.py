"""The contract, scheduling: gangs start whole or not at all, queues hold jobs at their capability."""

from __future__ import annotations

import time

import pytest
from contract_kit import FOREVER, Ctx

pytestmark = pytest.mark.integration


def bound(info) -> list[str]:
    return [p.name for p in info.pods if p.node]


def test_a_gang_short_of_gpus_waits_with_no_pod_bound_then_starts_whole(ctx: Ctx):
    cluster = ctx.cluster
    cluster.submit(ctx.job("hog", pods=2, gpus=4, runs=FOREVER))
    cluster.wait("hog", {"Running"}, timeout=20 * ctx.slow, namespace=ctx.ns)
    cluster.submit(ctx.job("gang", pods=2, gpus=2, runs=FOREVER))

    time.sleep(0.5 * ctx.slow)
    waiting = cluster.get("gang", ctx.ns)
    assert waiting.phase == "Pending"
    assert bound(waiting) == [], "no pod of a gang that cannot start whole may be bound"
    assert "nvidia.com/gpu" in (waiting.message or ""), "a waiting job says what it waits for"
    snapshot = cluster.queue("default")
    assert snapshot.pending + snapshot.inqueue >= 1

    cluster.delete("hog", ctx.ns)
    started = cluster.wait("gang", {"Running"}, timeout=20 * ctx.slow, namespace=ctx.ns)
    assert len(started.pods) == 2 and len(bound(started)) == 2, started.pods
    assert len({p.node for p in started.pods}) == 1, "binpack puts both 2-GPU pods on one node"


def test_a_job_the_cluster_has_no_room_for_is_not_enqueued_and_gets_no_pods(ctx: Ctx):
    """Volcano's enqueue (proportion: allocated + inqueue + request within the cluster) holds it back whole."""
    cluster = ctx.cluster
    cluster.submit(ctx.job("hog", pods=2, gpus=4, runs=FOREVER))
    cluster.wait("hog", {"Running"}, timeout=20 * ctx.slow, namespace=ctx.ns)
    cluster.submit(ctx.job("small", gpus=1, runs=0.2))

    time.sleep(0.5 * ctx.slow)
    waiting = cluster.get("small", ctx.ns)
    assert (waiting.phase, waiting.podgroup_phase, waiting.pods) == ("Pending", "Pending", [])
    assert cluster.queue("default").pending_gpus >= 1

    cluster.delete("hog", ctx.ns)
    assert cluster.wait("small", timeout=20 * ctx.slow, namespace=ctx.ns).phase == "Completed"


def test_a_queue_at_its_capability_holds_its_next_job_while_others_run(ctx: Ctx):
    cluster = ctx.cluster
    capped = ctx.queue({"nvidia.com/gpu": 2})
    cluster.submit(ctx.job("capped-a", gpus=2, runs=FOREVER, queue=capped))
    cluster.wait("capped-a", {"Running"}, timeout=20 * ctx.slow, namespace=ctx.ns)
    cluster.submit(ctx.job("capped-b", gpus=1, runs=0.2, queue=capped))
    cluster.submit(ctx.job("elsewhere", gpus=2, runs=0.2))

    assert cluster.wait("elsewhere", timeout=20 * ctx.slow, namespace=ctx.ns).phase == "Completed"
    waiting = cluster.get("capped-b", ctx.ns)
    assert (waiting.phase, bound(waiting)) == ("Pending", [])
    assert "nvidia.com/gpu" in (waiting.message or ""), waiting.message
    snapshot = cluster.queue(capped)
    assert (snapshot.running, snapshot.pending, snapshot.pending_gpus) == (1, 1, 1)
    assert snapshot.running_gpus == 2
    assert snapshot.capability["nvidia.com/gpu"] == 2
    ctx.eventually(
        "the queue reports 2 GPUs allocated", lambda: cluster.queue(capped).allocated.get("nvidia.com/gpu") == 2
    )

    cluster.delete("capped-a", ctx.ns)
    assert cluster.wait("capped-b", timeout=20 * ctx.slow, namespace=ctx.ns).phase == "Completed"


def test_a_queue_at_its_deserved_share_waits_even_while_gpus_sit_idle_for_another_queues_gang(ctx: Ctx):
    """Proportion, as deploy/ configures Volcano: two queues with work deserve half of the 8 GPUs each.

    The owner's second job fits on the idle node, yet waits: its queue holds its 4 deserved GPUs, and the idle
    ones are the other queue's, whose 6-GPU gang cannot start on them. Nothing is reclaimed (the owner's queue is
    not reclaimable). Once the first job goes, both start.
    """
    cluster = ctx.cluster
    owner, other = ctx.queue({}, reclaimable=False), ctx.queue({})
    cluster.submit(ctx.job("first", pods=2, gpus=2, runs=FOREVER, queue=owner))
    cluster.wait("first", {"Running"}, timeout=20 * ctx.slow, namespace=ctx.ns)
    cluster.submit(ctx.job("wide", pods=3, gpus=2, runs=FOREVER, queue=other))
    ctx.eventually(
        "the 6-GPU gang is admitted with its pods made",
        lambda: (info := cluster.get("wide", ctx.ns)).podgroup_phase == "Inqueue" and len(info.pods) == 3,
    )
    cluster.submit(ctx.job("second", gpus=2, runs=FOREVER, queue=owner))

    time.sleep(1.0 * ctx.slow)
    for name in ("second", "wide"):
        waiting = cluster.get(name, ctx.ns)
        assert (waiting.phase, bound(waiting)) == ("Pending", []), waiting
    assert sum(n.gpu_allocated for n in cluster.nodes()) == 4, "4 GPUs sit idle"

    cluster.delete("first", ctx.ns)
    for name in ("wide", "second"):
        started = cluster.wait(name, {"Running"}, timeout=20 * ctx.slow, namespace=ctx.ns)
        assert all(p.node for p in started.pods), started.pods


def test_nodes_account_gpus_of_the_pods_bound_to_them(ctx: Ctx):
    cluster = ctx.cluster
    before = {n.name: n.gpu_allocated for n in cluster.nodes()}
    cluster.submit(ctx.job("three", pods=3, gpus=1, runs=FOREVER))
    running = cluster.wait("three", {"Running"}, timeout=20 * ctx.slow, namespace=ctx.ns)
    nodes = {n.name: n for n in cluster.nodes()}
    used = {name: nodes[name].gpu_allocated - before.get(name, 0) for name in nodes}
    assert sum(used.values()) == 3
    for pod in running.pods:
        assert pod.gpus == 1 and used[pod.node] >= 1
    assert all(n.ready and n.gpu_capacity == 4 and n.gpu_allocatable == 4 for n in nodes.values())
