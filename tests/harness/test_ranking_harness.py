"""The harness's learning-to-rank part: configs, the refusals, a logged run and a tuning study of a
ranking method on a tiny ``ranking_like``, a ranking file's splits, and the Table 4 builder against
hand-made runs in a real SQLite MLflow store.

The runs share one MLflow store per module (a fresh SQLite store's schema costs seconds); the data
is 30 training queries (about 650 rows) x 20 columns, fitted with 8 trees.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest
from harness_utils import CONF, compose_cfg, group_options, paper_rows, reproduction_parent, unit_tags
from hydra import compose, initialize_config_dir
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from gbfs import GBFSRanker, load_model
from gbfs.booster.losses.ranking import group_offsets, mrr, ndcg_at
from gbfs.data.synthetic.generators import GENERATORS
from runners import reproduce as rp
from runners import run as run_module
from runners import tune
from runners.core import experiment, ranking_eval
from runners.paper.reproduction import ranking as reproduce_ranking
from runners.paper.reproduction import run as reproduce_run
from runners.paper.reproduction.plan import rows_by_task
from runners.paper.tables import DatasetRuns
from runners.tracking import runs as tracking
from runners.tuning.search_space import check_search_space

pytestmark = pytest.mark.usefixtures("restore_mlflow")

RANK_METHODS = ("rank_gbdt_full", "rank_gbfs", "rank_agbm", "rank_gtgbm", "rank_gbdt_topk")
TINY_RANK = ["dataset=ranking_like", "dataset.scale=0.015", "dataset.kwargs.n_features=20",
             "dataset.kwargs.n_relevant=4", "method.params.n_estimators=8", "print_summary=false"]
NDCG, VAL = f"test_{ranking_eval.NDCG}", f"val_{ranking_eval.NDCG}"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A root whose MLflow store (experiment ``gbfs``) exists already."""
    root = tmp_path_factory.mktemp("ranking")
    tracking.init_store(f"sqlite:///{root}/mlflow.db", "gbfs", str(root / "mlartifacts"))
    return root


def _cfg(root: Path, *overrides: str, config: str = "config"):
    """The TINY_RANK config under ``root``; ``config="tune"`` is runners.tune's (tune=optuna)."""
    quiet = ["tune.progress=false"] if config == "tune" else []
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config, overrides=[f"paths.root_dir={root}", f"paths.data_dir={root}/data", *TINY_RANK,
                                          *quiet, *overrides])


def _scores(model, ds, split: str) -> dict[str, float]:
    """NDCG@10 and MRR of ``model`` on ``split``, by gbfs.booster.losses.ranking."""
    X, y, group = getattr(ds, f"X_{split}"), getattr(ds, f"y_{split}"), getattr(ds, f"group_{split}")
    offsets, score = group_offsets(group, len(y)), model.predict(X)
    return {"ndcg": ndcg_at(y, score, offsets, 10), "mrr": mrr(y, score, offsets)}


# ------------------------------------------------------------------------------ configs, refusals

@pytest.mark.parametrize("method", RANK_METHODS)
def test_ranking_configs_compose_and_build_a_ranker(tmp_path, method):
    k = ["method.params.max_features=5"] if method == "rank_gbdt_topk" else []   # GBDT-topK's K: given
    cfg = compose_cfg(tmp_path, [f"method={method}", "dataset=ranking_like", "tune=optuna", *k])
    OmegaConf.resolve(cfg)
    assert experiment.estimator_kind(cfg.method).task == "ranking" and cfg.dataset.task == "ranking"
    assert cfg.tune.objective == VAL          # the default objective is the method's score
    check_search_space(cfg.method)
    experiment.check_dataset(cfg)
    est = experiment.build_estimator(cfg.method, 0, None, experiment.method_params(cfg.method))
    assert isinstance(est, GBFSRanker) and est.eval_at == 10
    assert {"ranking_like", "ranking_file"} <= set(group_options("dataset"))


