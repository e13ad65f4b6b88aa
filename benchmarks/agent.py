"""Agent benchmark: does the rule policy finish fine-tuning sooner, and waste fewer GPU-hours, on a crowded cluster?

Replays seeded traces (`benchmarks/agent_trace.py`: 16 nodes × 8 GPUs, four queues, other tenants' jobs, node
outages, fine-tuning requests arriving over a simulated day) on a virtual clock (`benchmarks/agent_sim.py`, the
pure scheduling core of LocalCluster) under three strategies (`benchmarks/agent_strategies.py`):

- `wait_full`: submit the full 8 GPUs and wait; a node failure restarts the job from scratch (Volcano RestartJob,
  the job keeps its place in the queue).
- `argo_retry`: submit the full 8 GPUs; a failure fails the job and Argo's retryStrategy resubmits the same job
  from scratch after its backoff (a new job, at the back of the queue).
- `rules`: `agent.policy_rules.RulePolicy` decides at plan time (proceed, downscale, maybe to the fallback queue,
  or wait) and at diagnose time (retry from the latest checkpoint off the failed node, or abort).

Failures are rare events, so one day says little about GPU-hours lost: the figures pool several seeds (5 unless
`--seeds` says otherwise), and `per_seed` shows the spread. Prints one JSON document; `docs/agent-benchmark.md`
explains the trace, `docs/benchmarks.md` reports the figures.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python benchmarks/agent.py`: this file would shadow the `agent` package it tests
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from agent.policy import Policy  # noqa: E402
from benchmarks.agent_sim import SimJob, Simulation  # noqa: E402
from benchmarks.agent_strategies import ArgoRetry, Outcome, Rules, Training, WaitFull  # noqa: E402
from benchmarks.agent_trace import (  # noqa: E402
    DAY,
    FALLBACK_QUEUE,
    GPUS_PER_NODE,
    HOUR,
    NODE_MTBF_S,
    WARMUP_S,
    TenantJob,
    Trace,
    make_trace,
)
from benchmarks.goals import figure  # noqa: E402

__all__ = ["figures", "main", "run", "simulate"]

STRATEGIES = ("wait_full", "argo_retry", "rules")
REQUESTS_PER_DAY = 50


# -- running a strategy over a trace --------------------------------------------------------------------


class _Tenant:
    """Another team's job: holds its GPUs for its hold time; Volcano restarts it from scratch when a node fails."""

    def __init__(self, sim: Simulation, tenant: TenantJob) -> None:
        self.sim, self.hold_s = sim, tenant.hold_s
        self.job = SimJob(
            key=f"{tenant.queue}/{tenant.name}",
            queue=tenant.queue,
            pods=tenant.pods,
            gpus_per_pod=tenant.gpus_per_pod,
            priority=tenant.priority,
            on_start=self._started,
            on_lost=lambda job, node: sim.submit(job, keep_order=True),
        )
        sim.at(tenant.arrival_s, lambda: sim.submit(self.job))

    def _started(self, job: SimJob) -> None:
        run = job.run
        self.sim.at(self.sim.now + self.hold_s, lambda: self._done(run))

    def _done(self, run: int) -> None:
        if self.job.run == run and self.job.phase == "Running":
            self.sim.finish(self.job)


