"""Runs recorded in MLflow's own terms (runners.tracking.mlflow_native, runners.tracking.mlflow_model): the
data as
dataset inputs, the fitted model as an MLflow model that loads and predicts exactly as the model
file; the UI's experiment kind and runs view; a data file's name in the tables.  Serving the model,
loading it without the harness and the UI's screenshot: tests/harness/test_mlflow_serve.py (slow)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from harness_utils import TINY, compose_cfg, model_uri
from mlflow.tracking import MlflowClient
from omegaconf import open_dict

import gbfs
from gbfs.baselines.lightgbm_baseline import LightGBMBaseline
from runners import run as run_module
from runners.core import experiment, summaries
from runners.tracking import mlflow_model, mlflow_native
from runners.tuning.hydra_callbacks import PrintComparison, dataset_of, run_value

REPO = Path(__file__).resolve().parents[2]
METHODS = {"agbm": [], "lgbm_cegb": ["n_threads=1"], "gbdt_topk": ["n_threads=1", "method.params.k=4"]}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One store for the module (a fresh one costs seconds): a run of each of METHODS on the TINY
    data; ``{"root", "uri", "cfg", "runs": {method: run}}``."""
    root = tmp_path_factory.mktemp("native")
    uri = mlflow.get_tracking_uri()
    try:
        for method, extra in METHODS.items():
            run_module.run(compose_cfg(root, [*TINY, f"method={method}", "print_summary=false", *extra]))
    finally:
        mlflow.set_tracking_uri(uri)
    client = MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    exp = client.get_experiment_by_name("gbfs")
    found = client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])
    return {"root": root, "uri": f"sqlite:///{root}/mlflow.db", "client": client, "experiment": exp,
            "cfg": compose_cfg(root, [*TINY, "method=agbm"]),
            "runs": {r.data.tags["method"]: r for r in found}}


@pytest.fixture
def tracking_at(store, restore_mlflow):
    mlflow.set_tracking_uri(store["uri"])
    return store


def _frame(X: np.ndarray, names) -> pd.DataFrame:
    return pd.DataFrame(X, columns=list(names))


def _model_file(client: MlflowClient, run_id: str, dst: Path) -> Path:
    return Path(client.download_artifacts(run_id, "model.json", str(dst)))


def test_the_pyfunc_model_predicts_exactly_as_the_model_file(tracking_at, tmp_path, caplog):
    store = tracking_at
    r = store["runs"]["agbm"]
    ds = experiment.load_data(store["cfg"])
    expected = gbfs.load_model(_model_file(store["client"], r.info.run_id, tmp_path)).predict_proba(ds.X_test)
    model = mlflow.pyfunc.load_model(model_uri(r))
    with caplog.at_level(logging.WARNING, logger="mlflow"):
        got = model.predict(_frame(ds.X_test, ds.feature_names))   # float32 columns: converted to double
    # MLflow's warning about the ignored columns says how many, not each of them (kilobytes)
    (ignored,) = [r.getMessage() for r in caplog.records if "ignored" in r.getMessage()]
    assert ignored.startswith(f"{ds.X_test.shape[1] - len(model.metadata.get_input_schema().input_names())} "
                              "input columns are not in the model's signature") and len(ignored) < 300
    assert got.dtype == np.float64 and got.shape == (len(ds.X_test),)
    assert np.array_equal(got, expected[:, 1])                      # bitwise: the positive class
    # it asks for the features the model selected, in column order: they alone give the same
    # predictions; columns in another order, and extra ones, change nothing; a missing one is named
    selected = sorted(int(j) for j in gbfs.load_model(tmp_path / "model.json").selected_features_)
    names = [ds.feature_names[j] for j in selected]
    info = model.metadata
    assert info.get_input_schema().input_names() == names and 0 < len(names) < ds.X_test.shape[1]
    assert np.array_equal(model.predict(_frame(ds.X_test[:, selected], names)), expected[:, 1])
    shuffled = _frame(ds.X_test, ds.feature_names)[ds.feature_names[::-1]].assign(extra=1.0)
    assert np.array_equal(model.predict(shuffled), expected[:, 1])
    with pytest.raises(Exception, match=names[0]):
        model.predict(_frame(ds.X_test, ds.feature_names).drop(columns=names[0]))
    # what was logged: a 2-row input example, explicit requirements, the wrapper as code (no
    # runners package needed to load it), the library's JSON file as data
    assert info.metadata["output"].startswith("probability of classes[1]")
    assert info.metadata["dataset"] == "gisette_like" and info.metadata["method"] == "agbm"
    local = Path(mlflow.artifacts.download_artifacts(model_uri(r),
                                                     dst_path=str(tmp_path / "m")))
    assert (local / "code" / "mlflow_model.py").read_text() == Path(mlflow_model.__file__).read_text()
    assert (local / "data" / "model" / "model.json").read_bytes() == \
        (tmp_path / "model.json").read_bytes()
    requirements = (local / "requirements.txt").read_text().split()
    assert f"mlflow=={mlflow.__version__}" in requirements and f"numpy=={np.__version__}" in requirements
    example = json.loads((local / "input_example.json").read_text())
    assert len(example["data"]) == mlflow_model.EXAMPLE_ROWS
    # the logged model carries the run's final metrics
    (output,) = MlflowClient().get_run(r.info.run_id).outputs.model_outputs
    logged = MlflowClient().get_logged_model(output.model_id)
    # named after its method and data set, so the Models tab tells the models apart
    assert logged.source_run_id == r.info.run_id and logged.name == "agbm-gisette_like"
    assert {m.key: m.value for m in logged.metrics}["test_auc"] == r.data.metrics["test_auc"]


