"""Screenshots of the MLflow UI for docs/review.md: a real `mlflow server` on loopback and headless Chromium.

The screenshot half takes any tracking URI and the names to look for (`ReviewTarget`), so it does not care who
wrote the runs (`review_night`: what `vcpilot run --scenario node-failure` recorded). Every shot
waits for the texts it must show to be visible and for MLflow's spinners to go, never for a fixed time.

Routes are those of MLflow 3.17's single-page UI (hash router; see `Routes` in its bundle `static/js/main.*.js`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlflow_kit import MlflowServer

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WINDOW = (1400, 900)
# What MLflow shows while it is still fetching: spinners, skeleton rows, ag-grid's loading overlay. A spinning
# Spin only (`-spin-spinning`, its dots): the Spin's containers (`-spin-container`, `-spin-nested-loading`) stay.
LOADING = (
    "[data-testid*='spinner'], [class*='-spin-spinning'], [class*='-spin-dot'], [class*='skeleton'], "
    "[class*='Skeleton'], .ag-overlay-loading-center"
)
# The UI's own first-visit extras, marked as seen (`useLocalStorage` keys, stored as `<key>_v<version>`): the
# assistant panel that opens itself on localhost and the "Detect issues" tip over the trace view would cover the page.
SEEN = {
    "mlflow.assistant.fab.autoOpenedOnFirstLoad_v1": "true",
    "mlflow.assistant.panelOpen_v1": "false",
    "mlflow.detectIssues.guidanceShown_v1": "true",
}


@contextlib.contextmanager
def mlflow_server(root: Path, timeout_s: float = 120) -> Iterator[str]:
    """`mlflow server` (tests/mlflow_kit.py) with its store under `root`; yields its URL."""
    server = MlflowServer(root)
    try:
        yield server.start(timeout_s)
    finally:
        server.stop()


def browser_missing() -> str | None:
    """Why headless screenshots cannot be taken here, or None when they can."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if missing:
        return f"{' and '.join(missing)} missing: apt-get install -y chromium chromium-driver"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed: pip install -c constraints.txt -e '.[dev]'"
    return None


# --- where things are in MLflow 3.x's UI ----------------------------------------------------------------------------


# The "Model training" view of an experiment: Runs, Models and Traces in the side bar (the default "GenAI" view
# files runs under "Evaluation runs"). A URL parameter, so it holds for these pages only.
VIEW = {"workflowType": "machine_learning"}


def _route(base: str, path: str, **query: str) -> str:
    return f"{base}/#{path}?{urllib.parse.urlencode({**query, **VIEW})}"


def runs_url(base: str, experiment_id: str) -> str:
    """The experiment's runs table, oldest first so that nested runs read in the order the steps ran."""
    return _route(base, f"/experiments/{experiment_id}/runs", orderByKey="attributes.start_time", orderByAsc="true")


def artifact_url(base: str, experiment_id: str, run_id: str, path: str) -> str:
    """The run page's Artifacts tab with `path` selected (`Routes.getRunPageRoute(exp, run, path)`)."""
    return _route(base, f"/experiments/{experiment_id}/runs/{run_id}/artifacts/{path}")


def trace_url(base: str, experiment_id: str, trace_id: str) -> str:
    """The experiment's Traces tab with one trace open in its drawer (the UI's own "View trace" link)."""
    return _route(base, f"/experiments/{experiment_id}/traces", selectedEvaluationId=trace_id, traceId=trace_id)


def model_url(base: str, name: str) -> str:
    """The registered model's page: its versions with their aliases."""
    return _route(base, f"/models/{urllib.parse.quote(name)}")


# --- what to show -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReviewTarget:
    """A night's run in MLflow, as far as the four screenshots need it: ids to open and texts each must show."""

    tracking_uri: str
    experiment_id: str
    parent_run_name: str
    child_run_names: tuple[str, ...]
    plot_run_id: str
    plot_path: str  # artifact path of a PNG, e.g. plots/training_loss.png
    trace_id: str
    trace_run_id: str  # the decision's run, which the trace is linked to
    trace_span_names: tuple[str, ...]
    model_name: str
    aliases: tuple[str, ...] = ("champion", "previous")


@dataclass(frozen=True)
class Shot:
    """One screenshot and the page text that was visible when it was taken."""

    name: str
    path: Path
    url: str
    expected: tuple[str, ...]
    page_text: str = field(repr=False)


