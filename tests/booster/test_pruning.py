"""Features that cannot split a node's descendants are skipped: the fit-level filter against a
brute force over thresholds, and every fit grows exactly the trees of a full search."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from gbfs import GBFSClassifier, GBFSRegressor
from gbfs.booster.binning import BinMapper
from gbfs.booster.growing import pruning
from gbfs.booster.growing.grower import TreeGrower
from gbfs.booster.kernels.histogram import HistogramLayout, build_histogram
from gbfs.data.synthetic.text import make_text_like
from gbfs.estimators.model_io import model_to_dict


def _brute_unsplittable(Xb, n_bins, m):
    """No threshold t (left: value bins <= t, missing on either side) with m rows on each side."""
    n, d = Xb.shape
    dead = np.ones(d, dtype=bool)
    for f in range(d):
        col = np.minimum(Xb[:, f].astype(np.int64), n_bins[f])
        miss = int(np.sum(col == n_bins[f]))
        for t in range(n_bins[f]):
            left = int(np.sum(col <= t)) - (miss if t >= n_bins[f] else 0)
            for lc in (left, left + miss):
                if m <= lc <= n - m:
                    dead[f] = False
    return dead


def _rare_columns(seed, n=300, d=24):
    """Columns from dense to a handful of non-zeros, some with NaN, one constant."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    for j in range(2, d):
        X[rng.random(n) > 3.0 / j ** 1.5, j] = 0.0   # column j: about n * 3 / j^1.5 non-zeros
    X[rng.random(n) < 0.05, 1] = np.nan
    X[:, 4] = 7.0
    X[rng.random(n) < 0.9, 5] = np.nan              # mostly missing
    y = (X[:, 0] + 2 * X[:, 2] + rng.normal(0, 0.3, n) > 1.2).astype(int)
    return X, y


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("m", [1, 5, 20])
def test_unsplittable_matches_brute_force(seed, m):
    X, _ = _rare_columns(seed)
    mapper = BinMapper(max_bins=32).fit(X)
    Xb = mapper.transform(X)
    layout = HistogramLayout(mapper.n_bins_non_missing_)
    features = np.arange(X.shape[1], dtype=np.int64)
    cols, no_rows, no_h = np.arange(X.shape[1]), np.empty(0, dtype=np.int32), np.empty(0)

    def fill_counts(hist, feats):
        build_histogram(Xb, cols, no_rows, np.zeros(X.shape[0]), no_h, feats, layout.offsets, layout.n_bins,
                        hist)

    got = pruning.unsplittable(fill_counts, X.shape[0], layout, features, m)
    np.testing.assert_array_equal(got, _brute_unsplittable(Xb, layout.n_bins, m))
    assert got[4] and not got[0]   # the constant column never splits, the dense one does
    if m == 20:
        assert got.sum() >= 3, "the rare columns should be filtered"


def _without_pruning(monkeypatch):
    monkeypatch.setattr(pruning.Pruning, "root", lambda self, exact: None)


def _skips(monkeypatch):
    """Count the features the grower's searches skip (to check the test exercises pruning)."""
    seen = {"skipped": 0}
    live = pruning.Pruning.live

    def counting(features, dead):
        out = live(features, dead)
        seen["skipped"] += features.shape[0] - out.shape[0]
        return out
    monkeypatch.setattr(pruning.Pruning, "live", staticmethod(counting))
    return seen


def _text(seed):
    X, y, _ = make_text_like(600, 400, density=0.02, max_count=4, random_state=seed)
    return X, y


