"""Load generator benchmark: how many requests per second `vcpilot loadtest` drives, beside `wrk` on the same server.

Two trivial servers, each in its own process, answer every POST with the same streamed completion (5 text
chunks, usage, [DONE]): a raw asyncio HTTP/1.1 server (as fast as Python serves) and a bare ASGI app on uvicorn
(how our own server and most Python LLM servers are built). Against each, one after the other:

- peak request rate at `--concurrency` connections (closed loop): ours (`run_loadtest`, streaming, with
  per-request records and metrics) vs wrk; the goal is ours >= 0.5x wrk;
- CPU time per request of each generator during those runs (user + system): unlike the rates, it does not
  depend on how busy the machine is, and its ratio is what the rates would be if both generators saturated
  an equal core;
- sustained open-loop rate: our Poisson arrivals at 80%, 60%, 40%, then 20% of our peak, until one is achieved
  within 5% without errors; in flight capped at 4x `--concurrency`, so that a generator falling behind queues
  instead of opening a connection per late request (thousands, until the server runs out of file descriptors);
- added latency at p50 over one connection: our end-to-end p50 minus wrk's p50, and minus the server's own
  handling time (which each server measures and reports at GET /stats);
- where our CPU per request goes, layer by layer, at `--concurrency` connections, each on uvloop's event loop
  (which `run_loadtest` runs on): a bare asyncio-streams loop that writes the request and reads the response
  without looking at it, and the same on asyncio's callbacks (`bare_asyncio_protocol`); our HTTP/1.1 client
  reading the response's lines; `send_request` on it (that plus SSE and JSON parsing, timestamps and the request
  record); `sse_client`, `SseClient.send`, the same work on callbacks, which is what `run_loadtest` uses for
  http://. The bare protocol and `sse_client` once more on asyncio's own loop (`..._stdlib_loop`), for comparison.

With two CPUs or more the server is pinned to the first and the clients to the others. Best of `--rounds`.
Prints one JSON document. wrk comes from the distribution (`apt-get install -y wrk`); without it the wrk figures
are null and a note says so.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import uvicorn  # noqa: E402
import uvloop  # noqa: E402
from goals import figure  # noqa: E402

from components.loadtest.client import encode_request, parse_target, send_request  # noqa: E402
from components.loadtest.http1 import Http1Client  # noqa: E402
from components.loadtest.records import RequestSpec  # noqa: E402
from components.loadtest.session import build_config, run_loadtest_sync  # noqa: E402
from components.loadtest.sse import SseClient  # noqa: E402

PIECES = ["The", " model", " is", " fine", "."]
BODY = "".join(
    f"data: {json.dumps({'object': 'text_completion', 'choices': [{'index': 0, 'text': p}]})}\n\n" for p in PIECES
).encode()
BODY += b'data: {"choices":[],"usage":{"prompt_tokens":6,"completion_tokens":5,"total_tokens":11}}\n\n'
BODY += b"data: [DONE]\n\n"
MODELS = json.dumps({"object": "list", "data": [{"id": "fixed"}]}).encode()
PAYLOAD = json.dumps({"prompt": "model latency token cluster queue stream", "max_tokens": 16, "stream": True})
HANDLING_NS: list[int] = []  # per server process


def _stats() -> bytes:
    global HANDLING_NS
    times = HANDLING_NS or [0]
    HANDLING_NS = []
    return json.dumps({"requests": len(times), "p50_ms": statistics.median(times) / 1e6}).encode()


# ---- server 1: raw asyncio HTTP/1.1 -----------------------------------------------------------------------------


def _http(body: bytes, kind: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s" % (kind, len(body), body)


STREAM = _http(BODY, b"text/event-stream")


class FixedCompletion(asyncio.Protocol):
    """HTTP/1.1 with keep-alive: every POST gets the same streamed completion, GET /stats the handling times."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: Any = transport
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (head_end := self.buffer.find(b"\r\n\r\n")) >= 0:
            started = time.perf_counter_ns()
            head = self.buffer[:head_end].decode("latin-1")
            match = re.search(r"(?im)^content-length:\s*(\d+)", head)
            end = head_end + 4 + (int(match.group(1)) if match else 0)
            if len(self.buffer) < end:
                return
            self.buffer = self.buffer[end:]
            if head.startswith("POST"):
                self.transport.write(STREAM)
                HANDLING_NS.append(time.perf_counter_ns() - started)
            elif head.startswith("GET /stats"):
                self.transport.write(_http(_stats(), b"application/json"))
            else:
                self.transport.write(_http(MODELS, b"application/json"))