@pytest.mark.parametrize("method", ["lgbm_cegb", "gbdt_topk"])
def test_lightgbm_baselines_use_the_lightgbm_flavour(tracking_at, tmp_path, method):
    store = tracking_at
    r = store["runs"][method]
    ds = experiment.load_data(store["cfg"])
    baseline = LightGBMBaseline.load_model(_model_file(store["client"], r.info.run_id, tmp_path))
    uri = model_uri(r)
    model = mlflow.pyfunc.load_model(uri)
    assert "lightgbm" in model.metadata.flavors
    # GBDT-topK's booster sees its k columns, in rank order; the full frame is accepted all the same
    names = model.metadata.get_input_schema().input_names()
    assert names == [ds.feature_names[j] for j in baseline.columns_]
    assert len(names) == (4 if method == "gbdt_topk" else ds.X_test.shape[1])
    got = model.predict(_frame(ds.X_test, ds.feature_names))
    assert np.array_equal(np.asarray(got), baseline.predict_proba(ds.X_test)[:, 1])
    booster = mlflow.lightgbm.load_model(uri)
    assert np.array_equal(booster.predict(ds.X_test[:, baseline.columns_]), np.asarray(got))
    local = Path(mlflow.artifacts.download_artifacts(uri, dst_path=str(tmp_path / "m")))
    assert any(line.startswith("lightgbm==") for line in (local / "requirements.txt").read_text().split())


def test_every_split_is_a_dataset_input(store):
    ds = experiment.load_data(store["cfg"])
    for r in store["runs"].values():
        inputs = {i.tags[0].value: i.dataset for i in r.inputs.dataset_inputs}
        assert set(inputs) == {"train", "validation", "test"}
        for split, key in mlflow_native.CONTEXTS.items():
            found = inputs[split]
            X, y = ds.split(key)
            assert found.name == "gisette_like" and found.digest == mlflow_native.digest(X, y)
            assert found.source_type == "generated"
            assert json.loads(found.source) == {
                "uri": "synthetic:gisette_like(scale=0.05, random_state=0, feature_scale=0.02)"}
            profile = json.loads(found.profile)
            assert profile["features_shape"] == list(X.shape) and profile["targets_shape"] == [len(y)]
            assert "float32" in found.schema
    # a source reads back through MLflow's registry
    source = mlflow.data.get_source(store["runs"]["agbm"].inputs.dataset_inputs[0].dataset)
    assert isinstance(source, mlflow_native.GeneratedSource)


