"""Synthetic service logs for the detect-logs tests: a calm baseline and a current window that drifts or not."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest

WindowsFactory = Callable[..., Path]


def _requests(rng: random.Random, n: int, *, drift: bool, start: int) -> list[str]:
    lines = []
    for i in range(start, start + n):
        a, b = rng.randint(1, 99), rng.randint(1, 99)
        record: dict[str, object] = {
            "timestamp": f"2026-11-28T{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}Z",
            "request_id": f"req-{i}",
            "latency_ms": round(rng.uniform(80, 120), 1),
            "status": 200,
        }
        if drift and i % 3 == 0:
            # The drift: a new kind of prompt the model gets wrong; users complain and correct it.
            ticket = rng.randint(1000, 9999)
            record |= {
                "prompt": f"Reverse the word ticket{ticket} please",
                "completion": f"ticket{ticket}",
                "feedback": "negative" if rng.random() < 0.7 else "positive",
                "correction": f"{str(ticket)[::-1]}tekcit",
            }
        else:
            record |= {
                "prompt": f"What is {a} plus {b}?",
                "completion": str(a + b),
                "feedback": rng.choice(["positive", "positive", "positive", "negative", "none"])
                if rng.random() < 0.9
                else "none",
            }
        lines.append(json.dumps(record))
    return lines


def _service(rng: random.Random, n: int, *, drift: bool) -> list[str]:
    lines = []
    for i in range(n):
        stamp = f"2026-11-28 03:{(i // 60) % 60:02d}:{i % 60:02d},{rng.randint(0, 999):03d}"
        if drift and i % 4 == 0:
            lines.append(f"{stamp} ERROR [worker-{i % 4}] serving.engine: model timeout after {rng.randint(30, 90)}s")
        elif i % 10 == 0:
            lines.append(f"{stamp} INFO [worker-{i % 4}] serving.cache: cache miss for key {rng.getrandbits(32):08x}")
        else:
            ip = f"10.0.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
            lines.append(
                f"{stamp} INFO [worker-{i % 4}] serving.http: served request from {ip} in {rng.randint(5, 90)} ms"
            )
    return lines


@pytest.fixture
def make_windows(tmp_path: Path) -> WindowsFactory:
    """Write `<root>/baseline/` and `<root>/current/` (service.log + requests.jsonl each) and return the root."""

    def make(name: str = "logs", *, drift: bool = True, seed: int = 7, requests: int = 600) -> Path:
        rng = random.Random(seed)
        root = tmp_path / name
        for window, drifting in (("baseline", False), ("current", drift)):
            directory = root / window
            directory.mkdir(parents=True)
            (directory / "service.log").write_text("\n".join(_service(rng, 400, drift=drifting)) + "\n")
            start = 0 if window == "baseline" else requests
            lines = _requests(rng, requests, drift=drifting, start=start)
            (directory / "requests.jsonl").write_text("\n".join(lines) + "\n")
        return root

    return make


@pytest.fixture(autouse=True)
def _no_state_between_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    """`make test` exports VCPILOT_HOME: keep detect from remembering windows there across tests."""
    monkeypatch.delenv("VCPILOT_HOME", raising=False)
    monkeypatch.delenv("VCPILOT_LOGS_STATE", raising=False)
