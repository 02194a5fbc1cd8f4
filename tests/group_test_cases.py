"""Shared cases of the GT-GBM tests (``tests/criteria/test_group_testing_*.py``): a planned and
precomputed group tester, a node search, messy matrices, a tree problem and the tree comparison."""

from __future__ import annotations

import numpy as np

from gbfs.booster.binning import BinMapper
from gbfs.booster.tree import Tree
from gbfs.criteria import group_testing as gt

NO_ROWS = np.empty(0, dtype=np.int32)
NO_H = np.empty(0)


def make_tester(X, s, delta=0.1, seed=0, direct_sum_below=gt.DIRECT_SUM_BELOW, mapper=None, **kw):
    """Plan and precompute on the binned ``X`` (``mapper``: the grower's, else a default BinMapper)."""
    mapper = BinMapper().fit(X) if mapper is None else mapper
    pl = gt.plan(X.shape[0], X.shape[1], s, delta, direct_sum_below=direct_sum_below, **kw)
    tester = gt.GroupTester.precompute(mapper.transform(X), mapper.standardised_values_, pl,
                                       np.random.default_rng(seed), direct_sum_below)
    return pl, tester


def bin_edges(mapper):
    return [mapper.bin_edges_[j, :mapper.n_edges_[j]] for j in range(mapper.n_edges_.shape[0])]


def node_search(tester, rows, r, h, min_samples_leaf, min_child_weight=1e-3):
    """``tester.search`` on a node holding ``rows`` (empty: all rows) with residuals ``r`` (node order)
    and weights ``h`` (empty: unit weights)."""
    sum_h = float(h.sum()) if h.shape[0] else float(r.shape[0])
    return tester.search(rows, r, h, float(r.sum()), sum_h, r.shape[0], min_samples_leaf,
                         min_child_weight, 0.0)


def messy_matrix(n, d, seed):
    """Features on very different scales with NaN, constant columns (one with NaN), an all-NaN column
    and a column with three values."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.01, 1000.0, d) + rng.uniform(-1e3, 1e3, d)
    X[rng.random((n, d)) < 0.1] = np.nan
    X[:, 3] = 7.5
    X[:, 8] = -2.0
    X[::3, 8] = np.nan
    X[:, 11] = np.nan
    X[:, 13] = rng.integers(0, 3, n)
    return X




def tree_problem(seed, n=600, d=40, weights=False):
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    X[rng.random((n, d)) < 0.05] = np.nan
    X[:, 5] = rng.integers(0, 4, n)
    x = np.nan_to_num(X, nan=0.5)
    r = (2.0 * (x[:, 0] > 0.5) + x[:, 5] - 1.5 * x[:, 17] + 0.7 * np.isnan(X[:, 30])
         + np.where(x[:, 0] > 0.5, x[:, 9], -x[:, 22]) + 0.5 * rng.standard_normal(n))
    mapper = BinMapper(max_bins=32).fit(X)
    hw = rng.uniform(0.3, 2.0, n) if weights else np.ones(n)
    rw = hw * (r - np.average(r, weights=hw))
    return rng, X, mapper, mapper.transform(X), rw, hw


def assert_same_tree(a, b):
    ta = a.builder.build(np.zeros(len(a.builder.cols["feature"])))
    tb = b.builder.build(np.zeros(len(b.builder.cols["feature"])))
    for name in Tree.FIELDS:
        if name == "gain":  # histograms by subtraction or from rows: equal up to rounding
            np.testing.assert_allclose(ta.gain, tb.gain, rtol=1e-9, atol=1e-9)
        else:
            np.testing.assert_array_equal(getattr(ta, name), getattr(tb, name), err_msg=name)
    for name in ("partition", "leaf_ids", "leaf_starts", "leaf_ends"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    return ta


HIST_MODES = [{}, {"subtraction_min_rows": 0}, {"subtraction_min_rows": 0, "histogram_memory_ratio": 1e6}]
