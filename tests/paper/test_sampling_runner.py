"""The sampler/ Hydra group and its plumbing, the MVS-paper comparison runner, the sampling benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from harness_utils import TINY, compose_cfg, group_options
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from runners import bench
from runners.core import experiment
from runners.paper.mvs import comparison as sampling

SAMPLERS = group_options("sampler")
COMMITTED = Path(__file__).resolve().parents[2] / "results" / "sampling" / "sampling.csv"
METHODS = group_options("method")
LGB_EXPECTED = {"sgb": {"bagging_fraction": 0.2, "bagging_freq": 1},
                "goss": {"data_sample_strategy": "goss", "top_rate": 0.1, "other_rate": 0.1}}


pytestmark = pytest.mark.usefixtures("restore_mlflow")


# ------------------------------------------------------------------------------ the sampler group

def test_sampler_group_holds_the_paper_strategies(tmp_path):
    assert set(SAMPLERS) == {"none", "sgb", "goss", "mvs", "mvs_adaptive"}
    for name in SAMPLERS:
        cfg = compose_cfg(tmp_path, [f"sampler={name}"])
        params, space = experiment.sampler_params(cfg.sampler), cfg.sampler.search_space
        assert cfg.sampler.name == name
        assert params.get("sampler") == (None if name == "none" else name)
        assert set(space) <= set(params) - {"sampler"}            # tunes only what it sets
        for spec in space.values():
            assert spec.type == "float" and 0 < spec.low < spec.high
    assert compose_cfg(tmp_path, []).sampler.name == "none"      # the default samples nothing


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("method", METHODS)
def test_every_sampler_composes_with_every_method(tmp_path, method, sampler):
    cfg = compose_cfg(tmp_path, [f"method={method}", f"sampler={sampler}"])
    OmegaConf.resolve(cfg)
    params = experiment.method_params(cfg.method, sampler=cfg.sampler)
    if method == "gbdt_topk":
        params["k"] = 5
    lightgbm = cfg.method.estimator == "lightgbm"
    if lightgbm and sampler.startswith("mvs"):
        with pytest.raises(ValueError, match="LightGBM has no MVS"):
            experiment.build_estimator(cfg.method, cfg.seed, cfg.n_threads, params, cfg.sampler)
        return
    est = experiment.build_estimator(cfg.method, cfg.seed, cfg.n_threads, params, cfg.sampler)
    got = est.get_params()
    if "estimator" in got:  # a multitask baseline wraps a single-task estimator
        got = {k[len("estimator__"):]: v for k, v in got.items() if k.startswith("estimator__")}
    if lightgbm:
        assert (got["lgb_params"] or {}) == LGB_EXPECTED.get(sampler, {})
        assert "sampler" not in got
    else:
        expected = {"sampler": None, **experiment.sampler_params(cfg.sampler)}
        assert {k: got[k] for k in expected} == expected
        for k in set(experiment.SAMPLER_ARGS) - set(expected) - {"goss_style"}:
            assert got[k] is None                                   # what a sampler does not use
        assert got["mu"] == cfg.method.params.mu                    # the method's params are kept


def test_tuned_sampler_values_win_and_reach_the_estimator(tmp_path):
    cfg = compose_cfg(tmp_path, ["method=agbm", "sampler=mvs"])
    space = experiment.search_space(cfg.method, cfg.sampler)
    assert {"mu", "learning_rate", "subsample", "mvs_lambda"} <= set(space)
    params = experiment.method_params(cfg.method, {"subsample": 0.35, "mu": 0.02}, sampler=cfg.sampler)
    est = experiment.build_estimator(cfg.method, 0, 1, params, cfg.sampler)
    assert (est.subsample, est.mvs_lambda, est.mu) == (0.35, 0.1, 0.02)
    with pytest.raises(ValueError, match="not in method.params"):   # without a sampler: unknown
        experiment.method_params(cfg.method, {"subsample": 0.35})
    lgb = compose_cfg(tmp_path, ["method=gbdt_full", "sampler=sgb"])
    est = experiment.build_estimator(lgb.method, 0, 1, {**experiment.method_params(lgb.method),
                                                        "subsample": 0.3}, lgb.sampler)
    assert est.lgb_params == {"bagging_fraction": 0.3, "bagging_freq": 1}


def test_lightgbm_mapping_refuses_what_it_cannot_honour():
    m = experiment.lightgbm_sampling
    assert m({}) == {} and m({"sampler": None}) == {}
    assert m({"sampler": "goss", "goss_style": "lightgbm"}, {"max_bin_by_feature": None}) == {
        "lgb_params": {"max_bin_by_feature": None, "data_sample_strategy": "goss", "top_rate": 0.2,
                       "other_rate": 0.1}}
    assert m({"sampler": "sgb"})["lgb_params"]["bagging_fraction"] == 0.5    # the estimator's default
    for args, match in [({"sampler": "mvs"}, "no MVS"), ({"sampler": "mvs_adaptive"}, "no MVS"),
                        ({"sampler": "goss", "goss_style": "paper"}, "goss_style"),
                        ({"sampler": "sgb", "mvs_lambda": 0.1}, "does not use"),
                        ({"sampler": None, "subsample": 0.5}, "does not use"),
                        ({"sampler": "bagging"}, "sampler must be one of")]:
        with pytest.raises(ValueError, match=match):
            m(args)
    with pytest.raises(ValueError, match="clash"):                  # 'subsample' aliases bagging_fraction
        m({"sampler": "sgb", "subsample": 0.2}, {"subsample": 0.5})


def test_sampler_named_twice_must_agree(tmp_path):
    cfg = compose_cfg(tmp_path, ["method=gbfs", "sampler=goss"])
    with pytest.raises(ValueError, match="disagree"):
        experiment.with_sampler(cfg.method, {"sampler": "sgb"}, cfg.sampler)
    clash = OmegaConf.create({"name": "x", "search_space": {"mu": {"type": "float", "low": 0.1, "high": 1}}})
    with pytest.raises(ValueError, match="both tune"):
        experiment.search_space(cfg.method, clash)


@pytest.mark.parametrize("method, sampler", [("agbm", "mvs"), ("gbdt_full", "goss")])
def test_fit_evaluate_samples_rows(tmp_path, method, sampler):
    # 240 train rows: at the default rate 0.2 no tree could split its 48 rows
    rate = "sampler.params.subsample=0.5" if sampler == "mvs" else "sampler.params.top_rate=0.3"
    cfg = compose_cfg(tmp_path, [*TINY, f"method={method}", f"sampler={sampler}", rate, "n_threads=1"])
    ds = experiment.load_data(cfg)
    out = experiment.fit_evaluate(cfg, ds, experiment.method_params(cfg.method))
    assert 0.5 < out.metrics["test_auc"] <= 1.0
    if method == "agbm":
        n = len(ds.y_train)
        assert all(abs(r["n_rows_sampled"] / n - 0.5) < 0.1 for r in out.history)
    else:
        assert out.model.booster_.params["data_sample_strategy"] == "goss"


# ----------------------------------------------------------------------------- the comparison

TINY_RUN = ["--dataset", "epsilon_like", "--scale", "0.01", "--feature-scale", "0.03", "--rates", "0.2",
            "1.0", "--seeds", "2", "--trees", "5", "--threads", "1", "--quiet"]


def test_grid_splits_the_rate_as_specified():
    goss = sampling.grid("goss", 0.1)
    assert [g["top_rate"] for g in goss] == pytest.approx([0.01, 0.025, 0.05, 0.075])
    assert all(abs(g["top_rate"] + g["other_rate"] - 0.1) < 1e-12 for g in goss)
    assert [g["mvs_lambda"] for g in sampling.grid("mvs", 0.1)] == [0.01, 0.1, 1.0, 10.0]
    assert sampling.grid("sgb", 0.1) == [{"sampler": "sgb", "subsample": 0.1}]
    assert sampling.grid("lgb_goss", 0.1)[0]["data_sample_strategy"] == "goss"
    with pytest.raises(ValueError, match="unknown strategy"):
        sampling.grid("bagging", 0.1)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sampling")
    uri = f"sqlite:///{out}/mlflow.db"
    previous = mlflow.get_tracking_uri()
    try:
        assert sampling.main([*TINY_RUN, "--out", str(out), "--tracking-uri", uri]) == 0
        assert sampling.main([*TINY_RUN, "--out", str(out / "no-mlflow"), "--no-mlflow",
                              "--tracking-uri", uri]) == 0
    finally:
        while mlflow.active_run() is not None:
            mlflow.end_run()
        mlflow.set_tracking_uri(previous)
    return out, uri


def test_tiny_run_writes_the_tables(tiny_run):
    out, _ = tiny_run
    df = pd.read_csv(out / "sampling.csv")
    assert tuple(df.columns) == sampling.CSV_COLUMNS
    assert sorted(zip(df.strategy, df.rate)) == sorted(
        [("none", 1.0), ("lgb_none", 1.0)] + [(s, 0.2) for s in sampling.OURS + sampling.LIGHTGBM])
    base = df[df.strategy.isin(["none", "lgb_none"])]
    assert (base.rel_error == 0).all() and (base.rel_time == 1).all() and (base.sampled_share == 1).all()
    assert (df.n_seeds == 2).all() and df.test_auc_mean.between(0.0, 1.0).all()
    assert np.allclose(df.error_mean, 1 - df.test_auc_mean)
    ours = df[df.library == "gbfs"].set_index("strategy")
    assert ours.loc[["sgb", "goss", "mvs", "mvs_adaptive"], "sampled_share"].between(0.1, 0.3).all()
    assert len(json.loads(ours.loc["mvs", "grid_val_auc"])) == 4             # lambda was tuned
    assert json.loads(ours.loc["goss", "params"])["goss_style"] == "paper"
    md = (out / "sampling.md").read_text()
    assert "## Target\n\nMVS target: not checked (needs sgb, goss and mvs at a rate <= 0.1)" in md
    assert "Relative error change" in md and "Relative learning time change" in md
    assert "| strategy | 0.2 | 1 |" in md and "| MVS Adaptive |" in md and "| LightGBM GOSS |" in md
    assert (out / "sampling.png").read_bytes()[:4] == b"\x89PNG"


def test_tiny_run_logs_one_mlflow_run(tiny_run):
    out, uri = tiny_run
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("gbfs-sampling")
    (r,) = client.search_runs([exp.experiment_id])
    assert r.data.metrics["rel_error_none_1"] == 0.0
    assert {"rel_error_mvs_0.2", "rel_time_goss_0.2", "test_auc_lgb_bagging_0.2"} <= set(r.data.metrics)
    assert r.data.params["dataset"] == "epsilon_like" and r.data.tags["role"] == "sampling"
    names = {a.path for a in client.list_artifacts(r.info.run_id)}
    assert names == {"sampling.csv", "sampling.md", "sampling.png"}


def test_run_is_seeded(tmp_path):
    ds = sampling.load("epsilon_like", 0.01, 0.03, 0)
    booster = sampling.Booster(trees=4, threads=1)
    a, b = (sampling.run(ds, booster, [0.3, 1.0], [0, 1], ["mvs", "lgb_bagging"], progress=False)
            for _ in range(2))
    assert a.test_auc_mean.tolist() == b.test_auc_mean.tolist() and a.params.tolist() == b.params.tolist()


# ------------------------------------------------------------------------------- the benchmark

def test_bench_sampling_small(tmp_path, capsys):
    out = tmp_path / "sampling.json"
    assert bench.main(["sampling", "--threshold-n", "20000", "--scale", "0.01", "--feature-scale", "0.03",
                       "--trees", "12", "--threads", "1", "--fit-scale", "0.01", "--fit-trees", "5",
                       "--out", str(out), "--comparison", str(COMMITTED)]) == 0
    res = json.loads(out.read_text())
    t = res["threshold"]
    assert t["max_rel_diff"] < 1e-9 and abs(t["sum_p_over_target"] - 1) < 1e-9
    rows = {(r["library"], r["strategy"]): r for r in res["per_tree"]}
    assert set(rows) == {("gbfs", s) for s in ("none", "sgb", "goss", "mvs", "mvs_adaptive")} | {
        ("lightgbm", s) for s in ("none", "bagging", "goss")}
    assert all(r["per_tree_s"] > 0 and np.isfinite(r["ratio"]) for r in rows.values())
    fit = res["whole_fit"]
    assert fit["n_train"] == 1000 and fit["trees"] == 5 and fit["none_fit_s"] > 0 and fit["mvs_fit_s"] > 0
    assert fit["fit_ratio"] == fit["mvs_fit_s"] / fit["none_fit_s"] and 0.5 < fit["none_auc"] <= 1
    assert res["command"] and res["git_commit"]
    printed = capsys.readouterr().out
    assert "whole fit at the Flight shape (1000 x 634, 5 trees): MVS at 0.2" in printed
    assert "mvs_threshold on" in printed and "per-tree time at rate 0.2" in printed
    assert "(target <= 0.2 s: MET)" in printed and "per-tree target (ratio <= 0.4" in printed
    # the third target is read from the committed comparison
    assert "MVS target (relative error below SGB's and GOSS's at every rate <= 0.1): " in printed
    assert f"[from {COMMITTED}]" in printed


def _cell(strategy, rate, rel_error, sd=0.01, seeds=5):
    return {"strategy": strategy, "rate": rate, "rel_error": rel_error, "rel_error_sd": sd, "n_seeds": seeds}


def test_mvs_verdict():
    rows = [_cell("sgb", 0.05, 0.5), _cell("goss", 0.05, 0.6), _cell("mvs", 0.05, 0.4),
            _cell("sgb", 0.2, 0.1), _cell("goss", 0.2, 0.1), _cell("mvs", 0.2, 0.3)]     # 0.2 is not judged
    met, lines = sampling.mvs_verdict(pd.DataFrame(rows))
    assert met is True and lines[0].endswith("MET") and len(lines) == 2
    assert "rate 0.05: MVS +40.0% vs SGB +50.0% (+15.8 se), GOSS +60.0% (+31.6 se)" in lines[1]
    rows.append(_cell("mvs", 0.1, 0.5))
    rows += [_cell("sgb", 0.1, 0.45), _cell("goss", 0.1, 0.6)]
    met, lines = sampling.mvs_verdict(pd.DataFrame(rows))
    assert met is False and lines[0].endswith("NOT MET") and len(lines) == 3
    assert sampling.mvs_verdict(pd.DataFrame(rows[:2]))[0] is None                    # no MVS


def test_threshold_references_agree_on_edge_cases():
    from runners.bench.sampling import threshold_partition, threshold_sort

    v = np.array([5.0, 1.0, 1.0, 1.0, 1.0])          # 5 is capped: mu = 4 / (2 - 1) = 4
    assert threshold_sort(v, 2.0) == threshold_partition(v, 2.0) == 4.0
    v = np.random.default_rng(0).random(1001)
    for size in (1.0, 10.5, 500.0, 1000.0):
        mu = threshold_sort(v, size)
        assert abs(np.minimum(1, v / mu).sum() - size) < 1e-9
        assert abs(threshold_partition(v, size) - mu) < 1e-12
