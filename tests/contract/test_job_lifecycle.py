"""The contract, a job's life: submission rules, restart policies and retryCount, completion, deletion."""

from __future__ import annotations

import pytest
from contract_kit import FOREVER, Ctx, task

from components.volcano.cluster import Conflict, Invalid, JobNotFound
from pipelines.vcjobs import JobContext, build_loadtest_job

pytestmark = pytest.mark.integration

RESTART_ON_FAILURE = [{"event": "PodFailed", "action": "RestartJob"}, {"event": "PodEvicted", "action": "RestartJob"}]


def test_submit_is_idempotent_and_a_different_spec_conflicts(ctx: Ctx):
    cluster = ctx.cluster
    first = cluster.submit(ctx.job("same", runs=FOREVER))
    again = cluster.submit(ctx.job("same", runs=FOREVER))
    assert (again.uid, again.name, again.namespace) == (first.uid, "same", ctx.ns)
    with pytest.raises(Conflict, match="different spec"):
        cluster.submit(ctx.job("same", runs=5))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"queue": "nope"}, "queue 'nope' does not exist"),
        ({"schedulerName": "default-scheduler"}, "schedulerName must be 'volcano'"),
        ({"minAvailable": 3}, "minAvailable"),
    ],
)
def test_a_job_volcano_would_refuse_is_invalid_and_changes_nothing(ctx: Ctx, change, message):
    manifest = ctx.job("bad")
    manifest["spec"].update(change)
    with pytest.raises(Invalid, match=message) as err:
        ctx.cluster.submit(manifest)
    assert "\n" not in str(err.value)
    with pytest.raises(JobNotFound):
        ctx.cluster.get("bad", ctx.ns)


def test_pod_failed_restarts_the_job_until_max_retry(ctx: Ctx):
    cluster = ctx.cluster
    cluster.submit(ctx.job("flaky", runs=0.3, exit_code=3, max_retry=2, policies=RESTART_ON_FAILURE))
    done = cluster.wait("flaky", timeout=30 * ctx.slow, namespace=ctx.ns)
    # Volcano counts a restart before it checks the budget: with maxRetry 2 the job runs twice, then fails.
    assert (done.phase, done.retry_count) == ("Failed", 2)
    failed = [p for p in done.pods if p.phase == "Failed"]
    assert failed and all(p.exit_code == 3 and p.node for p in failed), done.pods


def test_a_job_that_fails_keeps_only_the_pods_that_ended_by_themselves(ctx: Ctx):
    """Volcano's last restart retains Failed and Succeeded pods and deletes the ones it had to kill."""
    before = sum(n.gpu_allocated for n in ctx.cluster.nodes())
    tasks = [task("bad", 1, runs=0.5, exit_code=7), task("good", 2, runs=FOREVER)]
    ctx.cluster.submit(ctx.job("mixed", tasks=tasks, max_retry=1, policies=RESTART_ON_FAILURE))
    done = ctx.cluster.wait("mixed", timeout=30 * ctx.slow, namespace=ctx.ns)
    assert (done.phase, done.retry_count) == ("Failed", 1)
    # Volcano's controller may still be removing pods when the phase turns Failed: look until it settles.
    ctx.eventually(
        "only the pod that failed by itself is left",
        lambda: (
            [(p.name, p.phase, p.exit_code) for p in ctx.cluster.get("mixed", ctx.ns).pods]
            == [("mixed-bad-0", "Failed", 7)]
        ),
    )
    ctx.eventually(
        "the killed pods' GPUs are free", lambda: sum(n.gpu_allocated for n in ctx.cluster.nodes()) == before
    )


def test_without_a_policy_a_failed_pod_fails_the_job(ctx: Ctx):
    done = ctx.cluster.wait(ctx.cluster.submit(ctx.job("plain", exit_code=5)).name, namespace=ctx.ns, timeout=60)
    assert (done.phase, done.retry_count) == ("Failed", 0)
    assert [(p.phase, p.exit_code, p.reason) for p in done.pods] == [("Failed", 5, "Error")]


def test_task_completed_completes_the_job_while_other_pods_still_run(ctx: Ctx):
    tasks = [
        task("master", 1, runs=0.5, policies=[{"event": "TaskCompleted", "action": "CompleteJob"}]),
        task("worker", 2, runs=FOREVER),
    ]
    ctx.cluster.submit(ctx.job("layout", tasks=tasks))
    done = ctx.cluster.wait("layout", timeout=30 * ctx.slow, namespace=ctx.ns)
    assert done.phase == "Completed"
    # CompleteJob stops the remaining pods, and Volcano deletes the pods it stopped (seen on real pods too: the
    # load test's server is gone once its client completes): the job keeps only the pod that ended by itself.
    assert [(p.task, p.phase) for p in done.pods] == [("master", "Succeeded")]


