"""What a LocalCluster user sees of one Volcano session: who is admitted, where pods land, why gangs wait."""

from __future__ import annotations

import random

from components.volcano.resources import GPU
from components.volcano.scheduler import Gang, NodeState, PodRequest, QueueState, schedule

HOSTNAME = "kubernetes.io/hostname"


def node(name: str, gpus: float = 8, used: float = 0, **kwargs) -> NodeState:
    return NodeState(
        name=name,
        ready=kwargs.pop("ready", True),
        allocatable={GPU: gpus, "cpu": 32, "memory": 256 * 2**30},
        used={GPU: used} if used else {},
        labels={HOSTNAME: name, **kwargs.pop("labels", {})},
        **kwargs,
    )


def gang(
    key: str,
    pods: int = 1,
    gpus: float = 1,
    *,
    queue: str = "default",
    phase: str = "Pending",
    min_member: int | None = None,
    bound: int = 0,
    priority: int = 0,
    order: int = 0,
    **pod_kwargs,
) -> Gang:
    name = key.split("/")[-1]
    requests = [PodRequest(f"{name}-{i}", {GPU: gpus, "cpu": 1}, **pod_kwargs) for i in range(pods)]
    minimum = pods if min_member is None else min_member
    return Gang(
        key=key,
        queue=queue,
        phase=phase,
        min_member=minimum,
        min_resources={GPU: gpus * max(minimum - bound, 0), "cpu": max(minimum - bound, 0)},
        pods=tuple(requests),
        bound=bound,
        priority=priority,
        order=order,
    )


QUEUES = [QueueState("default")]


