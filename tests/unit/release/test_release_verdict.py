"""A version's verdict: the scores read from the reports, the sentence that says why, the tags."""

from __future__ import annotations

import json

import pytest

from components.release.verdict import Bars, Scores, Verdict, describe, read_scores, verdict_tags

BARS = Bars(slo_ttft_ms=500, slo_tpot_ms=50, margin=0.0)


def reports(tmp_path, *, ttft=210.0, errors=0, champion=0.74):
    evaluation = tmp_path / "evaluate.json"
    evaluation.write_text(
        json.dumps(
            {
                "candidate_score": 0.82,
                "champion_score": champion,
                "candidate_perplexity": 3.1,
                "champion_perplexity": 4.25,
                "champion_version": "1",
                "metric": "exact_match",
                "examples": 50,
                "promote": True,
            }
        )
    )
    loadtest = tmp_path / "loadtest.json"
    loadtest.write_text(
        json.dumps(
            {"ttft_p95_ms": ttft, "tpot_p95_ms": 12.5, "goodput_rps": 3.2, "errors": errors, "requests": 40}
            | {"ttft_p50_ms": 100.0, "slo_passed": True}
        )
    )
    return evaluation, loadtest


def test_the_scores_come_from_the_evaluate_and_loadtest_reports(tmp_path):
    scores = read_scores(*reports(tmp_path))
    assert scores == Scores(
        metric="exact_match",
        candidate_score=0.82,
        champion_score=0.74,
        candidate_perplexity=3.1,
        champion_perplexity=4.25,
        champion_version="1",
        ttft_p95_ms=210.0,
        tpot_p95_ms=12.5,
        goodput_rps=3.2,
        errors=0,
        requests=40,
    )
    assert read_scores() == Scores()


def test_a_promoted_version_says_the_numbers_that_decided_it(tmp_path):
    verdict = Verdict(promoted=True, scores=read_scores(*reports(tmp_path)), bars=BARS)
    assert describe(verdict) == (
        "Promoted: exact match 0.82 vs champion 0.74 (+0.08 ≥ margin 0.00); p95 TTFT 210 ms ≤ SLO 500 ms; "
        "p95 TPOT 12.5 ms ≤ SLO 50 ms; 0 of 40 load-test requests failed."
    )


def test_a_version_not_promoted_leads_with_the_bar_it_missed(tmp_path):
    slow = Verdict(promoted=False, scores=read_scores(*reports(tmp_path, ttft=900.0)), bars=BARS)
    assert describe(slow).startswith("Not promoted: p95 TTFT 900 ms > SLO 500 ms; exact match 0.82 vs champion")
    worse = Verdict(
        promoted=False,
        scores=read_scores(*reports(tmp_path, champion=0.80)),
        bars=BARS.model_copy(update={"margin": 0.05}),
    )
    assert describe(worse).startswith("Not promoted: exact match 0.82 vs champion 0.8 (+0.02 < margin 0.05); ")
    held = Verdict(promoted=False, reason="held for review", scores=read_scores(*reports(tmp_path)), bars=BARS)
    assert describe(held).endswith("0 of 40 load-test requests failed. Held for review.")
    assert describe(Verdict()) == "Promoted: registered without an evaluation or a load test."
    assert describe(Verdict(promoted=False)) == "Not promoted: registered with --no-promote."


def test_the_verdict_becomes_version_tags(tmp_path):
    verdict = Verdict(promoted=False, reason="p95 TTFT 900 ms is over its SLO", scores=read_scores(*reports(tmp_path)))
    tags = verdict_tags(verdict.model_copy(update={"bars": BARS}))
    assert tags["vcpilot.promoted"] == "false" and tags["vcpilot.reason"] == "p95 TTFT 900 ms is over its SLO"
    assert tags["vcpilot.metric_name"] == "exact_match" and tags["vcpilot.compared_with"] == "1"
    assert tags["vcpilot.metric.candidate_score"] == "0.82" and tags["vcpilot.metric.champion_perplexity"] == "4.25"
    assert tags["vcpilot.metric.ttft_p95_ms"] == "210" and tags["vcpilot.metric.goodput_rps"] == "3.2"
    assert tags["vcpilot.metric.errors"] == "0" and "vcpilot.metric.ttft_p50_ms" not in tags
    assert (tags["vcpilot.bar.slo_ttft_ms"], tags["vcpilot.bar.margin"]) == ("500", "0")


def test_a_bad_report_is_one_sentence(tmp_path):
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match="is not JSON") as err:
        read_scores(tmp_path / "bad.json")
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="does not exist"):
        read_scores(loadtest=tmp_path / "missing.json")
    (tmp_path / "odd.json").write_text(json.dumps({"candidate_score": "high"}))
    with pytest.raises(ValueError, match="candidate_score 'high', which is not a number"):
        read_scores(tmp_path / "odd.json")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--slo-ttft-ms", "inf"], "--slo-ttft-ms should be a finite number, got inf"),
        (["--slo-tpot-ms", "-1"], "--slo-tpot-ms should be greater than 0, got -1.0"),
        (["--margin", "nan"], "--margin should be a finite number, got nan"),
    ],
)
def test_register_refuses_a_bar_that_is_no_finite_number_before_mlflow(tmp_path, capsys, extra, message):
    # it recorded inf or nan as the bar the version cleared
    from components.release.__main__ import main

    unreachable = "http://127.0.0.1:9"  # never asked: the bars are checked first
    args = ["--model", str(tmp_path), "--registered-model", "m", "--tracking-uri", unreachable, *extra]
    assert main(args) == 1
    assert capsys.readouterr().err == f"error: {message}\n"
