"""The harness's multitask part: configs, one-vs-rest data, a logged run, the comparison, tuning.

Every run logs to a fresh SQLite MLflow store under ``tmp_path``; the one-vs-rest data is an
``.npz`` the test writes (CI has no shared data folder).
"""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import numpy as np
import pytest
from harness_utils import CONF, compose_cfg
from hydra import compose, initialize_config_dir
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from gbfs import GBFSClassifier
from gbfs.data import load_dataset
from gbfs.data.ovr import one_vs_rest
from runners import multitask as mt_runner
from runners import run as run_module
from runners import tune as tune_module
from runners.core import experiment
from runners.core.multitask_variants import IndependentWithinBudget, PooledWithinBudget
from runners.paper.multitask_comparison import variant_configs
from runners.tuning.search_space import check_search_space

VARIANTS = ("mt_agbm", "mt_gtgbm", "mt_groupsparse", "mt_singletask", "mt_independent")
MT_DATASETS = ("multitask", "isolet_ovr", "tox171_ovr")
# 3 tasks x 100 rows (80 fit + 20 validation) + 50 test rows each, 30 columns, 8 rounds
TINY_MT = ["dataset=multitask", "dataset.scale=0.05", "dataset.kwargs.n_tasks=3",
           "dataset.kwargs.n_features=30", "dataset.kwargs.n_shared=2", "dataset.kwargs.n_specific=2",
           "method.params.n_estimators=8", "print_summary=false"]


def _runs(root, experiment_name: str = "gbfs"):
    client = MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    exp = client.get_experiment_by_name(experiment_name)
    return client, client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])


def _write_npz(path, n_rows: int = 120, n_features: int = 12, n_classes: int = 4, seed: int = 0):
    """A multiclass file whose class c is told by column c (so every one-vs-rest task is learnable)."""
    rng = np.random.default_rng(seed)
    y = np.arange(n_rows) % n_classes
    X = rng.normal(size=(n_rows, n_features)).astype(np.float32)   # what gbfs.data.ovr reads
    X[np.arange(n_rows), y] += 3.0
    np.savez(path, X=X, y=y, class_names=np.array([f"c{k}" for k in range(n_classes)]))
    return X, y


# ------------------------------------------------------------------------------------- configs

@pytest.mark.parametrize("dataset", MT_DATASETS)
@pytest.mark.parametrize("method", VARIANTS)
def test_multitask_configs_compose_and_build(tmp_path, method, dataset):
    cfg = compose_cfg(tmp_path, [f"method={method}", f"dataset={dataset}"])
    OmegaConf.resolve(cfg)
    assert cfg.dataset.multitask is True and experiment.estimator_kind(cfg.method).multitask
    check_search_space(cfg.method)       # every searched name is a param, every range samples
    est = experiment.build_estimator(cfg.method, 0, None, experiment.method_params(cfg.method))
    assert hasattr(est, "fit") and hasattr(est, "predict_proba")


def test_search_spaces_cover_mu_and_mu_task(tmp_path):
    spaces = {m: set(compose_cfg(tmp_path, [f"method={m}"]).method.search_space) for m in VARIANTS}
    assert {"mu", "mu_task", "learning_rate"} <= spaces["mt_agbm"]
    assert {"mu", "mu_task"} <= spaces["mt_gtgbm"]
    # GroupSparse is mu_task = 0: never tuned away from it
    assert "mu_task" not in spaces["mt_groupsparse"]
    assert compose_cfg(tmp_path, ["method=mt_groupsparse"]).method.params.mu_task == 0
    assert {"mu", "learning_rate"} <= spaces["mt_singletask"]
    assert {"mu", "learning_rate"} <= spaces["mt_independent"]


def test_comparison_config_composes(tmp_path):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        variants = variant_configs([f"paths.root_dir={tmp_path}", "method=agbm"])
    assert tuple(variants) == VARIANTS
    assert {v: c.method.name for v, c in variants.items()} == {v: v for v in VARIANTS}
    assert all(c.dataset.name == "multitask" for c in variants.values())


def test_multitask_method_on_single_task_data_fails_before_any_run(tmp_path):
    cfg = compose_cfg(tmp_path, ["method=mt_agbm", "dataset=gisette_like"])
    with pytest.raises(ValueError, match="needs a dataset with task ids"):
        run_module.run(cfg)
    assert not (tmp_path / "mlflow.db").exists()


def test_multitask_method_refuses_stability(tmp_path):
    cfg = compose_cfg(tmp_path, ["method=mt_agbm", "dataset=multitask", "stability.enabled=true"])
    with pytest.raises(ValueError, match="stability.enabled"):
        experiment.check_dataset(cfg)
    # the generator's scale multiplies its rows, as the _like stand-ins' does
    scaled = compose_cfg(tmp_path, ["method=mt_agbm", "dataset=multitask", "dataset.scale=2"])
    experiment.check_dataset(scaled)


# ---------------------------------------------------------------------------- one-vs-rest data