def required(*terms: dict) -> dict:
    """A pod spec's affinity with required node selector terms (ORed)."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def not_in_hosts(*hosts: str) -> dict:
    return required({"matchExpressions": [{"key": HOSTNAME, "operator": "NotIn", "values": list(hosts)}]})


# --- gang: all or nothing -------------------------------------------------------------------------


def test_gang_that_cannot_fully_fit_binds_nothing_and_says_why():
    nodes = [node("n1", gpus=4, used=1), node("n2", gpus=4, used=1)]  # 2 of 8 GPUs busy
    session = schedule(nodes, QUEUES, [gang("ml/train", pods=4, gpus=2, phase="Inqueue")])
    assert session.bindings == {}
    assert "minMember is 4" in session.reasons["ml/train"]
    assert GPU in session.reasons["ml/train"]


def test_fragmented_gang_is_discarded_even_when_most_pods_fit():
    nodes = [node("n1", gpus=4, used=1), node("n2", gpus=4, used=1), node("n3", gpus=4, used=2)]
    session = schedule(nodes, QUEUES, [gang("ml/train", pods=4, gpus=2, phase="Inqueue")])
    assert session.bindings == {}
    assert session.reasons["ml/train"] == (
        "3/4 pods of the gang could be placed, minMember is 4: "
        f"0/3 nodes are available: 3 nodes have insufficient {GPU}"
    )


def test_discarded_gang_leaves_its_room_to_the_next_gang():
    nodes = [node("n1", gpus=4, used=1), node("n2", gpus=4, used=1), node("n3", gpus=4, used=2)]
    big = gang("ml/big", pods=4, gpus=2, phase="Inqueue", order=0)
    small = gang("ml/small", pods=3, gpus=2, phase="Inqueue", order=1)
    session = schedule(nodes, QUEUES, [big, small])
    assert sorted(session.bindings) == ["small-0", "small-1", "small-2"]


def test_gang_on_an_idle_cluster_is_admitted_and_bound_at_once():
    nodes = [node("n1", gpus=4), node("n2", gpus=4)]
    session = schedule(nodes, QUEUES, [gang("ml/train", pods=4, gpus=2)])
    assert session.enqueued == ("ml/train",)
    assert sorted(session.bindings) == ["train-0", "train-1", "train-2", "train-3"]
    assert sorted(session.bindings.values()) == ["n1", "n1", "n2", "n2"]
    assert session.reasons == {}


def test_min_member_below_pod_count_binds_what_fits():
    session = schedule([node("n1", gpus=3)], QUEUES, [gang("ml/elastic", pods=4, gpus=1, min_member=2)])
    assert len(session.bindings) == 3
    assert "3/4 pods" in session.reasons["ml/elastic"]


def test_a_node_at_its_kubelets_max_pods_takes_no_more():
    # Volcano's predicates plugin: a node that holds allocatable.pods pods gets no other ("pod number exceeded").
    nodes = [node("n1", max_pods=2, pods=1), node("n2", max_pods=3)]  # room for 1 and 3 pods, GPUs to spare
    session = schedule(nodes, QUEUES, [gang("ml/many", pods=6, gpus=1, min_member=1)])
    assert sorted(session.bindings.values()).count("n1") == 1 and len(session.bindings) == 4
    assert "2 nodes have their pod number exceeded" in session.reasons["ml/many"]
    # a gang the rooms cannot hold whole binds nothing, and a node without the limit (max_pods 0) is unbounded
    whole = schedule(nodes, QUEUES, [gang("ml/whole", pods=5, gpus=1, phase="Inqueue")])
    assert whole.bindings == {} and "pod number exceeded" in whole.reasons["ml/whole"]
    assert len(schedule([node("n3")], QUEUES, [gang("ml/free", pods=6, gpus=1)]).bindings) == 6


# --- enqueue: overcommit and proportion -----------------------------------------------------------


def test_pending_gang_waits_when_the_cluster_has_too_little_idle():
    session = schedule([node("n1", gpus=8, used=6)], QUEUES, [gang("ml/train", pods=4, gpus=1)])
    assert session.enqueued == ()
    assert session.bindings == {}
    assert session.reasons["ml/train"] == (
        f"not enough idle resources in the cluster to admit the gang ({GPU}: asks 4, 3.6 idle)"
    )


def test_inqueue_reservations_count_against_new_gangs():
    held = gang("ml/held", pods=1, gpus=8, phase="Inqueue")  # admitted earlier, pods not placed yet
    session = schedule([node("n1", gpus=8)], QUEUES, [held, gang("ml/next", gpus=2, order=1)])
    assert "ml/next" not in session.enqueued
    assert "idle" in session.reasons["ml/next"]


def test_gang_without_min_resources_is_always_admitted():
    bare = Gang("ml/bare", "default", "Pending", 1, {}, (PodRequest("bare-0", {GPU: 1}),))
    session = schedule([node("n1", gpus=8, used=8)], QUEUES, [bare])
    assert session.enqueued == ("ml/bare",)
    assert session.bindings == {}


def test_queue_at_capability_keeps_its_gang_pending_while_another_queue_runs():
    queues = [
        QueueState("team-a", capability={GPU: 4}, allocated={GPU: 4}),
        QueueState("team-b"),
    ]
    nodes = [node("n1", gpus=8, used=4), node("n2", gpus=8)]
    gangs = [gang("a/next", gpus=2, queue="team-a"), gang("b/job", gpus=2, queue="team-b", order=1)]
    session = schedule(nodes, queues, gangs)
    assert session.enqueued == ("b/job",)
    assert set(session.bindings) == {"job-0"}
    expected = f"queue 'team-a' is at its capability ({GPU}: 4 allocated + 2 asked > 4)"
    assert session.reasons["a/next"] == expected


def test_closed_or_missing_queue_keeps_the_gang_pending():
    queues = [QueueState("shut", open=False)]
    session = schedule([node("n1")], queues, [gang("x/a", queue="shut"), gang("x/b", queue="nowhere")])
    assert session.enqueued == ()
    assert "closed" in session.reasons["x/a"]
    assert "does not exist" in session.reasons["x/b"]


def test_two_gangs_that_each_need_the_whole_cluster_do_not_deadlock():
    nodes = [node("n1", gpus=4), node("n2", gpus=4)]
    first, second = gang("ml/first", pods=2, gpus=4), gang("ml/second", pods=2, gpus=4, order=1)
    session = schedule(nodes, QUEUES, [second, first])
    assert session.enqueued == ("ml/first",)
    assert sorted(session.bindings) == ["first-0", "first-1"]
    assert "ml/second" in session.reasons


def test_two_admitted_gangs_that_each_need_the_whole_cluster_run_one_at_a_time():
    nodes = [node("n1", gpus=4), node("n2", gpus=4)]
    gangs = [gang(f"ml/g{i}", pods=2, gpus=4, phase="Inqueue", order=i) for i in range(2)]
    session = schedule(nodes, QUEUES, gangs)
    assert sorted(session.bindings) == ["g0-0", "g0-1"]
    assert set(session.reasons) == {"ml/g1"}


# --- order ----------------------------------------------------------------------------------------


def test_higher_priority_gang_goes_first_even_when_created_later():
    gangs = [gang("ml/early", gpus=4, order=0), gang("ml/urgent", gpus=4, order=1, priority=100)]
    session = schedule([node("n1", gpus=4)], QUEUES, gangs)
    assert session.enqueued[0] == "ml/urgent"
    assert set(session.bindings) == {"urgent-0"}


def test_equal_queues_share_a_small_cluster():
    queues = [QueueState("a"), QueueState("b")]
    gangs = [gang(f"{q}/{q}{i}", queue=q, phase="Inqueue", order=i) for q in "ab" for i in range(4)]
    session = schedule([node("n1", gpus=4)], queues, gangs)
    assert sorted(session.bindings) == ["a0-0", "a1-0", "b0-0", "b1-0"]


# --- placement ------------------------------------------------------------------------------------


def test_binpack_puts_a_small_pod_on_the_partly_used_node():
    nodes = [node("node-a", gpus=8), node("node-b", gpus=8, used=3)]
    session = schedule(nodes, QUEUES, [gang("ml/small", gpus=1)])
    assert session.bindings == {"small-0": "node-b"}


def test_gang_pods_are_packed_together():
    nodes = [node("node-a", gpus=8), node("node-b", gpus=8)]
    session = schedule(nodes, QUEUES, [gang("ml/pair", pods=2, gpus=2)])
    assert set(session.bindings.values()) == {"node-a"}


def test_not_in_hostname_affinity_is_never_violated():
    nodes = [node("bad", gpus=8), node("good", gpus=8, used=8)]
    pending = gang("ml/retry", gpus=1, phase="Inqueue", affinity=not_in_hosts("bad"))
    session = schedule(nodes, QUEUES, [pending])
    assert session.bindings == {}
    reason = session.reasons["ml/retry"]
    assert "1 node does not match the pod's node affinity" in reason
    assert f"1 node has insufficient {GPU}" in reason


def test_affinity_operators_select_the_right_node():
    nodes = [
        node("n1", labels={"gpu-mem": "40", "zone": "a"}),
        node("n2", labels={"gpu-mem": "80", "zone": "b"}),
        node("n3", labels={"gpu-mem": "80"}),
    ]
    term = {
        "matchExpressions": [
            {"key": "gpu-mem", "operator": "Gt", "values": ["64"]},
            {"key": "zone", "operator": "Exists"},
        ]
    }
    by_field = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    gangs = [
        gang("ml/big-mem", affinity=required(term)),
        gang("ml/named", affinity=required(by_field), order=1),
    ]
    session = schedule(nodes, QUEUES, gangs)
    assert session.bindings == {"big-mem-0": "n2", "named-0": "n1"}


def test_node_selector_is_honoured():
    nodes = [node("n1", used=4), node("n2", labels={"pool": "h200"})]
    session = schedule(nodes, QUEUES, [gang("ml/pinned", node_selector={"pool": "h200"})])
    assert session.bindings == {"pinned-0": "n2"}


def test_unready_cordoned_and_tainted_nodes_take_no_pods():
    taint = {"key": "gpu-fault", "value": "xid79", "effect": "NoSchedule"}
    nodes = [node("n1", ready=False), node("n2", unschedulable=True), node("n3", taints=(taint,))]
    session = schedule(nodes, QUEUES, [gang("ml/train", phase="Inqueue")])
    assert session.bindings == {}
    assert session.reasons["ml/train"].endswith(
        "0/3 nodes are available: 1 node has a taint the pod does not tolerate, "
        "1 node is not ready, 1 node is unschedulable"
    )


def test_tolerated_taint_and_prefer_no_schedule_do_not_block():
    nodes = [
        node("n1", taints=({"key": "dedicated", "value": "ml", "effect": "NoExecute"},)),
        node("n2", taints=({"key": "spot", "value": "", "effect": "PreferNoSchedule"},), used=7),
    ]
    toleration = {"key": "dedicated", "operator": "Equal", "value": "ml"}
    tolerant = gang("ml/tolerant", gpus=2, tolerations=(toleration,))
    plain = gang("ml/plain", order=1)
    session = schedule(nodes, QUEUES, [tolerant, plain])
    assert session.bindings == {"tolerant-0": "n1", "plain-0": "n2"}


# --- running gangs --------------------------------------------------------------------------------


def test_running_gang_gets_its_replacement_pod_bound():
    running = gang("ml/train", pods=1, gpus=2, phase="Running", min_member=4, bound=4)
    session = schedule([node("n1", gpus=8, used=6)], QUEUES, [running])
    assert session.bindings == {"train-0": "n1"}


def test_running_gang_below_min_member_waits_for_all_its_missing_pods():
    short = gang("ml/train", pods=1, gpus=2, phase="Running", min_member=4, bound=2)
    session = schedule([node("n1", gpus=8)], QUEUES, [short])
    assert session.bindings == {}
    assert "minMember is 4" in session.reasons["ml/train"]


# --- determinism ----------------------------------------------------------------------------------


def test_same_state_in_any_order_gives_the_same_session():
    rng = random.Random(7)
    nodes = [node(f"n{i:02d}", gpus=8, used=rng.randint(0, 8)) for i in range(12)]
    queues = [QueueState("a", weight=2), QueueState("b", capability={GPU: 20})]
    gangs = [
        gang(
            f"ns/j{i}",
            pods=rng.randint(1, 4),
            gpus=rng.randint(1, 2),
            queue=rng.choice("ab"),
            priority=rng.choice([0, 10]),
            phase=rng.choice(["Pending", "Inqueue"]),
            order=i,
        )
        for i in range(40)
    ]
    first = schedule(nodes, queues, gangs)
    again = schedule(nodes, queues, gangs)
    shuffled = schedule(rng.sample(nodes, len(nodes)), queues[::-1], rng.sample(gangs, len(gangs)))
    assert first == again == shuffled
    assert first.bindings and first.reasons


# --- minTaskMember: each task's minAvailable --------------------------------------------------------------------


def tasks_gang(key: str, tasks: dict[str, tuple[int, int]], min_member: int, **kwargs) -> Gang:
    """A gang of tasks {name: (pods, minAvailable)}, 1 GPU a pod; `kwargs` by task name: that task's pod fields."""
    pods = [
        PodRequest(f"{key}-{task}-{i}", {GPU: 1}, task=task, index=i, **kwargs.get(task, {}))
        for task, (count, _) in tasks.items()
        for i in range(count)
    ]
    return Gang(
        key=key,
        queue="default",
        phase="Inqueue",
        min_member=min_member,
        min_resources={},
        pods=tuple(pods),
        min_task_member={task: minimum for task, (_, minimum) in tasks.items()},
    )


