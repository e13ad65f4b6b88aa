"""Agent benchmark: does the rule policy finish fine-tuning sooner, and waste fewer GPU-hours, on a crowded cluster?

Replays a window of Microsoft's Philly trace as the other tenants' load (`benchmarks/agent_philly.py`) on
16 nodes × 8 GPUs, our fine-tuning requests arriving over the window, node faults at Llama 3's published rate
(`benchmarks/agent_trace.py`), on a virtual clock (`benchmarks/agent_sim.py`, the pure scheduling core of
LocalCluster, with reclaim of the fallback queue by its owner), under six strategies side by side
(`benchmarks/agent_strategies.py`): (a) wait_full, (b) argo_retry, (c) volcano_ckpt, (d) elastic, (e) rules and
(f) llm (the LLM policy through an in-process endpoint replaying the rules, `benchmarks/agent_replay.py`).

    python benchmarks/agent.py --trace PATH --start 2017-11-06 --days 2 --seeds 3
    python benchmarks/agent.py --sensitivity        # the fault rate × fallback contention table

Prints one JSON document: every strategy's figures pooled over the seeds, and `figures`, the goals against
(a) and (c) as {name, value, goal, baseline, met} (every goal is `value <= goal`). docs/agent-benchmark.md
explains the trace and the model; docs/benchmarks.md reports the figures.
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python benchmarks/agent.py`: this file would shadow the `agent` package it tests
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from agent.policy import Policy  # noqa: E402
from agent.policy_rules import LLAMA3_NODE_MTBF_S, RulePolicy, RulesConfig  # noqa: E402
from benchmarks.agent_philly import PHILLY, PhillyJob, day_of, load_philly, philly_trace  # noqa: E402
from benchmarks.agent_replay import ReplayedLLM  # noqa: E402
from benchmarks.agent_sim import AT_ONCE, SimJob, Simulation, Timing  # noqa: E402
from benchmarks.agent_strategies import (  # noqa: E402
    MODEL_PARAMS,
    ArgoRetry,
    Costs,
    Elastic,
    Outcome,
    Rules,
    Training,
    VolcanoCheckpoint,
    WaitFull,
)
from benchmarks.agent_trace import FALLBACK_QUEUE, HOUR, RECLAIMABLE_QUEUES, TenantJob, Trace  # noqa: E402
from benchmarks.goals import figure  # noqa: E402

__all__ = ["figures", "goals", "main", "run", "sensitivity", "simulate"]

STRATEGIES = ("wait_full", "argo_retry", "volcano_ckpt", "elastic", "rules", "llm")
_CLASSES: dict[str, type[Training]] = {
    "wait_full": WaitFull,
    "argo_retry": ArgoRetry,
    "volcano_ckpt": VolcanoCheckpoint,
    "elastic": Elastic,
}
FAULT_SCALES = (0.1, 0.3, 1.0, 3.0, 10.0)  # × Llama 3's rate, for the sensitivity table
CONTENTION = {"idle": 0.0, "as_trace": 1.0, "busy": 3.0}  # × the fallback owner's Philly load
DEFAULT_START, DEFAULT_DAYS, DEFAULT_SEEDS = "2017-11-06", 2.0, 3


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
            on_reclaimed=lambda job: sim.submit(job, keep_order=True),  # RestartJob, as for a lost pod
        )
        sim.at(tenant.arrival_s, lambda: sim.submit(self.job))

    def _started(self, job: SimJob) -> None:
        run = job.run
        self.sim.at(self.sim.now + self.hold_s, lambda: self._done(run))

    def _done(self, run: int) -> None:
        if self.job.run == run and self.job.phase == "Running":
            self.sim.finish(self.job)


def simulate(
    trace: Trace,
    strategy: str,
    *,
    efficiency: float,
    costs: Costs,
    policy: Policy | None = None,
    timing: Timing = AT_ONCE,
    config: RulesConfig | None = None,
) -> tuple[list[Outcome], Counter[str], Simulation]:
    """Replay `trace` under `strategy`: each request's outcome, the policy's decisions by kind, the ended cluster.

    Pure: the same trace and policy always give the same outcomes. `timing` is Volcano's (at once by default; the
    comparison with a real cluster gives its session period and controller lag); `config` gives the policy's
    start deadline (the defaults when None).
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if strategy in ("rules", "llm") and policy is None:
        raise ValueError(f"the {strategy} strategy needs a policy")
    sim = Simulation(
        trace.nodes, trace.gpus_per_node, trace.queues, trace.start_s, reclaimable=RECLAIMABLE_QUEUES, timing=timing
    )
    for tenant in trace.tenants:
        _Tenant(sim, tenant)
    for outage in trace.outages:
        sim.at(outage.start_s, functools.partial(sim.fail_node, outage.node))
        sim.at(outage.end_s, functools.partial(sim.recover_node, outage.node))
    runs: list[Training] = []
    for request in trace.requests:
        if policy is not None:
            runs.append(Rules(sim, request, efficiency, costs, policy, config))
        else:
            runs.append(_CLASSES[strategy](sim, request, efficiency, costs))
    sim.run(lambda: all(r.out.status != "unfinished" for r in runs), trace.horizon_s)
    for run in runs:
        if run.out.status == "unfinished":
            run.out.end_s = trace.horizon_s
    kinds: Counter[str] = Counter()
    for run in runs:
        if isinstance(run, Rules):
            kinds.update(run.kinds)
    return [r.out for r in runs], kinds, sim


