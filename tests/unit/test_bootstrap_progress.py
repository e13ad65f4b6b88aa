"""The first champion's training, as `vcpilot run` shows it: its step lines as they come, and Ctrl-C."""

from __future__ import annotations

import os
import sys
import time

import pytest

from pipelines.autopilot_run import _train
from pipelines.local.runner import Interrupted, StopRequest

STEPS = "import sys\nfor s in (10, 20): print(f'[0:00:0{s // 10}] step {s}/20  loss {3 / s:.4f}', file=sys.stderr)\n"


def test_the_step_lines_are_reported_and_the_last_line_kept() -> None:
    seen: list[str] = []
    code, tail = _train([sys.executable, "-c", STEPS + "print('{\"done\": 1}')"], dict(os.environ), seen.append, None)
    assert code == 0
    assert seen == ["step 10/20, loss 0.300", "step 20/20, loss 0.150"]
    assert tail == '{"done": 1}'


def test_a_stop_kills_the_training_at_once() -> None:
    stop = StopRequest()
    script = "import os, time\nprint(os.getpid(), flush=True)\ntime.sleep(60)\n"
    seen: list[str] = []
    stop.set()
    started = time.monotonic()
    with pytest.raises(Interrupted):
        _train([sys.executable, "-c", script], dict(os.environ), seen.append, stop)
    assert time.monotonic() - started < 10