class Browser:
    """Headless Chromium at a fixed window size, driven through Debian's chromedriver."""

    def __init__(self, timeout_s: float = 60) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for argument in ("--headless=new", "--no-sandbox", f"--window-size={WINDOW[0]},{WINDOW[1]}"):
            options.add_argument(argument)
        options.add_argument("--force-device-scale-factor=1")  # the PNG is the window size, whatever the display
        options.add_argument("--disable-dev-shm-usage")
        self.driver: Any = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
        # --window-size is the outer window; the page (and so the PNG) is made exactly that size.
        metrics = {"width": WINDOW[0], "height": WINDOW[1], "deviceScaleFactor": 1, "mobile": False}
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
        self.timeout_s = timeout_s
        self._prepared: set[str] = set()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.driver.quit()

    def wait(self, condition: Callable[[Any], Any], what: str) -> Any:
        from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
        from selenium.webdriver.support.ui import WebDriverWait

        # React re-renders under our feet: an element gone stale between two looks is simply looked at again.
        wait = WebDriverWait(self.driver, self.timeout_s, 0.2, ignored_exceptions=[StaleElementReferenceException])
        try:
            return wait.until(condition)
        except TimeoutException:
            text = self.driver.find_element("tag name", "body").text
            loading = [e.get_attribute("class") for e in self.driver.find_elements("css selector", LOADING)]
            raise AssertionError(
                f"{what} not shown in {self.timeout_s:.0f} s at {self.driver.current_url}; still loading: "
                f"{loading[:5]}; the page showed: {text[:600]!r} … {text[-900:]!r}"
            ) from None

    def wait_for_texts(self, texts: Sequence[str]) -> str:
        """Wait until every text is in the page's visible text and nothing is loading; return that text."""

        def ready(driver: Any) -> str | bool:
            if driver.find_elements("css selector", LOADING):
                return False
            shown = driver.find_element("tag name", "body").text
            return shown if all(t in shown for t in texts) else False

        return str(self.wait(ready, f"{list(texts)}"))

    def shoot(
        self, name: str, url: str, expected: Sequence[str], out: Path, prepare: Callable[[Browser], None] | None = None
    ) -> Shot:
        """Open `url`, let `prepare` act on the page, wait for `expected`, and save `out/<name>.png`."""
        origin = "{0.scheme}://{0.netloc}".format(urllib.parse.urlsplit(url))
        # A page of the same origin first: it sets SEEN before the app starts, and a hash change alone would not
        # reload the single-page app.
        self.driver.get(f"{origin}/health")
        if origin not in self._prepared:
            for key, value in SEEN.items():
                self.driver.execute_script("window.localStorage.setItem(arguments[0], arguments[1])", key, value)
            self._prepared.add(origin)
        self.driver.get(url)
        if prepare is not None:
            prepare(self)
        page_text = self.wait_for_texts(expected)
        self.wait(_images_loaded, "every image loaded")
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{name}.png"
        if not self.driver.save_screenshot(str(path)):
            raise AssertionError(f"chromium saved no screenshot for {url}")
        return Shot(name, path, url, tuple(expected), page_text)


def _images_loaded(driver: Any) -> bool:
    return bool(driver.execute_script("return [...document.images].every(i => i.complete && i.naturalWidth > 0)"))


def _xpath_literal(text: str) -> str:
    if "'" not in text:
        return f"'{text}'"
    return "concat('" + "', \"'\", '".join(text.split("'")) + "')"


# --- the four shots ---------------------------------------------------------------------------------------------------


EXPANDER = "//button[contains(@data-component-id, 'runnamecellrenderer')]"
NAME_RESIZE = ".ag-header-cell[col-id='attributes.`Run Name`'] .ag-header-cell-resize"


def _expand_parent(name: str) -> Callable[[Browser], None]:
    """Open the nested runs of the parent run `name`: the expander button in its row of the runs table."""

    def expand(browser: Browser) -> None:
        browser.wait_for_texts([name])
        # The row itself (class token `ag-row`), not a container whose class merely starts so (`ag-row-animation`).
        row_class = "contains(concat(' ', normalize-space(@class), ' '), ' ag-row ')"
        row = f"//div[{row_class}][.//*[normalize-space(text())={_xpath_literal(name)}]]"
        button = browser.wait(
            lambda d: next((b for b in d.find_elements("xpath", f"{row}{EXPANDER}") if b.is_displayed()), False),
            f"the expander of {name!r}",
        )
        button.click()
        # Wide enough for "finetune (attempt 2)" behind the nesting indent; ag-grid resizes by dragging only.
        from selenium.webdriver.common.action_chains import ActionChains

        handle = browser.wait(
            lambda d: next(iter(d.find_elements("css selector", NAME_RESIZE)), False),
            "the Run Name column's resize handle",
        )
        ActionChains(browser.driver).drag_and_drop_by_offset(handle, 120, 0).perform()

    return expand


def take_review_shots(target: ReviewTarget, out: Path, base_url: str | None = None) -> list[Shot]:
    """The four screenshots docs/review.md shows, in `out/`: runs, plot, trace, model."""
    base = (base_url or target.tracking_uri).rstrip("/")
    plot_file = target.plot_path.rsplit("/", 1)[-1]
    with Browser() as browser:
        return [
            browser.shoot(
                "runs",
                runs_url(base, target.experiment_id),
                [target.parent_run_name, *target.child_run_names],
                out,
                prepare=_expand_parent(target.parent_run_name),
            ),
            browser.shoot(
                "plot",
                artifact_url(base, target.experiment_id, target.plot_run_id, target.plot_path),
                [plot_file],
                out,
            ),
            browser.shoot(
                "trace", trace_url(base, target.experiment_id, target.trace_id), list(target.trace_span_names), out
            ),
            browser.shoot("model", model_url(base, target.model_name), [target.model_name, *target.aliases], out),
        ]


def copy_shots(shots: Sequence[Shot], destination: Path) -> list[Path]:
    destination.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.copyfile(shot.path, destination / shot.path.name)) for shot in shots]
