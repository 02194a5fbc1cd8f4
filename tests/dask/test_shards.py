"""The data-parallel engine against the single-process estimator, with the shards in this process.

:class:`gbfs.dask.engine.InProcessGroup` runs the same shards and driver as a Dask fit without a
cluster, so these tests are fast: one shard reproduces the local fit bit for bit (the same kernels
over the same rows in the same order); several shards add histograms in another order, which
changes no split here, and leaf values by a few ulps.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from dask_cases import wide

from gbfs import GBFSClassifier, GBFSRegressor
from gbfs.booster.binning import BinMapper
from gbfs.dask import engine
from gbfs.dask.shard import Shard
from gbfs.estimators import fitting


def _data(n=600, d=8, seed=0, classify=True):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[rng.random(X.shape) < 0.05] = np.nan
    Z = np.nan_to_num(X)
    z = Z[:, 0] - 2 * Z[:, 1] + np.sin(Z[:, 2]) + 0.5 * rng.normal(size=n)
    y = (z > 0).astype(float) if classify else z
    return X, y


def shard_fit(est, X, y, bounds):
    """``est``'s fit on shards holding the row ranges ``bounds`` (an :class:`InProcessGroup`)."""
    params = est._validate_params()
    if params.growth.leaf_count == "auto":  # what the local fit resolves for a pointwise loss
        params = dataclasses.replace(params, growth=dataclasses.replace(params.growth, leaf_count="rows"))
    seed = fitting.fit_seed(est)
    mapper = BinMapper(est.max_bins, None, np.random.default_rng(seed), None, est.min_data_in_bin).fit(X)
    yy = y if isinstance(est, GBFSRegressor) else (y == 1).astype(float)
    shards = [Shard(mapper.transform(X[a:b]), yy[a:b], mapper.n_bins_non_missing_, params.loss,
                    params.criterion.hessian_weighted, params.leaf_estimate.newton, k)
              for k, (a, b) in enumerate(bounds)]
    costs, bags, _ = fitting.check_selection(est, X.shape[1], [], [])
    return engine.fit(est, engine.InProcessGroup(shards), mapper, params, costs, bags, seed=seed)


def _same_trees(local, trees, exact: bool):
    assert len(local.trees_) == len(trees)
    for a, b in zip(local.trees_, trees):
        np.testing.assert_array_equal(a.feature, b.feature)
        np.testing.assert_array_equal(a.threshold, b.threshold)
        np.testing.assert_array_equal(a.count, b.count)
        if exact:
            np.testing.assert_array_equal(a.value, b.value)
        else:
            np.testing.assert_allclose(a.value, b.value, rtol=1e-9, atol=1e-12)


CASES = {
    "agbm": {"method": "agbm", "mu": 0.02},
    "gbfs": {"method": "gbfs", "mu": 2.0},
    "budget": {"method": "agbm", "mu": 0.0, "max_features": 3},
    "refit": {"method": "agbm", "mu": 0.05, "refit": True},
    "topk": {"method": "topk", "max_features": 3},
    "newton": {"method": "gbfs", "mu": 0.0, "criterion": "newton", "leaf_estimate": "newton",
               "reg_lambda": 1.0},
    "bags": {"method": "gbfs", "mu": 5.0, "feature_bags": [0, 0, 1, 1, 2, 2, 3, 3],
             "feature_costs": [1, 2, 1, 2, 1, 2, 1, 2]},
}


#: the default suite's cases; the others run with the slow tests
FAST = ("agbm", "budget")


@pytest.mark.parametrize("case", [c if c in FAST else pytest.param(c, marks=pytest.mark.slow)
                                  for c in sorted(CASES)])
@pytest.mark.parametrize("bounds", [[(0, 600)], [(0, 150), (150, 420), (420, 600)]], ids=["1", "3"])
def test_shards_grow_the_local_trees(case, bounds):
    kw = {"n_estimators": 12, "max_leaves": 8, "min_samples_leaf": 10, "random_state": 0, **CASES[case]}
    X, y = _data()
    local = GBFSClassifier(**kw).fit(X, y)
    got = shard_fit(GBFSClassifier(**kw), X, y, bounds)
    trees = got.result.trees
    _same_trees(local, trees, exact=len(bounds) == 1)
    if local._selection is not None:
        np.testing.assert_array_equal(local._selection, got.selection)
    assert local.init_score_ == got.result.init_score


