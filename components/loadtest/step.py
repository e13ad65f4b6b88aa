"""The pipeline's load-test client: find the gang's server, run the load, write the report the release step reads.

The server is the gang's `server` task, found through `VC_SERVER_HOSTS` (Volcano's svc/env plugins; 127.0.0.1
when unset). The report holds `ttft_p95_ms`, `tpot_p95_ms`, `errors`, every other figure and `slo_passed`; one
record per request goes beside it. Missing the SLOs is the release step's call, so it is not an error here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from components.files import write_json
from components.loadtest.session import Outcome, build_config, run_loadtest_sync, write_records
from components.tracking.steps import StepLog, log_step_run, report_metrics

__all__ = ["default_records", "gang_server", "run_step", "step_log"]


def gang_server(port: int, env: Mapping[str, str] = os.environ) -> str:
    """The base URL of the gang's `server` task: the first of `VC_SERVER_HOSTS`, or this host."""
    host = (env.get("VC_SERVER_HOSTS") or "127.0.0.1").split(",")[0].strip()
    return f"http://{host}:{port}"


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


def default_records(report: Path) -> Path:
    """Where the per-request records go without `--records`: records.jsonl beside the report."""
    return report.with_name("records.jsonl")


def run_step(
    report: Path,
    *,
    port: int,
    requests: int,
    concurrency: int,
    slo_ttft_ms: float | None,
    slo_tpot_ms: float | None,
    dataset: Path | None,
    max_tokens: int,
    wait_s: float,
    records: Path | None = None,
    on_done: Callable[[int], None] | None = None,
) -> Outcome:
    """Load-test the gang's server, write the report and the records (default: records.jsonl beside the report).

    Raises LoadtestError (bad options or dataset) or ServerUnreachable (the server never came up); nothing is
    written then. In a workflow the figures also go to the step's MLflow child run. `on_done(n)` hears after each
    request how many have ended.
    """
    config = build_config(
        url=gang_server(port),
        requests=requests,
        concurrency=concurrency,
        ttft_ms=slo_ttft_ms,
        tpot_ms=slo_tpot_ms,
        dataset=dataset,
        max_tokens=max_tokens,
        wait_healthy_s=wait_s,
    )
    outcome = run_loadtest_sync(config, on_done)
    write_json(report, outcome.summary())
    records = records or default_records(report)
    write_records(records, outcome.records)
    log_step_run(step_log(outcome, report, records))  # in a workflow: a child run of its MLflow run; else nothing
    return outcome
