"""`make demo` as a test: a first champion, then llm-autopilot on the drifted logs, released over it.

Marked `night`: at about three minutes it is the longest whole run, so `make e2e` runs it (first, with the other
night tests) and `make test` stays in its 15 minutes; `make demo` itself is the same run.
"""

from __future__ import annotations

import json

import pytest

from pipelines.autopilot_run import run_autopilot

pytestmark = [pytest.mark.integration, pytest.mark.night]


def test_the_demo_releases_a_model_that_beats_its_champion(tmp_path):
    """`make demo`: a first champion from the baseline catalog, then the pipeline on the drifted logs."""
    from components.release.registry import connect, view

    result = run_autopilot("drift", home=tmp_path, name="demo")
    assert result.phase == "Succeeded", {n["displayName"]: n["phase"] for n in result.status["nodes"].values()}
    evaluation = json.loads((tmp_path / "workspace" / "runs" / "demo" / "evaluate" / "report.json").read_text())
    assert evaluation["eval_set"].endswith("data/drifted/eval.jsonl")
    assert evaluation["champion_score"] is not None
    assert evaluation["candidate_score"] > evaluation["champion_score"] + 0.3
    release = json.loads((tmp_path / "workspace" / "runs" / "demo" / "release.json").read_text())
    assert release["released"] is True
    registry = view(connect(f"sqlite:///{tmp_path / 'mlflow.db'}"), "shop-assistant")
    assert (registry.aliases["champion"], registry.aliases["previous"]) == ("2", "1")