CASES = {
    "dense-rare": ({}, _rare_columns),
    "newton-lambda": ({"criterion": "newton", "leaf_estimate": "newton", "reg_lambda": 1.0,
                       "min_child_weight": 0.5}, _rare_columns),
    "agbm-budget": ({"method": "agbm", "mu": 0.01, "max_features": 4}, _rare_columns),
    "goss": ({"sampler": "goss", "top_rate": 0.2, "other_rate": 0.3}, _rare_columns),
    "mvs": ({"sampler": "mvs", "subsample": 0.5}, _rare_columns),
    "gtgbm-tree": ({"method": "gtgbm", "mu": 0.01, "n_target_features": 3, "group_test_scope": "tree"},
                   _rare_columns),
    "gtgbm-node": ({"method": "gtgbm", "mu": 0.01, "n_target_features": 3, "group_test_scope": "node"},
                   _rare_columns),
    "text-rowwise": ({}, _text),
    "text-newton-subtraction": ({"criterion": "newton", "leaf_estimate": "newton",
                                 "subtraction_min_rows": 0}, _text),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("seed", range(2))
def test_pruned_search_grows_the_full_search_trees(case, seed, monkeypatch):
    kwargs, make = CASES[case]
    X, y = make(seed)
    kwargs = {"n_estimators": 12, "max_leaves": 12, "min_samples_leaf": 15, "random_state": seed,
              "max_bins": 32, **kwargs}
    extra = {k: kwargs.pop(k) for k in ("subtraction_min_rows",) if k in kwargs}

    def fit():
        est = GBFSClassifier(**kwargs)
        if extra:   # a growth setting the estimators do not expose: set on the grower's params
            original = TreeGrower.__init__

            def init(self, X_binned, bin_mapper, params, search=None):
                params.subtraction_min_rows = extra["subtraction_min_rows"]
                original(self, X_binned, bin_mapper, params, search)
            monkeypatch.setattr(TreeGrower, "__init__", init)
        est.fit(X, y)
        monkeypatch.undo()
        return model_to_dict(est)

    seen = _skips(monkeypatch)
    pruned = fit()
    if not case.startswith("gtgbm"):   # group tests rarely nominate a dead feature
        assert seen["skipped"] > 0, "no feature was skipped: the case does not test pruning"
    _without_pruning(monkeypatch)
    full = fit()
    assert pruned == full


def test_hessian_counts_skip_nothing_and_multiclass_is_unchanged(monkeypatch):
    X, _ = _rare_columns(0)
    y = np.digitize(X[:, 0] + X[:, 2], [0.6, 1.0, 1.4])
    seen = _skips(monkeypatch)
    est = GBFSClassifier(n_estimators=5, max_leaves=8, criterion="newton", leaf_estimate="newton",
                         random_state=0).fit(X, y)   # leaf_count "auto": by hessian for 4 classes
    assert seen["skipped"] == 0
    assert len(est.selected_features_) > 0


def test_regressor_on_sparse_input_with_pruning(monkeypatch):
    X, y = _text(0)
    target = np.asarray(X[:, :5].sum(axis=1)).ravel() + y
    seen = _skips(monkeypatch)
    pruned = model_to_dict(GBFSRegressor(n_estimators=8, random_state=0).fit(sp.csr_matrix(X), target))
    assert seen["skipped"] > 0
    monkeypatch.undo()
    _without_pruning(monkeypatch)
    full = model_to_dict(GBFSRegressor(n_estimators=8, random_state=0).fit(sp.csr_matrix(X), target))
    assert full == pruned


@pytest.mark.parametrize("seed", range(4))
def test_live_and_after_search_are_their_numpy_definitions(seed):
    rng = np.random.default_rng(seed)
    d = 40
    dead = rng.random(d) < 0.3
    features = np.sort(rng.choice(d, size=25, replace=False)).astype(np.int64)
    live = pruning.Pruning.live(features, dead)
    np.testing.assert_array_equal(live, features[~dead[features]])
    assert pruning.Pruning.live(features, None) is features
    gain = np.where(rng.random(d) < 0.4, -np.inf, rng.random(d))
    before = dead.copy()
    out = pruning.Pruning.after_search(dead, live, gain)
    expected = dead.copy()
    expected[live[gain[live] == -np.inf]] = True
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(dead, before)  # the parent's mask is never written: children share it
    assert pruning.Pruning.after_search(None, live, gain) is None
    finite = np.where(np.isin(np.arange(d), live), 1.0, -np.inf)  # nothing new: the same mask, no copy
    np.testing.assert_array_equal(pruning.Pruning.after_search(dead, live, finite), dead)
