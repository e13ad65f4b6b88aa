"""The screenshots docs/review.md shows, taken in headless Chromium against a real MLflow server on loopback.

`VCPILOT_UPDATE_SCREENSHOTS=1` also writes them to docs/images/review/: that is how the committed images are made.
Nothing is compared pixel by pixel with those (run ids and times differ on every run); each shot must be a PNG of
the window's size that is not blank, taken once the page showed what it is meant to show.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from review_data import populate
from review_kit import WINDOW, browser_missing, copy_shots, mlflow_server, take_review_shots

# make e2e installs Chromium (deploy/e2e/host-deps.sh) and sets VCPILOT_REQUIRE_BROWSER=1: there a missing
# browser fails the test instead of skipping it.
_MISSING = browser_missing()
if _MISSING and os.environ.get("VCPILOT_REQUIRE_BROWSER") == "1":
    raise RuntimeError(f"VCPILOT_REQUIRE_BROWSER=1 but no headless browser: {_MISSING}")
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(_MISSING is not None, reason=f"no headless browser: {_MISSING}"),
]

DOCS_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images" / "review"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_review_screenshots_show_the_night_in_mlflow(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient
    from PIL import Image, ImageStat

    with mlflow_server(tmp_path / "mlflow") as url:
        target = populate(url)
        shots = take_review_shots(target, tmp_path / "shots")
        trace = MlflowClient(url).get_trace(target.trace_id)
    assert trace.info.request_metadata.get("mlflow.sourceRun") == target.trace_run_id, (
        "the trace is not linked to its run"
    )

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
    assert {target.parent_run_name, *target.child_run_names} <= set(runs.expected)
    assert "training_loss.png" in plot.expected
    assert set(target.trace_span_names) <= set(trace_shot.expected)
    assert {"shop-assistant", "champion", "previous"} <= set(model.expected)
    if os.environ.get("VCPILOT_UPDATE_SCREENSHOTS") == "1":
        copy_shots(shots, DOCS_IMAGES)