def test_one_vs_rest_stacks_task_major():
    X = np.arange(12, dtype=np.float32).reshape(4, 3)
    Xs, ys, ts = one_vs_rest(X, np.array([2, 1, 2, 3]), [2, 3])
    assert np.array_equal(Xs, np.vstack([X, X])) and ts.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert ys.tolist() == [1, 0, 1, 0, 0, 0, 0, 1]


def test_malformed_npz_and_settings_are_refused(tmp_path):
    np.savez(tmp_path / "bad.npz", X=np.zeros((4, 2)))
    with pytest.raises(ValueError, match="no array.*'y'"):
        load_dataset("ovr", path=tmp_path / "bad.npz")
    _write_npz(tmp_path / "ok.npz")
    with pytest.raises(ValueError, match="n_tasks=9 but y has only 4 classes"):
        load_dataset("ovr", path=tmp_path / "ok.npz", n_tasks=9)
    with pytest.raises(ValueError, match="classes must be distinct labels"):
        load_dataset("ovr", path=tmp_path / "ok.npz", classes=[7])
    with pytest.raises(FileNotFoundError, match="GBFS_SHARED_DATA"):
        load_dataset("ovr")                          # no path and no registered file

def test_one_vs_rest_builder_stacks_every_row_per_task(tmp_path):
    X, y = _write_npz(tmp_path / "multi.npz")
    ds = load_dataset("ovr", path=tmp_path / "multi.npz", n_tasks=3, val_fraction=0.25, seed=1)
    assert ds.task_names == ("c0", "c1", "c2")
    n_rows = {s: len(getattr(ds, f"y_{s}")) // 3 for s in ("train", "val", "test")}
    assert sum(n_rows.values()) == len(y)           # every original row in exactly one split
    for split, n in n_rows.items():
        Xs, ys, ts = (getattr(ds, f"{k}_{split}") for k in ("X", "y", "task"))
        assert np.array_equal(np.bincount(ts), [n, n, n])
        for t in range(3):                           # the same rows for every task, labelled c_t vs rest
            assert np.array_equal(Xs[ts == t], Xs[ts == 0])
            rows = [int(np.flatnonzero((X == r).all(axis=1))[0]) for r in Xs[ts == t]]
            assert np.array_equal(ys[ts == t], (y[rows] == t).astype(ys.dtype))
        assert all(ys[ts == t].sum() > 0 for t in range(3))   # stratified: positives everywhere
    again = load_dataset("ovr", path=tmp_path / "multi.npz", n_tasks=3, val_fraction=0.25, seed=1)
    assert np.array_equal(again.X_test, ds.X_test)   # seeded


def test_dataset_path_is_taken_from_where_the_command_runs(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    _write_npz(tmp_path / "data" / "mine.npz")
    monkeypatch.chdir(tmp_path)
    cfg = compose_cfg(tmp_path, ["method=mt_agbm", "dataset=isolet_ovr", "dataset.kwargs.path=data/mine.npz",
                                 "dataset.kwargs.n_tasks=2"])
    ds = experiment.load_data(cfg)
    assert ds.task_names == ("c0", "c1") and ds.X_train.shape[1] == 12


def test_env_var_names_the_data_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("GBFS_SHARED_DATA", str(tmp_path))
    cfg = compose_cfg(tmp_path, ["dataset=tox171_ovr"])
    assert cfg.dataset.kwargs.path == f"{tmp_path}/tox171.npz"


def test_missing_file_names_the_path(tmp_path):
    missing = tmp_path / "nowhere" / "isolet.npz"
    cfg = compose_cfg(tmp_path, ["method=mt_agbm", "dataset=isolet_ovr", f"dataset.kwargs.path={missing}"])
    with pytest.raises(FileNotFoundError, match=str(missing)):
        experiment.load_data(cfg)


# ------------------------------------------------------------------------------------ a run

def test_run_logs_per_task_and_total_metrics(tmp_path):
    cfg = compose_cfg(tmp_path, [*TINY_MT, "method=mt_agbm"])
    metrics = run_module.run(cfg)
    client, (r,) = _runs(tmp_path)
    got = r.data.metrics
    assert r.info.status == "FINISHED" and r.data.tags["method"] == "mt_agbm"
    for split in ("val", "test"):
        for m in ("auc", "auprc"):
            assert {f"{split}_{m}", *(f"{split}_{m}_task{t}" for t in range(3))} <= set(got)
            # Total: the task-size-weighted mean (equal sizes here)
            per_task = [got[f"{split}_{m}_task{t}"] for t in range(3)]
            assert got[f"{split}_{m}"] == pytest.approx(np.mean(per_task))
    assert {"n_selected_features", "fit_seconds", "predict_seconds", "boosting_seconds",
            *(f"n_features_task{t}" for t in range(3))} <= set(got)
    assert got["test_auc"] == pytest.approx(metrics["test_auc"])
    artifacts = {a.path for a in client.list_artifacts(r.info.run_id)}
    assert {"selected_features.json", "selected_features_per_task.json", "tasks.json", "tasks_auprc.png",
            "tasks_auc.png", "model.json"} <= artifacts
    local = client.download_artifacts(r.info.run_id, "selected_features_per_task.json", str(tmp_path))
    per_task = json.loads(Path(local).read_text())
    counts = [t["n_selected_features"] for t in per_task["tasks"]]
    assert counts == [got[f"n_features_task{t}"] for t in range(3)]
    assert len(client.get_metric_history(r.info.run_id, "val_auc_task0")) >= 1   # per-task curves


@pytest.mark.parametrize("method", ["mt_singletask", "mt_independent"])
def test_baselines_run_within_a_budget(tmp_path, method):
    cfg = compose_cfg(tmp_path, [*TINY_MT, f"method={method}", "method.params.max_features=4"])
    metrics = run_module.run(cfg)
    assert metrics["n_selected_features"] <= 4 and 0 <= metrics["test_auprc"] <= 1
    _, (r,) = _runs(tmp_path)
    assert r.data.tags["budget"] == "4"


def test_budget_wrappers_hold_the_union_of_the_tasks_features():
    ds = load_dataset("multitask", scale=0.05, n_tasks=3, n_features=30, n_shared=2, n_specific=2)
    fit = dict(eval_set=(ds.X_val, ds.y_val, ds.task_val))
    base = GBFSClassifier(mu=0.0, n_estimators=10, random_state=0)
    pooled = PooledWithinBudget(base, max_features=4).fit(ds.X_train, ds.y_train, ds.task_train, **fit)
    assert pooled.n_features_selected_ <= 4 and pooled.inner_max_features_ >= 4   # the task columns are free
    assert pooled.predict_proba(ds.X_test, ds.task_test).shape == (len(ds.y_test), 2)
    assert len(pooled.history_) == 10 and "boosting_seconds" in pooled.timings_
    ind = IndependentWithinBudget(base, max_features=7).fit(ds.X_train, ds.y_train, ds.task_train, **fit)
    assert ind.n_features_selected_ <= 7 and ind.inner_max_features_ >= 7 // 3
    assert all(len(f) <= ind.inner_max_features_ for f in ind.selected_features_per_task_)
    with pytest.raises(ValueError, match="below the number of tasks"):
        IndependentWithinBudget(base, max_features=2).fit(ds.X_train, ds.y_train, ds.task_train)


@pytest.mark.slow  # a few seconds: the default suite stays under 5 minutes
def test_comparison_draws_the_figure_as_an_artifact(tmp_path):
    overrides = [f"paths.root_dir={tmp_path}", *TINY_MT, "compare.variants=[mt_agbm,mt_groupsparse]",
                 "compare.baselines=[mt_groupsparse]"]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("multitask", overrides=overrides)
        variants = variant_configs(overrides, list(cfg.compare.variants))
        out = mt_runner.compare(cfg, variants)
    stem = "multitask_untuned"
    for f in (f"{stem}_auprc.png", f"{stem}_auc.png", f"{stem}_auprc.csv", f"{stem}.md", f"{stem}.json"):
        assert (tmp_path / "results" / "multitask" / f).is_file()
    # the CSV: one row per variant, the tasks and Total
    rows = (tmp_path / "results" / "multitask" / f"{stem}_auprc.csv").read_text().splitlines()
    assert rows[0].split(",")[-1] == "Total" and len(rows) == 3
    assert out["figures"]["auprc"]["Multitask"][-1] == pytest.approx(
        out["variants"]["mt_agbm"]["metrics"]["test_auprc"])
    client, runs = _runs(tmp_path)
    (comparison,) = [r for r in runs if r.data.tags.get("role") == "comparison"]
    logged = {a.path for a in client.list_artifacts(comparison.info.run_id)}
    assert {f"{stem}_auprc.png", f"{stem}_auc.png"} <= logged
    assert comparison.data.metrics["mt_agbm.test_auprc"] == pytest.approx(
        out["variants"]["mt_agbm"]["metrics"]["test_auprc"])


# --------------------------------------------------------------------------------- tuning

@pytest.mark.slow
def test_optuna_tunes_mu_and_mu_task(tmp_path):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("tune", overrides=[f"paths.root_dir={tmp_path}", *TINY_MT, "method=mt_agbm",
                                         "tune.n_trials=3", "tune.progress=false", "tune.pruner=null"])
    metrics = tune_module.run(cfg)
    assert {"test_auc", "test_auprc", "best_value"} <= set(metrics)
    _, runs = _runs(tmp_path)
    trials = [r for r in runs if r.data.tags.get("role") == "trial"]
    assert len(trials) == 3
    assert all({"method.params.mu", "method.params.mu_task"} <= set(r.data.params) for r in trials)
    (study,) = [r for r in runs if r.data.tags.get("role") == "study"]
    assert {"best.mu", "best.mu_task", "best.learning_rate"} <= set(study.data.tags)
    mlflow.set_tracking_uri(None)