def test_the_experiment_opens_on_the_runs_table_with_the_metrics_that_matter(store, restore_mlflow):
    client, exp_id = store["client"], store["experiment"].experiment_id
    tags = client.get_experiment(exp_id).tags
    assert tags[mlflow_native.KIND_TAG] == mlflow_native.KIND == "custom_model_development"
    view = json.loads(tags[mlflow_native.VIEW_TAG + mlflow_native.VIEW_KEY])
    assert view["selectedColumns"] == list(mlflow_native.RUN_COLUMNS)
    assert {"metrics.`test_auc`", "metrics.`n_selected_features`", "attributes.`Dataset`"} <= set(
        view["selectedColumns"])
    # the link the runners print opens it, in the UI's model-training mode
    hint = summaries.ui_hint(store["uri"], exp_id)
    assert hint.endswith(f"http://127.0.0.1:5000/#/experiments/{exp_id}/runs?viewStateShareKey="
                         f"{mlflow_native.VIEW_KEY}&workflowType=machine_learning)")
    remote = summaries.ui_hint("http://host:5000/", exp_id)
    assert remote.endswith(f"open http://host:5000/{mlflow_native.runs_view_url(exp_id)}")
    # a kind chosen in the UI is kept; the view is written again only when it changed
    client.set_experiment_tag(exp_id, mlflow_native.KIND_TAG, "genai_development")
    mlflow.set_tracking_uri(store["uri"])
    mlflow_native.configure_ui(exp_id, views={"mine": mlflow_native.runs_view_state("tags.role = 'refit'")})
    tags = client.get_experiment(exp_id).tags
    assert tags[mlflow_native.KIND_TAG] == "genai_development"
    assert json.loads(tags[mlflow_native.VIEW_TAG + "mine"])["searchFilter"] == "tags.role = 'refit'"
    client.set_experiment_tag(exp_id, mlflow_native.KIND_TAG, mlflow_native.KIND)


def test_digest_is_cheap_and_tells_splits_apart():
    big = np.zeros((100_000, 700), dtype=np.float32)     # 280 MB never touched but for the sampled rows
    y = np.zeros(100_000, dtype=np.int64)
    t0 = time.perf_counter()
    first = mlflow_native.digest(big, y)
    assert time.perf_counter() - t0 < 1.0                # 5 ms here; MLflow's own copies the array first
    assert len(first) == 16 and mlflow_native.digest(big, y) == first
    changed = np.zeros((100_000, 700), dtype=np.float32)
    changed[-1, 3] = 1.0                                 # the last row is always sampled
    assert mlflow_native.digest(changed, y) != first
    y2 = y.copy()
    y2[500] = 1                                          # every label is hashed
    assert mlflow_native.digest(big, y2) != first
    assert mlflow_native.digest(big[:-1], y[:-1]) != first


def test_inputs_are_logged_again_when_a_parallel_run_inserted_the_same_dataset(store, monkeypatch):
    """Parallel runs on the same data race to insert the dataset: the losers' transaction fails on
    the unique constraint, and the next attempt finds the dataset stored."""
    from mlflow.exceptions import MlflowException

    calls = []
    real = MlflowClient.log_inputs

    def racing(self, run_id, datasets=None, models=None):
        calls.append(run_id)
        if len(calls) < 3:
            raise MlflowException("(sqlite3.IntegrityError) UNIQUE constraint failed: "
                                  "datasets.experiment_id, datasets.name, datasets.digest")
        return real(self, run_id, datasets=datasets, models=models)

    monkeypatch.setattr(MlflowClient, "log_inputs", racing)
    monkeypatch.setattr(mlflow_native.time, "sleep", lambda seconds: None)
    run = store["client"].create_run(store["experiment"].experiment_id)
    mlflow.set_tracking_uri(store["uri"])
    try:
        mlflow_native.log_inputs(run.info.run_id, store["cfg"], experiment.load_data(store["cfg"]))
        assert len(calls) == 3
        assert len(store["client"].get_run(run.info.run_id).inputs.dataset_inputs) == 3

        def missing(self, run_id, datasets=None, models=None):
            calls.append(run_id)
            raise MlflowException(f"Run '{run_id}' not found")

        calls.clear()
        monkeypatch.setattr(MlflowClient, "log_inputs", missing)
        with pytest.raises(MlflowException, match="not found"):   # another error: raised at once
            mlflow_native.log_inputs(run.info.run_id, store["cfg"], experiment.load_data(store["cfg"]))
        assert len(calls) == 1
    finally:
        store["client"].set_terminated(run.info.run_id)
        store["client"].delete_run(run.info.run_id)