def simulate(
    trace: Trace, strategy: str, *, efficiency: float, policy: Policy | None = None
) -> tuple[list[Outcome], Counter[str]]:
    """Replay `trace` under `strategy`: each request's outcome, and the policy's decisions by kind.

    Pure: the same trace and policy always give the same outcomes.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if strategy == "rules" and policy is None:
        raise ValueError("the rules strategy needs a policy")
    sim = Simulation(trace.nodes, GPUS_PER_NODE, trace.queues, start_s=-WARMUP_S)
    for tenant in trace.tenants:
        _Tenant(sim, tenant)
    for outage in trace.outages:
        sim.at(outage.start_s, functools.partial(sim.fail_node, outage.node))
        sim.at(outage.end_s, functools.partial(sim.recover_node, outage.node))
    runs: list[Training] = []
    for request in trace.requests:
        if strategy == "wait_full":
            runs.append(WaitFull(sim, request, efficiency))
        elif strategy == "argo_retry":
            runs.append(ArgoRetry(sim, request, efficiency))
        else:
            assert policy is not None
            runs.append(Rules(sim, request, efficiency, policy))
    sim.run(lambda: all(r.out.status != "unfinished" for r in runs), trace.horizon_s)
    for run in runs:
        if run.out.status == "unfinished":
            run.out.end_s = trace.horizon_s
    kinds: Counter[str] = Counter()
    for run in runs:
        if isinstance(run, Rules):
            kinds.update(run.kinds)
    return [r.out for r in runs], kinds


def figures(outcomes: list[Outcome], decisions: Counter[str]) -> dict[str, Any]:
    """The per-strategy figures: time to finish over the finished requests, GPU-hours, counts."""
    finished = [o for o in outcomes if o.status == "finished"]
    ttf = sorted((o.end_s - o.arrival_s) / HOUR for o in finished)
    waited = [((o.first_start_s or o.end_s) - o.arrival_s) / HOUR for o in outcomes if o.first_start_s is not None]
    out: dict[str, Any] = {
        "requests": len(outcomes),
        "finished": len(finished),
        "aborted": sum(o.status == "aborted" for o in outcomes),
        "unfinished": sum(o.status == "unfinished" for o in outcomes),
        "time_to_finish_h": {
            "mean": _round(statistics.fmean(ttf)) if ttf else None,
            "p50": _round(_quantile(ttf, 0.5)),
            "p90": _round(_quantile(ttf, 0.9)),
        },
        "first_start_wait_h_mean": _round(statistics.fmean(waited)) if waited else None,
        "gpu_h_used": _round(sum(o.gpu_s_used for o in outcomes) / HOUR),
        "gpu_h_lost": _round(sum(o.gpu_s_lost for o in outcomes) / HOUR),
        "attempts": sum(o.attempts for o in outcomes),
        "failures": sum(o.failures for o in outcomes),
        "ran_below_full": sum(any(g < 8 for g, _ in o.shapes) for o in outcomes),
        "ran_in_fallback": sum(any(q == FALLBACK_QUEUE for _, q in o.shapes) for o in outcomes),
    }
    if decisions:
        out["decisions"] = dict(sorted(decisions.items()))
    reasons = Counter(o.reason for o in outcomes if o.status == "aborted")
    if reasons:
        out["abort_reasons"] = dict(reasons.most_common())
    return out


def _quantile(values: list[float], q: float) -> float | None:
    """The nearest-rank quantile of sorted `values` (None when empty)."""
    if not values:
        return None
    return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def run(
    seed: int = 0, requests: int = REQUESTS_PER_DAY, seeds: int = 1, node_mtbf_h: float = NODE_MTBF_S / HOUR
) -> dict[str, Any]:
    """The whole benchmark: `seeds` traces from `seed` on, each strategy over each, figures pooled over all requests.

    Deterministic: the same arguments always give the same document.
    """
    from agent.policy_rules import RulePolicy, RulesConfig

    config = RulesConfig()
    efficiency = config.scaling_efficiency  # the true scaling of the simulated jobs is the policy's own model
    pooled: dict[str, tuple[list[Outcome], Counter[str]]] = {name: ([], Counter()) for name in STRATEGIES}
    per_seed, traces = [], []
    for trace_seed in range(seed, seed + seeds):
        window_s = DAY * requests / REQUESTS_PER_DAY
        trace = make_trace(trace_seed, requests, window_s=window_s, node_mtbf_s=node_mtbf_h * HOUR)
        traces.append(_describe(trace))
        results = {}
        for name in STRATEGIES:
            policy = RulePolicy(config) if name == "rules" else None
            outcomes, kinds = simulate(trace, name, efficiency=efficiency, policy=policy)
            pooled[name][0].extend(outcomes)
            pooled[name][1].update(kinds)
            results[name] = figures(outcomes, kinds)
        per_seed.append({"seed": trace_seed, **_brief(results), "goals": _goals(results)})
    strategies = {name: figures(*pooled[name]) for name in STRATEGIES}
    return {
        "benchmark": "agent",
        "seeds": list(range(seed, seed + seeds)),
        "trace": {
            **traces[0],
            "node_mtbf_h": node_mtbf_h,
            "tenant_jobs_in_window": [t["tenant_jobs_in_window"] for t in traces],
            "node_outages_in_window": [t["node_outages_in_window"] for t in traces],
        },
        "rules_config": config.model_dump(),
        "strategies": strategies,
        "goals": _goals(strategies),
        "per_seed": per_seed,
    }


def _brief(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One seed's headline figures, strategy by strategy."""
    return {
        "ttf_mean_h": {name: r["time_to_finish_h"]["mean"] for name, r in results.items()},
        "gpu_h_lost": {name: r["gpu_h_lost"] for name, r in results.items()},
        "failures": {name: r["failures"] for name, r in results.items()},
    }


