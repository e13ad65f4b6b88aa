"""The simulator's `Timing`: Volcano's session period and the job controller's lag, as the e2e comparison uses them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # benchmarks/ is not an installed package; `make bench` runs it from the checkout
    sys.path.insert(0, str(ROOT))

from benchmarks.agent_sim import AT_ONCE, SimJob, Simulation, Timing  # noqa: E402
from components.volcano.resources import GPU  # noqa: E402
from components.volcano.scheduler import QueueState  # noqa: E402

QUEUE = "ml-team"


def one_node(timing: Timing = AT_ONCE) -> Simulation:
    return Simulation(("node-00",), 4, (QueueState(QUEUE, capability={GPU: 4.0}),), start_s=0.0, timing=timing)


def start_of(timing: Timing, submitted_s: float) -> float:
    sim, started = one_node(timing), []
    job = SimJob("default/ft", QUEUE, 4, 1, on_start=lambda j: started.append(sim.now))
    sim.at(submitted_s, lambda: sim.submit(job))
    sim.run(lambda: bool(started), 1000.0)
    return started[0]


def test_without_a_timing_a_gang_starts_at_the_instant_it_is_submitted() -> None:
    assert start_of(Timing(), 10.0) == 10.0


def test_with_a_period_a_gang_is_admitted_at_a_tick_and_bound_at_the_next() -> None:
    # proportion's shares are dealt as a session opens, when the gang it admits asked for nothing yet
    assert start_of(Timing(period_s=60.0), 10.0) == 120.0
    assert start_of(Timing(period_s=60.0), 60.0) == 120.0  # submitted on a tick: that tick's session admits it
    assert start_of(Timing(period_s=60.0, phase_s=15.0), 10.0) == 75.0  # ticks at 15, 75, …


def test_the_controller_lag_delays_the_podgroup_and_then_the_pods() -> None:
    # submitted at 10: PodGroup at 80, admitted by the session at 120, pods at 190, bound by the session at 240
    sim, seen = one_node(Timing(period_s=60.0, controller_s=70.0)), {}
    job = SimJob("default/ft", QUEUE, 4, 1)
    sim.at(10.0, lambda: sim.submit(job))
    for at_s in (70.0, 90.0, 130.0, 230.0, 250.0):
        sim.at(at_s, lambda at_s=at_s: seen.update({at_s: (job.phase, sim.queue_snapshot(QUEUE).pending)}))
    sim.run(lambda: False, 300.0)
    assert seen == {
        70.0: ("Pending", 0),  # no PodGroup yet: `agent.observe` would not see it either
        90.0: ("Pending", 1),
        130.0: ("Inqueue", 0),
        230.0: ("Inqueue", 0),  # pods exist since 190, the next session is at 240
        250.0: ("Running", 0),
    }
    assert job.started_s == 240.0 and sim.partial_gangs == 0


def test_a_moment_shorter_than_the_period_is_missed() -> None:
    # The GPUs are free from 100, and from 110 a higher-priority gang asks for them: scheduling at the instant,
    # ours takes them at 100; with a session every 60 s, the one at 120 sees both and the other goes first.
    def ours_started(timing: Timing) -> bool:
        sim = one_node(timing)
        first, ours = SimJob("t/first", QUEUE, 4, 1), SimJob("default/ft", QUEUE, 4, 1)
        urgent = SimJob("t/urgent", QUEUE, 4, 1, priority=1)
        sim.at(0.0, lambda: sim.submit(first))
        sim.at(5.0, lambda: sim.submit(ours))
        sim.at(100.0, lambda: sim.finish(first))
        sim.at(110.0, lambda: sim.submit(urgent))
        sim.run(lambda: False, 200.0)
        return ours.phase == "Running"

    assert ours_started(Timing())
    assert not ours_started(Timing(period_s=60.0))


def test_a_timing_is_given_in_real_seconds_and_compressed_for_a_replay() -> None:
    scaled = Timing(period_s=0.2, controller_s=0.5, phase_s=0.1).scaled(720.0)
    assert scaled == Timing(period_s=144.0, controller_s=360.0, phase_s=72.0)
    with pytest.raises(ValueError, match="never negative"):
        Timing(period_s=-1.0)
    with pytest.raises(ValueError, match="compression must be positive"):
        Timing(period_s=0.2).scaled(0.0)
