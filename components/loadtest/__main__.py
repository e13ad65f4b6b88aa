"""`python -m components.loadtest --port N --report FILE …`: a first, minimal load test client.

It waits for the server (`VC_SERVER_HOSTS`, set by Volcano's svc/env plugins) to be healthy, sends a fixed
number of requests and reports latency percentiles. The asyncio load generator of the step-programs issue
(arrival processes, streaming TTFT/TPOT, goodput) replaces it behind the same report fields.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import httpx


def main(argv: list[str] | None = None) -> int:
    """Run the command line; the exit code says whether it worked."""
    parser = argparse.ArgumentParser(prog="python -m components.loadtest")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--slo-ttft-ms", type=float, default=1000.0)
    parser.add_argument("--slo-tpot-ms", type=float, default=200.0)
    parser.add_argument("--report", type=Path, required=True)
    args = parser.parse_args(argv)
    host = (os.environ.get("VC_SERVER_HOSTS") or "127.0.0.1").split(",")[0]
    url = f"http://{host}:{args.port}"
    deadline = time.monotonic() + 120
    with httpx.Client(timeout=10) as client:
        while True:
            try:
                if client.get(f"{url}/health").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                print(f"error: the server at {url} did not become healthy in 120 s", file=sys.stderr)
                return 1
            time.sleep(0.2)
        latencies, errors = [], 0
        for i in range(args.requests):
            start = time.perf_counter()
            try:
                client.post(
                    f"{url}/v1/completions", json={"prompt": f"request {i}", "max_tokens": 8}
                ).raise_for_status()
                latencies.append((time.perf_counter() - start) * 1000)
            except httpx.HTTPError:
                errors += 1
    p95 = statistics.quantiles(latencies, n=20)[-1] if len(latencies) >= 2 else (latencies or [0.0])[0]
    report = {"ttft_p95_ms": p95, "tpot_p95_ms": p95, "errors": errors, "requests": args.requests}
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(report, indent=2))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