@pytest.mark.slow
def test_regression_on_shards():
    kw = {"method": "agbm", "mu": 0.01, "n_estimators": 10, "max_leaves": 6, "random_state": 1}
    X, y = _data(classify=False, seed=3)
    local = GBFSRegressor(**kw).fit(X, y)
    got = shard_fit(GBFSRegressor(**kw), X, y, [(0, 200), (200, 400), (400, 600)])
    _same_trees(local, got.result.trees, exact=False)
    assert got.result.init_score == pytest.approx(local.init_score_, rel=1e-14)


def test_histogram_bytes_are_counted():
    X, y = _data(n=300)
    got = shard_fit(GBFSClassifier(n_estimators=2, max_leaves=4), X, y, [(0, 100), (100, 300)])
    assert got.comm["histogram_bytes"] > 0 and got.comm["histogram_requests"] >= 2


def _log_loss(y, raw):
    p = 1.0 / (1.0 + np.exp(-raw))
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def _local_and_shard_fits(kw: dict, seeds: int) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Held-out log-losses of the local fit and of the fit on three shards, for each seed, and the
    shards' sampled rows of every tree."""
    from gbfs.booster.tree import PackedEnsemble

    X, y = _data(n=3000, seed=7)
    Xt, yt = _data(n=3000, seed=8)
    bounds = [(0, 1000), (1000, 1999), (1999, 3000)]
    local, shards, sizes = [], [], []
    for seed in range(seeds):
        m = GBFSClassifier(random_state=seed, **kw).fit(X, y)
        local.append(_log_loss(yt, m.decision_function(Xt)))
        got = shard_fit(GBFSClassifier(random_state=seed, **kw), X, y, bounds)
        raw = np.full(Xt.shape[0], got.result.init_score)
        PackedEnsemble(got.result.trees).predict_raw(Xt, raw)
        shards.append(_log_loss(yt, raw))
        sizes += [r["n_rows_sampled"] for r in got.result.history]
    return np.array(local), np.array(shards), sizes


def _same_distribution(local: np.ndarray, shards: np.ndarray) -> None:
    se = np.sqrt(local.var(ddof=1) / local.size + shards.var(ddof=1) / shards.size)
    assert abs(local.mean() - shards.mean()) < 4 * se + 1e-3, (local, shards)


@pytest.mark.slow
def test_sgb_on_shards_is_the_local_sampler_in_distribution():
    """Each shard draws its own half of its rows (a stratified SGB sample): not the local draws,
    so only the distribution of the fits can agree -- the test loss over seeds, and the sample size."""
    kw = {"method": "agbm", "mu": 0.0, "sampler": "sgb", "subsample": 0.5, "n_estimators": 30,
          "max_leaves": 8}
    local, shards, sizes = _local_and_shard_fits(kw, 8)
    assert set(sizes) == {500 + 500 + 500}  # round(n_p / 2) on each shard
    _same_distribution(local, shards)


@pytest.mark.parametrize("sampler", ["mvs", pytest.param("mvs_adaptive", marks=pytest.mark.slow)])
def test_mvs_threshold_over_all_shards(sampler):
    """One threshold over every shard's rows: the expected sample size is the sampler's ``s N`` (the
    realised sizes scatter around it) and the fits agree with the local sampler's in distribution."""
    kw = {"method": "agbm", "mu": 0.0, "sampler": sampler, "subsample": 0.3, "n_estimators": 20,
          "max_leaves": 8}
    local, shards, sizes = _local_and_shard_fits(kw, 6)
    assert abs(np.mean(sizes) - 900) < 4 * np.sqrt(900 / len(sizes)) + 5  # s N = 0.3 * 3000
    _same_distribution(local, shards)


# -- GT-GBM and GOSS: the single-process model on shards --------------------------------------------

