"""The MLflow models of runs in other processes: ``mlflow models serve`` answering exactly as the
model file, a process without the harness loading the model, and ``runners.tracking.screenshot`` against a
real ``mlflow server`` (all ``slow``: each starts a server or an interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from harness_utils import TINY, compose_cfg, model_uri, wait_for
from mlflow.tracking import MlflowClient

import gbfs
from runners import run as run_module
from runners.core import experiment
from runners.tracking.local_server import answers, stop

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """An A-GBM run on the TINY data in a fresh store: ``{"uri", "client", "cfg", "run"}``."""
    root = tmp_path_factory.mktemp("serve")
    uri = mlflow.get_tracking_uri()
    try:
        run_module.run(compose_cfg(root, [*TINY, "method=agbm", "print_summary=false"]))
    finally:
        mlflow.set_tracking_uri(uri)
    client = MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    (found,) = client.search_runs([client.get_experiment_by_name("gbfs").experiment_id])
    return {"uri": f"sqlite:///{root}/mlflow.db", "client": client, "run": found,
            "cfg": compose_cfg(root, [*TINY, "method=agbm"])}


def _expected(store, tmp_path) -> tuple[object, np.ndarray]:
    """The dataset and the model file's ``predict_proba`` on its test split."""
    ds = experiment.load_data(store["cfg"])
    local = store["client"].download_artifacts(store["run"].info.run_id, "model.json", str(tmp_path))
    return ds, gbfs.load_model(local).predict_proba(ds.X_test)


# ------------------------------------------------------------------------------- mlflow models serve

def _serve(model: str, uri: str, log: Path) -> tuple[subprocess.Popen, str]:
    from runners.tracking.local_server import free_port

    port = free_port()
    with open(log, "wb") as out:   # a file, not a pipe: nobody reads a pipe while the test runs
        proc = subprocess.Popen([sys.executable, "-m", "mlflow", "models", "serve", "-m",
                                 model, "--env-manager", "local", "-h", "127.0.0.1",
                                 "-p", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "MLFLOW_TRACKING_URI": uri})
    return proc, f"http://127.0.0.1:{port}"


def test_mlflow_models_serve_answers_as_the_model_file(store, tmp_path):
    """``mlflow models serve`` (about 5 s to start here, 10-15 s on a loaded machine) on the run's
    model: ``/invocations`` gives the model file's probabilities, bit for bit."""
    r = store["run"]
    ds, expected = _expected(store, tmp_path)
    log = tmp_path / "serve.log"
    proc, url = _serve(model_uri(r), store["uri"], log)
    try:
        wait_for(lambda: answers(url, "/ping") or proc.poll() is not None,
                 "mlflow models serve to answer /ping")
        assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
        frame = pd.DataFrame(ds.X_test.astype(np.float64), columns=ds.feature_names)
        body = json.dumps({"dataframe_split": frame.to_dict(orient="split")}).encode()
        request = urllib.request.Request(url + "/invocations", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            served = json.loads(response.read())["predictions"]
    finally:
        stop(proc)
    assert np.array_equal(np.asarray(served, dtype=np.float64), expected[:, 1])


def test_the_model_loads_without_the_harness(store, tmp_path):
    """The wrapper is code of the MLflow model: a process that cannot import ``runners`` loads it."""
    r = store["run"]
    ds, expected = _expected(store, tmp_path)
    np.save(tmp_path / "X.npy", ds.X_test)
    script = ("import sys; sys.modules['runners'] = None\n"
              "import mlflow, numpy as np, pandas as pd\n"
              f"X = pd.DataFrame(np.load({str(tmp_path / 'X.npy')!r}), columns={ds.feature_names!r})\n"
              f"m = mlflow.pyfunc.load_model({model_uri(r)!r})\n"
              f"np.save({str(tmp_path / 'p.npy')!r}, m.predict(X))\n")
    res = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                         timeout=600, env={**os.environ, "MLFLOW_TRACKING_URI": store["uri"]})
    assert res.returncode == 0, res.stderr[-3000:]
    assert np.array_equal(np.load(tmp_path / "p.npy"), expected[:, 1])


def test_screenshot_of_the_runs_table(store, tmp_path):
    """``python -m runners.screenshot`` on the store: a PNG of the runs table (skipped without
    Playwright, a development tool, or without a Chromium)."""
    pytest.importorskip("playwright")
    from runners.tracking import screenshot
    from runners.tuning.hydra_callbacks import log_summary

    # a sweep's summary run, as a multirun ends with, for the way from the home page to its chart
    client = MlflowClient(tracking_uri=store["uri"])
    exp = client.get_experiment_by_name("gbfs")
    r = store["run"]
    log_summary(client, exp.experiment_id, str(tmp_path), "| table |",
                [{"method": r.data.tags["method"], "dataset": "d", "budget": None, **r.data.metrics}], [])
    out = tmp_path / "ui.png"
    try:
        screenshot.main(["--backend-store-uri", store["uri"], "--out", str(out), "--size", "1600x700",
                         "--from-home", str(tmp_path / "home")])
    except SystemExit as err:   # no browser on this machine
        pytest.skip(str(err))
    home = tmp_path / "home"
    for png in (out, home / "mlflow_home_runs.png", home / "mlflow_sweep_summary.png"):
        assert png.read_bytes()[:4] == b"\x89PNG" and 10_000 < png.stat().st_size < 300_000