def test_the_load_tests_server_dying_leaves_the_job_to_its_client_which_completes_it(ctx: Ctx):
    # The policies the pipeline gives its load test: a task's own policies first, then the job's (Volcano's rule).
    rendered = build_loadtest_job(
        JobContext(workflow="contract", workspace="/tmp/contract", image="local"),
        model_uri="model",
        slo_ttft_ms=1,
        slo_tpot_ms=1,
    ).to_dict()
    policies = {t["name"]: t.get("policies") for t in rendered["spec"]["tasks"]}
    tasks = [
        task("server", 1, runs=FOREVER, policies=policies["server"]),
        task("client", 1, runs=4 * ctx.slow, policies=policies["client"]),
    ]
    ctx.cluster.submit(ctx.job("gate", tasks=tasks, policies=rendered["spec"]["policies"]))
    ctx.cluster.wait("gate", {"Running"}, timeout=20 * ctx.slow, namespace=ctx.ns)
    ctx.cluster.kill_pod("gate-server-0", ctx.ns)
    ctx.eventually(
        "the killed server pod is Failed",
        lambda: any(p.task == "server" and p.phase == "Failed" for p in ctx.cluster.get("gate", ctx.ns).pods),
    )
    assert ctx.cluster.get("gate", ctx.ns).phase == "Running", "the client goes on counting failed requests"
    done = ctx.cluster.wait("gate", timeout=30 * ctx.slow, namespace=ctx.ns)
    assert done.phase == "Completed"
    assert sorted((p.task, p.phase) for p in done.pods) == [("client", "Succeeded"), ("server", "Failed")]


def test_deleting_a_job_takes_its_pods_and_podgroup(ctx: Ctx):
    cluster = ctx.cluster
    before = sum(n.gpu_allocated for n in cluster.nodes())
    cluster.submit(ctx.job("doomed", pods=2, gpus=2, runs=FOREVER))
    cluster.wait("doomed", {"Running"}, timeout=20 * ctx.slow, namespace=ctx.ns)
    assert sum(n.gpu_allocated for n in cluster.nodes()) == before + 4

    cluster.delete("doomed", ctx.ns)
    with pytest.raises(JobNotFound):
        cluster.get("doomed", ctx.ns)
    ctx.eventually("the job's pods and PodGroup are gone", lambda: ctx.residue("doomed") == [])
    assert sum(n.gpu_allocated for n in cluster.nodes()) == before
    assert "doomed" not in [j.name for j in cluster.list_jobs(namespace=ctx.ns)]
    with pytest.raises(JobNotFound):
        cluster.delete("doomed", ctx.ns)
    cluster.delete("doomed", ctx.ns, missing_ok=True)


def test_jobs_are_listed_by_labels_and_read_back_as_the_api_shows_them(ctx: Ctx):
    cluster = ctx.cluster
    cluster.submit(ctx.job("mine", labels={"team": "a", "run": "1"}))
    cluster.submit(ctx.job("theirs", labels={"team": "b"}))
    assert [j.name for j in cluster.list_jobs({"team": "a"}, namespace=ctx.ns)] == ["mine"]
    assert sorted(j.name for j in cluster.list_jobs(namespace=ctx.ns)) == ["mine", "theirs"]

    done = cluster.wait("mine", timeout=30 * ctx.slow, namespace=ctx.ns)
    assert done.phase == "Completed" and done.labels["team"] == "a"
    obj = cluster.get_object("mine", ctx.ns)
    assert (obj["kind"], obj["metadata"]["name"], obj["metadata"]["namespace"]) == ("Job", "mine", ctx.ns)
    assert obj["status"]["state"]["phase"] == "Completed"
    assert obj["spec"]["queue"] == "default" and obj["spec"]["maxRetry"] == 3
    events = cluster.events("mine", ctx.ns)
    assert events and [e.time for e in events] == sorted(e.time for e in events)
    assert {e.object.split("/")[0] for e in events} <= {"Job", "Pod", "PodGroup"}
    with pytest.raises(JobNotFound):
        cluster.get("never-submitted", ctx.ns)