def _describe(trace: Trace) -> dict[str, Any]:
    window = (trace.requests[0].arrival_s, trace.requests[-1].arrival_s) if trace.requests else (0.0, 0.0)
    return {
        "nodes": len(trace.nodes),
        "gpus": len(trace.nodes) * GPUS_PER_NODE,
        "queues": {
            q.name: {"weight": q.weight, "capability_gpus": int(q.capability["nvidia.com/gpu"])} for q in trace.queues
        },
        "requests": len(trace.requests),
        "request_window_h": [_round(window[0] / HOUR), _round(window[1] / HOUR)],
        "tenant_jobs_in_window": sum(0 <= t.arrival_s <= window[1] for t in trace.tenants),
        "node_outages_in_window": sum(0 <= o.start_s <= window[1] for o in trace.outages),
    }


def _goals(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    goals: dict[str, Any] = {}
    ours, wait, argo = results.get("rules"), results.get("wait_full"), results.get("argo_retry")
    if ours and wait and ours["time_to_finish_h"]["mean"] and wait["time_to_finish_h"]["mean"]:
        ratio = ours["time_to_finish_h"]["mean"] / wait["time_to_finish_h"]["mean"]
        goals["ttf_mean_rules_over_wait_full"] = _round(ratio)
        goals["ttf_goal_met"] = ratio <= 0.7
    if ours and argo:
        ratio = ours["gpu_h_lost"] / argo["gpu_h_lost"] if argo["gpu_h_lost"] else None
        goals["gpu_h_lost_rules_over_argo_retry"] = _round(ratio)
        goals["lost_goal_met"] = ratio is not None and ratio <= 0.5
    return goals


def goal_figures(goals: dict[str, Any]) -> list[dict[str, object]]:
    """Issue 5's goals as `make bench` figures: (c) at most 0.7x the time of (a), 0.5x the GPU-hours lost of (b)."""
    out = []
    if goals.get("ttf_mean_rules_over_wait_full") is not None:
        ratio = goals["ttf_mean_rules_over_wait_full"]
        out.append(figure("agent: mean time to finish", ratio, "<=", 0.7, unit="x", baseline="(a) wait for full size"))
    if goals.get("gpu_h_lost_rules_over_argo_retry") is not None:
        ratio = goals["gpu_h_lost_rules_over_argo_retry"]
        out.append(figure("agent: GPU-hours lost", ratio, "<=", 0.5, unit="x", baseline="(b) Argo retry from scratch"))
    return out


def main(argv: list[str] | None = None) -> None:
    """Parse flags, run, print one JSON document."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="the trace's seed (default 0)")
    parser.add_argument("--requests", type=int, default=None, help=f"fine-tuning requests, {REQUESTS_PER_DAY} a day")
    parser.add_argument("--seeds", type=int, default=None, help="traces to pool, seed after seed (default 5)")
    parser.add_argument(
        "--node-mtbf-h", type=float, default=NODE_MTBF_S / HOUR, help="mean hours between one node's outages"
    )
    parser.add_argument("--quick", action="store_true", help="one small trace (12 requests) for a smoke run")
    args = parser.parse_args(argv)
    requests = args.requests if args.requests is not None else (12 if args.quick else REQUESTS_PER_DAY)
    seeds = args.seeds if args.seeds is not None else (1 if args.quick else 5)
    if requests < 1 or seeds < 1 or args.node_mtbf_h <= 0:
        parser.error("--requests and --seeds must be at least 1, --node-mtbf-h above 0")
    start = time.perf_counter()
    report = run(args.seed, requests, seeds, args.node_mtbf_h)
    report["wall_s"] = round(time.perf_counter() - start, 2)
    report["figures"] = goal_figures(report["goals"])
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
