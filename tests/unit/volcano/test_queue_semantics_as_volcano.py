"""Where LocalCluster's queues once differed from Volcano v1.15.1, through its own API: each names the upstream rule.

- a queue that is not Open gets no pod placed, not only no job admitted (plugins/proportion: AllocatableFn);
- other queues' guarantees are held back from a queue's realCapability, and a queue deserves at least its guarantee
  (plugins/proportion: OnSessionOpen);
- pods beyond a running gang's minimum do not count against its queue in enqueue (proportion: elastic);
- a PodGroup some of whose pods run while the gang is short of minMember is Unknown, which raises the job's
  `Unknown` event (framework/session.go getPodGroupPhase, job_controller_handler.go updatePodGroup), and its
  job is Pending while more pods wait than it can spare (state/running.go).

Pods here sleep until their job is deleted: only the scheduler's decisions are under test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from vcjob_factory import GPU, vcjob

from components.volcano.cluster_local import LocalCluster
from components.volcano.localconfig import LocalClusterConfig
from components.volcano.scheduler import QueueState, deserved

SLEEP = "sleep 600"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """Two nodes of 4 GPUs, no overcommit: deploy/'s scheduler configuration."""
    made = LocalCluster(tmp_path / "home", LocalClusterConfig.model_validate({}), hook=False)
    yield made
    for job in made.list_jobs():
        made.delete(job.name, job.namespace, missing_ok=True)
    made.close()


def running(cluster: LocalCluster, job: str) -> list[str]:
    return sorted(p.name for p in cluster.get(job).pods if p.phase == "Running")


def test_a_closing_queue_places_no_pod_of_a_job_it_already_admitted(cluster):
    # proportion.go OnSessionOpen, queueAllocatable (AllocatableFn): `if queue.Queue.Status.State != QueueStateOpen
    # { return false }` — allocate places no task of a queue that is not Open, and only best-effort pods (backfill)
    # go. The job admitted before the queue began closing stays Inqueue when room frees up; LocalCluster ran it.
    cluster.apply_queue({"metadata": {"name": "q"}})
    cluster.submit(vcjob("hog", SLEEP, pods=2, gpus=4))
    cluster.submit(vcjob("later", SLEEP, pods=1, gpus=4, queue="q"))
    assert cluster.get("later").podgroup_phase == "Inqueue" and running(cluster, "later") == []
    cluster.apply_queue({"metadata": {"name": "q"}, "status": {"state": "Closing"}})
    cluster.delete("hog")
    later = cluster.get("later")
    assert (later.phase, later.podgroup_phase, running(cluster, "later")) == ("Pending", "Inqueue", [])
    assert "queue 'q' is not open" in later.message
    cluster.apply_queue({"metadata": {"name": "q"}, "status": {"state": "Open"}})
    assert running(cluster, "later") == ["later-main-0"]


def test_another_queues_guarantee_is_held_back_from_a_queue_without_one(cluster):
    # proportion.go OnSessionOpen: totalGuarantee sums spec.guarantee.resource over every queue, and a queue's
    # realCapability = ExceededPart(totalResource, totalGuarantee) + its own guarantee, capped by its capability;
    # JobEnqueueableFn admits a gang only within it. 8 GPUs with 4 guaranteed to `reserved`: the default queue may
    # admit 4, so a gang of 8 stays Pending. LocalCluster admitted and ran it.
    spec = {"guarantee": {"resource": {GPU: 4}}, "deserved": {GPU: 4}}
    cluster.apply_queue({"metadata": {"name": "reserved"}, "spec": spec})
    cluster.submit(vcjob("wide", SLEEP, pods=2, gpus=4))
    wide = cluster.get("wide")
    assert (wide.phase, wide.podgroup_phase, running(cluster, "wide")) == ("Pending", "Pending", [])
    cluster.submit(vcjob("half", SLEEP, pods=1, gpus=4))
    assert running(cluster, "half") == ["half-main-0"]


def test_a_guaranteed_queue_may_admit_its_guarantee_beyond_the_others_share(cluster):
    # The same realCapability from the guaranteed queue's side: 8 − 4 + 4 = all 8 GPUs.
    spec = {"guarantee": {"resource": {GPU: 4}}, "deserved": {GPU: 4}}
    cluster.apply_queue({"metadata": {"name": "reserved"}, "spec": spec})
    cluster.submit(vcjob("wide", SLEEP, pods=2, gpus=4, queue="reserved"))
    assert running(cluster, "wide") == ["wide-main-0", "wide-main-1"]


def test_a_queue_deserves_at_least_its_guarantee() -> None:
    # proportion.go OnSessionOpen: `attr.deserved = helpers.Max(attr.deserved, attr.guarantee)` in every round, so
    # a guaranteed queue of weight 1 beside one of weight 3 deserves its 4 GPUs, not a quarter of 8.
    from test_scheduler import gang, node

    nodes = [node("n0", gpus=8)]
    queues = [
        QueueState("small", weight=1, guarantee={GPU: 4.0}),
        QueueState("big", weight=3),
    ]
    gangs = [gang("small/a", 8, queue="small", phase="Inqueue"), gang("big/a", 8, queue="big", phase="Inqueue")]
    shares = deserved(nodes, queues, gangs)
    assert shares["small"][GPU] == pytest.approx(4.0)