@pytest.mark.parametrize("overrides, match", [
    (["method=agbm", "dataset=ranking_like"],
     r"ranking data \(dataset.task: ranking\).*use a ranking method: method=rank_gbdt_full"),
    (["method=gbfs_path", "dataset=ranking_like"], r"method.estimator: gbfs_path\) fits binary labels"),
    (["method=rank_agbm", "dataset=gisette_like"], r"ranking method .*dataset.task: binary"),
    (["method=rank_gbfs", "dataset=multitask"], r"ranking method .*dataset=multitask"),
    (["method=rank_agbm", "dataset=ranking_like", "method.params.eval_at=5"],
     "method.params.eval_at must be 10"),
    (["method=rank_agbm", "dataset=ranking_like", "stability.enabled=true"], "stability.enabled"),
    (["method=rank_agbm", "dataset=ranking_file"], "dataset.path must name your ranking file"),
    (["method=rank_agbm", "dataset=ranking_file", "dataset.path=nope.txt"], "dataset.path: no such file"),
])
def test_wrong_task_and_bad_ranking_settings_fail_before_any_run(tmp_path, overrides, match):
    cfg = compose_cfg(tmp_path, overrides)
    with pytest.raises(ValueError, match=match):
        run_module.run(cfg)
    assert not (tmp_path / "mlflow.db").exists()


@pytest.mark.parametrize("overrides, match", [
    (["method=rank_agbm", "tune.objective=val_auc"], r"tune.objective must be one of \('val_ndcg_at_10'"),
    (["method=agbm"], r"dataset 'ranking_like' is ranking data"),
    (["method=rank_gbdt_topk"], r"method.params.max_features must be set: rank_gbdt_topk keeps the top K"),
])
def test_runners_tune_refuses_before_any_run(tmp_path, overrides, match):
    cfg = _cfg(tmp_path, *overrides, config="tune")
    with pytest.raises(ValueError, match=match):
        tune.run(cfg)
    assert not (tmp_path / "mlflow.db").exists()
    if "method=rank_gbdt_topk" in overrides:      # a hard budget gives GBDT-topK its K
        experiment.check_dataset(_cfg(tmp_path, *overrides, "tune.budget_mode=hard", "tune.feature_budget=5",
                                      config="tune"))


def test_reproduction_rows_follow_the_datasets_task(tmp_path):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("reproduce", overrides=[f"paths.root_dir={tmp_path}"])
        task = reproduce_run.dataset_task(lambda ov: compose("reproduce", overrides=list(ov)), "ranking_like",
                                          {})
        empty = compose("reproduce", overrides=["~reproduce.ranking_rows"])
    rows = rows_by_task(cfg, {"gisette_like": "binary", "ranking_like": task})
    assert task == "ranking" and [r.name for r in rows["ranking"]][-1] == "gbdt_topk"
    assert all(o.startswith("method=rank_") for r in rows["ranking"] for o in r.overrides[:1])
    with pytest.raises(ValueError, match="reproduce.ranking_rows is empty"):
        rows_by_task(empty, {"ranking_like": "ranking"})


# ------------------------------------------------------------------------------- data and splits

def _queries(X: np.ndarray, group: np.ndarray) -> list[bytes]:
    """Each query's rows, as bytes (to compare queries as wholes)."""
    starts = np.concatenate([[0], np.cumsum(group)])
    return [X[a:b].tobytes() for a, b in zip(starts[:-1], starts[1:])]


def test_every_split_keeps_whole_queries(tmp_path):
    ds = experiment.load_data(_cfg(tmp_path, "method=rank_agbm"))
    gen = GENERATORS["ranking_like"](scale=0.015, random_state=0, n_features=20, n_relevant=4)
    for split in ("train", "val", "test"):
        assert int(getattr(ds, f"group_{split}").sum()) == len(getattr(ds, f"y_{split}"))
    # train and validation hold the generator's training queries, each whole; test is its test set
    ours = _queries(ds.X_train, ds.group_train) + _queries(ds.X_val, ds.group_val)
    assert sorted(ours) == sorted(_queries(gen.X_train, gen.group_train)) and len(ds.group_val) >= 1
    assert _queries(ds.X_test, ds.group_test) == _queries(gen.X_test, gen.group_test)


