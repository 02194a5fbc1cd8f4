"""runners.run against a real MLflow SQLite store in a temporary folder, read back with search_runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import mlflow
import numpy as np
import pytest
from harness_utils import TINY, compose_cfg
from mlflow.tracking import MlflowClient

from gbfs import load_model
from gbfs.data import load_dataset
from runners import run as run_module
from runners.core import budget, summaries

REPO = Path(__file__).resolve().parents[2]
METRICS = {"test_auc", "test_rmse", "test_logloss", "val_auc", "n_selected_features", "precompute_seconds",
           "fit_seconds", "predict_seconds"}


def _runs(root: Path, experiment: str = "gbfs", role: str | None = None):
    """The experiment's runs, oldest first: the fitted models and studies, or (``role``) those of a
    role, e.g. ``sweep_summary``, the run a multirun ends with."""
    client = MlflowClient(tracking_uri=f"sqlite:///{root}/mlflow.db")
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])
    if role is not None:
        return client, [r for r in runs if r.data.tags.get("role") == role]
    return client, [r for r in runs if r.data.tags.get("role") != "sweep_summary"]


def test_run_logs_params_metrics_curves_artifacts(tmp_path):
    cfg = compose_cfg(tmp_path, [*TINY, "method=agbm", "seed=3", "tracking.log_figures=true"])
    metrics = run_module.run(cfg)
    client, (r,) = _runs(tmp_path)
    assert r.info.status == "FINISHED"
    assert METRICS <= set(r.data.metrics)
    assert r.data.metrics["test_auc"] == pytest.approx(metrics["test_auc"])
    # params: the flattened config with dotted keys
    assert r.data.params["method.params.mu"] == "0.01" and r.data.params["dataset.name"] == "gisette_like"
    assert r.data.params["tracking.uri"] == f"sqlite:///{tmp_path}/mlflow.db"
    assert {"method": "agbm", "dataset": "gisette_like", "seed": "3"}.items() <= r.data.tags.items()
    assert len(r.data.tags["git_commit"]) in (40, 7) or r.data.tags["git_commit"] == "unknown"
    # curves by iteration
    n_iter = len(client.get_metric_history(r.info.run_id, "root_variance"))
    assert n_iter >= 2
    for key, extra in (("val_auc", 1), ("val_rmse", 1), ("root_variance", 0), ("elapsed_seconds", 0)):
        hist = sorted(client.get_metric_history(r.info.run_id, key), key=lambda m: m.step)
        # val_auc / val_rmse end with the final model's value, one step after the last iteration
        assert [m.step for m in hist] == list(range(n_iter + extra))
    assert hist[-1].value >= 0
    elapsed = [m.value for m in sorted(client.get_metric_history(r.info.run_id, "elapsed_seconds"),
                                       key=lambda m: m.step)]
    assert np.all(np.diff(elapsed) >= 0)
    # artifacts
    names = {a.path for a in client.list_artifacts(r.info.run_id)}
    assert {"config.yaml", "selected_features.json", "correlations.png", "model.json"} <= names
    local = Path(client.download_artifacts(r.info.run_id, "", str(tmp_path / "dl")))
    model = load_model(local / "model.json")
    sel = json.loads((local / "selected_features.json").read_text())
    assert [f["index"] for f in sel["features"]] == model.selected_features_.tolist()
    assert sel["n_selected_features"] == r.data.metrics["n_selected_features"]
    assert [f["name"] for f in sel["features"]] == [f"f{j}" for j in model.selected_features_]
    assert (local / "correlations.png").read_bytes()[:4] == b"\x89PNG"
    # what the UI shows of the model: every used feature's gain and splits, a bar chart, ROC and PR
    importance = json.loads((local / "feature_importance.json").read_text())
    gain, splits = model.feature_importance("gain"), model.feature_importance("split")
    assert [f["index"] for f in importance["features"]] == sorted(np.flatnonzero(splits),
                                                                  key=lambda j: (-gain[j], j))
    assert all(f["gain"] == gain[f["index"]] and f["split"] == splits[f["index"]] and
               f["name"] == f"f{f['index']}" for f in importance["features"])
    for png in ("feature_importance.png", "roc_pr.png"):
        assert (local / png).read_bytes()[:4] == b"\x89PNG"
    # the logged model is the evaluated one: its test AUC is the logged one
    ds = load_dataset("gisette_like", scale=0.05, feature_scale=0.02, seed=3)
    from gbfs.booster.losses.metrics import roc_auc
    assert roc_auc(ds.y_test, model.predict_proba(ds.X_test)[:, 1]) == pytest.approx(
        r.data.metrics["test_auc"], rel=1e-9)
    assert "seed: 3" in (local / "config.yaml").read_text()
    # a stand-in knows its relevant columns: how many the model found is logged
    assert int(r.data.tags["n_relevant"]) == len(ds.relevant)
    assert r.data.metrics["relevant_selected"] == len(set(model.selected_features_) & set(ds.relevant))


def test_failure_marks_the_run_failed_and_reraises(tmp_path):
    cfg = compose_cfg(tmp_path, [*TINY, "method=agbm", "method.params.mu=-1"])
    with pytest.raises(ValueError, match="mu"):
        run_module.run(cfg)
    _, (r,) = _runs(tmp_path)
    assert r.info.status == "FAILED"
    assert mlflow.active_run() is None


@pytest.mark.slow
def test_gbdt_topk_takes_k_from_sibling_runs(tmp_path):
    # no sibling yet: a clear error, and a FAILED run
    with pytest.raises(ValueError, match="no FINISHED gbfs/agbm/gtgbm run on dataset 'gisette_like'"):
        run_module.run(compose_cfg(tmp_path, [*TINY, "method=gbdt_topk"]))
    siblings = {}
    for method, mu in (("agbm", "0.001"), ("gbfs", "0.5")):
        siblings[method] = run_module.run(compose_cfg(tmp_path, [*TINY, f"method={method}",
                                                                  f"method.params.mu={mu}"]))
    # runs that must not count: another scale, a method that does not count, a failed run
    other_scale = [o if o != "dataset.scale=0.05" else "dataset.scale=0.06" for o in TINY]
    run_module.run(compose_cfg(tmp_path, [*other_scale, "method=agbm", "method.params.mu=0"]))
    wider = [o if not o.startswith("dataset.kwargs.feature_scale") else "dataset.kwargs.feature_scale=0.03"
             for o in TINY]                                     # another width of the stand-in
    run_module.run(compose_cfg(tmp_path, [*wider, "method=agbm", "method.params.mu=0"]))
    run_module.run(compose_cfg(tmp_path, [*TINY, "method=lgbm_cegb", "method.params.mu=0"]))
    with pytest.raises(ValueError):
        run_module.run(compose_cfg(tmp_path, [*TINY, "method=gtgbm", "method.params.delta=2"]))
    expected = max(int(m["n_selected_features"]) for m in siblings.values())
    metrics = run_module.run(compose_cfg(tmp_path, [*TINY, "method=gbdt_topk"]))
    _, runs = _runs(tmp_path)
    topk = runs[-1]
    assert topk.info.status == "FINISHED" and topk.data.tags["method"] == "gbdt_topk"
    assert topk.data.params["method.params.k"] == str(expected)
    assert topk.data.tags["budget"] == topk.data.params["budget"] == str(expected)   # K resolved in the run
    assert metrics["n_selected_features"] <= expected
    assert topk.data.metrics["ranking_seconds"] <= topk.data.metrics["fit_seconds"]
    # the scale written as another number of the same value finds the same siblings
    same = [o if o != "dataset.scale=0.05" else "dataset.scale=0.050" for o in TINY]
    assert budget.resolve_topk_k(compose_cfg(tmp_path, [*same, "method=gbdt_topk"])) == expected


def test_max_features_run_logs_its_budget_and_stability_when_asked(tmp_path, capsys):
    budgeted = ["method.params.max_features=3", "method.params.refit=true"]
    cfg = compose_cfg(tmp_path, [*TINY, "method=agbm", *budgeted, "stability.enabled=true",
                                 "stability.n_resamples=3"])
    metrics = run_module.run(cfg)
    client, (r,) = _runs(tmp_path)
    assert r.data.tags["budget"] == r.data.params["budget"] == "3"
    assert r.data.params["method.params.max_features"] == "3"
    assert 1 <= r.data.metrics["n_selected_features"] <= 3
    assert r.data.metrics["refit_seconds"] <= r.data.metrics["fit_seconds"]
    assert "| agbm | gisette_like | 3 |" in capsys.readouterr().out
    # stability: a clone of the run's estimator on 3 half-samples of train
    assert 0 <= metrics["stability_jaccard"] == r.data.metrics["stability_jaccard"] <= 1
    assert -1 <= r.data.metrics["stability_kuncheva"] <= 1 and "stability_seconds" in r.data.metrics
    assert {"stability.json", "stability.png"} <= {a.path for a in client.list_artifacts(r.info.run_id)}
    local = Path(client.download_artifacts(r.info.run_id, "", str(tmp_path / "dl")))
    stab = json.loads((local / "stability.json").read_text())
    assert stab["n_resamples"] == 3 and stab["subsample"] == 0.5 and stab["random_state"] == 0
    assert stab["jaccard"] == pytest.approx(r.data.metrics["stability_jaccard"])
    assert all(len(s) <= 3 for s in stab["selections"])              # each refit keeps the budget
    assert stab["most_frequent"][0]["name"].startswith("f")
    assert (local / "stability.png").read_bytes()[:4] == b"\x89PNG"
    # without a budget nor stability (the defaults): neither is logged
    run_module.run(compose_cfg(tmp_path, [*TINY, "method=agbm", "print_summary=false"]))
    _, (_, plain) = _runs(tmp_path)
    assert "budget" not in plain.data.tags and "budget" not in plain.data.params
    assert not any(k.startswith("stability_") for k in plain.data.metrics)


def test_gbfs_topk_needs_max_features_and_is_tagged_with_it(tmp_path):
    with pytest.raises(ValueError, match="method='topk' needs max_features"):
        run_module.run(compose_cfg(tmp_path, [*TINY, "method=gbfs_topk"]))
    metrics = run_module.run(compose_cfg(tmp_path, [*TINY, "method=gbfs_topk",
                                                    "method.params.max_features=4"]))
    _, (failed, r) = _runs(tmp_path)
    assert failed.info.status == "FAILED" and r.info.status == "FINISHED"
    assert r.data.tags["budget"] == "4" and metrics["n_selected_features"] <= 4


@pytest.mark.parametrize("method", ["gbdt_full", "lgbm_cegb", "gtgbm"])
def test_every_method_logs_the_same_names(tmp_path, method):
    """LightGBM's baselines and GT-GBM log what test_run_logs_params_metrics_curves_artifacts checks."""
    cfg = compose_cfg(tmp_path, [*TINY, f"method={method}", "n_threads=1"])
    run_module.run(cfg)
    client, (r,) = _runs(tmp_path)
    assert r.info.status == "FINISHED" and METRICS <= set(r.data.metrics)
    assert {"method": method, "dataset": "gisette_like", "seed": "0"}.items() <= r.data.tags.items()
    assert "git_commit" in r.data.tags and r.data.params["method.name"] == method
    n_iter = len(client.get_metric_history(r.info.run_id, "root_variance"))
    assert n_iter >= 2
    for key, extra in (("val_auc", 1), ("val_rmse", 1), ("root_variance", 0), ("elapsed_seconds", 0)):
        assert len(client.get_metric_history(r.info.run_id, key)) == n_iter + extra, key
    names = {a.path for a in client.list_artifacts(r.info.run_id)}
    assert {"config.yaml", "selected_features.json", "correlations.png", "model.json"} <= names


