"""`python -m components.loadtest --port N --report FILE …`: the `client` task of the pipeline's load-test VCJob.

The server is the gang's `server` task, found through `VC_SERVER_HOSTS` (Volcano's svc/env plugins; 127.0.0.1
when unset). The client waits for its /health, runs the load, and writes the report the release step reads
(`ttft_p95_ms`, `tpot_p95_ms`, `errors`, every other figure, `slo_passed`) plus one record per request. Missing
the SLOs is the release step's call, so it still exits 0; a server that never came up exits 1.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from components.loadtest.session import LoadtestError, Outcome, build_config, run_loadtest, write_records
from components.tracking.steps import StepLog, log_step_run, report_metrics

__all__ = ["pipeline_command", "step_log"]


def step_log(outcome: Outcome, report: Path, records: Path) -> StepLog:
    """What the load test records in its MLflow child run: every figure, the SLO verdict, the report and records."""
    summary = outcome.summary()
    settings = ("concurrency", "rate", "burstiness", "slo_ttft_ms", "slo_tpot_ms", "slo_e2el_ms", "slo_percentile")
    return StepLog(
        step="loadtest",
        metrics=report_metrics({k: v for k, v in summary.items() if k not in settings}),
        params={key: str(summary[key]) for key in settings if summary[key] is not None},
        tags={
            "slo_passed": str(outcome.verdict.passed).lower(),
            "slo_reason": outcome.verdict.reason,
            "endpoint": outcome.endpoint,
            "model": outcome.model or "",
        },
        artifacts=(report, records),
    )


def pipeline_command(
    report: Annotated[Path, typer.Option(help="Where to write the JSON report.")],
    port: Annotated[int, typer.Option(help="The server task's port.")] = 8000,
    requests: Annotated[int, typer.Option(help="How many requests to send.")] = 20,
    # Two in flight: the server decodes one request at a time, so each extra one adds a whole generation to TTFT.
    concurrency: Annotated[int, typer.Option(help="Requests in flight.")] = 2,
    slo_ttft_ms: Annotated[float | None, typer.Option(help="SLO on p95 time to first token, ms.")] = None,
    slo_tpot_ms: Annotated[float | None, typer.Option(help="SLO on p95 time per output token, ms.")] = None,
    dataset: Annotated[Path | None, typer.Option(help="Evaluation JSONL to draw prompts from.")] = None,
    max_tokens: Annotated[int, typer.Option(help="max_tokens of each request.")] = 16,
    wait_s: Annotated[float, typer.Option(help="How long to wait for the server to become healthy.")] = 600.0,
    records: Annotated[
        Path | None, typer.Option(help="Per-request JSONL (default: records.jsonl next to the report).")
    ] = None,
) -> None:
    """Load-test the gang's server and write the report."""
    host = (os.environ.get("VC_SERVER_HOSTS") or "127.0.0.1").split(",")[0].strip()
    try:
        config = build_config(
            url=f"http://{host}:{port}",
            requests=requests,
            concurrency=concurrency,
            ttft_ms=slo_ttft_ms,
            tpot_ms=slo_tpot_ms,
            dataset=dataset,
            max_tokens=max_tokens,
            wait_healthy_s=wait_s,
        )
        outcome = asyncio.run(run_loadtest(config))
    except LoadtestError as err:
        print(f"error: {err}", file=sys.stderr)
        raise typer.Exit(1) from None
    summary = outcome.summary()
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps(summary, indent=2))
    records = records or report.with_name("records.jsonl")
    write_records(records, outcome.records)
    print(json.dumps({k: summary[k] for k in ("ttft_p95_ms", "tpot_p95_ms", "errors", "slo_passed", "slo_reason")}))
    log_step_run(step_log(outcome, report, records))  # in a workflow: a child run of its MLflow run


if __name__ == "__main__":
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(pipeline_command)
    app(prog_name="python -m components.loadtest")