def test_sources_name_the_file_the_url_or_the_generator(tmp_path):
    from gbfs.data import Dataset

    def ds(source: str) -> Dataset:
        X, y = np.zeros((4, 2), np.float32), np.array([0, 1, 0, 1])
        return Dataset("x", X, y, X, y, X, y, ["a", "b"], "binary", source=source)

    gisette = compose_cfg(tmp_path, ["dataset=gisette"])
    url = "https://archive.ics.uci.edu/static/public/170/gisette.zip"
    assert [mlflow_native.split_source(gisette, ds("/prepared.npz"), s) for s in mlflow_native.FIT_SPLITS] \
        == [url] * 3
    cancer = compose_cfg(tmp_path, ["dataset=breast_cancer"])
    assert mlflow_native.split_source(cancer, ds("sklearn.datasets"), "test") == \
        "sklearn.datasets:load_breast_cancer"
    own = compose_cfg(tmp_path, ["dataset=file", "dataset.path=data/my.csv", "dataset.target=label",
                                 f"dataset.test_path={tmp_path / 'held_out.csv'}"])
    assert mlflow_native.dataset_label(own.dataset) == "my.csv"
    assert mlflow_native.split_source(own, ds("/abs/my.csv"), "train") == "/abs/my.csv"
    assert mlflow_native.split_source(own, ds("/abs/my.csv"), "test") == str(tmp_path / "held_out.csv")
    with pytest.raises(ValueError, match="split must be one of"):
        mlflow_native.split_source(own, ds("/abs/my.csv"), "val")
    assert mlflow_native.dataset_label(compose_cfg(tmp_path, ["dataset=file"]).dataset) == "file"


def test_a_data_file_is_named_by_its_file(tmp_path, capsys, restore_mlflow):
    rng = np.random.default_rng(0)
    X = rng.random((200, 5))
    frame = pd.DataFrame(X, columns=[f"c{j}" for j in range(5)])
    frame["label"] = np.where(X[:, 0] + X[:, 1] > 1, "yes", "no")
    frame.to_csv(tmp_path / "my.csv", index=False)
    cfg = compose_cfg(tmp_path, ["dataset=file", f"dataset.path={tmp_path / 'my.csv'}",
                                 "dataset.target=label", "method=agbm", "method.params.n_estimators=5",
                                 "tracking.log_model=false", f"paths.data_dir={tmp_path / 'data'}"])
    run_module.run(cfg)
    assert "| agbm | my.csv |" in capsys.readouterr().out         # the run's own table
    client = MlflowClient(tracking_uri=cfg.tracking.uri)
    (r,) = client.search_runs([client.get_experiment_by_name("gbfs").experiment_id])
    inputs = {i.tags[0].value: i.dataset for i in r.inputs.dataset_inputs}
    assert {d.name for d in inputs.values()} == {"my.csv"}
    assert inputs["train"].source_type == "local"
    assert json.loads(inputs["train"].source) == {"uri": str((tmp_path / "my.csv").resolve())}
    # tracking.log_model=false: the model file only
    assert not r.outputs.model_outputs
    assert "model.json" in {a.path for a in client.list_artifacts(r.info.run_id)}
    # the sweep's table: the file's name, and every swept key, even a group that leaves no name
    hydra_cfg = compose_cfg(tmp_path, [], hydra_cfg=True)
    client.set_tag(r.info.run_id, "sweep_dir", str(hydra_cfg.hydra.sweep.dir))
    client.set_tag(r.info.run_id, "sweep_overrides", json.dumps(["experiment=quickstart", "method=agbm"]))
    r = client.get_run(r.info.run_id)
    assert dataset_of(r) == "my.csv" and run_value(r, "experiment") == "quickstart"
    with open_dict(hydra_cfg):
        hydra_cfg.hydra.overrides.task = ["method=agbm,gbfs"]
    PrintComparison().on_multirun_end(hydra_cfg)
    assert "| agbm | my.csv | - |" in capsys.readouterr().out


