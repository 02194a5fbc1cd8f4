"""A screenshot of the MLflow UI comparing a sweep's runs: ``python -m runners.screenshot``.

    python -m runners.tune -m dataset=file dataset.path=my.csv dataset.target=label \
        method=agbm,lgbm_cegb,gbdt_topk
    python -m runners.screenshot --backend-store-uri sqlite:///mlflow.db --out results/mlflow_ui.png

Starts ``mlflow server`` on 127.0.0.1 (a free port) on the store, unless ``--url`` names a running
one; opens the experiment's runs table in headless Chromium, in the view the runners set up (the
metrics that matter as columns, :data:`runners.tracking.mlflow_native.RUN_COLUMNS`), filtered to the latest
fitted models (:func:`fitted_runs`: a tuning study's refit, a plain run, a selection path's budgets)
with their parent runs unfolded, and saves the table as a PNG; ``--from-home DIR`` also takes the
way a user finds it from MLflow's home page (:func:`capture_from_home`).  Needs Playwright, a development tool
that is not a dependency of the package: ``pip install playwright``, then ``python -m playwright
install chromium`` (or pass ``--browser /usr/bin/chromium`` for an installed Chromium).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from mlflow.tracking import MlflowClient

from runners.tracking import mlflow_native
from runners.tracking.local_server import answers, free_port, stop
from runners.tracking.runs import NOT_A_RESULT

#: seconds to wait for ``mlflow server`` to answer ``/health`` (it migrates a fresh store first)
START_BOUND = 180.0
#: the shared view the screenshot opens (the runners' columns, filtered to the runs shown)
SHOT_KEY = "gbfs-screenshot"
#: what to do without Playwright
NO_PLAYWRIGHT = ("runners.screenshot needs Playwright (a development tool, not a dependency of the package): "
                 "pip install playwright && python -m playwright install chromium")
#: a cell of the runs table's name column
RUN_NAME_CELL = "[role='gridcell'][col-id='attributes.`Run Name`']"
#: the browsers tried when Playwright has none of its own
SYSTEM_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


@contextlib.contextmanager
def mlflow_server(backend_store_uri: str, log: Path) -> Iterator[str]:
    """``mlflow server`` on 127.0.0.1 and a free port on ``backend_store_uri``; yield its URL once
    ``/health`` answers and stop its process group on leaving.

    Raises
    ------
    RuntimeError
        If the server exits or is not ready within :data:`START_BOUND` seconds (with its output).
    """
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
             "--backend-store-uri", backend_store_uri, "--workers", "1"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_BOUND
        while not answers(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"mlflow server did not start:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)   # the poll interval
        yield url
    finally:
        stop(proc)


def fitted_runs(client: MlflowClient, exp_id: str, limit: int) -> list:
    """The ``limit`` latest runs of experiment ``exp_id`` that are a fitted model (not a study, a
    trial or a path's parent; with a ``test_auc``), newest first."""
    found = client.search_runs([exp_id], order_by=["attributes.start_time DESC"], max_results=1000)
    return [r for r in found if r.data.tags.get("role") not in NOT_A_RESULT
            and "test_auc" in r.data.metrics][:limit]


def _browser_path(playwright, given: str | None) -> str | None:
    """The Chromium to launch: ``given``, else Playwright's own (None), else one on the PATH."""
    if given:
        return given
    if Path(playwright.chromium.executable_path).exists():
        return None
    found = next((shutil.which(b) for b in SYSTEM_BROWSERS if shutil.which(b)), None)
    if found is None:
        raise SystemExit("no Chromium: run `python -m playwright install chromium`, or pass --browser PATH")
    return found


def _click_all(page, selector: str) -> None:
    """Click every element of ``selector`` that is there (the UI's assistant, banner, expanders)."""
    found = page.locator(selector)
    for i in reversed(range(found.count())):
        found.nth(i).click()
        page.wait_for_timeout(200)


def capture(url: str, exp_id: str, out: Path, runs: list, browser: str | None, size: tuple[int, int]) -> None:
    """Open the runs table of ``exp_id`` on ``url`` in the runners' view (its columns,
    :data:`runners.tracking.mlflow_native.RUN_COLUMNS`) filtered to ``runs``, unfold their parents (a study's
    refit is nested under the study), and save the table's part of the window to ``out``."""
    from playwright.sync_api import sync_playwright

    search = "attributes.run_id IN (" + ", ".join(f"'{r.info.run_id}'" for r in runs) + ")"
    MlflowClient(tracking_uri=f"{url}").set_experiment_tag(
        exp_id, mlflow_native.VIEW_TAG + SHOT_KEY, json.dumps(mlflow_native.runs_view_state(search)))
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=_browser_path(p, browser), headless=True)
        try:
            page = launched.new_page(viewport={"width": size[0], "height": size[1]})
            page.goto(f"{url}/{mlflow_native.runs_view_url(exp_id, SHOT_KEY)}", wait_until="load")
            page.locator(RUN_NAME_CELL).first.wait_for(timeout=60_000)   # the runs have arrived
            _click_all(page, "button[aria-label='Close']")         # the assistant's panel
            _click_all(page, "button[aria-label='Hide banner']")   # "You're viewing a shared view"
            _click_all(page, "button[data-component-id*='runnamecellrenderer']")   # unfold parents
            page.mouse.click(size[0] - 5, size[1] - 5)   # off the expanders: no focus outline in the shot
            page.wait_for_timeout(1500)   # the rows and the datasets' badges render after the runs arrive
            bottom = page.locator(".ag-center-cols-container").bounding_box()
            height = size[1] if bottom is None else min(size[1], int(bottom["y"] + bottom["height"] + 24))
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out), clip={"x": 0, "y": 0, "width": size[0], "height": height})
        finally:
            launched.close()