def serve_asyncio(sock: socket.socket) -> None:
    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(FixedCompletion, sock=sock, backlog=4096)
        await server.serve_forever()

    asyncio.run(main())


# ---- server 2: a bare ASGI app on uvicorn -----------------------------------------------------------------------


async def fixed_asgi(scope: dict, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    started = time.perf_counter_ns()
    while (await receive()).get("more_body"):
        pass
    if scope["method"] == "POST":
        body, kind = BODY, b"text/event-stream"
    elif scope["path"] == "/stats":
        body, kind = _stats(), b"application/json"
    else:
        body, kind = MODELS, b"application/json"
    headers = [(b"content-type", kind), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
    if scope["method"] == "POST":
        HANDLING_NS.append(time.perf_counter_ns() - started)


def serve_uvicorn(sock: socket.socket) -> None:
    config = uvicorn.Config(fixed_asgi, log_level="warning", access_log=False, backlog=4096, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


SERVERS = {"asyncio": serve_asyncio, "uvicorn": serve_uvicorn}


def run_server(kind: str, sock: socket.socket, cpu: int | None) -> None:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    SERVERS[kind](sock)


# ---- the clients ------------------------------------------------------------------------------------------------


def ours(
    url: str, *, requests: int, concurrency: int | None = None, rate: float | None = None, errors_ok: bool = False
) -> dict:
    config = build_config(url=url, requests=requests, concurrency=concurrency, rate=rate, model="fixed")
    cpu = time.process_time()  # the whole run_loadtest: prompts, model lookup, the run, the metrics
    m = run_loadtest_sync(config).metrics
    cpu_us = (time.process_time() - cpu) / requests * 1e6
    if m.errors and not errors_ok:
        raise SystemExit(f"our generator saw {m.errors} errors: {m.top_errors}")
    return {"rps": m.request_throughput_rps, "p50_ms": m.e2el_ms.p50, "cpu_us": cpu_us, "errors": m.errors}


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0}


def wrk(url: str, *, connections: int, seconds: float, cpus: set[int] | None) -> dict:
    script = Path(tempfile.mkdtemp(prefix="loadgen-bench-")) / "post.lua"
    body = PAYLOAD.replace("\\", "\\\\").replace('"', '\\"')
    script.write_text(f'wrk.method = "POST"\nwrk.body = "{body}"\nwrk.headers["Content-Type"] = "application/json"\n')
    command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "--latency", "-s", str(script)]
    command.append(f"{url}/v1/completions")
    if cpus:
        command = ["taskset", "-c", ",".join(map(str, sorted(cpus))), *command]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if "Non-2xx" in out or "Socket errors" in out:
        raise SystemExit(f"wrk saw errors:\n{out}")
    rps = re.search(r"Requests/sec:\s*([\d.]+)", out)
    p50 = re.search(r"50%\s+([\d.]+)(us|ms|s)\b", out)
    sent = re.search(r"(\d+) requests in", out)
    assert rps and p50 and sent, out
    return {
        "rps": float(rps.group(1)),
        "p50_ms": float(p50.group(1)) * _UNITS[p50.group(2)],
        "cpu_us": cpu_s / int(sent.group(1)) * 1e6,
    }


def breakdown(url: str, *, connections: int, requests: int) -> dict[str, float]:
    """CPU microseconds per request of each layer of our generator, each driving `connections` connections."""
    target = parse_target(url).model_copy(update={"model": "fixed"})
    spec = RequestSpec(prompt="model latency token cluster queue stream", max_tokens=16)
    body = encode_request(target, spec)
    port = int(url.rsplit(":", 1)[1])
    raw_request = b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
    raw_request += b"content-length: %d\r\n\r\n%s" % (len(body), body)
    json_type = {"content-type": "application/json"}

    async def bare(count: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(count):
            writer.write(raw_request)
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            length = re.search(rb"(?i)content-length:\s*(\d+)", head)
            assert length, head
            await reader.readexactly(int(length.group(1)))
        writer.close()

    class Bare(asyncio.Protocol):
        """Write the request, take in the response by its Content-Length, write the next: callbacks only."""

        def __init__(self, count: int, done: asyncio.Future[None]) -> None:
            self.count, self.done, self.data, self.need = count, done, b"", -1

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport: Any = transport
            self.transport.write(raw_request)

        def data_received(self, data: bytes) -> None:
            self.data += data
            if self.need < 0:
                end = self.data.find(b"\r\n\r\n")
                length = re.search(rb"(?i)content-length:\s*(\d+)", self.data[:end])
                assert end >= 0 and length, self.data
                self.data, self.need = self.data[end + 4 :], int(length.group(1))
            if len(self.data) >= self.need:
                self.data, self.need, self.count = b"", -1, self.count - 1
                if self.count:
                    self.transport.write(raw_request)
                else:
                    self.transport.close()
                    self.done.set_result(None)

    async def bare_protocol(count: int) -> None:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        await loop.create_connection(lambda: Bare(count, done), "127.0.0.1", port)
        await done

    async def client_lines(count: int) -> None:
        async with Http1Client() as client:
            for _ in range(count):
                async with client.stream("POST", target.endpoint, content=body, headers=json_type) as response:
                    async for _line in response.aiter_lines():
                        pass

    async def requests_measured(count: int) -> None:
        async with Http1Client() as client:
            for _ in range(count):
                record = await send_request(client, target, spec, clock=time.perf_counter, body=body)
                assert record.ok, record.error

    async def sse_client(count: int) -> None:
        client = SseClient()
        for _ in range(count):
            record = await client.send(target, spec, clock=time.perf_counter, body=body)
            assert record.ok, record.error
        await client.aclose()

    async def drive(layer: Any) -> float:
        cpu = time.process_time()
        await asyncio.gather(*(layer(requests // connections) for _ in range(connections)))
        return (time.process_time() - cpu) / (requests // connections * connections) * 1e6

    layers = {
        "bare_asyncio_streams": bare,
        "bare_asyncio_protocol": bare_protocol,
        "our_http1_client_lines": client_lines,
        "send_request": requests_measured,
        "sse_client": sse_client,
    }

    def measure(layer: Any, run: Any = uvloop.run) -> float:
        return round(min(run(drive(layer)) for _ in range(2)), 1)

    figures = {name: measure(layer) for name, layer in layers.items()}
    figures["bare_asyncio_protocol_stdlib_loop"] = measure(bare_protocol, asyncio.run)
    figures["sse_client_stdlib_loop"] = measure(sse_client, asyncio.run)
    return figures


def bench_server(kind: str, args: argparse.Namespace, server_cpu: int | None, client_cpus: set[int] | None) -> dict:
    # IPPROTO_TCP, not the default 0: asyncio sets TCP_NODELAY only on sockets that say they are TCP, and without
    # it a response written in two parts (uvicorn: head, then body) waits for the client's delayed ACK (~40 ms).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    process = multiprocessing.get_context("fork").Process(target=run_server, args=(kind, sock, server_cpu))
    process.start()
    has_wrk = shutil.which("wrk") is not None
    try:
        while True:
            try:
                httpx.get(f"{url}/stats")
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        warm = ours(url, requests=500, concurrency=args.concurrency)
        requests = max(1000, int(warm["rps"] * args.seconds))
        peak, wrk_peak, single, wrk_single, handling, cpu, wrk_cpu = [], [], [], [], [], [], []
        for _ in range(args.rounds):
            run = ours(url, requests=requests, concurrency=args.concurrency)
            peak.append(run["rps"])
            cpu.append(run["cpu_us"])
            httpx.get(f"{url}/stats")  # reset the server's handling times
            single.append(ours(url, requests=requests // 4, concurrency=1)["p50_ms"])
            handling.append(json.loads(httpx.get(f"{url}/stats").content)["p50_ms"])
            if has_wrk:
                run = wrk(url, connections=args.concurrency, seconds=args.seconds, cpus=client_cpus)
                wrk_peak.append(run["rps"])
                wrk_cpu.append(run["cpu_us"])
                wrk_single.append(wrk(url, connections=1, seconds=args.seconds, cpus=client_cpus)["p50_ms"])
        layers = breakdown(url, connections=args.concurrency, requests=min(requests, 20_000))
        for share in (0.8, 0.6, 0.4, 0.2):
            target = round(max(peak) * share)
            count = max(500, int(target * args.seconds))
            run = ours(url, requests=count, rate=float(target), concurrency=4 * args.concurrency, errors_ok=True)
            sustained = run["rps"]
            if sustained >= 0.95 * target and not run["errors"]:
                break
    finally:
        process.terminate()
        process.join(5)
    result: dict[str, Any] = {
        "ours_peak_rps": round(max(peak), 1),
        "wrk_peak_rps": round(max(wrk_peak), 1) if has_wrk else None,
        "ratio_vs_wrk": round(max(peak) / max(wrk_peak), 3) if has_wrk else None,
        "ours_cpu_us_per_request": round(min(cpu), 1),
        "wrk_cpu_us_per_request": round(min(wrk_cpu), 1) if has_wrk else None,
        "cpu_ratio_vs_wrk": round(min(wrk_cpu) / min(cpu), 3) if has_wrk else None,
        "open_loop_target_rps": target,
        "open_loop_achieved_rps": round(sustained, 1),
        "ours_p50_ms_one_connection": round(min(single), 3),
        "wrk_p50_ms_one_connection": round(min(wrk_single), 3) if has_wrk else None,
        "server_handling_p50_ms": round(min(handling), 4),
        "added_p50_ms_vs_wrk": round(min(single) - min(wrk_single), 3) if has_wrk else None,
        "added_p50_ms_vs_server": round(min(single) - min(handling), 3),
        "cpu_us_per_request_by_layer": layers,
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=3.0, help="rough length of each measured run")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--servers", default="asyncio,uvicorn")
    args = parser.parse_args()

    cpus = sorted(os.sched_getaffinity(0))
    server_cpu = cpus[0] if len(cpus) > 1 else None
    client_cpus = set(cpus[1:]) if len(cpus) > 1 else None
    if client_cpus:
        os.sched_setaffinity(0, client_cpus)
    result: dict[str, Any] = {
        "what": "closed-loop peak at --concurrency connections, p50 over one connection, best of --rounds",
        "cpus": {"server": server_cpu, "clients": sorted(client_cpus) if client_cpus else None},
        "load_average_1m": round(os.getloadavg()[0], 2),
        "concurrency": args.concurrency,
        "goal_ratio_vs_wrk": 0.5,
    }
    for kind in args.servers.split(","):
        result[kind] = bench_server(kind, args, server_cpu, client_cpus)
    if shutil.which("wrk") is None:
        result["note"] = "wrk is not installed (apt-get install -y wrk): the wrk figures and ratios are null"
    result["figures"] = [
        figure(
            f"loadgen: peak requests/s vs {kind}",
            result[kind]["ratio_vs_wrk"],
            ">=",
            0.5,
            unit="x",
            baseline="wrk on the same server",
        )
        for kind in args.servers.split(",")
    ]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