def test_a_ranking_file_keeps_whole_queries_and_its_scale(tmp_path):
    rng = np.random.default_rng(0)
    lines = []
    for q in range(40):
        for _ in range(int(rng.integers(3, 7))):
            x = rng.normal(size=3)
            lines.append(f"{int(x[0] > 0.5) + int(x[0] > 1)} qid:{q} 1:{x[0]:.4f} 2:{x[1]:.4f} 3:{x[2]:.4f}")
    (tmp_path / "rank.txt").write_text("\n".join(lines) + "\n")
    given = ["method=rank_agbm", "dataset=ranking_file", f"dataset.path={tmp_path}/rank.txt"]
    full = experiment.load_data(compose_cfg(tmp_path, given))
    half = experiment.load_data(compose_cfg(tmp_path, [*given, "dataset.scale=0.5"]))
    assert (len(full.group_train), len(full.group_val), len(full.group_test)) == (24, 6, 10)
    assert (len(half.group_train), len(half.group_val), len(half.group_test)) == (12, 3, 5)
    for ds in (full, half):
        assert all(int(getattr(ds, f"group_{s}").sum()) == len(getattr(ds, f"y_{s}"))
                   for s in ("train", "val", "test"))
    # a kept query is one of the file's, whole: its rows appear in the full split, in order
    starts = np.concatenate([[0], np.cumsum(half.group_test)])
    rows = {tuple(r) for r in full.X_test.tolist()}
    assert all(tuple(r) in rows for r in half.X_test[starts[0]:starts[1]].tolist())


# --------------------------------------------------------------------------- a run, a study

def test_a_ranking_run_logs_the_metrics_of_its_logged_model(store):
    cfg = _cfg(store, "method=rank_agbm", "method.params.mu=0.001")
    metrics = run_module.run(cfg)
    client = MlflowClient(tracking_uri=cfg.tracking.uri)
    exp = client.get_experiment_by_name("gbfs")
    (r,) = client.search_runs([exp.experiment_id], "tags.method = 'rank_agbm'")
    logged = r.data.metrics
    model = load_model(client.download_artifacts(r.info.run_id, "model.json", str(store)))
    ds = experiment.load_data(cfg)
    for split in ("val", "test"):
        s = _scores(model, ds, split)
        assert logged[f"{split}_{ranking_eval.NDCG}"] == pytest.approx(s["ndcg"], abs=1e-12)
        assert logged[f"{split}_mrr"] == pytest.approx(s["mrr"], abs=1e-12)
    assert metrics[NDCG] == logged[NDCG] and "test_auc" not in logged
    assert logged["n_selected_features"] == len(model.selected_features_) and logged["fit_seconds"] > 0
    assert logged["relevant_selected"] <= 4 and r.data.tags["n_relevant"] == "4"
    curve = client.get_metric_history(r.info.run_id, VAL)
    # one point per tree (8, early stopping waits 20), then the final model's
    assert len(curve) == cfg.method.params.n_estimators + 1 and curve[-1].value == logged[VAL]
    assert {m.step for m in client.get_metric_history(r.info.run_id, "val_mrr")} == {m.step for m in curve}
    features = json.loads(Path(client.download_artifacts(r.info.run_id, "selected_features.json",
                                                         str(store))).read_text())
    assert [f["index"] for f in features["features"]] == [int(j) for j in model.selected_features_]


@pytest.mark.slow  # 1.5-2 s: the default suite stays under 5 minutes (CI runs the slow tests too)
def test_tuning_maximises_validation_ndcg(store):
    cfg = _cfg(store, "method=rank_gbfs", "tune.n_trials=2", "tune.n_startup_trials=2", config="tune")
    metrics = tune.run(cfg)
    client = MlflowClient(tracking_uri=cfg.tracking.uri)
    exp = client.get_experiment_by_name("gbfs")
    trials = client.search_runs([exp.experiment_id], "tags.role = 'trial' and tags.method = 'rank_gbfs'")
    values = [t.data.metrics[VAL] for t in trials]
    study = optuna.load_study(study_name=cfg.tune.study_name, storage=cfg.tune.storage)
    assert study.direction == optuna.study.StudyDirection.MAXIMIZE and len(set(values)) == 2
    assert sorted(t.value for t in study.trials) == pytest.approx(sorted(values))   # the objective
    assert metrics["best_value"] == pytest.approx(max(values))
    assert metrics[f"best_{VAL}"] == metrics["best_value"]
    assert all("test_mrr" not in t.data.metrics for t in trials)        # tuning never sees test
    (refit,) = client.search_runs([exp.experiment_id], "tags.role = 'refit' and tags.method = 'rank_gbfs'")
    assert refit.data.metrics[NDCG] == metrics[NDCG] and 0 < metrics["test_mrr"] <= 1
    (parent,) = client.search_runs([exp.experiment_id], "tags.role = 'study' and tags.method = 'rank_gbfs'")
    assert parent.data.metrics[f"best_{VAL}"] == pytest.approx(max(values))
    assert parent.data.metrics[NDCG] == metrics[NDCG]


