"""`vcpilot loadtest` and `python -m components.loadtest`: a load test from a shell, and the pipeline's client.

`vcpilot loadtest --url …` load-tests any OpenAI-compatible server and judges it against SLOs; the pod's command
(`python -m components.loadtest --port N --report FILE …`, the `client` task of the load-test VCJob) loads the
gang's server and writes the report (components/loadtest/step.py). Two commands, because a missed SLO means
different things to them: a person's load test fails (exit 1), while the pipeline's client leaves the verdict to
the release step (exit 0). Both exit as every step program does (components/errors.py): 1 a bad option or
dataset, 3 the server could not be reached.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from components.entry import JsonOption, new_app
from components.errors import EXIT_FAILED, InputError

if TYPE_CHECKING:
    from components.loadtest.session import Outcome

__all__ = ["app", "loadtest_command", "step_app", "step_command"]


def loadtest_command(
    url: Annotated[str, typer.Option(help="Server base URL (http://host:8000) or a full /v1/… completions URL.")],
    requests: Annotated[int, typer.Option(help="How many requests to send.")] = 100,
    concurrency: Annotated[
        int | None, typer.Option(help="Requests in flight (alone: closed loop; with --rate: a cap).")
    ] = None,
    rate: Annotated[float | None, typer.Option(help="Arrivals per second (inf: all at once).")] = None,
    burstiness: Annotated[float, typer.Option(help="1: Poisson arrivals; <1 burstier, >1 more even (gamma).")] = 1.0,
    slo_ttft_ms: Annotated[float | None, typer.Option(help="SLO on time to first token, ms.")] = None,
    slo_tpot_ms: Annotated[float | None, typer.Option(help="SLO on time per output token, ms.")] = None,
    slo_e2el_ms: Annotated[float | None, typer.Option(help="SLO on end-to-end latency, ms.")] = None,
    # The choices are components.loadtest.metrics.PERCENTILES (the metrics module is not needed to say them).
    slo_percentile: Annotated[Literal[50, 90, 95, 99], typer.Option(help="Percentile the gate compares.")] = 95,
    max_errors: Annotated[int, typer.Option(help="Failed requests the gate tolerates.")] = 0,
    dataset: Annotated[
        Path | None, typer.Option(help='Prompts from a JSONL of {"prompt", "completion"} (default: synthetic).')
    ] = None,
    max_tokens: Annotated[int, typer.Option(help="max_tokens of each request.")] = 16,
    chat: Annotated[bool, typer.Option("--chat", help="Use /v1/chat/completions.")] = False,
    model: Annotated[str | None, typer.Option(help="Model name in requests (default: the server's first).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the arrival process and the synthetic prompts.")] = 0,
    timeout_s: Annotated[
        float, typer.Option(help="How long a request may wait for the next byte from the server, seconds.")
    ] = 300.0,
    api_key: Annotated[str, typer.Option(envvar="OPENAI_API_KEY", help="Bearer token, if the server needs one.")] = "",
    json_output: JsonOption = False,
    records: Annotated[Path | None, typer.Option(help="Write one JSON line per request here.")] = None,
) -> None:
    """Load-test an OpenAI-compatible server and judge it against SLOs.

    Sends --requests streaming requests at a fixed --concurrency or at --rate arrivals per second and reports
    TTFT, TPOT, ITL, end-to-end latency, throughput, goodput and errors.
    """
    from components.files import check_output, refuse_overwriting
    from components.loadtest.session import LoadtestError, build_config, run_loadtest_sync, write_records
    from components.progress import Progress

    if records is not None:
        check_output(records, "--records")
        refuse_overwriting([(dataset, "the data set")] if dataset is not None else [], [(records, "--records")])
    if concurrency is None and rate is None:
        raise LoadtestError("give --concurrency C (requests in flight) or --rate R (requests per second)")
    if max_tokens <= 0:
        raise LoadtestError(f"--max-tokens must be a positive number of tokens, got {max_tokens}")
    config = build_config(
        url=url,
        requests=requests,
        concurrency=concurrency,
        rate=rate,
        burstiness=burstiness,
        seed=seed,
        ttft_ms=slo_ttft_ms,
        tpot_ms=slo_tpot_ms,
        e2el_ms=slo_e2el_ms,
        percentile=slo_percentile,
        max_errors=max_errors,
        dataset=dataset,
        max_tokens=max_tokens,
        chat=chat,
        model=model,
        timeout_s=timeout_s,
        api_key=api_key,
    )
    # A bar on a terminal, a line every few seconds in a pipe; on stderr with --json.
    with Progress.for_command(json_output).steps("requests", requests, every_s=5) as advance:
        outcome = run_loadtest_sync(config, on_done=lambda n: advance(n, ""))
    if records is not None:
        write_records(records, outcome.records)
    if json_output:
        print(json.dumps(outcome.summary(), indent=2))
    else:
        _print_table(outcome)
    if not outcome.verdict.passed:
        if not json_output:
            print(f"SLO missed: {outcome.verdict.reason}", file=sys.stderr)
        raise typer.Exit(EXIT_FAILED)


def _print_table(outcome: Outcome) -> None:
    from rich.console import Console
    from rich.table import Table

    m = outcome.metrics
    console = Console()
    console.print(
        f"{outcome.endpoint} ({outcome.model or 'no model name'}): {m.completed}/{m.requests} completed, "
        f"{m.errors} errors in {m.duration_s:.2f} s"
    )
    goodput = "-" if m.goodput_rps is None else f"{m.goodput_rps:.2f}"
    console.print(
        f"throughput {m.request_throughput_rps:.2f} req/s, {m.output_throughput_tps:.1f} output tok/s; "
        f"goodput {goodput} req/s"
    )
    table = Table("ms", "mean", "p50", "p90", "p95", "p99")
    for name, dist in (("TTFT", m.ttft_ms), ("TPOT", m.tpot_ms), ("ITL", m.itl_ms), ("E2E latency", m.e2el_ms)):
        table.add_row(name, *(f"{v:.2f}" for v in (dist.mean, dist.p50, dist.p90, dist.p95, dist.p99)))
    console.print(table)
    for message, count in m.top_errors.items():
        console.print(f"{count} x {message}")
    console.print(f"SLO {'met' if outcome.verdict.passed else 'missed'}: {outcome.verdict.reason}")


def step_command(
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
    """Load-test the gang's server (VC_SERVER_HOSTS) and write the report; the SLO verdict is the release step's."""
    from components.files import check_output, refuse_overwriting
    from components.loadtest.step import default_records, run_step
    from components.progress import Progress

    check_output(report, "--report")
    if records is not None:
        check_output(records, "--records")
        if records.resolve() == report.resolve():  # the records would replace the report as they were written
            raise InputError(f"--records {records} is the --report file too; give each its own path")
    refuse_overwriting(
        [(dataset, "the data set")] if dataset is not None else [],
        [(report, "--report"), (records or default_records(report), "--records")],
    )
    # A line every few seconds in the step's log (stderr: stdout ends with the JSON line).
    with Progress(sys.stderr).steps("requests", requests, every_s=5) as advance:
        outcome = run_step(
            report,
            port=port,
            requests=requests,
            concurrency=concurrency,
            slo_ttft_ms=slo_ttft_ms,
            slo_tpot_ms=slo_tpot_ms,
            dataset=dataset,
            max_tokens=max_tokens,
            wait_s=wait_s,
            records=records,
            on_done=lambda n: advance(n, ""),
        )
    summary = outcome.summary()
    print(json.dumps({k: summary[k] for k in ("ttft_p95_ms", "tpot_p95_ms", "errors", "slo_passed", "slo_reason")}))


app = new_app()
app.command()(loadtest_command)
step_app = new_app()
step_app.command()(step_command)
