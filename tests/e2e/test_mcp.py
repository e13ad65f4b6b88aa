"""The MCP server against real Volcano: the SDK's client lists the tools, reads the cluster, explains a Pending
gang, submits through the guardrails, and read-only mode refuses a submit with nothing created."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import CallToolResult

from agent.guardrails import DEFAULT_IMAGE, Guardrails
from agent.mcp_server import build_server
from agent.tools import TOOLS, ToolContext

pytestmark = pytest.mark.e2e

KWOK_COMPLETE = "pod-complete.stage.kwok.x-k8s.io"


def training(name: str, namespace: str, gpus: int) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": namespace,
        "image": f"{DEFAULT_IMAGE}:0.1.0",
        "command": ["python", "-m", "components.finetune"],
        "total_gpus": gpus,
        "gpus_per_pod": 1,
        "micro_batch": 1,
        "grad_accum": 1,
        "global_batch": gpus,
        "cpu_per_pod": "1",
        "memory_per_pod": "1Gi",
    }


def text(result: CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def call(context: ToolContext, name: str, arguments: dict[str, Any]) -> CallToolResult:
    async def session() -> CallToolResult:
        async with Client(build_server(context)) as client:
            return await client.call_tool(name, arguments)

    return anyio.run(session)


def test_the_tools_read_and_explain_the_real_cluster(cluster, namespace, eventually):
    guardrails = Guardrails(namespaces=[namespace], max_gpus_per_job=64)
    context = ToolContext(cluster, guardrails)

    async def listing() -> list[str]:
        async with Client(build_server(context)) as client:
            return [tool.name for tool in (await client.list_tools()).tools]

    assert anyio.run(listing) == list(TOOLS)
    nodes = call(context, "list_nodes", {})
    assert not nodes.is_error and nodes.structured_content
    total = sum(n["gpu_allocatable"] for n in nodes.structured_content["nodes"])
    queue = call(context, "get_queue_status", {"queue": "default"})
    assert not queue.is_error and queue.structured_content["state"] == "Open"

    # A gang larger than every GPU of the cluster: submitted through the tool, it stays Pending, explained.
    too_big = call(context, "submit_training_job", training("too-big", namespace, total + 2))
    assert not too_big.is_error, text(too_big)
    eventually("the gang is Pending", lambda: cluster.get("too-big", namespace).podgroup_phase == "Pending")
    why = call(context, "explain_pending", {"name": "too-big", "namespace": namespace})
    assert not why.is_error and why.structured_content, text(why)
    explained = why.structured_content
    assert explained["pending"] is True and explained["gpus_needed"] == total + 2
    assert explained["short_by"] >= 2 and explained["summary"]
    assert all(pod.node is None for pod in cluster.get("too-big", namespace).pods)  # gang: no pod bound
    cancelled = call(context, "cancel_job", {"name": "too-big", "namespace": namespace})
    assert not cancelled.is_error, text(cancelled)


def test_read_only_refuses_a_submit_on_the_real_cluster(cluster, namespace):
    context = ToolContext(cluster, Guardrails(namespaces=[namespace], read_only=True))
    refused = call(context, "submit_training_job", training("ft", namespace, 1))
    assert refused.is_error and "read_only" in text(refused)
    assert cluster.list_jobs(namespace=namespace) == []