# ----------------------------------------------------------------- Table 4, from hand-made runs

ROWS = paper_rows("rank_", k_param="method.params.max_features")
#: (test_mrr, test_ndcg_at_10, n_selected_features, fit_seconds, test_precision_at_2) of each row at
#: seeds 0 and 1
HAND = {
    "gbdt_full": [(0.90, 0.80, 90, 2.0, 0.70), (0.92, 0.82, 88, 2.2, 0.72)],
    "gbfs": [(0.91, 0.81, 6, 4.0, 0.75), (0.93, 0.83, 8, 4.4, 0.77)],
    "agbm": [(0.92, 0.84, 7, 3.0, 0.76), (0.94, 0.86, 9, 3.2, 0.78)],
    "gtgbm": [(0.95, 0.85, 6, 1.0, 0.77), (0.95, 0.85, 6, 1.2, 0.76)],
    "gbdt_topk": [(0.80, 0.70, 7, 1.5, 0.60), (0.82, 0.72, 9, 1.5, 0.64)],
}


@pytest.fixture
def hand_runs(tmp_path):
    """Runs logged by hand as the runners log them, in a reproduction's experiment."""
    client, exp, parent = reproduction_parent(tmp_path, "table4")
    runs = {}
    for row in ROWS:
        for seed, (mrr_, ndcg, n, sec, p2) in enumerate(HAND[row.name]):
            tags = unit_tags(parent, "ranking_like", row.name, seed)
            if row.k_param:
                tags["budget"] = "9" if seed else "7"
            run_id = client.create_run(exp, tags=tags).info.run_id
            metrics = {"test_mrr": mrr_, NDCG: ndcg, "n_selected_features": n, "fit_seconds": sec,
                       "test_precision_at_2": p2}
            for key, value in metrics.items():
                client.log_metric(run_id, key, value)
            client.set_terminated(run_id)
            runs[f"{row.name}/{seed}"] = client.get_run(run_id)
    return client, parent, runs


def test_table4_reads_the_runs_back_next_to_the_papers_numbers(hand_runs, tmp_path):
    client, parent, runs = hand_runs
    data = compose_cfg(tmp_path, ["method=rank_gbdt_full", "dataset=ranking_like", "dataset.scale=0.01",
                                  f"paths.data_dir={tmp_path}/data"])
    settings = OmegaConf.create({"figure3_features": 20})
    runs_of = DatasetRuns(client, parent, "ranking_like", ROWS, runs, [0, 1], data, settings,
                          tmp_path / "out")
    folder = reproduce_ranking.write_dataset(runs_of)
    t4 = pd.read_csv(folder / "table4.csv").set_index("row")
    assert list(t4.index) == ["gbdt_full", "gbfs", "agbm", "gtgbm", "gbdt_topk"]
    assert t4.loc["gbfs", "mrr"] == pytest.approx(0.92) and t4.loc["gbfs", "n_features"] == 7
    assert t4.loc["agbm", "ndcg"] == pytest.approx(0.85)
    assert t4.loc["gbfs", "mrr_sd"] == pytest.approx(np.std([0.91, 0.93], ddof=1), abs=1e-6)   # %.6g
    assert t4.loc["gtgbm", "fit_seconds"] == pytest.approx(1.1) and t4.loc["gbdt_topk", "budget"] == "7,9"
    assert t4.loc["gtgbm", "mrr_paper_r1"] == 0.532 and t4.loc["gbdt_topk", "mrr_paper_r2"] == 0.496
    assert t4.loc["gbfs", "rmse_paper_r1"] == 0.158
    assert math.isnan(t4.loc["agbm", "mrr_paper_r1"]) and math.isnan(t4.loc["gbdt_full", "mrr_paper_r2"])
    assert t4.loc["gtgbm", "run_ids"].split() == [runs["gtgbm/0"].info.run_id, runs["gtgbm/1"].info.run_id]
    md = (folder / "table4.md").read_text()
    assert "| GBFS | 7.0 ± 1.4 | 0.920 ± 0.014 | 0.820 ± 0.014 | 0.760 ± 0.014 | 4.20 ± 0.28 | 0.531 | " \
           "0.499 |" in md
    assert "| GBDT-topK (K=7,9) |" in md and "| A-GBM | 8.0 ± 1.4 | 0.930 ± 0.014 | 0.850 ± 0.014 |" in md
    assert f"`{runs['agbm/1'].info.run_id[:8]}`" in md and parent in md and "data differ" in md
    assert "GT-GBM's MRR is higher than GBDT-topK's: ours +0.140, +14.0 se over 2 paired seeds, paper " \
           "R1 +0.002, R2 +0.002: **holds**" in md
    assert "GT-GBM's MRR is higher than GBFS's: ours +0.030, +3.0 se over 2 paired seeds" in md
    assert "GT-GBM trains in less time than GBFS: 1.10 s vs 4.20 s (3.82× GT-GBM's; +3.10 s, +31.0 se over " \
           "2 paired seeds): **holds**" in md
    ds = experiment.load_data(data)
    assert f"({len(ds.group_train)} / {len(ds.group_val)} / {len(ds.group_test)} queries)" in md
    t7 = (folder / "table7.md").read_text()
    assert "| GBFS | 0.760 ± 0.014 | 0.922 / 0.770 / 0.258 | 0.910 / 0.875 / 0.218 |" in t7
    assert "| GT-GBM | 0.765 ± 0.007 |" in t7 and "| A-GBM" not in t7
    assert "GBDT-topK is suboptimal: GBFS's P@2 is higher: ours +0.140, +14.0 se over 2 paired seeds, " \
           "paper C1 +0.019, C2 +0.001: **holds**." in t7
    assert "GT-GBM matches or outperforms GBFS on P@2: ours +0.005, +0.3 se over 2 paired seeds, paper " \
           "C1 +0.003, C2 +0.003: **within noise**." in t7