GT_CASES = {
    "node": {"group_test_scope": "node", "n_target_features": 1},
    "node_rows": {"group_test_scope": "node", "n_target_features": 2, "group_test_rows": 200},
    "tree": {"group_test_scope": "tree", "n_target_features": 2},
    "one_feature_subsets": {"group_test_scope": "node", "subset_size": 1, "n_subsets": 8},
    "tree_goss": {"group_test_scope": "tree", "n_target_features": 2, "sampler": "goss", "other_rate": 0.3},
}
THREE = [(0, 150), (150, 420), (420, 600)]


@pytest.mark.parametrize("case", [c if c in ("node", "tree") else pytest.param(c, marks=pytest.mark.slow)
                                  for c in sorted(GT_CASES)])
def test_gtgbm_on_shards_grows_the_local_trees(case):
    """Each shard's precompute of its rows, every halving level's bounds and histograms summed:
    the local candidates, hence the local trees and selection."""
    kw = {"method": "gtgbm", "mu": 0.01, "n_estimators": 12, "max_leaves": 8, "min_samples_leaf": 10,
          "random_state": 0, **GT_CASES[case]}
    X, y = wide()
    local = GBFSClassifier(**kw).fit(X, y)
    got = shard_fit(GBFSClassifier(**kw), X, y, THREE)
    _same_trees(local, got.result.trees, exact=False)
    used = np.unique(np.concatenate([t.feature[t.feature >= 0] for t in got.result.trees]))
    np.testing.assert_array_equal(np.sort(local.selected_features_), used)


GOSS_CASES = {
    "paper": {},
    "lightgbm": {"goss_style": "lightgbm", "learning_rate": 0.25},
    "newton": {"criterion": "newton", "leaf_estimate": "newton", "reg_lambda": 1.0},
    "no_top": {"top_rate": 0.0},
    "refit": {"mu": 0.05, "refit": True},
}


@pytest.mark.parametrize("case", [c if c == "paper" else pytest.param(c, marks=pytest.mark.slow)
                                  for c in sorted(GOSS_CASES)])
@pytest.mark.parametrize("bounds", [THREE, [(0, 0), (0, 300), (300, 600)]], ids=["3", "empty"])
def test_goss_on_shards_draws_the_local_sample(case, bounds):
    """The a-th largest |g| over all shards, the ties in partition order and selection sampling
    continued shard after shard with the local uniforms: the local rows, weights and trees."""
    kw = {"method": "agbm", "mu": 0.01, "n_estimators": 12, "max_leaves": 8, "min_samples_leaf": 10,
          "random_state": 0, "sampler": "goss", "top_rate": 0.2, "other_rate": 0.3, **GOSS_CASES[case]}
    X, y = _data()
    local = GBFSClassifier(**kw).fit(X, y)
    got = shard_fit(GBFSClassifier(**kw), X, y, bounds)
    _same_trees(local, got.result.trees, exact=False)
    ours = got.selection_history or got.result.history
    theirs = local.selection_history_ if kw.get("refit") else local.history_
    assert [r["n_rows_sampled"] for r in ours] == [r["n_rows_sampled"] for r in theirs]


@pytest.mark.parametrize("fetch_below", [0, 40])
def test_goss_kth_largest_by_bisection_alone(monkeypatch, fetch_below):
    """The a-th largest key found by bisecting bit patterns to the end (nothing fetched), or
    fetched from a narrow bracket: the same value as sorting every key, so the local trees."""
    from gbfs.dask import goss

    found = []

    def spy(group, a, v_max, fold):
        found.append((a, keys := np.concatenate([s._key for s in group.shards])))
        value = kth(group, a, v_max, fold)
        assert value == np.sort(keys)[::-1][a - 1]
        return value

    kth = goss.kth_largest
    monkeypatch.setattr(goss, "FETCH_BELOW", fetch_below)
    monkeypatch.setattr(goss, "kth_largest", spy)
    kw = {"method": "agbm", "mu": 0.01, "n_estimators": 6, "max_leaves": 8, "random_state": 0,
          "sampler": "goss"}
    X, y = _data(classify=False, seed=3)
    local = GBFSRegressor(**kw).fit(X, y)
    got = shard_fit(GBFSRegressor(**kw), X, y, THREE)
    _same_trees(local, got.result.trees, exact=False)
    assert len(found) == 6