@pytest.mark.slow
def test_quickstart_experiment_end_to_end(tmp_path):
    """The README's main command on a smaller stand-in."""
    env = {**os.environ, "GBFS_ROOT": str(tmp_path)}
    res = subprocess.run([sys.executable, "-m", "runners.run", "experiment=quickstart", "dataset.scale=0.05",
                          "dataset.kwargs.feature_scale=0.05", "method.params.n_estimators=20"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "| gbdt_topk | gisette_like |" in res.stdout and "mlflow ui --backend-store-uri" in res.stdout
    _, runs = _runs(tmp_path)
    assert [r.data.tags["method"] for r in runs] == ["gbfs", "agbm", "gtgbm", "gbdt_full", "lgbm_cegb",
                                                      "gbdt_topk"]
    assert all(r.info.status == "FINISHED" for r in runs)
    # and one run with the sweep's table and chart, after the six
    _, (summary,) = _runs(tmp_path, role="sweep_summary")
    assert summary.info.status == "FINISHED" and summary.info.start_time >= runs[-1].info.start_time


@pytest.mark.slow  # two joblib workers, ~20 s; CI runs the slow tests too
def test_parallel_joblib_multirun_on_a_fresh_store(tmp_path):
    """Four jobs at once on a store that does not exist yet: none is lost."""
    env = {**os.environ, "GBFS_ROOT": str(tmp_path)}
    res = subprocess.run([sys.executable, "-m", "runners.run", "-m", "hydra/launcher=joblib",
                          "hydra.launcher.n_jobs=4", *TINY, "method=agbm,gbfs", "seed=0,1"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    _, runs = _runs(tmp_path)
    assert len(runs) == 4 and all(r.info.status == "FINISHED" for r in runs)
    assert sorted((r.data.tags["method"], r.data.tags["seed"]) for r in runs) == [
        ("agbm", "0"), ("agbm", "1"), ("gbfs", "0"), ("gbfs", "1")]
    assert len({r.data.tags["sweep_dir"] for r in runs}) == 1
    # the comparison table at the end: one row per method, its two seeds pooled
    assert res.stdout.count("| gisette_like |") == 2 and res.stdout.count("| gisette_like | - | 2 |") == 2


@pytest.mark.slow
def test_optuna_storage_is_created_before_parallel_jobs(tmp_path):
    """Four processes opening one fresh SQLite storage at the same instant race to create its schema
    (about half the time without the callback); after InitOptunaStorage they only open it."""
    import multiprocessing

    from harness_utils import open_optuna_storage

    from runners.tuning.hydra_callbacks import InitOptunaStorage

    ctx = multiprocessing.get_context("spawn")
    for rep in range(3):
        cfg = compose_cfg(tmp_path / str(rep), ["tune=optuna"])
        InitOptunaStorage().on_multirun_start(cfg)
        barrier, results = ctx.Barrier(4), ctx.Queue()
        procs = [ctx.Process(target=open_optuna_storage, args=(cfg.tune.storage, barrier, results))
                 for _ in range(4)]
        for p in procs:
            p.start()
        got = [results.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        assert got == ["ok"] * 4, got
    off = compose_cfg(tmp_path / "off", [])                      # not tuning: no storage is made
    InitOptunaStorage().on_multirun_start(off)
    assert not (tmp_path / "off" / "optuna.db").exists()


@pytest.mark.slow  # two joblib workers, ~20 s; CI runs the slow tests too
def test_parallel_tuning_multirun_on_fresh_stores(tmp_path):
    """Four tuning jobs at once on an Optuna storage and an MLflow store that do not exist yet."""
    env = {**os.environ, "GBFS_ROOT": str(tmp_path)}
    res = subprocess.run([sys.executable, "-m", "runners.tune", "-m", "hydra/launcher=joblib",
                          "hydra.launcher.n_jobs=4", *TINY, "method.params.n_estimators=5", "tune.n_trials=1",
                          "method=agbm,gbfs", "seed=0,1", "n_threads=1"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    import optuna

    studies = optuna.get_all_study_summaries(f"sqlite:///{tmp_path}/optuna.db")
    assert len(studies) == 4 and all(s.n_trials == 1 for s in studies)
    _, runs = _runs(tmp_path)
    roles = sorted(r.data.tags.get("role") for r in runs)
    assert roles == ["refit"] * 4 + ["study"] * 4 + ["trial"] * 4
    assert all(r.info.status == "FINISHED" for r in runs)
    # one row per method over its refits (two seeds pooled), none per trial
    assert res.stdout.count("| gisette_like | - | 2 |") == 2


@pytest.mark.slow
def test_run_logs_to_a_remote_tracking_server(tmp_path, mlflow_server):
    cfg = compose_cfg(tmp_path, [*TINY, "method=gbfs", "tracking=remote", f"tracking.uri={mlflow_server}"])
    metrics = run_module.run(cfg)
    client = MlflowClient(tracking_uri=mlflow_server)
    (r,) = client.search_runs([client.get_experiment_by_name("gbfs").experiment_id])
    assert r.info.status == "FINISHED" and r.data.metrics["test_auc"] == pytest.approx(metrics["test_auc"])
    assert {"model.json", "selected_features.json"} <= {a.path for a in client.list_artifacts(r.info.run_id)}
    assert not (tmp_path / "mlflow.db").exists()          # nothing went to the local store
    assert summaries.ui_hint(mlflow_server).endswith(f"open {mlflow_server}")


# ------------------------------------------------------------------ errors naming the config key

@pytest.mark.parametrize("uri, problem", [
    ("garbage://x", "unknown scheme 'garbage'"), ("sqlite://", "SQLite needs a file"),
    ("http://", "no host"), ("file:///tmp/mlruns", "file store"), ("mlruns", "file store"), ("", "empty")])
def test_a_bad_tracking_uri_names_the_key_before_any_run(tmp_path, uri, problem):
    cfg = compose_cfg(tmp_path, [*TINY, f"tracking.uri={uri}"])
    with pytest.raises(ValueError, match=rf"tracking.uri=.*{problem}.*expected sqlite:///<file>, postgresql"):
        run_module.run(cfg)
    assert mlflow.active_run() is None and not list(tmp_path.iterdir())   # no store, no run
    # a multirun stops before its jobs (Hydra would turn a ValueError of a callback into a warning)
    from runners.tuning.hydra_callbacks import InitMLflowStore

    with pytest.raises(SystemExit, match="tracking.uri"):
        InitMLflowStore().on_multirun_start(cfg)


def test_the_tracking_stores_mlflow_opens_are_accepted(monkeypatch):
    from runners.tracking import runs as tracking

    for uri in ("sqlite:///mlflow.db", "sqlite:////abs/mlflow.db", "postgresql://u@db/mlflow",
                "postgresql+psycopg2://u@db:5432/mlflow", "mysql+pymysql://u@db/m", "mssql://u@db/m",
                "http://127.0.0.1:5000", "https://mlflow.example.org", "databricks", "databricks://profile"):
        tracking.check_uri(uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")    # MLflow 3's opt-in to its file store
    tracking.check_uri("file:///tmp/mlruns")


@pytest.mark.parametrize("override, message", [
    ("dataset.scale=abc", r"dataset.scale must be a positive number.*got 'abc'"),
    ("dataset.scale=0", r"dataset.scale must be a positive number.*got 0"),
    ("dataset.val_fraction=1.5", r"dataset.val_fraction must be a number in \(0, 1\).*got 1.5"),
    ("dataset.val_fraction=null", r"dataset.val_fraction .* got None"),
    ("seed=-1", r"seed must be a non-negative integer; got -1"),
    ("seed=1.5", r"seed must be a non-negative integer; got 1.5")])
def test_a_bad_dataset_setting_names_the_key_before_any_run(tmp_path, override, message):
    with pytest.raises(ValueError, match=message):
        run_module.run(compose_cfg(tmp_path, [*TINY, override]))
    with pytest.raises(ValueError, match=message):                   # tuning too
        run_module.run(compose_cfg(tmp_path, [*TINY, override, "tune=optuna"]))
    assert not list(tmp_path.iterdir())                               # no MLflow store, no Optuna study


def test_real_data_scale_is_a_share_of_its_rows(tmp_path):
    from runners.core import experiment

    with pytest.raises(ValueError, match=r"dataset.scale must be in \(0, 1\], the share of the real data"):
        experiment.check_dataset(compose_cfg(tmp_path, ["dataset=gisette", "dataset.scale=2"]))
    experiment.check_dataset(compose_cfg(tmp_path, ["dataset=gisette_like", "dataset.scale=2"]))


# ------------------------------------------------------------------------- the SLURM launcher

def test_slurm_launcher_composes_with_the_plugins_settings_and_ours(tmp_path):
    cfg = compose_cfg(tmp_path, ["hydra/launcher=slurm", "hydra.launcher.partition=cpu"], hydra_cfg=True)
    launcher = cfg.hydra.launcher
    assert launcher._target_ == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert launcher.partition == "cpu" and launcher.timeout_min == 240       # ours over the plugin's
    assert launcher.signal_delay_s == 120 and "submitit_folder" in launcher   # the plugin's own settings
    from runners.tuning.hydra_callbacks import check_launcher

    check_launcher(launcher)                           # installed here (the test extra): no error


def test_a_missing_launcher_plugin_names_the_extra(tmp_path, monkeypatch):
    from runners.tuning.hydra_callbacks import CheckLauncher

    cfg = compose_cfg(tmp_path, ["hydra/launcher=slurm"], hydra_cfg=True)
    monkeypatch.setitem(sys.modules, "hydra_plugins.hydra_submitit_launcher.submitit_launcher", None)
    with pytest.raises(SystemExit, match=r'needs hydra-submitit-launcher .* pip install -e "\.\[slurm\]"'):
        CheckLauncher().on_multirun_start(cfg)


# a process without the submitit plugin: None in sys.modules makes every import of it fail, and
# Hydra's plugin scan skips it, as if hydra-submitit-launcher were not installed
WITHOUT_SUBMITIT = """
import runpy, sys
plugin = "hydra_plugins.hydra_submitit_launcher"
for name in ("submitit", plugin, plugin + ".config", plugin + ".submitit_launcher"):
    sys.modules[name] = None
sys.argv = ["runners.run", *sys.argv[1:]]
runpy.run_module("runners.run", run_name="__main__", alter_sys=True)
"""


@pytest.mark.slow
def test_slurm_multirun_without_the_plugin_says_which_extra_to_install(tmp_path):
    env = {**os.environ, "GBFS_ROOT": str(tmp_path)}
    res = subprocess.run([sys.executable, "-c", WITHOUT_SUBMITIT, "-m", "hydra/launcher=slurm", *TINY,
                          "method=agbm,gbfs"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 1
    # composed (no "Could not load 'hydra/launcher/submitit_slurm'"), then stopped by CheckLauncher
    assert 'hydra-submitit-launcher' in res.stderr and 'pip install -e ".[slurm]"' in res.stderr, res.stderr
    assert "Could not load" not in res.stderr
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "outputs").exists()   # no job ran


@pytest.mark.slow  # a few seconds: the default suite stays under 5 minutes
def test_gbdt_topk_finds_its_k_on_data_without_generator_arguments_and_per_file(tmp_path):
    # breast_cancer has kwargs: {} (an empty config once read the K lookup); a file dataset's K
    # comes only from runs on the same file and target
    small = ["method.params.n_estimators=10", "method.params.mu=0"]
    run_module.run(compose_cfg(tmp_path, ["dataset=breast_cancer", "method=agbm", *small]))
    _, (agbm,) = _runs(tmp_path)
    cancer = compose_cfg(tmp_path, ["dataset=breast_cancer", "method=gbdt_topk"])
    assert budget.resolve_topk_k(cancer) == int(agbm.data.metrics["n_selected_features"])
    rng = np.random.default_rng(0)
    for name, n_cols in (("a.csv", 6), ("b.csv", 9)):
        X = rng.random((240, n_cols))
        y = (X[:, 0] + X[:, 1] > 1).astype(int)
        rows = ["f" + ",f".join(map(str, range(n_cols))) + ",label"]
        rows += [",".join(f"{v:.6f}" for v in x) + f",{t}" for x, t in zip(X, y)]
        (tmp_path / name).write_text("\n".join(rows) + "\n")
    root = f"paths.data_dir={tmp_path / 'data'}"      # the parsed file's cache
    file_a = ["dataset=file", f"dataset.path={tmp_path / 'a.csv'}", "dataset.target=label", root]
    run_module.run(compose_cfg(tmp_path, [*file_a, "method=gbfs", *small, "method.params.mu=0"]))
    _, runs = _runs(tmp_path)
    k_a = int(runs[-1].data.metrics["n_selected_features"])
    assert runs[-1].data.tags["dataset"] == "a.csv"  # the file's name, not "file", in the UI's columns
    assert budget.resolve_topk_k(compose_cfg(tmp_path, [*file_a, "method=gbdt_topk"])) == k_a
    file_b = ["dataset=file", f"dataset.path={tmp_path / 'b.csv'}", "dataset.target=label", root]
    with pytest.raises(ValueError, match="no FINISHED gbfs/agbm/gtgbm run"):
        budget.resolve_topk_k(compose_cfg(tmp_path, [*file_b, "method=gbdt_topk"]))
