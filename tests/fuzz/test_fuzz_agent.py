"""Fuzz what reaches the agent from outside: an LLM's replies, the actions in them, and tool (MCP) arguments.

A reply that is not a usable action must make the LLM policy fall back to the rules with one sentence saying why,
never raise; a tool call with bad arguments must come back as a ToolResult refusing it, never raise (the MCP
server hands a client's arguments to `call_tool` untouched, agent/mcp_server.py).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import httpx
from fuzz_kit import JSON, mutated_bytes, mutated_tree, one_line
from hypothesis import example, given
from hypothesis import strategies as st

from agent.actions import Abort, Downscale, Proceed, RetryFromCheckpoint, Wait, parse_action
from agent.guardrails import DEFAULT_IMAGE, Guardrails
from agent.observation import CheckpointInfo, Observation, PlanRequest
from agent.policy_llm import LLMPolicy
from agent.tools import TOOLS, ToolContext, call_tool
from components.volcano.cluster import NodeInfo, QueueSnapshot
from components.volcano.cluster_local import LocalCluster

REQUEST = PlanRequest(gpus=8, gpus_min=2, global_batch=64, micro_batch=2, queue="default", fallback_queue="spare")
OBSERVATION = Observation(
    time=1000.0,
    request=REQUEST,
    queue=QueueSnapshot(name="default", state="Open", capability={"nvidia.com/gpu": 8}),
    nodes=[NodeInfo(name="n1", ready=True, gpu_capacity=8, gpu_allocatable=8, gpu_allocated=0)],
    checkpoint=CheckpointInfo(path="/ws/ckpt/step-40", step=40),
)
SHAPE = {"gpus": 8, "micro_batch": 2, "grad_accum": 4, "queue": "default", "rationale": "the queue is idle"}
ACTIONS: list[dict[str, Any]] = [
    Proceed(**SHAPE).model_dump(),
    Downscale(**{**SHAPE, "gpus": 4, "grad_accum": 8, "from_gpus": 8}).model_dump(),
    Wait(reason="the queue is full", recheck_s=60, rationale="wait").model_dump(),
    RetryFromCheckpoint(**SHAPE, checkpoint="/ws/ckpt/step-40", checkpoint_step=40, avoid_nodes=["n9"]).model_dump(),
    Abort(reason="nothing fits", rationale="abort").model_dump(),
]


def _reply(arguments: Any, name: str = "decide") -> dict[str, Any]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    call = {"id": "c1", "type": "function", "function": {"name": name, "arguments": text}}
    return {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}


REPLIES = [_reply(a) for a in ACTIONS] + [_reply({"queue": "default"}, "get_queue_status"), _reply({}, "list_nodes")]


@given(st.one_of(mutated_tree(ACTIONS, steps=3), JSON))
@example({**ACTIONS[0], "gpus": 2**70})
@example({**ACTIONS[2], "recheck_s": float("nan")})
@example({**ACTIONS[2], "recheck_s": float("inf")})  # what json.loads makes of an LLM's 1e999
def test_action_parser(data: Any) -> None:
    try:
        action = parse_action(data)
    except ValueError as err:
        one_line(str(err))
    else:  # an action the agent takes is written to its decision record, and read back from it
        assert parse_action(action.model_dump_json()) == action


@given(mutated_bytes([json.dumps(a).encode() for a in ACTIONS]))
def test_action_parser_on_text(data: bytes) -> None:
    try:
        parse_action(data)
    except ValueError as err:
        one_line(str(err))


# One cluster for every example: both nodes are failed, so a job a tool submits is stored but never starts a pod.
_HOME = tempfile.TemporaryDirectory(prefix="vcpilot-fuzz-agent-")
_CLUSTER = LocalCluster(Path(_HOME.name) / "home", hook=False)
for _node in ("node-0", "node-1"):
    _CLUSTER.fail_node(_node)
CONTEXT = ToolContext(
    cluster=_CLUSTER,
    guardrails=Guardrails(queues=["default"]),
    checkpoints_root=Path(_HOME.name) / "workspace",
)

Reply = tuple[int, Any]  # (HTTP status, JSON body or raw bytes)


@given(
    st.lists(
        st.tuples(
            st.sampled_from([200, 200, 200, 400, 429, 500]),
            st.one_of(mutated_tree(REPLIES, steps=3), JSON, mutated_bytes([json.dumps(r).encode() for r in REPLIES])),
        ),
        min_size=1,
        max_size=4,
    ),
    st.booleans(),
)
# An endpoint that answers Python's JSON extensions (Infinity): not JSON, a fallback, not a crash of the next request.
@example(
    [(200, {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [{"": float("inf")}]}}]})],
    False,
)
@example([(200, {"choices": [{"message": {"tool_calls": [{"function": {"name": "decide", "arguments": 1}}]}}]})], False)
def test_llm_policy_falls_back_on_any_reply(replies: list[Reply], with_tools: bool) -> None:
    queue = list(replies)

    def handler(request: httpx.Request) -> httpx.Response:
        status, body = queue.pop(0) if queue else replies[-1]
        if isinstance(body, bytes):
            return httpx.Response(status, content=body)
        return httpx.Response(status, content=json.dumps(body, allow_nan=True).encode())

    policy = LLMPolicy(
        "http://llm.test/v1",
        "m",
        "sk-fuzz-0123456789",
        guardrails=Guardrails(),
        tools_context=CONTEXT if with_tools else None,
        transport=httpx.MockTransport(handler),
        max_rounds=3,
    )
    for stage in ("plan", "diagnose"):
        decision = policy.decide(OBSERVATION, stage)
        assert decision.policy in ("llm", "rules")
        if decision.policy == "rules":
            one_line(decision.fallback)
        assert "sk-fuzz-0123456789" not in decision.model_dump_json()


TOOL_ARGUMENTS: list[dict[str, Any]] = [
    {"queue": "default"},
    {"name": "ft", "namespace": "default"},
    {"directory": "ckpt"},
    {
        "name": "ft",
        "image": f"{DEFAULT_IMAGE}:0.1.0",
        "command": ["python", "-m", "components.finetune.train"],
        "total_gpus": 8,
        "gpus_per_pod": 4,
        "micro_batch": 2,
        "grad_accum": 2,
        "global_batch": 32,
    },
]


@given(
    st.one_of(st.sampled_from(sorted(TOOLS)), st.text(max_size=20)),
    st.one_of(mutated_tree(TOOL_ARGUMENTS, steps=3), JSON),
)
@example("find_latest_checkpoint", {"directory": "../../etc"})
@example("find_latest_checkpoint", {"directory": "\x00"})
@example("submit_training_job", {**TOOL_ARGUMENTS[3], "env": {"A": 1}})
def test_tool_arguments(name: str, arguments: Any) -> None:
    result = call_tool(CONTEXT, name, arguments)
    assert result.ok or result.error
    if not result.ok:
        one_line(result.error)