# --- PodGroup Unknown: some pods run, the gang is short of minMember ----------------------------------------------


def node_of(cluster: LocalCluster, job: str, pod: str) -> str:
    (node,) = {p.node for p in cluster.get(job).pods if p.name == pod}
    assert node is not None
    return node


def test_a_gang_that_loses_a_pod_it_cannot_place_again_has_its_podgroup_unknown(cluster):
    # framework/session.go getPodGroupPhase: "If running tasks && unschedulable, unknown phase" — the gang plugin's
    # OnSessionClose marks the PodGroup Unschedulable whenever ReadyTaskNum < minAvailable (JobInfo.IsReady). The
    # evicted pod is recreated but finds no node, its partner still runs: Unknown, and the queue counts it so, with
    # the GPUs its waiting pod lacks. LocalCluster left the PodGroup Running.
    cluster.submit(vcjob("pair", SLEEP, pods=2, gpus=4))
    failed = node_of(cluster, "pair", "pair-main-0")
    cluster.fail_node(failed)
    pair = cluster.get("pair")
    assert pair.podgroup_phase == "Unknown" and running(cluster, "pair") == ["pair-main-1"]
    # state/running.go: `status.Pending > jobReplicas - MinAvailable` moves the job back to Pending meanwhile.
    assert pair.phase == "Pending"
    queue = cluster.queue("default")
    assert (queue.unknown, queue.unknown_gpus, queue.running) == (1, 4, 0)
    cluster.recover_node(failed)
    pair = cluster.get("pair")
    assert (pair.phase, pair.podgroup_phase, len(running(cluster, "pair"))) == ("Running", "Running", 2)


def test_a_gang_above_its_minimum_stays_running_when_a_pod_it_could_spare_finds_no_node(cluster):
    # getPodGroupPhase and state/running.go again: one pod of two runs and minAvailable is 1, so the gang is ready
    # (Running) and Pending 1 is not more than replicas 2 - minAvailable 1: the job stays Running.
    cluster.submit(vcjob("spare", SLEEP, pods=2, gpus=4, min_available=1))
    cluster.fail_node(node_of(cluster, "spare", "spare-main-0"))
    spare = cluster.get("spare")
    assert (spare.phase, spare.podgroup_phase, running(cluster, "spare")) == ("Running", "Running", ["spare-main-1"])


def test_an_unknown_policy_restarts_the_job_when_its_podgroup_turns_unknown(cluster):
    # job_controller_handler.go updatePodGroup: a PodGroup whose phase turns Unknown sends the job the event
    # JobUnknownEvent ("Unknown"), which applyPolicies matches against the job's policies: here RestartJob, so the
    # job restarts (retryCount 1) and, with 4 GPUs left for a gang of 8, waits Pending. LocalCluster never raised it.
    cluster.submit(vcjob("pair", SLEEP, pods=2, gpus=4, policies=[{"event": "Unknown", "action": "RestartJob"}]))
    cluster.fail_node(node_of(cluster, "pair", "pair-main-0"))
    pair = cluster.get("pair")
    assert (pair.phase, pair.retry_count, running(cluster, "pair")) == ("Pending", 1, [])
    assert any(e.reason == "Restarting" for e in cluster.events("pair"))


# --- enqueue: pods beyond a running gang's minimum are elastic -----------------------------------------------------


def test_pods_beyond_a_running_gangs_minimum_do_not_keep_another_gang_out_of_the_queue(tmp_path: Path):
    # proportion.go JobEnqueueableFn: a gang is admitted when minReq + allocated + inqueue - elastic fits the queue's
    # realCapability, where a job's elastic part is what it holds beyond its minResources (JobInfo
    # GetElasticResources). `elastic` (minAvailable 1) holds all 4 GPUs of q, 3 of them elastic, so `small` is
    # admitted (Inqueue, its pod made) and waits for room; LocalCluster kept it Pending, "at its capability".
    config = {"queues": [{"name": "q", "capability": {GPU: 4}}]}
    cluster = LocalCluster(tmp_path / "home", LocalClusterConfig.model_validate(config), hook=False)
    try:
        cluster.submit(vcjob("elastic", SLEEP, pods=4, gpus=1, min_available=1, queue="q"))
        assert len(running(cluster, "elastic")) == 4
        cluster.submit(vcjob("small", SLEEP, pods=1, gpus=1, queue="q"))
        small = cluster.get("small")
        assert (small.phase, small.podgroup_phase, running(cluster, "small")) == ("Pending", "Inqueue", [])
        cluster.delete("elastic")
        assert running(cluster, "small") == ["small-main-0"]
    finally:
        for job in cluster.list_jobs():
            cluster.delete(job.name, job.namespace, missing_ok=True)
        cluster.close()