def figures(outcomes: list[Outcome], decisions: Counter[str], partial_gangs: int = 0) -> dict[str, Any]:
    """The per-strategy figures: time to finish over the finished requests, GPU-hours, counts."""
    finished = [o for o in outcomes if o.status == "finished"]
    # An unfinished request counts with the horizon as its end: leaving it out would reward never finishing.
    ttf = sorted((o.end_s - o.arrival_s) / HOUR for o in outcomes if o.status != "aborted")
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
        "gpu_h_overhead": _round(sum(o.gpu_s_overhead for o in outcomes) / HOUR),
        "attempts": sum(o.attempts for o in outcomes),
        "failures": sum(o.failures for o in outcomes),
        "reclaims": sum(o.reclaims for o in outcomes),
        "downscales": sum(any(g < o.gpus for g, _ in o.shapes) for o in outcomes),
        "fallback_runs": sum(sum(q == FALLBACK_QUEUE for _, q in o.shapes) for o in outcomes),
        "partial_gangs": partial_gangs,
        "changed_global_batches": sum(o.changed_batches for o in outcomes),
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
    jobs: Sequence[PhillyJob],
    start: str = DEFAULT_START,
    days: float = DEFAULT_DAYS,
    seeds: int = DEFAULT_SEEDS,
    *,
    seed: int = 0,
    fault_scale: float = 1.0,
    contention: float = 1.0,
    strategies: Sequence[str] = STRATEGIES,
    model_params: float = MODEL_PARAMS,
) -> dict[str, Any]:
    """Every strategy over `seeds` draws of the window, figures pooled over all requests, and the goals.

    Deterministic apart from the LLM path's measured overhead: the same arguments give the same figures.
    """
    # The agent is told the cluster's fault rate (as an operator sets node_mtbf_s): Llama 3's × fault_scale.
    config = RulesConfig(node_mtbf_s=LLAMA3_NODE_MTBF_S / fault_scale) if fault_scale else RulesConfig()
    efficiency = config.scaling_efficiency  # the true scaling of the simulated jobs is the policy's own model
    costs = Costs.for_model(model_params)
    pooled: dict[str, tuple[list[Outcome], Counter[str], list[int]]] = {n: ([], Counter(), []) for n in strategies}
    per_seed, about, replay = [], [], ReplayedLLM(config)
    for trace_seed in range(seed, seed + seeds):
        trace = philly_trace(jobs, day_of(start), days, trace_seed, fault_scale=fault_scale, owner_factor=contention)
        about.append(trace.about | {"tenant_jobs": len(trace.tenants), "node_faults": len(trace.outages)})
        results = {}
        for name in strategies:
            policy: Policy | None = RulePolicy(config) if name == "rules" else replay if name == "llm" else None
            outcomes, kinds, sim = simulate(
                trace, name, efficiency=efficiency, costs=costs, policy=policy, config=config
            )
            pooled[name][0].extend(outcomes)
            pooled[name][1].update(kinds)
            pooled[name][2].append(sim.partial_gangs)
            results[name] = figures(outcomes, kinds, sim.partial_gangs)
        per_seed.append({"seed": trace_seed, **_brief(results)})
    table = {name: figures(o, k, sum(p)) for name, (o, k, p) in pooled.items()}
    if "llm" in strategies:
        table["llm"]["llm_policy"] = replay.summary()
    first = about[0]
    return {
        "benchmark": "agent",
        "trace": {
            **{k: v for k, v in first.items() if k not in ("tenant_jobs", "node_faults")},
            "tenant_jobs": [a["tenant_jobs"] for a in about],
            "node_faults": [a["node_faults"] for a in about],
            "requests_per_seed": table[strategies[0]]["requests"] // seeds,
        },
        "seeds": list(range(seed, seed + seeds)),
        "costs_s": {k: round(v, 1) for k, v in vars(costs).items()},
        "model_params": model_params,
        "rules_config": config.model_dump(),
        "strategies": table,
        "figures": goals(table),
        "per_seed": per_seed,
    }