def test_a_gang_binds_only_when_every_task_has_its_minimum():
    # gang.go JobReady = CheckTaskReady && IsReady; pods go by index: a-0, b-0, a-1 fill the node, b-1 finds none.
    session = schedule([node("n1", gpus=3)], QUEUES, [tasks_gang("pair", {"a": (3, 1), "b": (2, 2)}, min_member=3)])
    assert session.bindings == {}
    assert session.reasons["pair"].startswith("3/5 pods of the gang could be placed, but only 1 of task 'b', whose")


def test_below_the_sum_of_the_task_minima_only_min_member_counts():
    # job_info.go: with minMember under the tasks' sum, CheckTaskReady passes whatever each task holds.
    session = schedule([node("n1", gpus=2)], QUEUES, [tasks_gang("pair", {"a": (2, 2), "b": (2, 2)}, min_member=2)])
    assert sorted(session.bindings) == ["pair-a-0", "pair-b-0"]


def test_a_task_that_fits_nowhere_leaves_the_others_to_try_while_the_gang_can_still_be_ready():
    # NeedContinueAllocating: a's pods fit nowhere, but b's 3 still reach minMember 3; the rest of a is not tried.
    nowhere = {"node_selector": {"pool": "none"}}
    gang_ = tasks_gang("mixed", {"a": (2, 2), "b": (3, 3)}, min_member=3, a=nowhere)
    session = schedule([node("n1", gpus=8)], QUEUES, [gang_])
    assert sorted(session.bindings) == ["mixed-b-0", "mixed-b-1", "mixed-b-2"]


def test_a_gang_short_of_a_tasks_pods_waits_for_them():
    # CheckTaskValid: b has one pod to bind and none bound, below its minAvailable of 2.
    short = tasks_gang("short", {"a": (2, 1), "b": (1, 2)}, min_member=3)
    session = schedule([node("n1", gpus=8)], QUEUES, [short])
    assert session.bindings == {}
    assert session.reasons["short"] == "task 'b' has 1 pod but its minAvailable is 2; the gang waits for more pods"