def capture_from_home(url: str, experiment: str, out_dir: Path, browser: str | None,
                      size: tuple[int, int]) -> list[Path]:
    """The way a user finds the comparison without the printed link: from MLflow's home page, the
    *Model training* switch, then the experiment -- its runs table (``mlflow_home_runs.png``) -- then
    the latest sweep summary run's chart under *Artifacts* (``mlflow_sweep_summary.png``)."""
    from playwright.sync_api import sync_playwright

    out_dir.mkdir(parents=True, exist_ok=True)
    shots = [out_dir / "mlflow_home_runs.png", out_dir / "mlflow_sweep_summary.png"]
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=_browser_path(p, browser), headless=True)
        try:
            page = launched.new_page(viewport={"width": size[0], "height": size[1]})
            page.goto(f"{url}/", wait_until="load")
            page.get_by_text("Model training", exact=True).first.click()   # MLflow starts on GenAI
            page.get_by_role("link", name=experiment, exact=True).first.click()
            page.locator(RUN_NAME_CELL).first.wait_for(timeout=60_000)
            _click_all(page, "button[aria-label='Close']")                 # the assistant's panel
            page.wait_for_timeout(1500)
            page.screenshot(path=str(shots[0]))
            page.get_by_role("link", name=re.compile("sweep summary$")).first.click()
            page.get_by_text("Artifacts", exact=True).first.click()
            page.get_by_text("auc_vs_features.png", exact=True).first.click()
            page.get_by_text("Path:").first.wait_for(timeout=60_000)   # the artifact's preview
            page.wait_for_timeout(2000)   # its image loads after the preview's header
            page.screenshot(path=str(shots[1]))
        finally:
            launched.close()
    return shots


def _args(argv: list[str] | None) -> argparse.Namespace:
    head, _, rest = __doc__.partition("\n\n")
    ap = argparse.ArgumentParser(prog="python -m runners.screenshot", description=head, epilog=rest,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend-store-uri", default="sqlite:///mlflow.db",
                    help="the MLflow store (default: %(default)s)")
    ap.add_argument("--url", help="a running MLflow server on that store (else one is started)")
    ap.add_argument("--experiment", default="gbfs", help="the MLflow experiment (default: %(default)s)")
    ap.add_argument("--runs", type=int, default=6,
                    help="how many of the latest fitted models (default: %(default)s)")
    ap.add_argument("--out", type=Path, default=Path("results/mlflow_ui.png"),
                    help="the PNG (default: %(default)s)")
    ap.add_argument("--browser",
                    help="a Chromium executable (default: Playwright's own, else chromium on the PATH)")
    ap.add_argument("--size", default="1860x900", help="the window, WIDTHxHEIGHT (default: %(default)s)")
    ap.add_argument("--from-home", type=Path, metavar="DIR",
                    help="also go from the home page to the runs table and to the latest sweep "
                         "summary run's chart, saving mlflow_home_runs.png and "
                         "mlflow_sweep_summary.png in DIR")
    args = ap.parse_args(argv)
    try:
        args.size = tuple(int(v) for v in args.size.lower().split("x"))
        assert len(args.size) == 2 and min(args.size) >= 200
    except (ValueError, AssertionError):
        ap.error(f"--size must be WIDTHxHEIGHT in pixels (each at least 200), got {args.size!r}")
    if args.runs < 1:
        ap.error(f"--runs must be a positive integer, got {args.runs}")
    return args


def take(args: argparse.Namespace) -> Path:
    """The screenshot of :func:`main`'s arguments; return its path."""
    try:
        import playwright  # noqa: F401 -- only checked here: a development tool
    except ImportError:
        raise SystemExit(NO_PLAYWRIGHT) from None
    client = MlflowClient(tracking_uri=args.backend_store_uri)
    exp = client.get_experiment_by_name(args.experiment)
    runs = fitted_runs(client, exp.experiment_id, args.runs) if exp is not None else []
    if not runs:
        raise SystemExit(f"no fitted run in experiment {args.experiment!r} of {args.backend_store_uri}")
    if args.from_home is not None and not client.search_runs(
            [exp.experiment_id], filter_string="tags.role = 'sweep_summary'", max_results=1):
        raise SystemExit(f"--from-home: no sweep summary run in experiment {args.experiment!r} (a multirun, "
                         "python -m runners.run -m ..., ends with one)")
    mlflow_native.configure_ui(exp.experiment_id, client)
    with contextlib.ExitStack() as stack:
        url = args.url or stack.enter_context(
            mlflow_server(args.backend_store_uri, Path(stack.enter_context(tempfile.TemporaryDirectory()))
                          / "server.log"))
        capture(url.rstrip("/"), exp.experiment_id, args.out, runs, args.browser, args.size)
        if args.from_home is not None:
            for shot in capture_from_home(url.rstrip("/"), args.experiment, args.from_home, args.browser,
                                          args.size):
                print(f"{shot}: from the home page ({shot.stat().st_size // 1024} KB)")
    kb = args.out.stat().st_size // 1024
    print(f"{args.out}: {len(runs)} runs of experiment {args.experiment!r} ({kb} KB)")
    return args.out


def main(argv: list[str] | None = None) -> int:
    take(_args(argv))
    return 0
