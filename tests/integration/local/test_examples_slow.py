"""The upstream examples that take a while: real backoff sleeps, a 10 s batch Job, 20-30 s parallel sleeps."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from components.volcano.cluster_local import LocalCluster
from pipelines.local.engine.status import parse_rfc3339
from pipelines.local.runner import delete_run

# Marked `night` (`make e2e` runs them): mostly sleeping, and tests/e2e/test_argo_examples.py runs the same examples
# through the local runner beside the real controller.
pytestmark = [pytest.mark.integration, pytest.mark.night]

Example = Callable[[str], Path]


def _epoch(stamp: str) -> float:
    value = parse_rfc3339(stamp)
    assert value is not None
    return value


def _attempts(ran) -> list[str]:
    pattern = re.compile(r"\((\d+)\)")
    return sorted((k for k in ran.nodes if pattern.fullmatch(k)), key=lambda k: int(pattern.fullmatch(k)[1]))


def test_retry_backoff_waits_between_attempts(run, example: Example) -> None:
    ran = run(example("retry-backoff"))
    attempts = _attempts(ran)
    assert all(ran.phases[a] == "Failed" for a in attempts[:-1])
    assert ran.phase == ("Succeeded" if ran.phases[attempts[-1]] == "Succeeded" else "Failed")
    stamps = [ran.nodes[a] for a in attempts]
    for i in range(1, len(stamps)):
        gap = _epoch(stamps[i]["startedAt"]) - _epoch(stamps[i - 1]["finishedAt"])
        assert gap >= min(2 ** (i - 1), 5) - 1  # duration 1s, factor 2, cap 5s; timestamps have 1s resolution


def test_k8s_jobs_creates_a_batch_job_on_the_local_cluster(run, example: Example, home: Path) -> None:
    cluster = LocalCluster(home)
    try:
        ran = run(example("k8s-jobs"), cluster=cluster)
        assert ran.phase == "Succeeded", ran.message("")
        name = ran.param("", "job-name") or ""
        assert name.startswith("rand-num-")
        job = json.loads(ran.param("", "job-obj") or "")
        assert job["kind"] == "Job" and job["status"]["succeeded"] == 3
        assert [j.name for j in cluster.list_jobs()] == [name]
        delete_run(ran.name, home=home, cluster=cluster)  # setOwnerReference: the job goes with the workflow
        assert cluster.list_jobs() == []
    finally:
        cluster.close()


def test_loops_param_result_sleeps_in_parallel(run, example: Example) -> None:
    start = time.monotonic()
    ran = run(example("loops-param-result"))
    assert ran.phase == "Succeeded"
    assert json.loads(ran.out("[0].generate") or "") == list(range(20, 31))
    sleeps = sorted(k for k in ran.nodes if k.startswith("[1].sleep("))
    assert len(sleeps) == 11 and all(ran.phases[k] == "Succeeded" for k in sleeps)
    assert ran.out("[1].sleep(10:30)") == "sleeping for 30 seconds\ndone"
    assert time.monotonic() - start < 60  # 11 sleeps of 20-30 s run side by side
