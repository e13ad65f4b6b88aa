"""The agent's tools against a LocalCluster in tmp: typed answers, plain explanations, refusals that name the rule.

No pod runs here: the jobs these tests submit cannot be placed (a node is failed or the gang is too large), so
the cluster only stores and schedules them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from agent.guardrails import DEFAULT_IMAGE, Guardrails
from agent.pending import explain
from agent.tools import TOOLS, ToolContext, call_tool, openai_tools
from components.volcano.cluster import JobInfo
from components.volcano.cluster_local import LocalCluster
from components.volcano.localconfig import LocalClusterConfig
from components.volcano.models import parse_job, validate_job

IMAGE = f"{DEFAULT_IMAGE}:0.1.0"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """Two nodes × 4 GPUs, and a `capped` queue that may hold 2 GPUs."""
    config = LocalClusterConfig.model_validate({"queues": [{"name": "capped", "capability": {"nvidia.com/gpu": 2}}]})
    c = LocalCluster(tmp_path / "home", config)
    yield c
    for job in c.list_jobs():
        c.delete(job.name, job.namespace, missing_ok=True)
    c.close()


@pytest.fixture
def ctx(cluster: LocalCluster, tmp_path: Path) -> ToolContext:
    rules = Guardrails(queues=["default", "capped"])
    return ToolContext(cluster=cluster, guardrails=rules, checkpoints_root=tmp_path / "workspace")


def training(**changes: Any) -> dict[str, Any]:
    request = {
        "name": "ft",
        "image": IMAGE,
        "command": ["python", "-m", "components.finetune.train"],
        "total_gpus": 8,
        "gpus_per_pod": 4,
        "micro_batch": 2,
        "grad_accum": 2,
        "global_batch": 32,
    }
    return {**request, **changes}


def ok(ctx: ToolContext, tool: str, /, **arguments: Any) -> dict[str, Any]:
    result = call_tool(ctx, tool, arguments)
    assert result.ok, result.error
    return result.data


def error(ctx: ToolContext, name: str, arguments: Any) -> str:
    result = call_tool(ctx, name, arguments)
    assert not result.ok and result.data == {}
    assert result.error and "\n" not in result.error
    return result.error


def test_queue_status_and_nodes_are_typed_snapshots(ctx):
    queue = ok(ctx, "get_queue_status", queue="capped")
    assert (queue["name"], queue["state"], queue["capability"]) == ("capped", "Open", {"nvidia.com/gpu": 2.0})
    nodes = ok(ctx, "list_nodes")["nodes"]
    assert [(n["name"], n["ready"], n["gpu_allocatable"]) for n in nodes] == [("node-0", True, 4), ("node-1", True, 4)]
    assert error(ctx, "get_queue_status", {"queue": "nope"}) == "queue 'nope' does not exist."


def test_explain_pending_says_the_gang_is_short_and_which_node_is_out(ctx, cluster):
    cluster.fail_node("node-0")
    assert ok(ctx, "submit_training_job", **training())["phase"] == "Pending"

    why = ok(ctx, "explain_pending", name="ft")
    assert why["pending"] is True
    assert (why["gpus_needed"], why["gpus_free"], why["short_by"]) == (8, 4, 4)
    assert why["excluded_nodes"] == {"node-0": "NotReady"}
    assert "short by 4 GPUs" in why["summary"] and "node-0 (NotReady)" in why["summary"]
    assert ok(ctx, "get_job_status", name="ft")["phase"] == "Pending"


def test_explain_pending_names_affinity_that_leaves_too_few_gpus(ctx, cluster):
    cluster.fail_node("node-0")
    ok(ctx, "submit_training_job", **training(avoid_nodes=["node-1"]))
    why = ok(ctx, "explain_pending", name="ft")
    assert why["excluded_nodes"] == {"node-0": "NotReady", "node-1": "excluded by the job's node affinity"}
    assert "short by 8 GPUs and cannot start as asked" in why["summary"]


def test_explain_pending_names_the_queue_capability_and_a_closed_queue(ctx, cluster):
    ok(ctx, "submit_training_job", **training(queue="capped", total_gpus=4, gpus_per_pod=1, grad_accum=4))
    why = ok(ctx, "explain_pending", name="ft")
    assert "queue 'capped' may hold at most 2 GPUs and the gang needs 4" in why["summary"]

    cluster.apply_queue({"metadata": {"name": "capped"}, "status": {"state": "Closed"}})
    assert "queue 'capped' is Closed" in ok(ctx, "explain_pending", name="ft")["summary"]


def test_explain_pending_counts_podgroups_ahead_in_the_queue(ctx, cluster):
    cluster.fail_node("node-0")
    cluster.fail_node("node-1")
    ok(ctx, "submit_training_job", **training(name="first"))
    ok(ctx, "submit_training_job", **training(name="second"))
    assert ok(ctx, "explain_pending", name="first")["ahead"] == 0
    why = ok(ctx, "explain_pending", name="second")
    assert why["ahead"] == 1 and "1 PodGroup is ahead of it in queue 'default'" in why["summary"]


def test_the_schedulers_words_are_quoted_as_data():
    # An event or a PodGroup condition is anyone's text: an MCP client's terminal must not act on it.
    said = "\x1b[2J\u202e0 of 2 nodes are available" + "!" * 5000
    info = JobInfo(name="ft", uid="u", queue="default", phase="Pending", min_available=2, message=said)
    why = explain(info, None, [], None)
    for text in (why.summary, why.scheduler_message):
        assert "\x1b" not in text and "\u202e" not in text and "\\u202e0 of 2 nodes" in text and len(text) < 2400


def test_a_job_that_is_not_pending_is_said_so():
    info = JobInfo(name="ft", uid="u", queue="default", phase="Running", min_available=2, podgroup_phase="Running")
    why = explain(info, None, [], None)
    assert (
        not why.pending
        and why.summary == "job default/ft is Running (PodGroup Running), not Pending; nothing holds it back."
    )


def test_plan_renders_a_vcjob_that_validates_and_submits_nothing(ctx, cluster, shared_dir):
    planned = ok(ctx, "plan_training_job", **training(avoid_nodes=["node-1"], resume_checkpoint="/ws/step-10"))
    assert (planned["gpus"], planned["pods"], planned["submitted"]) == (8, 2, False)
    job = parse_job(planned["manifest"])
    validate_job(job)
    assert [t.name for t in job.spec.tasks] == ["master", "worker"]
    crd = yaml.safe_load((shared_dir / "schemas" / "volcano-v1.15.1" / "batch.volcano.sh_jobs.yaml").read_text())
    version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
    jsonschema.Draft7Validator(version["schema"]["openAPIV3Schema"]).validate(planned["manifest"])
    assert cluster.list_jobs() == []


def test_plan_is_refused_by_the_guardrails_naming_the_rule(ctx, cluster):
    result = call_tool(ctx, "plan_training_job", training(total_gpus=512, global_batch=2048))
    assert (result.ok, result.rule) == (False, "max_gpus_per_job")
    assert result.error == "refused by guardrail max_gpus_per_job: job ft asks 512 GPUs, the cap is 8"
    result = call_tool(ctx, "plan_training_job", training(image="docker.io/evil/miner:1"))
    assert result.rule == "images" and "docker.io/evil/miner:1" in result.error
    assert cluster.list_jobs() == []


def test_bad_arguments_get_one_sentence(ctx):
    assert "did you mean total_gpus?" in error(ctx, "plan_training_job", {**training(), "total_gpu": 8})
    assert "global_batch 30 must equal total_gpus × micro_batch × grad_accum" in error(
        ctx, "plan_training_job", training(global_batch=30)
    )
    assert "name: field is required" in error(ctx, "get_job_status", {})
    assert "must be a JSON object" in error(ctx, "list_nodes", ["x"])
    assert error(ctx, "submit_job", {}) == "there is no tool 'submit_job'; did you mean submit_training_job?"


def test_a_count_past_what_a_manifest_holds_is_one_sentence_not_pydantics_report(ctx, cluster):
    # These passed the request's checks and failed in the rendered job's models, whose multi-line report went out.
    result = call_tool(ctx, "submit_training_job", training(total_gpus=10**30, global_batch=4 * 10**30))
    assert (result.ok, result.rule) == (False, "max_gpus_per_job")
    assert result.error == f"refused by guardrail max_gpus_per_job: job ft asks {10**30} GPUs, the cap is 8"
    for field in ("max_retry", "ttl_seconds_after_finished"):
        message = error(ctx, "submit_training_job", training(**{field: 10**20}))
        assert message == f"{field}: value must be at most 2147483647, got {10**20}"
    assert cluster.list_jobs() == []


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("get_job_status", {"name": "a" * 100_000}),  # a cluster error quoting the name
        ("get_job_status", {"name": "ft", "namespace": "a" * 100_000}),  # a guardrail refusal quoting it
        ("plan_training_job", {**training(), "queue": "a" * 100_000}),  # a validation error quoting it
        ("get_job_status", {"name": "ft\u202e\x1b[2J"}),  # a bidi override and an ANSI escape in the name
    ],
)
def test_an_error_quotes_a_hostile_value_short_and_escaped(ctx, tool, arguments):
    message = error(ctx, tool, arguments)
    assert len(message) < 1100
    assert "\u202e" not in message and "\x1b" not in message


def test_read_only_refuses_submit_and_cancel_at_call_time(ctx, cluster):
    cluster.fail_node("node-0")
    ok(ctx, "submit_training_job", **training(name="kept"))
    read_only = ToolContext(cluster, ctx.guardrails.model_copy(update={"read_only": True}), ctx.checkpoints_root)

    result = call_tool(read_only, "submit_training_job", training())
    assert (result.ok, result.rule) == (False, "read_only")
    assert "submit_training_job changes the cluster" in result.error
    assert call_tool(read_only, "cancel_job", {"name": "kept"}).rule == "read_only"
    assert [j.name for j in cluster.list_jobs()] == ["kept"]
    assert call_tool(read_only, "plan_training_job", training()).ok


def test_cancel_deletes_the_job_within_allowed_namespaces_only(ctx, cluster):
    cluster.fail_node("node-0")
    ok(ctx, "submit_training_job", **training())
    assert call_tool(ctx, "cancel_job", {"name": "ft", "namespace": "kube-system"}).rule == "namespaces"
    assert call_tool(ctx, "get_job_status", {"name": "ft", "namespace": "kube-system"}).rule == "namespaces"
    assert ok(ctx, "cancel_job", name="ft") == {
        "name": "ft",
        "namespace": "default",
        "deleted": True,
        "phase_before": "Pending",
    }
    assert cluster.list_jobs() == []
    assert error(ctx, "cancel_job", {"name": "ft"}) == "job default/ft does not exist."


def test_cancel_refuses_a_job_vcpilot_did_not_render(ctx, cluster):
    # A colleague's job (or the pipeline's serving one) in an allowed namespace was deleted on an MCP client's word.
    ok(ctx, "submit_training_job", **training(name="ours"))
    assert cluster.get("ours").labels["app.kubernetes.io/managed-by"] == "vcpilot"
    theirs = ok(ctx, "plan_training_job", **training(name="theirs"))["manifest"]
    del theirs["metadata"]["labels"]["app.kubernetes.io/managed-by"]
    cluster.submit(theirs)
    refused = call_tool(ctx, "cancel_job", {"name": "theirs"})
    assert (refused.ok, refused.rule) == (False, "cancel_unmanaged")
    assert "job default/theirs was not rendered by vcpilot" in refused.error
    assert sorted(j.name for j in cluster.list_jobs()) == ["ours", "theirs"]
    assert ok(ctx, "cancel_job", name="ours")["deleted"]
    lifted = ToolContext(cluster, ctx.guardrails.model_copy(update={"cancel_unmanaged": True}), ctx.checkpoints_root)
    assert ok(lifted, "cancel_job", name="theirs")["deleted"]
    assert cluster.list_jobs() == []


def checkpoint(directory: Path, step: int, complete: bool = True) -> Path:
    path = directory / f"step-{step}"
    path.mkdir(parents=True)
    if complete:
        (path / "metadata.json").write_text(f'{{"step": {step}}}')
    return path


def test_latest_checkpoint_is_the_newest_complete_step(ctx, tmp_path):
    run = tmp_path / "workspace" / "runs" / "wf-1" / "checkpoints"
    checkpoint(run, 10)
    newest = checkpoint(run, 200)
    checkpoint(run, 300, complete=False)  # a save that crashed before its metadata file
    found = ok(ctx, "find_latest_checkpoint", directory="runs/wf-1/checkpoints")
    assert (found["found"], found["path"], found["step"]) == (True, str(newest), 200)
    assert ok(ctx, "find_latest_checkpoint", directory=str(run))["step"] == 200
    empty = ok(ctx, "find_latest_checkpoint", directory="runs/none")
    assert (empty["found"], empty["path"]) == (False, "")


def test_latest_checkpoint_stays_under_the_checkpoints_root(ctx, tmp_path):
    outside = tmp_path / "secrets"
    checkpoint(outside, 1)
    for directory in ("../secrets", str(outside), "runs/../../secrets"):
        assert "outside the checkpoints root" in error(ctx, "find_latest_checkpoint", {"directory": directory})
    link = tmp_path / "workspace" / "link"
    link.parent.mkdir(parents=True)
    link.symlink_to(outside)
    assert "outside the checkpoints root" in error(ctx, "find_latest_checkpoint", {"directory": "link"})


@pytest.mark.parametrize("metadata", ["[" * 100_000, '{"step": 1e999}', '{"files": ["weights.pt"]}'])
def test_a_checkpoint_whose_metadata_no_reader_expects_is_none(ctx, tmp_path, metadata):
    # A training pod writes the workspace: this metadata raised out of call_tool, and the MCP client got the SDK's
    # bare "Error executing tool" with no audit line.
    step = tmp_path / "workspace" / "runs" / "x" / "step-3"
    step.mkdir(parents=True)
    (step / "metadata.json").write_text(metadata)
    found = ok(ctx, "find_latest_checkpoint", directory="runs/x")
    assert (found["found"], found["path"]) == (False, "")


def test_openai_specs_leave_mutating_tools_out_in_read_only_mode():
    full = {spec["function"]["name"]: spec for spec in openai_tools(read_only=False)}
    assert list(full) == list(TOOLS)
    read_only = [spec["function"]["name"] for spec in openai_tools(read_only=True)]
    assert "submit_training_job" not in read_only and "cancel_job" not in read_only
    assert "plan_training_job" in read_only and len(read_only) == 6
    for spec in full.values():
        assert spec["type"] == "function" and spec["function"]["description"]
        assert spec["function"]["parameters"]["type"] == "object" and "properties" in spec["function"]["parameters"]
    assert "total_gpus" in full["plan_training_job"]["function"]["parameters"]["required"]


class _Untouchable:
    """A cluster no call may reach."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the cluster was called: {name}")


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("get_job_status", {"name": "."}),  # in a URL path: the collection of jobs
        ("cancel_job", {"name": "."}),  # DELETE .../jobs/ would be a deletecollection
        ("cancel_job", {"name": ".."}),
        ("explain_pending", {"name": "ft", "namespace": ".."}),
        ("get_job_status", {"name": "ft", "namespace": "a/../b"}),
        ("get_queue_status", {"queue": ".."}),
        ("get_job_status", {"name": "Ft_1"}),
        ("get_job_status", {"name": "ft\x00"}),
        ("find_latest_checkpoint", {"directory": "runs/a\x00b"}),  # was Python's bare "embedded null byte"
    ],
)
def test_a_name_that_is_no_kubernetes_name_is_refused_before_the_cluster_is_asked(tool, arguments):
    ctx = ToolContext(cluster=_Untouchable(), guardrails=Guardrails(namespaces=["*"]))  # type: ignore[arg-type]
    result = call_tool(ctx, tool, arguments)
    assert not result.ok and result.error.startswith(f"bad arguments for {tool}: ")
    assert "DNS-1123" in result.error or "without control characters" in result.error
