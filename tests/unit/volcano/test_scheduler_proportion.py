"""Volcano's proportion plugin in one session: deserved shares, and a big gang waiting while small jobs go."""

from __future__ import annotations

import pytest
from test_scheduler import gang, node

from components.volcano.resources import GPU
from components.volcano.scheduler import QueueState, deserved, schedule


def test_the_cluster_is_dealt_out_by_weight_and_what_a_queue_does_not_ask_is_dealt_again() -> None:
    nodes = [node("n0", gpus=8)]
    queues = [QueueState("small", weight=1), QueueState("big", weight=3), QueueState("modest", weight=4)]
    gangs = [
        gang("small/a", 8, queue="small", phase="Inqueue"),
        gang("big/a", 8, queue="big", phase="Inqueue"),
        gang("modest/a", 1, queue="modest", phase="Inqueue"),  # asks 1 GPU of the 4 its weight offers
    ]
    shares = deserved(nodes, queues, gangs)
    assert shares["modest"][GPU] == pytest.approx(1.0)
    assert shares["small"][GPU] == pytest.approx(7 / 4)  # 1 + 3/4: what `modest` left, again by weight
    assert shares["big"][GPU] == pytest.approx(21 / 4)


def test_a_share_is_capped_by_the_queues_capability_and_a_pending_podgroup_asks_nothing() -> None:
    nodes = [node("n0", gpus=8)]
    queues = [QueueState("capped", weight=3, capability={GPU: 2.0}), QueueState("other", weight=1)]
    gangs = [
        gang("capped/a", 8, queue="capped", phase="Inqueue"),
        gang("other/a", 8, queue="other", phase="Inqueue"),
        gang("other/b", 8, queue="other"),  # Pending: its pods are not created yet
    ]
    shares = deserved(nodes, queues, gangs)
    assert shares["capped"][GPU] == pytest.approx(2.0) and shares["other"][GPU] == pytest.approx(6.0)


def test_a_gang_larger_than_its_queues_share_waits_while_small_jobs_of_other_queues_take_the_gpus() -> None:
    nodes = [node("n0", gpus=4), node("n1", gpus=4)]
    queues = [QueueState("team", weight=1), QueueState("tenants", weight=3)]
    gangs = [gang("team/ft", 4, queue="team", phase="Inqueue", order=0)]
    gangs += [gang(f"tenants/j{i}", 1, queue="tenants", phase="Inqueue", order=1 + i) for i in range(8)]
    session = schedule(nodes, queues, gangs, overcommit_factor=None, proportion=True)
    bound = {pod.rsplit("-", 1)[0] for pod in session.bindings}
    assert "ft" not in bound and len(session.bindings) == 6  # tenants' share: 6 of 8; team's 2 < its 4 pods
    assert "deserved share" in session.reasons["team/ft"]
    # Without proportion the older gang goes first, as LocalCluster does.
    plain = schedule(nodes, queues, gangs)
    assert {f"ft-{i}" for i in range(4)} <= set(plain.bindings)


def test_the_gang_goes_once_the_other_queue_asks_less() -> None:
    nodes = [node("n0", gpus=4), node("n1", gpus=4)]
    queues = [QueueState("team", weight=1), QueueState("tenants", weight=3)]
    gangs = [gang("team/ft", 4, queue="team", phase="Inqueue"), gang("tenants/j", 2, queue="tenants", phase="Inqueue")]
    session = schedule(nodes, queues, gangs, overcommit_factor=None, proportion=True)
    assert len(session.bindings) == 6  # team deserves the 6 GPUs tenants leave: its 4 pods fit


def test_without_the_overcommit_plugin_a_full_cluster_still_admits_into_a_queue_with_room() -> None:
    nodes = [node("n0", gpus=8, used=8)]
    queues = [QueueState("q", capability={GPU: 4.0})]
    with_plugin = schedule(nodes, queues, [gang("q/a", 4, queue="q")])
    without = schedule(
        nodes, queues, [gang("q/a", 4, queue="q"), gang("q/b", 1, queue="q", order=1)], overcommit_factor=None
    )
    assert with_plugin.enqueued == () and "idle" in with_plugin.reasons["q/a"]
    assert without.enqueued == ("q/a",) and "capability" in without.reasons["q/b"]  # 4 + 1 > 4
