"""MCP server benchmark: 50 clients at once against the agent's MCP server, beside the same calls from one client.

Each client is the official SDK's `Client` on the server in this process (the in-memory transport: what is
measured is the server and its tools, not a pipe), opens its session, lists the tools and reads the queue and the
nodes of a LocalCluster `--calls` times. The baseline makes the same calls one client after another. One client
first warms the server (its models' first validation), then the two runs alternate `--rounds` times, so that a
machine busy for a while slows both alike; the ratio is the median of the rounds'. Goals: every call of every
client answered (no error), and the concurrent run no slower than the serial one. Prints one JSON document.

    python benchmarks/mcp_load.py [--clients 50] [--calls 4] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/mcp_load.py`: benchmarks/agent.py would shadow the package
    sys.path[0] = str(Path(__file__).resolve().parents[1])

import anyio  # noqa: E402
from mcp import Client  # noqa: E402

from agent.guardrails import Guardrails  # noqa: E402
from agent.mcp_server import build_server  # noqa: E402
from agent.tools import ToolContext  # noqa: E402
from benchmarks.goals import figure  # noqa: E402
from components.volcano.cluster_local import LocalCluster  # noqa: E402
from components.volcano.localconfig import LocalClusterConfig  # noqa: E402


async def one_client(server: object, calls: int, latencies: list[float], errors: list[str]) -> None:
    """Open a session, list the tools, then read the queue and the nodes `calls` times each."""
    async with Client(server) as client:  # type: ignore[arg-type]
        if not (await client.list_tools()).tools:
            errors.append("no tools listed")
        for _ in range(calls):
            for name, arguments in (("get_queue_status", {"queue": "default"}), ("list_nodes", {})):
                start = time.perf_counter()
                result = await client.call_tool(name, arguments)
                latencies.append(time.perf_counter() - start)
                if result.is_error:
                    errors.append(f"{name}: {getattr(result.content[0], 'text', '')}")


async def serial(server: object, clients: int, calls: int) -> tuple[float, list[float], list[str]]:
    latencies: list[float] = []
    errors: list[str] = []
    start = time.perf_counter()
    for _ in range(clients):
        await one_client(server, calls, latencies, errors)
    return time.perf_counter() - start, latencies, errors


async def concurrent(server: object, clients: int, calls: int) -> tuple[float, list[float], list[str]]:
    latencies: list[float] = []
    errors: list[str] = []
    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(clients):
            group.start_soon(one_client, server, calls, latencies, errors)
    return time.perf_counter() - start, latencies, errors


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) > 1 else (values[0] if values else 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--calls", type=int, default=4, help="reads of the queue and of the nodes per client")
    parser.add_argument("--rounds", type=int, default=5, help="serial and concurrent runs, alternating")
    args = parser.parse_args()
    if min(args.clients, args.calls, args.rounds) < 1:
        parser.error("--clients, --calls and --rounds must be at least 1")
    serial_runs, together_runs = [], []
    with tempfile.TemporaryDirectory(prefix="vcpilot-bench-mcp-") as tmp:
        config = LocalClusterConfig.model_validate({"nodes": [{"name": "node", "count": 100, "gpus": 8}]})
        cluster = LocalCluster(Path(tmp) / "home", config, hook=False)
        server = build_server(ToolContext(cluster, Guardrails()))
        anyio.run(serial, server, 1, 1)  # warm-up: neither side pays the first validations
        for _ in range(args.rounds):
            serial_runs.append(anyio.run(serial, server, args.clients, args.calls))
            together_runs.append(anyio.run(concurrent, server, args.clients, args.calls))
        cluster.close()
    ratio = statistics.median(t[0] / s[0] for s, t in zip(serial_runs, together_runs, strict=True))
    serial_s = statistics.median(run[0] for run in serial_runs)
    together_s = statistics.median(run[0] for run in together_runs)
    serial_lat = [x for run in serial_runs for x in run[1]]
    together_lat = [x for run in together_runs for x in run[1]]
    serial_err = [x for run in serial_runs for x in run[2]]
    together_err = [x for run in together_runs for x in run[2]]
    expected = args.clients * args.calls * 2
    answered = min(len(run[1]) - len(run[2]) for run in together_runs)  # the worst round
    report = {
        "clients": args.clients,
        "rounds": args.rounds,
        "ratios": [round(t[0] / s[0], 3) for s, t in zip(serial_runs, together_runs, strict=True)],
        "calls_per_client": expected // args.clients,
        "serial": {"wall_s": round(serial_s, 3), "p95_call_ms": round(p95(serial_lat) * 1000, 2)},
        "concurrent": {"wall_s": round(together_s, 3), "p95_call_ms": round(p95(together_lat) * 1000, 2)},
        "errors": (serial_err + together_err)[:5],
        "figures": [
            figure(f"MCP: calls answered, {args.clients} clients at once", answered, "==", expected, unit="calls"),
            figure(
                f"MCP: {args.clients} concurrent clients, wall time",
                ratio,
                "<=",
                1.0,
                unit="x",
                baseline="the same sessions one after another",
            ),
        ],  # fmt: skip
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