def test_tuning_trials_and_refit_log_their_data_and_the_refit_its_model(tmp_path, restore_mlflow):
    from runners import tune

    cfg = compose_cfg(tmp_path, [*TINY, "method=agbm", "tune=optuna", "tune.n_trials=2",
                                 "tune.n_startup_trials=2", "tune.progress=false", "print_summary=false"])
    tune.run(cfg)
    client = MlflowClient(tracking_uri=cfg.tracking.uri)
    found = client.search_runs([client.get_experiment_by_name("gbfs").experiment_id])
    roles = {}
    for r in found:
        roles.setdefault(r.data.tags.get("role"), []).append(r)
    assert len(roles["trial"]) == 2
    for r in roles["trial"]:       # a trial never sees test
        assert sorted(i.tags[0].value for i in r.inputs.dataset_inputs) == ["train", "validation"]
        assert not r.outputs.model_outputs
    (refit,) = roles["refit"]
    assert sorted(i.tags[0].value for i in refit.inputs.dataset_inputs) == ["test", "train", "validation"]
    ds = experiment.load_data(cfg)
    expected = gbfs.load_model(_model_file(client, refit.info.run_id, tmp_path)).predict_proba(ds.X_test)
    pyfunc = mlflow.pyfunc.load_model(model_uri(refit))
    assert np.array_equal(pyfunc.predict(_frame(ds.X_test, ds.feature_names)), expected[:, 1])


def test_a_multitask_model_takes_the_task_in_a_column(tmp_path, restore_mlflow):
    tiny_mt = ["dataset=multitask", "dataset.scale=0.05", "dataset.kwargs.n_tasks=3",
               "dataset.kwargs.n_features=30", "dataset.kwargs.n_shared=2", "dataset.kwargs.n_specific=2",
               "method.params.n_estimators=8", "print_summary=false", "method=mt_agbm"]
    cfg = compose_cfg(tmp_path, tiny_mt)
    run_module.run(cfg)
    client = MlflowClient(tracking_uri=cfg.tracking.uri)
    (r,) = client.search_runs([client.get_experiment_by_name("gbfs").experiment_id])
    ds = experiment.load_data(cfg)
    model = gbfs.load_model(_model_file(client, r.info.run_id, tmp_path))
    pyfunc = mlflow.pyfunc.load_model(model_uri(r))
    assert pyfunc.metadata.get_input_schema().input_names()[-1] == mlflow_model.TASK_COLUMN
    frame = _frame(ds.X_test, ds.feature_names).assign(task=ds.task_test)
    assert np.array_equal(pyfunc.predict(frame), model.predict_proba(ds.X_test, ds.task_test)[:, 1])


def test_the_wrapper_names_what_is_missing():
    wrapper = mlflow_model.GBFSPyfunc(model=None, columns={"a": 0, "b": 1}, task="task")
    with pytest.raises(ValueError, match=r"lacks the columns \['b', 'task'\]"):
        wrapper.predict(pd.DataFrame({"a": [1.0]}))
    with pytest.raises(ValueError, match="must be a DataFrame with a 'task' column"):
        wrapper.predict(np.zeros((1, 2)))
    assert mlflow_model.feature_columns(["a", "a"], 2) == ["x0", "x1"]      # not unique
    assert mlflow_model.feature_columns(["a"], 2) == ["x0", "x1"]           # the wrong length
    assert mlflow_model.task_column(["task", "_task"]) == "__task"
    with pytest.raises(ValueError, match="X must have the model's 3 columns"):
        mlflow_model.log_model(type("M", (), {"n_features_in_": 3})(), "m.json", np.zeros((2, 2)), ["a", "b"])


# ------------------------------------------------------------------------------- runners.tracking.screenshot

def test_screenshot_arguments_and_runs(store, capsys):
    from runners.tracking import screenshot

    with pytest.raises(SystemExit) as done:
        screenshot.main(["--help"])
    assert done.value.code == 0 and "python -m runners.screenshot" in capsys.readouterr().out
    bad_args = ((["--size", "wide"], "--size must be WIDTHxHEIGHT"), (["--runs", "0"], "--runs must be"))
    for bad, named in bad_args:
        with pytest.raises(SystemExit) as done:
            screenshot.main(bad)
        assert done.value.code == 2 and named in capsys.readouterr().err
    runs = screenshot.fitted_runs(store["client"], store["experiment"].experiment_id, limit=10)
    assert [r.data.tags["method"] for r in runs] == ["gbdt_topk", "lgbm_cegb", "agbm"]   # newest first
    assert len(screenshot.fitted_runs(store["client"], store["experiment"].experiment_id, limit=2)) == 2