# ------------------------------------------------------------------- a whole (tiny) reproduction

@pytest.mark.slow
def test_tiny_ranking_reproduction_writes_table4_and_resumes(tmp_path, caplog):
    caplog.set_level("INFO", logger="runners.paper.reproduction.run")
    base = [f"paths.root_dir={tmp_path}", f"paths.data_dir={tmp_path}/data", "reproduce.scale=tiny",
            "+reproduce.scales.tiny={seeds: [0, 1], n_trials: 1, mvs: null, datasets: "
            "{ranking_like: {scale: 0.015, kwargs: {n_features: 40, n_relevant: 4}}}}",   # s <= 40
            "method.params.n_estimators=8"]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("reproduce", overrides=base)
        again = lambda: rp.run(cfg, lambda ov: compose("reproduce", overrides=[*base, *ov]))  # noqa: E731
        written = again()
        assert "unit 1 of 10: GBDT-Full on ranking_like: tuning" in caplog.text
        assert re.search(r"unit 10 of 10, ETA \d+ s: GBDT-topK on ranking_like", caplog.text)
        folder = written["ranking_like"]
        assert {p.name for p in folder.iterdir()} == {"table4.md", "table4.csv", "table7.md"}
        client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
        exp = client.get_experiment_by_name("reproduction")
        runs = client.search_runs([exp.experiment_id], max_results=5000)
        finals = [r for r in runs if r.data.tags.get("role") in ("refit", "evaluation")]
        assert len(finals) == 5 * 2 and all(r.info.status == "FINISHED" for r in runs)
        cited = {i for ids in pd.read_csv(folder / "table4.csv").run_ids for i in ids.split()}
        assert cited == {r.info.run_id for r in finals}
        by = {(r.data.tags["repro_row"], r.data.tags["seed"]): r for r in finals}
        for seed in ("0", "1"):      # GBDT-topK's K: the largest selector count at that seed
            k = max(by[(m, seed)].data.metrics["n_selected_features"] for m in ("gbfs", "agbm", "gtgbm"))
            assert by[("gbdt_topk", seed)].data.tags["budget"] == str(int(k))
            assert all(by[(m, seed)].data.metrics["n_selected_features"] <= 20 for m in ("gbfs", "agbm"))
        again()
        assert len(client.search_runs([exp.experiment_id], max_results=5000)) == len(runs)
