"""``dataset=file`` on every task: multiclass and regression CSVs and a ranking file (LIBSVM with a
LightGBM ``.query`` file) run with our methods and the LightGBM baseline of their task, log the
task's metrics and tags to a real SQLite MLflow store, and print the comparison table."""

from __future__ import annotations

from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from harness_utils import compose_cfg, model_uri
from mlflow.tracking import MlflowClient
from sklearn.metrics import r2_score

from gbfs import load_model
from runners import run as run_module
from runners.core import experiment, tasks

SMALL = ["method.params.n_estimators=10", "method.params.early_stopping_rounds=null"]


def _runs(root: Path):
    client = MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    exp = client.get_experiment_by_name("gbfs")
    if exp is None:
        return client, []
    return client, client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])


def write_multiclass(path: Path, n: int = 240, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    label = np.array(["bird", "cat", "dog", "fish"])[(X[:, 0] > 0).astype(int) + 2 * (X[:, 1] > 0)]
    rows = ["a,b,c,d,e,animal"] + [",".join(f"{v:.5f}" for v in x) + f",{t}" for x, t in zip(X, label)]
    path.write_text("\n".join(rows) + "\n")


def write_regression(path: Path, n: int = 240, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    y = 2 * X[:, 0] - X[:, 3] + 0.3 * rng.normal(size=n)
    rows = ["a,b,c,d,e,price"] + [",".join(f"{v:.5f}" for v in x) + f",{t:.5f}" for x, t in zip(X, y)]
    path.write_text("\n".join(rows) + "\n")


def write_ranking(path: Path, n_queries: int = 40, per: int = 8, seed: int = 2) -> None:
    """LightGBM's LambdaRank example layout: LIBSVM lines without qid, ``<path>.query`` of group sizes."""
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(n_queries * per):
        x = rng.normal(size=6)
        rel = int(np.clip(np.round(x[0] + 0.5 * rng.normal() + 1), 0, 3))
        lines.append(f"{rel} " + " ".join(f"{j + 1}:{v:.4f}" for j, v in enumerate(x)))
    path.write_text("\n".join(lines) + "\n")
    Path(f"{path}.query").write_text("\n".join([str(per)] * n_queries) + "\n")


def _file(tmp_path: Path, name: str, *extra: str) -> list[str]:
    return ["dataset=file", f"dataset.path={tmp_path / name}", f"paths.data_dir={tmp_path / 'data'}", *extra]


@pytest.mark.slow
def test_multiclass_csv_runs_our_method_and_lightgbm(tmp_path, capsys):
    write_multiclass(tmp_path / "animals.csv")
    args = _file(tmp_path, "animals.csv", "dataset.target=animal")
    for method in ("agbm", "gbdt_full"):
        cfg = compose_cfg(tmp_path, [*args, f"method={method}", *SMALL])
        metrics = run_module.run(cfg)
        assert {"test_accuracy", "test_macro_auc", "test_logloss", "val_accuracy"} <= set(metrics)
    out = capsys.readouterr().out
    assert "task multiclass" in out and "test accuracy" in out and "| agbm | animals.csv |" in out
    assert "| gbdt_full | animals.csv |" in out
    client, runs = _runs(tmp_path)
    assert [r.info.status for r in runs] == ["FINISHED", "FINISHED"]
    cfg = experiment.with_task(compose_cfg(tmp_path, [*args, "method=agbm"]))
    ds = experiment.load_data(cfg)
    for run, cls in zip(runs, ("GBFSClassifier", "LightGBMMulticlassBaseline")):
        assert run.data.tags["task"] == "multiclass" and run.data.params["dataset.task"] == "multiclass"
        model = load_model(client.download_artifacts(run.info.run_id, "model.json", str(tmp_path)))
        assert type(model).__name__ == cls and len(model.classes_) == 4
        accuracy = float(np.mean(model.predict(ds.X_test) == ds.y_test))
        assert run.data.metrics["test_accuracy"] == pytest.approx(accuracy)
        # the logged MLflow model returns every class's probability, as the model file does
        pyfunc = mlflow.pyfunc.load_model(model_uri(run))
        columns = pyfunc.metadata.get_input_schema().input_names()
        frame = pd.DataFrame(ds.X_test, columns=list(ds.feature_names))[columns]
        assert np.allclose(pyfunc.predict(frame), model.predict_proba(ds.X_test), rtol=1e-6, atol=1e-9)


@pytest.mark.slow
def test_regression_csv_runs_our_method_and_lightgbm(tmp_path, capsys):
    write_regression(tmp_path / "prices.csv")
    args = _file(tmp_path, "prices.csv", "dataset.target=price")
    for method in ("gbfs", "lgbm_cegb"):
        run_module.run(compose_cfg(tmp_path, [*args, f"method={method}", *SMALL, "method.params.mu=0.01"]))
    out = capsys.readouterr().out
    assert "task regression" in out and "test R²" in out and "| lgbm_cegb | prices.csv |" in out
    client, runs = _runs(tmp_path)
    ds = experiment.load_data(experiment.with_task(compose_cfg(tmp_path, [*args, "method=gbfs"])))
    assert ds.task == "regression" and ds.y_test.dtype == np.float64
    for run, cls in zip(runs, ("GBFSRegressor", "LightGBMRegressionBaseline")):
        assert run.info.status == "FINISHED" and run.data.tags["task"] == "regression"
        model = load_model(client.download_artifacts(run.info.run_id, "model.json", str(tmp_path)))
        assert type(model).__name__ == cls
        pred = model.predict(ds.X_test)
        assert run.data.metrics["test_rmse"] == pytest.approx(np.sqrt(np.mean((ds.y_test - pred) ** 2)))
        assert run.data.metrics["test_r2"] == pytest.approx(r2_score(ds.y_test, pred))
        assert run.data.metrics["test_r2"] > 0.5      # the target is learnable: a working fit


@pytest.mark.slow
def test_ranking_file_with_query_file_runs_through_dataset_file(tmp_path, capsys):
    write_ranking(tmp_path / "rank.train")
    args = _file(tmp_path, "rank.train")
    for method in ("rank_agbm", "gbdt_full"):
        run_module.run(compose_cfg(tmp_path, [*args, f"method={method}", *SMALL]))
    out = capsys.readouterr().out
    assert "task ranking" in out and "test NDCG@10" in out and "| gbdt_full | rank.train |" in out
    client, runs = _runs(tmp_path)
    ds = experiment.load_data(experiment.with_task(compose_cfg(tmp_path, [*args, "method=rank_agbm"])))
    for run, cls in zip(runs, ("GBFSRanker", "LightGBMRankerBaseline")):
        assert run.info.status == "FINISHED" and run.data.tags["task"] == "ranking"
        assert {"test_ndcg_at_10", "test_mrr", "val_ndcg_at_10"} <= set(run.data.metrics)
        model = load_model(client.download_artifacts(run.info.run_id, "model.json", str(tmp_path)))
        assert type(model).__name__ == cls
        scores = experiment.TASKS["ranking"].scores(ds, "test", model.predict(ds.X_test))
        assert run.data.metrics["test_ndcg_at_10"] == pytest.approx(scores["ndcg_at_10"])


def test_task_is_detected_for_each_kind_of_file(tmp_path):
    write_multiclass(tmp_path / "m.csv")
    write_regression(tmp_path / "r.csv")
    write_ranking(tmp_path / "q.txt")
    (tmp_path / "b.csv").write_text("x,y\n" + "\n".join(f"{i},{i % 2}" for i in range(40)) + "\n")
    for name, target, task in (("m.csv", "animal", "multiclass"), ("r.csv", "price", "regression"),
                               ("q.txt", None, "ranking"), ("b.csv", "y", "binary")):
        extra = [] if target is None else [f"dataset.target={target}"]
        cfg = compose_cfg(tmp_path, _file(tmp_path, name, *extra))
        assert tasks.data_task(cfg) == task
    # given: an integer target of two values read as classes of the multiclass task
    cfg = experiment.with_task(compose_cfg(tmp_path, _file(tmp_path, "b.csv", "dataset.target=y",
                                                           "dataset.task=multiclass", "method=gbdt_full")))
    assert cfg.dataset.task == "multiclass" and cfg.method.estimator == "lightgbm_multiclass"
    cfg = experiment.with_task(compose_cfg(tmp_path, _file(tmp_path, "r.csv", "dataset.target=price",
                                                           "method=agbm")))
    assert cfg.method._target_ == "gbfs.GBFSRegressor"
    # a ranking file without an extension whose group sizes are elsewhere: LightGBM's layout, renamed
    (tmp_path / "ranks").write_text((tmp_path / "q.txt").read_text())
    (tmp_path / "sizes").write_text((tmp_path / "q.txt.query").read_text())
    sizes = f"dataset.query_path={tmp_path / 'sizes'}"
    cfg = experiment.with_task(compose_cfg(tmp_path, _file(tmp_path, "ranks", sizes, "method=rank_agbm")))
    assert cfg.dataset.task == "ranking"
    experiment.check_dataset(cfg)
    assert experiment.load_data(cfg).X_train.shape[1] == 6


@pytest.mark.parametrize("name, target, task, match", [
    ("m.csv", "animal", "binary", "dataset.task='binary'.*4 classes"),
    ("r.csv", "price", "multiclass", "dataset.task='multiclass'.*real numbers"),
    ("m.csv", "animal", "ranking", "dataset.task='ranking'.*no ranking file"),
    ("m.csv", "animal", "regression", "dataset.task='regression'.*text"),
])
def test_a_wrong_task_is_refused_before_any_run(tmp_path, name, target, task, match):
    write_multiclass(tmp_path / "m.csv")
    write_regression(tmp_path / "r.csv")
    cfg = compose_cfg(tmp_path, _file(tmp_path, name, f"dataset.target={target}", f"dataset.task={task}"))
    with pytest.raises(ValueError, match=match):
        run_module.run(cfg)
    assert _runs(tmp_path)[1] == []


@pytest.mark.parametrize("name, method, match", [
    ("q.txt", "agbm", "use a ranking method: method=rank_gbdt_full"),
    ("m.csv", "rank_agbm", "is a ranking method"),
    ("r.csv", "gbfs_path", "methods of the regression task: method=agbm"),
])
def test_a_method_that_does_not_serve_the_task_is_refused_before_any_run(tmp_path, name, method, match):
    write_multiclass(tmp_path / "m.csv")
    write_regression(tmp_path / "r.csv")
    write_ranking(tmp_path / "q.txt")
    target = {"m.csv": ["dataset.target=animal"], "r.csv": ["dataset.target=price"]}.get(name, [])
    with pytest.raises(ValueError, match=match):
        run_module.run(compose_cfg(tmp_path, [*_file(tmp_path, name, *target), f"method={method}"]))
    assert _runs(tmp_path)[1] == []
