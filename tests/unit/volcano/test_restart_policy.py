"""A pod's restartPolicy on LocalCluster, as the kubelet and Volcano v1.15.1's job controller act on it.

- Never: a container that exits ends its pod, Succeeded or Failed, and a failure is `PodFailed` to the job's policies.
- OnFailure (a non-zero exit) and Always (any exit; a pod's default when unset): the kubelet restarts the container
  in place; the pod stays Running on its node, its restartCount goes up, and from the second restart on it waits in
  CrashLoopBackOff first, 10 s doubling to 300 s (pkg/kubelet/kuberuntime/kuberuntime_manager.go `doBackOff`).
  No `PodFailed` reaches the job: Volcano's updatePod raises `TaskFailed` instead once the restart counts of the
  task's Running and Pending pods reach the task's maxRetry (pkg/controllers/cache/cache.go `TaskFailed`,
  pkg/controllers/job/job_controller_handler.go `updatePod`).

The cluster's clock is the test's, so a back-off passes when the test moves it; pods are real processes.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from clock_kit import Clock
from vcjob_factory import vcjob, vcjob_task

from components.volcano.cluster import Invalid, JobInfo
from components.volcano.cluster_local import LocalCluster
from components.volcano.localconfig import LocalClusterConfig

SLEEP = "sleep 600"


@pytest.fixture
def cluster(tmp_path: Path, clock: Clock) -> Iterator[LocalCluster]:
    made = LocalCluster(tmp_path / "home", LocalClusterConfig.model_validate({}), clock=clock, hook=False)
    yield made
    for job in made.list_jobs():
        made.delete(job.name, job.namespace, missing_ok=True)
    made.close()


def crashing(
    name: str,
    script: str,
    restart_policy: str | None,
    *,
    policies: list | None = None,
    task_policies: list | None = None,
    **task: object,
) -> dict:
    """A one-pod job whose pod runs `script` under `restart_policy` (None: the field left out); `task` adds fields."""
    spec = vcjob_task("main", 1, 1, script, policies=task_policies, restartPolicy=restart_policy)
    if restart_policy is None:
        del spec["template"]["spec"]["restartPolicy"]
    return vcjob(name, tasks=[{**spec, **task}], policies=policies)


def until(cluster: LocalCluster, job: str, check: Callable[[JobInfo], bool], timeout: float = 10.0) -> JobInfo:
    """Read the job (each read reconciles) until `check` holds: its pods are real processes that end by themselves."""
    deadline = time.monotonic() + timeout
    while True:
        info = cluster.get(job)
        if check(info):
            return info
        assert time.monotonic() < deadline, f"{job} never got there: {info}"
        time.sleep(0.02)


def backing_off(restarts: int) -> Callable[[JobInfo], bool]:
    return lambda info: (
        [(p.phase, p.reason, p.restarts) for p in info.pods] == [("Running", "CrashLoopBackOff", restarts)]
    )


def test_on_failure_restarts_a_crashed_container_in_place_and_the_job_completes(cluster, tmp_path):
    # kubelet: the first crash is restarted at once, in the same pod on the same node; no PodFailed reaches the job,
    # so the job's PodFailed policy never acts, and the container's next exit 0 succeeds the pod and the job.
    marker = tmp_path / "crashed-once"
    script = f'if [ -e "{marker}" ]; then exit 0; fi; touch "{marker}"; exit 1'
    policies = [{"event": "PodFailed", "action": "AbortJob"}]
    cluster.submit(crashing("flaky", script, "OnFailure", policies=policies))
    (node,) = {p.node for p in cluster.get("flaky").pods}
    done = cluster.wait("flaky", timeout=15)
    assert done.phase == "Completed" and done.retry_count == 0
    (pod,) = done.pods
    assert (pod.phase, pod.node, pod.restarts, pod.exit_code) == ("Succeeded", node, 1, 0)


def test_on_failure_crashing_up_to_the_tasks_max_retry_raises_task_failed(cluster, clock):
    # Restarts 0 s, then 10 s and 20 s apart (doBackOff); the third restart makes the task's restartCount sum reach
    # its maxRetry of 3, and TaskFailed's policy aborts the job. The PodFailed policy (RestartJob) never fires.
    on_task = [{"event": "TaskFailed", "action": "AbortJob"}]
    on_job = [{"event": "PodFailed", "action": "RestartJob"}]
    cluster.submit(crashing("crashy", "exit 1", "OnFailure", policies=on_job, task_policies=on_task, maxRetry=3))
    until(cluster, "crashy", backing_off(1))
    clock.now += 9
    assert backing_off(1)(cluster.get("crashy")), "still backing off"
    clock.now += 1
    until(cluster, "crashy", backing_off(2))
    clock.now += 19
    assert backing_off(2)(cluster.get("crashy"))
    clock.now += 1
    done = until(cluster, "crashy", lambda info: info.finished)
    assert (done.phase, done.reason, done.retry_count, done.pods) == ("Aborted", "AbortJob", 0, [])
    assert any(e.message == "TaskFailed on task main: AbortJob" for e in cluster.events("crashy"))


def test_the_back_off_doubles_to_five_minutes_and_nothing_runs_meanwhile(cluster, clock):
    # A task without a limit on restarts worth the name: maxRetry far away, so the kubelet's back-off is all that
    # paces it. While it waits, the pod has no process: a read of the cluster starts nothing and spins on nothing.
    cluster.submit(crashing("loop", "exit 2", "OnFailure", maxRetry=100))
    until(cluster, "loop", backing_off(1))
    for restarts, wait in ((2, 10), (3, 20), (4, 40), (5, 80), (6, 160), (7, 300), (8, 300)):
        clock.now += wait - 1
        for _ in range(3):
            assert backing_off(restarts - 1)(cluster.get("loop"))
        clock.now += 1
        until(cluster, "loop", backing_off(restarts))
    assert cluster.get("loop").phase == "Running"


def test_always_restarts_a_container_that_exits_0_so_the_job_never_completes(cluster, clock):
    # restartPolicy Always: exit 0 restarts too, so no TaskCompleted; after maxRetry restarts TaskFailed comes, and
    # with no policy for it the job just syncs (applyPolicies' SyncJob): it stays Running, its pod crash-looping.
    policies = [{"event": "TaskCompleted", "action": "CompleteJob"}]
    cluster.submit(crashing("server", "true", "Always", policies=policies))
    until(cluster, "server", backing_off(1))
    for restarts, wait in ((2, 10), (3, 20), (4, 40)):
        clock.now += wait
        until(cluster, "server", backing_off(restarts))
    info = cluster.get("server")
    assert (info.phase, info.retry_count) == ("Running", 0)


@pytest.mark.parametrize("absent", [None, ""])
def test_an_unset_restart_policy_is_always_as_the_api_server_defaults_it(cluster, absent):
    # SetDefaults_PodSpec: an unset (or empty) restartPolicy is Always, so a pod that exits 0 is restarted.
    cluster.submit(crashing("plain", "true", absent))
    until(cluster, "plain", backing_off(1))


def test_a_restart_policy_kubernetes_does_not_know_is_refused(cluster):
    # ValidatePodSpec: restartPolicy must be Always, OnFailure or Never.
    with pytest.raises(Invalid, match="restartPolicy 'Sometimes' is not one of Always, OnFailure, Never"):
        cluster.submit(crashing("odd", "true", "Sometimes"))
    assert cluster.list_jobs() == []


def test_never_ends_the_pod_and_its_failure_is_pod_failed(cluster):
    policies = [{"event": "PodFailed", "action": "AbortJob"}]
    cluster.submit(crashing("once", "exit 3", "Never", policies=policies))
    done = cluster.wait("once", timeout=15)
    assert (done.phase, done.reason) == ("Aborted", "AbortJob")
    succeeded = cluster.wait(cluster.submit(crashing("fine", "true", "Never")).name, timeout=15)
    assert [(p.phase, p.restarts) for p in succeeded.pods] == [("Succeeded", 0)]


def test_a_killed_container_under_on_failure_is_restarted_in_place(cluster):
    # An OOM kill (exit 137) is a failed container like any other: the kubelet restarts it, no PodFailed.
    cluster.submit(crashing("oom", SLEEP, "OnFailure", policies=[{"event": "PodFailed", "action": "AbortJob"}]))
    cluster.kill_pod("oom-main-0")
    info = cluster.get("oom")
    assert info.phase == "Running"
    assert [(p.phase, p.reason, p.restarts) for p in info.pods] == [("Running", None, 1)]


def test_a_batch_v1_job_under_on_failure_fails_once_its_restarts_reach_the_backoff_limit(cluster):
    # The Job controller's pastBackoffLimitOnFailure: the pods' restartCounts against backoffLimit (the same sum
    # as Volcano's TaskFailed); here 1, so the first restart ends the Job Failed.
    pod = {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox", "command": ["false"]}]}
    manifest = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "batch"},
        "spec": {"backoffLimit": 1, "template": {"spec": pod}},
    }
    cluster.submit(manifest)
    done = until(cluster, "batch", lambda info: info.finished)
    assert done.phase == "Aborted"
    conditions = cluster.get_object("batch")["status"]["conditions"]
    assert [c["type"] for c in conditions] == ["Failed"]


def test_a_cluster_db_from_before_restart_counts_keeps_working(tmp_path, clock):
    # An older cluster.db has no pods.restarts / pods.backoff: opening it adds them, and what it held stays.
    home = tmp_path / "old"
    LocalCluster(home, LocalClusterConfig.model_validate({}), clock=clock, hook=False).close()
    with sqlite3.connect(home / "cluster.db") as db:
        db.execute("ALTER TABLE pods DROP COLUMN restarts")
        db.execute("ALTER TABLE pods DROP COLUMN backoff")
    cluster = LocalCluster(home, clock=clock, hook=False)
    try:
        cluster.submit(crashing("again", "exit 1", "OnFailure"))
        until(cluster, "again", backing_off(1))
    finally:
        cluster.delete("again", missing_ok=True)
        cluster.close()
