"""A night of the autopilot reviewed on a real MLflow server, and the screenshots docs/review.md shows of it.

One `vcpilot run --scenario node-failure` (the first champion, then a fine-tune whose node dies mid-run) records
to a real `mlflow server` on loopback. The first test reads the server as a reviewer would; the second takes the
screenshots in headless Chromium. `VCPILOT_UPDATE_SCREENSHOTS=1` also writes them to docs/images/review/: that is
how the committed images are made. Nothing is compared pixel by pixel with those (run ids and times differ on every
run); each shot must be a PNG of the window's size that is not blank, taken once the page showed what it must show.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from review_kit import WINDOW, browser_missing, copy_shots, mlflow_server, take_review_shots
from review_night import MODEL, NAME, SPANS, TRACED, nested_runs, night_target, parent_run, run_night

# make e2e installs Chromium (deploy/e2e/host-deps.sh) and sets VCPILOT_REQUIRE_BROWSER=1: there a missing
# browser fails the test instead of skipping it.
_MISSING = browser_missing()
if _MISSING and os.environ.get("VCPILOT_REQUIRE_BROWSER") == "1":
    raise RuntimeError(f"VCPILOT_REQUIRE_BROWSER=1 but no headless browser: {_MISSING}")
pytestmark = [pytest.mark.integration, pytest.mark.night]

DOCS_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images" / "review"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PLOTS = {f"{name}.png" for name in ("training_loss", "latency_cdf", "throughput", "scores", "log_windows")}


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The server's URL once the night has run on it, and the run's VCPILOT_HOME."""
    root = tmp_path_factory.mktemp("night")
    with mlflow_server(root / "mlflow") as url:
        done = run_night(url, root / "home")
        said = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        assert done.returncode == 0, f"vcpilot run exited {done.returncode}:\n{said}"
        yield url, root


def test_a_node_failure_night_is_one_parent_run_with_every_step_attempt_decision_plot_and_the_release(
    night: tuple[str, Path],
) -> None:
    from mlflow.tracking import MlflowClient

    url, root = night
    client = MlflowClient(url)
    parent = parent_run(client)
    assert parent.info.status == "FINISHED" and parent.data.tags["vcpilot.status"] == "Succeeded"
    assert parent.data.tags["vcpilot.trigger"] == "local" and parent.data.tags["vcpilot.workflow.uid"]
    children = {run.info.run_name: run for run in nested_runs(client, parent)}
    steps = {run.data.tags.get("vcpilot.step") for run in children.values()}
    assert {"detect-logs", "finetune", "loadtest", "evaluate", "plan", "diagnose"} <= steps, sorted(children)
    # The attempt whose node died could not end its run: the exit handler ended it KILLED, the rest ended themselves.
    assert {name: run.info.status for name, run in children.items() if run.info.status != "FINISHED"} == {
        "finetune-1": "KILLED"
    }

    # Two training attempts, the first lost with its node; each with its VCJob and its loss by step.
    attempts = {name: run for name, run in children.items() if run.data.tags.get("vcpilot.step") == "finetune"}
    assert sorted(attempts) == ["finetune-1", "finetune-2"]
    for number, run in enumerate((attempts["finetune-1"], attempts["finetune-2"]), start=1):
        assert run.data.tags["vcpilot.attempt"] == str(number)
        assert run.data.tags["vcpilot.vcjob"] == f"{NAME}-train-{number}"
        losses = client.get_metric_history(run.info.run_id, "loss")
        assert len({m.step for m in losses}) == len(losses) > 1, "each step's loss once"
    first = max(m.step for m in client.get_metric_history(attempts["finetune-1"].info.run_id, "loss"))
    second = min(m.step for m in client.get_metric_history(attempts["finetune-2"].info.run_id, "loss"))
    assert second <= first + 1 and second > 1, "attempt 2 resumed from attempt 1's checkpoint, not from scratch"

    # Each decision: its run with the record, and one trace of its stages linked to it.
    for name in ("plan-1", TRACED, "plan-2"):
        run = children[name]
        assert [a.path for a in client.list_artifacts(run.info.run_id)] == ["decision.json"]
        (trace,) = client.search_traces(locations=[parent.info.experiment_id], run_id=run.info.run_id)
        spans = client.get_trace(trace.info.trace_id).data.spans
        assert {s.name for s in spans} >= {name, *SPANS}
    assert children[TRACED].data.params["action"] == "retry" and children[TRACED].data.params["avoid_nodes"]

    # The review on the parent: summary, every picture as a non-empty PNG, the decisions and the manifests.
    out = root / "downloaded"
    client.download_artifacts(parent.info.run_id, "", str(out))
    assert {p.name for p in (out / "plots").glob("*.png")} == PLOTS
    for png in (out / "plots").glob("*.png"):
        assert png.read_bytes()[:8] == PNG_SIGNATURE and png.stat().st_size > 5000, png
    assert {"plan-1.json", f"{TRACED}.json", "plan-2.json"} <= {p.name for p in (out / "decisions").iterdir()}
    assert {f"{NAME}-train-1.json", f"{NAME}-train-2.json"} <= {p.name for p in (out / "manifests").iterdir()}
    summary = (out / "summary.md").read_text()
    assert summary.startswith(f"# {NAME}: Succeeded") and f"**Outcome.** released {MODEL} version" in summary

    # The released version: its run and scores, champion now, and the first champion previous.
    champion = client.get_model_version_by_alias(MODEL, "champion")
    previous = client.get_model_version_by_alias(MODEL, "previous")
    assert int(champion.version) == int(previous.version) + 1
    assert champion.tags["vcpilot.workflow"] == NAME and champion.run_id
    assert champion.description and "promoted" in champion.description.lower()


def test_review_screenshots_show_the_night_in_mlflow(night: tuple[str, Path], tmp_path: Path) -> None:
    if _MISSING:
        pytest.skip(f"no headless browser: {_MISSING}")
    from PIL import Image, ImageStat

    url, _ = night
    target = night_target(url)
    shots = take_review_shots(target, tmp_path / "shots")

    assert [shot.name for shot in shots] == ["runs", "plot", "trace", "model"]
    for shot in shots:
        missing = [text for text in shot.expected if text not in shot.page_text]
        assert not missing, f"{shot.name}: the page at {shot.url} did not show {missing}"
        assert shot.path.read_bytes()[:8] == PNG_SIGNATURE, f"{shot.path} is not a PNG"
        with Image.open(shot.path) as image:
            assert image.size == WINDOW, f"{shot.name}: {image.size}, not the window's {WINDOW}"
            spread = ImageStat.Stat(image.convert("L")).stddev[0]
        assert spread > 10, f"{shot.name}: the screenshot is nearly blank (grey-level spread {spread:.1f})"

    runs, plot, trace_shot, model = shots
    assert {NAME, "finetune-1", "finetune-2", TRACED} <= set(runs.expected)
    assert "training_loss.png" in plot.expected
    assert set(SPANS) <= set(trace_shot.expected)
    assert {MODEL, "champion", "previous"} <= set(model.expected)
    if os.environ.get("VCPILOT_UPDATE_SCREENSHOTS") == "1":
        copy_shots(shots, DOCS_IMAGES)