def _brief(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One seed's headline figures, strategy by strategy."""
    return {
        "ttf_mean_h": {name: r["time_to_finish_h"]["mean"] for name, r in results.items()},
        "gpu_h_lost": {name: r["gpu_h_lost"] for name, r in results.items()},
        "failures": {name: r["failures"] for name, r in results.items()},
        "reclaims": {name: r["reclaims"] for name, r in results.items()},
    }


def goals(table: dict[str, dict[str, Any]], ours: str = "rules") -> list[dict[str, Any]]:
    """The goals of issue 17 for `ours` against (a) wait_full and (c) volcano_ckpt; each is `value <= goal`.

    A ratio with a zero or missing denominator is null, and its goal is met only when ours is zero as well (the
    baseline's text then says what ours was).
    """
    mine, wait, ckpt = table.get(ours), table.get("wait_full"), table.get("volcano_ckpt")
    if mine is None:
        return []
    out = []

    def ratio(name: str, value: float | None, base: float | None, goal: float, baseline: str) -> None:
        shown = value / base if value is not None and base else None
        out.append(figure(f"agent: {name}", shown, "<=", goal, unit="x", baseline=baseline))
        if shown is None and value == 0 and base == 0:  # neither lost anything: ours is no worse
            out[-1]["met"] = True
        elif shown is None and value:  # the baseline lost nothing, ours did: no ratio, and never met
            out[-1]["baseline"] += f" (it lost none, ours {value:.3g} h)"

    if wait:
        ratio("mean time to finish vs (a)", _ttf(mine), _ttf(wait), 0.70, "(a) wait for full size")
    if ckpt:
        ratio("mean time to finish vs (c)", _ttf(mine), _ttf(ckpt), 0.85, "(c) Volcano + checkpointing")
        ratio("GPU-hours lost vs (c)", mine["gpu_h_lost"], ckpt["gpu_h_lost"], 0.5, "(c) Volcano + checkpointing")
        aborts = figure("agent: aborts", mine["aborted"], "<=", ckpt["aborted"], baseline="(c) Volcano + checkpointing")
        out.append(aborts)
    for name in ("partial_gangs", "changed_global_batches"):
        out.append(figure(f"agent: {name.replace('_', ' ')}", mine[name], "==", 0))
    return out


LOST_FAULT_SCALE = 10.0  # × Llama 3's rate: the lowest of the sensitivity table's rates that fails nodes in 2 days
# Draws pooled for that measurement, at least: with 3, which runs a failing node holds is mostly luck (on
# 2017-11-06 (c) had no failure in 3 draws, (e) five in one); 10 give both strategies failures to compare.
LOST_SEEDS = 10


def lost_where_faults_come(
    report: dict[str, Any],
    jobs: Sequence[PhillyJob],
    start: str,
    days: float,
    seeds: int,
    fault_scale: float,
    **window: Any,
) -> dict[str, Any]:
    """`report` with its GPU-hours-lost goal measured where it can be: again at `LOST_FAULT_SCALE`, (c) and (e) only.

    At Llama 3's rate a 2-day window on 16 nodes rarely sees a node fault, and when neither (c) nor (e) lost anything
    the ratio is undefined: a goal nothing tested. Then the same window runs again at 10× the rate, over the same
    draws and more (`LOST_SEEDS` at least), and the figure is that run's ratio, its baseline naming the rate.
    `lost_goal` has the run's faults, failures and losses, and, beside them, what the goal leaves out: the GPU time
    each strategy spent writing checkpoints and starting attempts (`gpu_h_overhead`), and lost + overhead.
    """
    name = "agent: GPU-hours lost vs (c)"
    lost = next((f for f in report["figures"] if f["name"] == name), None)
    if lost is None or lost["value"] is not None or fault_scale >= LOST_FAULT_SCALE:
        return report
    draws = max(seeds, LOST_SEEDS)
    again = run(jobs, start, days, draws, fault_scale=LOST_FAULT_SCALE, strategies=("volcano_ckpt", "rules"), **window)
    measured = next(f for f in again["figures"] if f["name"] == name)
    measured["baseline"] += (
        f", both at {LOST_FAULT_SCALE:g}× Llama 3's fault rate over {draws} draws (none lost at {fault_scale:g}×)"
    )
    report["figures"] = [measured if f["name"] == name else f for f in report["figures"]]
    table = again["strategies"]
    wasted = {k: round(v["gpu_h_lost"] + v["gpu_h_overhead"], 3) for k, v in table.items()}
    report["lost_goal"] = {
        "fault_scale": LOST_FAULT_SCALE,
        "seeds": again["seeds"],
        "node_faults": again["trace"]["node_faults"],
        "failures": {k: v["failures"] for k, v in table.items()},
        "gpu_h_lost": {k: v["gpu_h_lost"] for k, v in table.items()},
        "gpu_h_overhead": {k: v["gpu_h_overhead"] for k, v in table.items()},
        "gpu_h_lost_and_overhead": wasted,
        "lost_and_overhead_vs_c": _round(wasted["rules"] / wasted["volcano_ckpt"]) if wasted["volcano_ckpt"] else None,
    }
    return report


def _ttf(figures: dict[str, Any]) -> float | None:
    mean: float | None = figures["time_to_finish_h"]["mean"]
    return mean


def sensitivity(jobs: Sequence[PhillyJob], start: str, days: float, seeds: int, *, seed: int = 0) -> dict[str, Any]:
    """The table of (e) against (a) and (c) over fault rates × fallback contention (strategies a, c, e only)."""
    rows = []
    for scale in FAULT_SCALES:
        for level, factor in CONTENTION.items():
            report = run(
                jobs,
                start,
                days,
                seeds,
                seed=seed,
                fault_scale=scale,
                contention=factor,
                strategies=("wait_full", "volcano_ckpt", "rules"),
            )
            table = report["strategies"]
            rows.append(
                {
                    "fault_scale": scale,
                    "contention": level,
                    "node_faults": sum(report["trace"]["node_faults"]),
                    "ttf_mean_h": {k: v["time_to_finish_h"]["mean"] for k, v in table.items()},
                    "gpu_h_lost": {k: v["gpu_h_lost"] for k, v in table.items()},
                    "reclaims": table["rules"]["reclaims"],
                    "fallback_runs": table["rules"]["fallback_runs"],
                    "figures": {f["name"]: f["value"] for f in report["figures"]},
                    "met": {f["name"]: f["met"] for f in report["figures"]},
                }
            )
    return {"benchmark": "agent-sensitivity", "start": start, "days": days, "seeds": seeds, "rows": rows}


def main(argv: list[str] | None = None) -> None:
    """Parse flags, run, print one JSON document."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=PHILLY, help="the Philly CSV (default ../shared/datasets/...)")
    parser.add_argument("--start", default=DEFAULT_START, help=f"the window's first day, YYYY-MM-DD ({DEFAULT_START})")
    parser.add_argument("--days", type=float, default=DEFAULT_DAYS, help=f"the window's length ({DEFAULT_DAYS:g})")
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, help=f"draws to pool ({DEFAULT_SEEDS})")
    parser.add_argument("--seed", type=int, default=0, help="the first draw's seed (default 0)")
    parser.add_argument("--fault-scale", type=float, default=1.0, help="× Llama 3's node fault rate (default 1)")
    parser.add_argument("--contention", type=float, default=1.0, help="× the fallback queue owner's load (default 1)")
    parser.add_argument("--model-params", type=float, default=MODEL_PARAMS, help="parameters fine-tuned (7e9)")
    parser.add_argument("--sensitivity", action="store_true", help="the fault rate × contention table instead")
    parser.add_argument("--quick", action="store_true", help="half a day, one seed: a smoke run")
    args = parser.parse_args(argv)
    days, seeds = (0.5, 1) if args.quick else (args.days, args.seeds)
    if days <= 0 or seeds < 1 or args.fault_scale < 0 or args.contention < 0 or args.model_params <= 0:
        parser.error("--days and --model-params must be above 0, --seeds at least 1, the scales at least 0")
    started = time.perf_counter()
    try:
        day_of(args.start)
        jobs = load_philly(args.trace)
        if args.sensitivity:
            report = sensitivity(jobs, args.start, days, seeds, seed=args.seed)
        else:
            window = dict(seed=args.seed, contention=args.contention, model_params=args.model_params)
            report = run(jobs, args.start, days, seeds, fault_scale=args.fault_scale, **window)
            report = lost_where_faults_come(report, jobs, args.start, days, seeds, args.fault_scale, **window)
    except ValueError as err:
        parser.exit(2, f"error: {err}\n")
    report["wall_s"] = round(time.perf_counter() - started, 2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
