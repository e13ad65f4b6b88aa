"""Argo's upstream examples on the real workflow-controller (v4.1.2, deploy/e2e) and through the local runner:
the same workflow phase, and per node the same type, phase, outputs and log (argo_kit says what is compared).

Every example in ../shared/argo-examples runs here unless it needs something outside the cluster and the images
the real nodes hold (EXCLUDED says why). Each runs in a namespace of its own, with the RBAC Argo's executor needs.
Where the two runners differ on purpose, docs/local-runner.md ("Compared with the real controller") says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from argo_kit import (
    EXAMPLES,
    OURS,
    ClusterRuns,
    Example,
    Run,
    compared,
    created_job,
    differences,
    drawn_number,
    heads_up,
    last_attempts,
    last_flip,
    masked,
    run_locally,
    run_on_cluster,
)

pytestmark = [pytest.mark.e2e, pytest.mark.real_pods]

COMPARED = [
    Example("arguments-parameters"),
    Example("coinflip-recursive", last_flip, timeout_s=300),
    Example("conditional-parameters", heads_up("[0].flip-coin")),
    Example("continue-on-fail"),
    Example("dag-conditional-parameters", heads_up(".flip-coin")),
    Example("dag-continue-on-fail"),
    Example("dag-diamond"),
    Example("dag-enhanced-depends"),
    Example("dag-multiroot"),
    Example("dag-nested", timeout_s=300),
    Example("exit-handler-with-param"),
    # {{workflow.duration}}: seconds, as a float
    Example("exit-handlers", masked(r"(?<= Failed )\d+(\.\d+)?(?=\. )", "<duration>")),
    Example("global-parameters"),
    Example("hello-world"),
    Example(
        "k8s-jobs",
        created_job,
        timeout_s=300,
        rules=({"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get"]},),
        generate_name="k8s-jobs-",  # upstream's `name: k8s-jobs` ended up inside an annotation
        local_cluster=True,
    ),
    Example("loops"),
    Example("loops-dag"),
    Example("loops-param-result", timeout_s=300),
    Example("output-parameter"),
    Example("parameter-aggregation-dag"),
    Example("retry-backoff", last_attempts, redraw=True, timeout_s=300),
    Example("retry-script", last_attempts, redraw=True, timeout_s=300),
    Example("scripts-bash", drawn_number("[0].generate")),
    Example("scripts-python", drawn_number("[0].generate")),
    Example("steps"),
    Example("template-defaults", last_attempts, redraw=True, timeout_s=300),
]
# Workflows of ours (tests/e2e/workflows/) for what no upstream example here covers and the local runner does:
# containerSet pods, {{steps.X.exitCode}}, `retryStrategy: {}`, a retry expression, a timed suspend, loop items
# as their JSON text (numbers as spelt, map values' escapes kept), mutexes of a workflow and of its templates.
COMPARED += [
    Example("container-set", directory=OURS),
    Example("exit-codes-and-retries", directory=OURS),
    Example("loop-item-values", directory=OURS),
    Example("suspend-for-a-while", directory=OURS),
    Example("synchronization", directory=OURS),
]

# How many more times a drawn example runs on the real controller, alone, when none of the local runner's draws
# agreed with its first run. retry-backoff's `maxDuration: 1m` is wall time: each failed attempt costs a pod start,
# a few seconds on the real nodes against about one locally, so about six failures in a row (p = (2/3)^6 ≈ 9 %, more
# on the busy cluster of the first runs) end the real run by maxDuration where the local one goes on and succeeds.
# With one redraw that failed an estimated 1-3 % of CI runs (c004099's did); with three, alone, about 10^-4.
REAL_REDRAWS = 3

# The rule: an example runs here when it needs nothing but the cluster and the images the real nodes hold — no
# artifact repository, URL, Secret, ConfigMap, volume or CRD the cluster lacks (a `resource` template of built-in
# kinds is fine: argoexec embeds kubectl). All 26 upstream examples pass it; EXCLUDED names those that would not,
# and why.
EXCLUDED: dict[str, str] = {}


def test_every_upstream_example_is_compared_or_excluded() -> None:
    shipped = {p.stem for p in EXAMPLES.glob("*.yaml")}
    assert shipped, f"no examples in {EXAMPLES}"
    upstream = {e.name for e in COMPARED if e.directory == EXAMPLES}
    assert upstream | EXCLUDED.keys() == shipped
    assert not upstream & EXCLUDED.keys()
    assert {e.name for e in COMPARED if e.directory == OURS} == {p.stem for p in OURS.glob("*.yaml")}


@pytest.fixture(scope="module")
def cluster_runs(
    request: pytest.FixtureRequest, admin: Any, real_nodes: list[Any], step_image: str
) -> Iterator[ClusterRuns]:
    """Every compared example this session runs, created on the real controller up front, several at a time.

    Only those selected (`-k`, a test id): a run of one example does not wait for the others.
    """
    selected = {
        item.callspec.params["example"].name
        for item in request.session.items
        if "example" in getattr(getattr(item, "callspec", None), "params", {})
    }
    runs = ClusterRuns(admin, [example for example in COMPARED if example.name in selected])
    yield runs
    runs.close()


@pytest.mark.parametrize("example", COMPARED, ids=lambda e: e.name)
def test_the_local_runner_agrees_with_the_real_controller(
    example: Example,
    admin: Any,
    cluster_runs: ClusterRuns,
    eventually: Callable[..., Any],
    tmp_path: Path,
) -> None:
    homes = count()

    def real_runs() -> Iterator[Run]:
        yield cluster_runs.first_run(example)
        for _ in range(REAL_REDRAWS if example.redraw else 0):  # drawn only while no pair has agreed
            yield run_on_cluster(admin, cluster_runs.namespace(example), example, eventually)

    def local_run() -> Run:
        return run_locally(example, tmp_path / f"home-{next(homes)}")

    real, local = compared(example, real_runs(), local_run)
    assert not differences(real, local), "\n".join([f"{example.name} differs:", *differences(real, local)])
