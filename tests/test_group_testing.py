"""GT-GBM (Section 4 / Algorithm 2 / Theorem 4.1 of the GT-GBM paper): precompute, group tests, grower.

* the precompute (min-max standardisation, random subsets, prefix sums of the halving tree) against
  direct float64 sums (naive_gt);
* the node search (Algorithm 2, lines 4-10) against a numpy binary search over the same subsets;
* what the search is for: s = 1 finds the single relevant feature of a monotone signal, and the
  Figure-1 generator's three relevant features are among the root candidates;
* the grower: with every feature in Omega GT-GBM is A-GBM; every split is the best penalised split
  over Omega (at the time of the split) and the node's candidates, which needs the refresh of pending
  nodes on features a sibling's split made free;
* the estimator: defaults of Theorem 4.1, memory guard, determinism, parameter errors.
"""

from __future__ import annotations

import dataclasses
import math
import re
import warnings

import naive
import naive_gt
import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from gbfs import GBFSClassifier, GBFSRegressor
from gbfs.booster.binning import BinMapper
from gbfs.booster.growing.feature_search import group_tests
from gbfs.booster.growing.grower import GrowthParams, TreeGrower
from gbfs.booster.tree import Tree
from gbfs.criteria import group_testing as gt
from gbfs.criteria.penalty import FeatureUsage
from gbfs.data.synthetic.generators import make_figure1_regression

NO_ROWS = np.empty(0, dtype=np.int32)
NO_H = np.empty(0)


def _tester(X, s, delta=0.1, seed=0, direct_sum_below=gt.DIRECT_SUM_BELOW, mapper=None, **kw):
    """Plan and precompute on the binned ``X`` (``mapper``: the grower's, else a default BinMapper)."""
    mapper = BinMapper().fit(X) if mapper is None else mapper
    pl = gt.plan(X.shape[0], X.shape[1], s, delta, direct_sum_below=direct_sum_below, **kw)
    tester = gt.GroupTester.precompute(mapper.transform(X), mapper.standardised_values_, pl,
                                       np.random.default_rng(seed), direct_sum_below)
    return pl, tester


def _edges(mapper):
    return [mapper.bin_edges_[j, :mapper.n_edges_[j]] for j in range(mapper.n_edges_.shape[0])]


def _search(tester, rows, r, h, min_samples_leaf, min_child_weight=1e-3):
    """``tester.search`` on a node holding ``rows`` (empty: all rows) with residuals ``r`` (node order)
    and weights ``h`` (empty: unit weights)."""
    sum_h = float(h.sum()) if h.shape[0] else float(r.shape[0])
    return tester.search(rows, r, h, float(r.sum()), sum_h, r.shape[0], min_samples_leaf,
                         min_child_weight, 0.0)


def _messy_matrix(n, d, seed):
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


# -- 1. s = 1: a binary search over [d] ------------------------------------------------------------

MONOTONE = {
    "linear": lambda x: x,
    "exp2": lambda x: 2.0 ** x,
    "log2": lambda x: np.log2(1.0 + x),
    "decreasing_cubic": lambda x: -(x ** 3),
    "step": lambda x: (x > 0.3).astype(float),
}


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("shape", list(MONOTONE))
def test_s1_binary_search_finds_the_relevant_feature(d, shape):
    """y = f(x_k) + noise with f monotone (Theorem 4.2's setting with s = 1): Algorithm 2 line 2 uses
    one subset, [d] itself, and halving it always keeps the half holding x_k."""
    n = 2000
    pl = gt.plan(n, d, 1)
    assert (pl.n_subsets, pl.subset_size) == (1, d)
    for seed, k in enumerate([0, d - 1, 17, 2 * d // 3]):
        rng = np.random.default_rng(seed)
        X = rng.random((n, d))
        fx = MONOTONE[shape](X[:, k])
        y = fx / fx.std() + 0.5 * rng.standard_normal(n)
        pl, tester = _tester(X, 1, seed=seed)
        assert tester.subsets.shape == (1, d)
        np.testing.assert_array_equal(np.sort(tester.subsets[0]), np.arange(d))  # [d], in random order
        r = y - y.mean()
        feature, gain = _search(tester, NO_ROWS, r, NO_H, 20)
        assert feature.tolist() == [k], (shape, d, seed)
        assert gain[0] > 0
        assert gt.root_candidates(X, y, 1, random_state=seed).tolist() == [k]


# -- 2. the Figure-1 generator ---------------------------------------------------------------------

def test_figure1_root_candidates_contain_the_relevant_features():
    """y = 2 x1 - 3 * 2^x2 + log2(1 + x3) + eps (Section 4.3): with s = 3 and delta = 0.1 (28 subsets of
    20 features) every relevant feature is alone in some subset with probability >= 0.9 (Theorem 4.1),
    and then found by that subset's binary search."""
    hits, sizes = 0, []
    for seed in range(10):
        X, y = make_figure1_regression(4000, 60, random_state=seed)
        cand = gt.root_candidates(X, y, 3, delta=0.1, random_state=seed)
        assert np.all(np.diff(cand) > 0) and cand.min() >= 0 and cand.max() < 60  # sorted, unique
        hits += {0, 1, 2} <= set(cand.tolist())
        sizes.append(len(cand))
    assert hits >= 9
    assert np.mean(sizes) < 20  # a selection, not every feature


# -- 3. the precompute -----------------------------------------------------------------------------

def test_default_precompute_stores_only_the_large_halves():
    for m in (1, 2, 7, 8, 9, 16, 20, 37, 64, 100):
        tree = naive_gt.halving_tree(m)
        # the paper's full prefix array: every position of the subset is a boundary of some half
        np.testing.assert_array_equal(gt.halving_boundaries(m, 1), np.arange(m + 1))
        big = {0, m} | {b for lo, hi in tree[1:] if hi - lo >= gt.DIRECT_SUM_BELOW for b in (lo, hi)}
        np.testing.assert_array_equal(gt.halving_boundaries(m), sorted(big))
        assert gt.plan(100, m, 1).n_stored == len(big) - 1
    # the saving of the default at Gisette's shape with s = 10 (subsets of 500): the boundaries of the 32
    # halves of 15-16 features and of the 32 halves of 8 inside them, ~8x fewer than 500 columns
    assert gt.plan(10, 5000, 10).n_stored == 64
    assert gt.plan(10, 5000, 10, direct_sum_below=1).n_stored == 500


@pytest.mark.parametrize("order", ["C", "F"])
def test_standardised_values_are_min_max_of_the_binned_features(order):
    """z = (mean of the training values in x's bin - min) / (max - min); NaN: the column's standardised
    mean; constant or all-NaN column: 0.  Columns with few values (one bin each) give the paper's
    (x - min) / (max - min) exactly, continuous ones within their bin's spread."""
    X = _messy_matrix(700, 20, seed=0)
    X[:, 15] = np.round(X[:, 15] / 100.0)  # another column with fewer than 255 values
    X = np.asfortranarray(X) if order == "F" else X
    mapper = BinMapper(min_data_in_bin=1).fit(X)  # few-valued columns: one bin per value
    _, tester = _tester(X, 4, mapper=mapper)
    Z = tester.standardised()
    ref = naive_gt.standardise_binned(X, _edges(mapper))
    assert Z.shape == X.shape
    assert not np.isnan(Z).any() and Z.min() >= 0.0 and Z.max() <= 1.0
    np.testing.assert_allclose(Z, ref, rtol=1e-12, atol=1e-12)
    rows = np.array([5, 0, 699, 17, 17])
    np.testing.assert_array_equal(tester.standardised(rows), Z[rows])
    for j in (3, 8, 11):  # constant, constant with NaN, all NaN
        np.testing.assert_array_equal(Z[:, j], 0.0)
    raw = naive_gt.standardise(X)  # footnote 1 on the raw values
    for j in range(X.shape[1]):
        ok = ~np.isnan(X[:, j])
        # a NaN is the mean standardised value of its column's observed entries
        np.testing.assert_allclose(Z[~ok, j], raw[ok, j].mean() if ok.any() else 0.0, atol=1e-12)
        if len(np.unique(X[ok, j])) <= 255:
            np.testing.assert_allclose(Z[:, j], raw[:, j], atol=1e-12, err_msg=f"column {j}")
        else:  # within the spread of the standardised values sharing the bin
            b = mapper.transform(X)[:, j]
            for k in np.unique(b[ok]):
                in_bin = raw[ok & (b == k), j]
                assert in_bin.min() - 1e-12 <= Z[ok & (b == k), j][0] <= in_bin.max() + 1e-12
    assert len(np.unique(X[:, 0])) > 255 and len(np.unique(X[:, 13])) == 3  # both kinds are there


def test_standardised_values_are_monotone_in_the_bin():
    """With a bin subsample, rows outside it may fall in a bin no subsampled value fell in.  The top bin
    is empty when the last quantile edge is the subsample's max (>= 1/255 of the values tied there, e.g. a
    clipped feature); an outlier above it must still get the largest standardised value."""
    rng = np.random.default_rng(0)
    x = np.minimum(rng.random(5000) * 1.01, 1.0)  # clipped at 1: ~1% of the values tied at the max
    x[0] = 1.5
    mapper = BinMapper(subsample=1000, random_state=1).fit(x[:, None])
    b = mapper.transform(x[:, None])[:, 0]
    assert b[0] == mapper.n_edges_[0]  # the outlier is alone in the top bin
    z = mapper.standardised_values_[0, : mapper.n_edges_[0] + 1]
    assert np.all(np.diff(z) >= 0), z[-3:]  # fails: [..., 0.9998, 0.0]


@pytest.mark.parametrize("direct_sum_below", [1, gt.DIRECT_SUM_BELOW])
@pytest.mark.parametrize("s", [1, 3])
def test_pseudo_features_equal_direct_sums(direct_sum_below, s):
    n, d = 400, 40
    X = _messy_matrix(n, d, seed=1)
    mapper = BinMapper().fit(X)
    pl, tester = _tester(X, s, seed=2, direct_sum_below=direct_sum_below, mapper=mapper)
    m = pl.subset_size
    assert tester.subsets.shape == (pl.n_subsets, m)
    assert tester.prefix.shape == (pl.n_subsets, pl.n_stored, n)
    assert tester.nbytes == pl.nbytes
    Z = naive_gt.standardise_binned(X, _edges(mapper))
    rng = np.random.default_rng(3)
    row_sets = [None, np.sort(rng.choice(n, 150, replace=False)), rng.permutation(n)[:77]]
    arbitrary = [(0, m), (1, m), (0, m - 1), (2, m - 3), (m // 3, m // 3 + 1), (m - 1, m),
                 (m // 2, m // 2), (0, 0), (m, m)]  # the last three empty: 0
    ranges = naive_gt.halving_tree(m) + [(lo, hi) for lo, hi in arbitrary if 0 <= lo <= hi <= m]
    for k in range(min(pl.n_subsets, 6)):
        assert len(set(tester.subsets[k].tolist())) == m  # a subset: no feature twice
        if direct_sum_below == 1:  # the paper's prefix array: prefix[k, t - 1] = sum of positions < t
            ref = np.cumsum(Z[:, tester.subsets[k]], axis=1).T
            np.testing.assert_allclose(tester.prefix[k], ref, rtol=1e-6, atol=1e-5)
        for rows in row_sets:
            for lo, hi in ranges:
                got = tester.pseudo_feature(k, lo, hi, rows)
                want = naive_gt.pseudo_feature(Z, tester.subsets, k, lo, hi, rows)
                assert got.shape == (n if rows is None else len(rows),)
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5, err_msg=f"k={k} [{lo}, {hi})")


def test_subsets_are_random_subsets_in_random_order():
    X = np.random.default_rng(0).random((50, 30))
    pl, tester = _tester(X, 3, seed=5)  # 28 subsets of 10 features
    S = tester.subsets
    assert all(len(set(row.tolist())) == pl.subset_size for row in S)
    assert len({tuple(row) for row in S}) == pl.n_subsets
    assert len({tuple(sorted(row)) for row in S}) == pl.n_subsets  # not one set in several orders
    counts = np.bincount(S.ravel(), minlength=30)
    assert counts.min() > 0  # 280 draws over 30 features: each appears (expected 9.3 each)


# -- 4. the node search against a numpy binary search ----------------------------------------------

def _search_problem(seed, n=500, d=60):
    rng = np.random.default_rng(seed)
    X = _messy_matrix(n, d, seed)
    X[:, [20, 21, 22]] = 1.0  # more constant columns: single-feature halves with no split
    x0, x5 = np.nan_to_num(X[:, 0]), np.nan_to_num(X[:, 5])
    y = np.sign(x0 - np.median(x0)) + np.sin(x5 / (np.abs(x5).max() + 1) * 6) + 0.5 * rng.standard_normal(n)
    return rng, X, y


@pytest.mark.parametrize("s", [1, 4])
@pytest.mark.parametrize("node", ["root", "subset"])
@pytest.mark.parametrize("weights", ["unit", "explicit"])
def test_group_test_search_matches_naive(s, node, weights):
    rng, X, y = _search_problem(seed=s)
    n = X.shape[0]
    mapper = BinMapper().fit(X)
    pl, tester = _tester(X, s, delta=0.2, seed=s, mapper=mapper)
    rows = NO_ROWS if node == "root" else np.sort(rng.choice(n, 260, replace=False)).astype(np.int32)
    r = y if node == "root" else y[rows]
    r = r - r.mean()
    h = rng.uniform(0.2, 3.0, r.shape[0]) if weights == "explicit" else NO_H
    h_ref = h if weights == "explicit" else np.ones(r.shape[0])
    Z = naive_gt.standardise_binned(X, _edges(mapper))

    def values(k, lo, hi):
        return naive_gt.pseudo_feature(Z, tester.subsets, k, lo, hi, rows)

    for msl in (7, 60):
        feature, gain = _search(tester, rows, r, h, msl)
        ref_feature, ref_gain = naive_gt.group_test_search(values, tester.subsets, r, h_ref, gt.GT_BINS, msl,
                                                           1e-3)
        np.testing.assert_array_equal(feature, ref_feature)
        np.testing.assert_allclose(gain, ref_gain, rtol=1e-6)
        # the candidate set: the survivors whose last test had an admissible split, sorted and unique
        cand = tester.candidates(rows, r, h, float(r.sum()), float(h_ref.sum()), r.shape[0], msl, 1e-3, 0.0)
        np.testing.assert_array_equal(cand, np.unique(ref_feature[np.isfinite(ref_gain)]))
    # the search is not vacuous: halves differ in score, and the subsets do not all end on the same side
    assert len(set(ref_feature.tolist())) > 1 or s == 1


def test_group_test_search_without_admissible_split_keeps_the_left_half():
    """min_samples_leaf above half the node: no half has a split (-inf), ties keep the left half, so
    every subset ends on its first feature with score -inf, and the candidate set is empty."""
    rng, X, y = _search_problem(seed=7)
    _, tester = _tester(X, 3, seed=7)
    r = y - y.mean()
    msl = X.shape[0] // 2 + 1
    feature, gain = _search(tester, NO_ROWS, r, NO_H, msl)
    np.testing.assert_array_equal(feature, tester.subsets[:, 0])
    assert np.all(gain == -np.inf)
    # such arbitrary survivors are no candidates
    cand = tester.candidates(NO_ROWS, r, NO_H, float(r.sum()), float(r.shape[0]), r.shape[0], msl, 1e-3, 0.0)
    assert cand.shape == (0,)


def test_half_constant_on_the_node_has_no_split():
    """Columns that are constant on a node (e.g. binary columns after a split) sum to a constant
    pseudo-feature, which the specification scores -inf.  Through a difference of two float32 prefix sums
    the constant 16 comes out as 15.999999 or 16.0 depending on the row; that spread is rounding and the
    search must not split on it."""
    n, d = 500, 32
    pl = gt.plan(n, d, 1)  # one subset of 32 features; prefix sums stored at 8, 16, 24, 32
    order = _tester(np.random.default_rng(1).random((2, d)), 1)[1].subsets[0]
    rng = np.random.default_rng(5)
    X = rng.random((n, d)) * np.pi
    b = (rng.random(n) < 0.5).astype(float)
    X[:, order[16:]] = b[:, None]  # positions 16..31 of the subset: one binary column, 16 times
    pl, tester = _tester(X, 1)
    np.testing.assert_array_equal(tester.subsets[0], order)
    rows = np.flatnonzero(b == 1).astype(np.int32)  # a node where all of them are 1
    r = rng.standard_normal(n)[rows]
    r -= r.mean()
    Z = tester.standardised()
    ref_feature, _ = naive_gt.group_test_search(
        lambda k, lo, hi: naive_gt.pseudo_feature(Z, tester.subsets, k, lo, hi, rows), tester.subsets, r,
        np.ones(r.shape[0]), gt.GT_BINS, 5, 1e-3)
    assert ref_feature[0] not in order[16:]
    z = tester.pseudo_feature(0, 16, 32, rows)
    feature, _ = _search(tester, rows, r, NO_H, 5)
    assert 0 < z.max() - z.min() <= 8 * 2.0**-24 * 32  # float32 rounding only (15.999999 and 16.0)
    np.testing.assert_array_equal(feature, ref_feature)


# -- 5. every feature in Omega: GT-GBM is A-GBM ----------------------------------------------------

def _tree_problem(seed, n=600, d=40, weights=False):
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


def _assert_same_tree(a, b):
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


@pytest.mark.parametrize("scope", ["node", "tree"])
@pytest.mark.parametrize("case", ["unit", "weighted-subset"])
def test_all_features_in_omega_gives_the_agbm_tree(scope, case):
    rng, X, mapper, Xb, rw, hw = _tree_problem(0, weights=case != "unit")
    n, d = Xb.shape
    rows = np.arange(n, dtype=np.int32) if case == "unit" else \
        np.sort(rng.choice(n, 450, replace=False)).astype(np.int32)
    norm = naive.sse(rw[rows] / hw[rows], hw[rows])
    # two subsets of four features: C alone would be a poor choice of features
    _, tester = _tester(X, 2, seed=0, mapper=mapper, n_subsets=2, subset_size=4)
    base = GrowthParams(max_leaves=12, min_samples_leaf=8)

    def usage(all_used):
        u = FeatureUsage(d, 0.02)
        for f in range(d) if all_used else ():
            u.mark_used(f)
        return u

    unit = case == "unit"
    for extra in HIST_MODES:
        params = dataclasses.replace(base, **extra)
        ref = TreeGrower(Xb, mapper, params).grow(rows, rw, hw, usage(True), norm, hw_is_one=unit)
        search = group_tests(tester, scope)
        grown = TreeGrower(Xb, mapper, params, search).grow(rows, rw, hw, usage(True), norm, hw_is_one=unit)
        tree = _assert_same_tree(grown, ref)
    assert tree.n_leaves == 12
    # not vacuous: starting from an empty Omega the same tester grows another tree
    other = TreeGrower(Xb, mapper, base, group_tests(tester, scope)).grow(rows, rw, hw, usage(False), norm,
                                                                          hw_is_one=unit)
    t_other = other.builder.build(np.zeros(len(other.builder.cols["feature"])))
    assert t_other.n_nodes != tree.n_nodes or not np.array_equal(t_other.feature, tree.feature)


# -- 6. Theorem 4.1 defaults -----------------------------------------------------------------------

@pytest.mark.parametrize("s, delta, expected", [(2, 0.1, 17), (3, 0.1, 28), (10, 0.1, 126), (5, 0.05, 63),
                                                (4, 0.5, 23), (20, 0.01, 414), (2, 0.9, 5), (1, 0.1, 1),
                                                (1, 0.001, 1)])
def test_default_n_subsets_follows_theorem_4_1(s, delta, expected):
    assert naive_gt.default_n_subsets(s, delta) == expected  # ceil(e s ln(s / delta)); 1 for s = 1
    assert gt.default_n_subsets(s, delta) == expected
    assert gt.plan(1000, 200, s, delta).n_subsets == expected


@pytest.mark.parametrize("d, s, expected", [(60, 7, 9), (100, 3, 34), (12, 10, 2), (10, 10, 1), (64, 1, 64),
                                            (61, 2, 31)])
def test_default_subset_size_is_d_over_s(d, s, expected):
    assert gt.plan(50, d, s).subset_size == expected == (d if s == 1 else math.ceil(d / s))
    # explicit values are used as given
    pl = gt.plan(50, d, s, 0.3, n_subsets=3, subset_size=max(1, d // 2))
    assert (pl.n_subsets, pl.subset_size, pl.delta) == (3, max(1, d // 2), 0.3)


@pytest.mark.parametrize("s, delta, n_subsets, subset_size, expected",
                         [(1, 0.1, None, None, (1, 30)), (3, 0.1, None, None, (28, 10)),
                          (7, 0.25, None, None, (64, 5)), (4, 0.1, 5, 7, (5, 7))])
def test_fitted_subset_attributes(reg_data, s, delta, n_subsets, subset_size, expected):
    X0, y = reg_data
    X = np.hstack([X0, np.random.default_rng(0).random((X0.shape[0], 18))])  # 30 features
    est = GBFSRegressor(method="gtgbm", n_target_features=s, delta=delta, n_subsets=n_subsets,
                        subset_size=subset_size, n_estimators=3, random_state=0).fit(X, y)
    assert (est.n_subsets_, est.subset_size_) == expected
    assert expected[0] == (n_subsets or naive_gt.default_n_subsets(s, delta))
    pl = gt.plan(X.shape[0], 30, s, delta, n_subsets, subset_size)
    assert est.timings_["precompute_bytes"] == pl.nbytes
    assert pl.n_stored == len(gt.halving_boundaries(expected[1])) - 1


def test_agbm_has_no_precompute(reg_data):
    X, y = reg_data
    est = GBFSRegressor(method="agbm", n_estimators=3, random_state=0).fit(X, y)
    assert est.timings_["precompute_bytes"] == 0
    assert not hasattr(est, "n_subsets_") and not hasattr(est, "subset_size_")


# -- 7. the memory guard ---------------------------------------------------------------------------

def test_memory_guard_names_the_budget_and_a_fitting_n_subsets():
    n, d = 1000, 50
    pl = gt.plan(n, d, 5, 0.1)  # 54 subsets of 10 features, one stored prefix column each
    per_subset = 4 * n * pl.n_stored  # float32 prefix sums of one subset
    assert pl.n_stored == 1
    fixed = pl.nbytes - pl.n_subsets * per_subset  # whatever the plan needs besides the prefix sums
    assert fixed >= 0
    gt.check_memory(pl, pl.nbytes)  # exactly at the budget: fine
    budget = fixed + 3 * per_subset + per_subset // 2
    with pytest.raises(ValueError) as err:
        gt.check_memory(pl, budget)
    msg = str(err.value)
    assert "max_precompute_bytes" in msg and str(pl.nbytes) in msg and str(budget) in msg
    k = int(re.search(r"n_subsets <= (\d+)", msg).group(1))
    assert k == 3  # the largest that fits
    gt.check_memory(gt.plan(n, d, 5, 0.1, n_subsets=k), budget)
    with pytest.raises(ValueError):
        gt.check_memory(gt.plan(n, d, 5, 0.1, n_subsets=k + 1), budget)
    # not even one subset fits: no n_subsets to suggest
    with pytest.raises(ValueError, match="max_precompute_bytes") as err:
        gt.check_memory(pl, fixed + per_subset - 1)
    assert "n_subsets <=" not in str(err.value)
    with pytest.raises(ValueError, match="max_precompute_bytes"):
        gt.root_candidates(np.random.default_rng(0).random((n, d)), np.zeros(n), 5,
                           max_precompute_bytes=budget)


def test_memory_guard_through_the_estimator(clf_data):
    X, y = clf_data
    n, d = X.shape
    pl = gt.plan(n, d, 3, 0.1)
    per_subset = 4 * n * pl.n_stored
    budget = pl.nbytes - (pl.n_subsets - 5) * per_subset
    est = GBFSClassifier(method="gtgbm", n_target_features=3, max_precompute_bytes=budget, n_estimators=5,
                         random_state=0)
    with pytest.raises(ValueError, match="max_precompute_bytes") as err:
        est.fit(X, y)
    msg = str(err.value)
    assert str(pl.nbytes) in msg
    k = int(re.search(r"n_subsets <= (\d+)", msg).group(1))
    assert k == 5
    with pytest.raises(NotFittedError):
        est.predict(X)
    est.set_params(n_subsets=k).fit(X, y)
    assert est.n_subsets_ == k
    assert est.timings_["precompute_bytes"] <= budget
    assert est.predict(X).shape == (n,)


def test_memory_guard_every_suggestion_fits():
    rng = np.random.default_rng(0)
    X = rng.random((1000, 50))
    y = X[:, 0] + 0.1 * rng.standard_normal(1000)
    base = dict(method="gtgbm", n_target_features=5, n_subsets=200, max_precompute_bytes=416_000,
                n_estimators=2, random_state=0)
    with pytest.raises(ValueError) as err:
        GBFSRegressor(**base).fit(X, y)
    hints = re.findall(r"(n_subsets) <= (\d+)|(n_target_features)=(\d+)|(delta) >= ([0-9.]+)", str(err.value))
    assert hints  # here only n_subsets helps: every subset size stores a single prefix column
    for a, b, c, e, f, g in hints:
        name, value = (a, int(b)) if a else (c, int(e)) if c else (f, float(g))
        GBFSRegressor(**{**base, name: value}).fit(X, y)


# -- 8. determinism --------------------------------------------------------------------------------

def test_precompute_is_determined_by_the_generator():
    X = _messy_matrix(200, 30, seed=0)
    _, a = _tester(X, 3, seed=11)
    _, b = _tester(X, 3, seed=11)
    _, c = _tester(X, 3, seed=12)
    for name in ("subsets", "prefix", "stored"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    np.testing.assert_array_equal(a.standardised(), b.standardised())
    assert not np.array_equal(a.subsets, c.subsets)
    np.testing.assert_array_equal(a.standardised(), c.standardised())  # the standardisation is not random


@pytest.mark.parametrize("scope", ["node", "tree"])
def test_same_seed_same_model(clf_data, monkeypatch, scope):
    X, y = clf_data
    seen = []
    precompute = gt.GroupTester.precompute

    def recording(*args, **kwargs):
        tester = precompute(*args, **kwargs)
        seen.append(tester.subsets.copy())
        return tester

    monkeypatch.setattr(gt.GroupTester, "precompute", staticmethod(recording))
    kw = dict(method="gtgbm", n_target_features=3, group_test_scope=scope, mu=0.02, n_estimators=12,
              max_leaves=8, min_samples_leaf=5)
    a = GBFSClassifier(random_state=3, **kw).fit(X, y)
    b = GBFSClassifier(random_state=3, **kw).fit(X, y)
    c = GBFSClassifier(random_state=4, **kw).fit(X, y)
    assert len(seen) == 3
    np.testing.assert_array_equal(seen[0], seen[1])
    assert not np.array_equal(seen[0], seen[2])
    assert len(a.trees_) == len(b.trees_)
    for ta, tb in zip(a.trees_, b.trees_):
        for name in Tree.FIELDS:
            np.testing.assert_array_equal(getattr(ta, name), getattr(tb, name), err_msg=name)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    np.testing.assert_array_equal(a.selected_features_, b.selected_features_)
    assert c.predict_proba(X).shape == (X.shape[0], 2)
    # and root_candidates is reproducible by random_state
    Xf, yf = make_figure1_regression(500, 40, random_state=0)
    np.testing.assert_array_equal(gt.root_candidates(Xf, yf, 3, random_state=5),
                                  gt.root_candidates(Xf, yf, 3, random_state=5))


# -- 9. the estimators -----------------------------------------------------------------------------

@pytest.mark.parametrize("Est", [GBFSClassifier, GBFSRegressor])
@pytest.mark.parametrize("scope", ["node", "tree"])
def test_gtgbm_estimators_select_the_informative_features(clf_data, reg_data, Est, scope):
    X, y = clf_data if Est is GBFSClassifier else reg_data
    est = Est(method="gtgbm", group_test_scope=scope, n_target_features=3, mu=0.02, n_estimators=15,
              max_leaves=8, min_samples_leaf=5, random_state=0).fit(X, y)
    assert set(est.selected_features_.tolist()) == {0, 1, 2}
    np.testing.assert_array_equal(est.get_support(), np.arange(X.shape[1]) < 3)
    assert est.timings_["precompute_seconds"] > 0
    assert est.timings_["precompute_bytes"] == gt.plan(*X.shape, 3, 0.1).nbytes
    assert (est.n_subsets_, est.subset_size_) == (28, 4)
    pred = est.predict(X)
    assert pred.shape == (X.shape[0],)
    assert est.score(X, y) > (0.85 if Est is GBFSClassifier else 0.7)
    if Est is GBFSClassifier:
        proba = est.predict_proba(X)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)


@pytest.mark.parametrize("param, value, match", [
    ("n_target_features", 0, "n_target_features"),
    ("n_target_features", 13, "n_target_features=13 exceeds the 12 features"),
    ("delta", 0.0, "delta"),
    ("delta", 1.0, "delta"),
    ("delta", 1.5, "delta"),
    ("n_subsets", 0, "n_subsets"),
    ("subset_size", 13, "subset_size=13 exceeds the 12 features"),
    ("subset_size", 0, "subset_size"),
    ("group_test_scope", "forest", "group_test_scope"),
    ("max_precompute_bytes", 0, "max_precompute_bytes"),
])
def test_bad_group_test_params_are_named(clf_data, param, value, match):
    X, y = clf_data
    est = GBFSClassifier(method="gtgbm", n_estimators=2, **{param: value})
    with pytest.raises(ValueError, match=match):
        est.fit(X, y)


def test_group_test_params_warn_with_other_methods(clf_data):
    X, y = clf_data
    with pytest.warns(UserWarning, match="n_target_features, n_subsets.*method='gtgbm'") as rec:
        GBFSClassifier(method="agbm", n_target_features=3, n_subsets=5, n_estimators=2).fit(X, y)
    assert "'agbm'" in str(rec[0].message)
    with pytest.warns(UserWarning, match="group_test_scope"):
        GBFSClassifier(method="gbfs", group_test_scope="node", n_estimators=2).fit(X, y)
    with pytest.warns(UserWarning, match="delta, subset_size, max_precompute_bytes"):
        GBFSClassifier(method="agbm", delta=0.2, subset_size=3, max_precompute_bytes=10**9,
                       n_estimators=2).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        GBFSClassifier(method="agbm", n_estimators=2).fit(X, y)  # defaults: no warning
        GBFSClassifier(method="gtgbm", n_target_features=3, n_subsets=5, n_estimators=2).fit(X, y)


# -- group_test_rows: group tests of large nodes on a row sample -----------------------------------

def test_group_test_rows_samples_the_rows_of_large_nodes():
    _, X, mapper, Xb, rw, hw = _tree_problem(2)
    n, d = Xb.shape
    _, tester = _tester(X, 3, seed=0, mapper=mapper)
    calls = []
    candidates = tester.candidates

    def recording(rows, r, h, sum_g, sum_h, count, msl, mcw, lam):
        calls.append((rows.copy(), r.copy(), h.copy(), sum_g, sum_h, count, msl))
        return candidates(rows, r, h, sum_g, sum_h, count, msl, mcw, lam)

    tester.candidates = recording
    params = GrowthParams(max_leaves=10, min_samples_leaf=10)
    grower = TreeGrower(Xb, mapper, params, group_tests(tester, "node", 150, np.random.default_rng(0)))
    tree = grower.grow(np.arange(n, dtype=np.int32), rw, hw, FeatureUsage(d, 0.01), naive.sse(rw),
                       hw_is_one=True)
    assert tree.leaf_ids.shape[0] == 10
    sampled = [c for c in calls if c[5] == 150]
    assert len(sampled) >= 3 and len(sampled) < len(calls)  # the root and other large nodes; small ones whole
    for rows, r, h, sum_g, sum_h, count, msl in calls:
        assert count <= 150 and h.shape[0] == 0
        if count == 150:  # a sorted sample without repetition, residuals aligned with it
            assert rows.shape[0] == 150 and np.all(np.diff(rows) > 0)
            assert 1.0 <= msl < params.min_samples_leaf
        else:
            assert rows.shape[0] == count and msl == params.min_samples_leaf
        np.testing.assert_array_equal(r, rw[rows])
        assert sum_g == pytest.approx(r.sum()) and sum_h == count


def test_group_test_rows_in_the_estimator(reg_data):
    X, y = reg_data
    kw = dict(method="gtgbm", n_target_features=3, mu=0.02, n_estimators=12, max_leaves=8, min_samples_leaf=5,
              random_state=0)
    full = GBFSRegressor(**kw).fit(X, y)
    capped = GBFSRegressor(group_test_rows=X.shape[0], **kw).fit(X, y)  # no node is larger: no sample
    np.testing.assert_array_equal(full.predict(X), capped.predict(X))
    a = GBFSRegressor(group_test_rows=100, **kw).fit(X, y)
    b = GBFSRegressor(group_test_rows=100, **kw).fit(X, y)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    assert set(a.selected_features_.tolist()) == {0, 1, 2}
    with pytest.raises(ValueError, match="group_test_rows"):
        GBFSRegressor(group_test_rows=1, **kw).fit(X, y)
    with pytest.warns(UserWarning, match="group_test_rows"):
        GBFSRegressor(method="agbm", group_test_rows=100, n_estimators=2).fit(X, y)


# -- 10. every split is the best over Omega (at its time) and the node's candidates ----------------

@dataclasses.dataclass
class _Grown:
    """A tree grown with a logged split order, and what the checks need to re-derive its choices."""

    tree: Tree
    grown: object  # GrownTree
    log: list  # per split, in order: (node id, its rows, Omega and penalty at the time)
    usage: FeatureUsage
    Xb: np.ndarray
    mapper: BinMapper
    rw: np.ndarray
    hw: np.ndarray
    tester: gt.GroupTester
    scope: str
    params: GrowthParams
    mu: float
    norm: float
    bags: np.ndarray | None
    pre_used: tuple


def _grow_logged(Xb, mapper, rw, hw, tester, scope, params, mu, norm, bags=None, pre_used=(),
                 complete=True) -> _Grown:
    d = Xb.shape[1]
    usage = FeatureUsage(d, mu, bags=bags)
    for f in pre_used:
        usage.mark_used(f)
    grower = TreeGrower(Xb, mapper, params, group_tests(tester, scope))
    if not complete:  # the best-first grower without the refresh of pending nodes on new features
        grower._complete = lambda node: None
    log = []
    split = grower._split

    def recording(node, builder):
        rows = grower._partition[node.start:node.end].copy()
        log.append((node.id, rows, usage.free_features().copy(), usage.penalty().copy()))
        return split(node, builder)

    grower._split = recording
    grown = grower.grow(np.arange(Xb.shape[0], dtype=np.int32), rw, hw, usage, norm)
    tree = grown.builder.build(np.zeros(len(grown.builder.cols["feature"])))
    return _Grown(tree, grown, log, usage, Xb, mapper, rw, hw, tester, scope, params, mu, norm, bags,
                  tuple(pre_used))


def _best_allowed(g: _Grown, rows, free, pen, root_cand):
    """Brute-force best penalised split of the node holding ``rows`` over Omega (``free``) and the
    candidates (the node's own group tests, or the root's in tree scope): (feature, score, gains)."""
    p = g.params
    r, h = g.rw[rows], g.hw[rows]
    cand = g.tester.candidates(rows.astype(np.int32), r, h, float(r.sum()), float(h.sum()), rows.shape[0],
                               p.min_samples_leaf, p.min_child_weight, 0.0)
    allowed = np.union1d(free, root_cand if g.scope == "tree" and root_cand is not None else cand)
    gain, *_ = naive.best_splits(g.Xb, rows, g.rw, g.hw, g.mapper.n_bins_non_missing_, p.min_samples_leaf,
                                 p.min_child_weight, 0.0)
    restricted = np.full(gain.shape[0], -np.inf)
    restricted[allowed.astype(int)] = gain[allowed.astype(int)]
    f, score = naive.penalized_best(restricted, pen, g.norm)
    return f, score, gain, cand


def _check_choices(g: _Grown):
    """Every split: Omega as the splits before it made it, and the node's best penalised split over Omega
    and its candidates.  Every final leaf that could be split (the tree stopped below max_leaves): no
    positive penalised split over the final Omega and its candidates."""
    d = g.Xb.shape[1]
    bag_of = np.arange(d) if g.bags is None else np.asarray(g.bags)

    def omega(used):
        free = np.flatnonzero(np.isin(bag_of, bag_of[sorted(used)])) if used else np.empty(0, np.int64)
        return free, np.where(np.isin(np.arange(d), free), 0.0, g.mu)

    used = set(g.pre_used)
    root_cand = None
    for node_id, rows, free, pen in g.log:
        free_ref, pen_ref = omega(used)
        np.testing.assert_array_equal(free, free_ref)
        np.testing.assert_array_equal(pen, pen_ref)
        f, _, gain, cand = _best_allowed(g, rows, free_ref, pen_ref, root_cand)
        root_cand = cand if root_cand is None else root_cand
        assert g.tree.feature[node_id] == f, f"node {node_id}: split on {g.tree.feature[node_id]}, best {f}"
        assert g.tree.gain[node_id] == pytest.approx(gain[f], rel=1e-9)
        used.add(f)
    assert sorted(used) == sorted(set(g.pre_used) | set(g.usage.order))
    if g.params.max_leaves is not None and g.tree.n_leaves >= g.params.max_leaves:
        return
    free_ref, pen_ref = omega(used)
    for leaf, a, b in zip(g.grown.leaf_ids, g.grown.leaf_starts, g.grown.leaf_ends):
        if b - a >= 2 * g.params.min_samples_leaf:
            rows = g.grown.partition[a:b]
            _, score, _, _ = _best_allowed(g, rows, free_ref, pen_ref, root_cand)
            assert not score > 0, f"leaf {leaf} has a split scoring {score}"


def _refresh_case(seed):
    """Root on A = x0 > 0.5.  L (A false): y depends strongly on F = x1.  R (A true): on G = x2 and less on
    F.  L splits first, on F; in R the group test (one subset: s = 1) finds G, not F, but once F is free
    it beats G after G's penalty.  Only the completion of R on F (grower._complete) finds that split."""
    rng = np.random.default_rng(seed)
    n, d = 1200, 16
    X = rng.random((n, d))
    A, F, G = X[:, 0] > 0.5, X[:, 1] > 0.5, X[:, 2] > 0.5
    y = 4.0 * A + np.where(A, 2.0 * G + 1.0 * F, 3.0 * F) + 0.3 * rng.standard_normal(n)
    mapper = BinMapper(max_bins=32).fit(X)
    r = y - y.mean()
    _, tester = _tester(X, 1, seed=seed, mapper=mapper)
    return X, mapper, mapper.transform(X), r, tester


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pending_node_is_completed_on_features_a_sibling_made_free(seed):
    X, mapper, Xb, r, tester = _refresh_case(seed)
    h = np.ones_like(r)
    params = GrowthParams(max_leaves=None, min_samples_leaf=60)
    mu, norm = 0.08, float(np.sum(r ** 2))
    g = _grow_logged(Xb, mapper, r, h, tester, "node", params, mu, norm)
    assert [entry[0] for entry in g.log[:3]] == [0, 1, 2]  # root, then L, then R
    np.testing.assert_array_equal(g.tree.feature[:3], [0, 1, 1])  # R splits on F, made free by L
    rows_r = g.log[2][1]
    cand_r = tester.candidates(rows_r, r[rows_r], NO_H, float(r[rows_r].sum()), float(len(rows_r)),
                               len(rows_r), params.min_samples_leaf, 1e-3, 0.0)
    assert 1 not in cand_r and 2 in cand_r  # F reached R only through the completion
    _check_choices(g)
    # without the completion R keeps its stale choice, and the checks see it
    stale = _grow_logged(Xb, mapper, r, h, tester, "node", params, mu, norm, complete=False)
    assert stale.tree.feature[2] != 1
    with pytest.raises(AssertionError):
        _check_choices(stale)


def test_tree_scope_searches_omega_and_the_root_candidates():
    """Same data in tree scope: the root's group test (one subset) finds A only, so every node of the tree
    searches {A} and splits on A, where node scope finds F in the children."""
    X, mapper, Xb, r, tester = _refresh_case(0)
    h = np.ones_like(r)
    params = GrowthParams(max_leaves=None, min_samples_leaf=60)
    mu, norm = 0.08, float(np.sum(r ** 2))
    g = _grow_logged(Xb, mapper, r, h, tester, "tree", params, mu, norm)
    assert g.tree.n_leaves >= 8
    assert set(g.tree.used_features().tolist()) == {0}
    _check_choices(g)
    node = _grow_logged(Xb, mapper, r, h, tester, "node", params, mu, norm)
    assert {0, 1} <= set(node.tree.used_features().tolist())


@pytest.mark.parametrize("scope", ["node", "tree"])
@pytest.mark.parametrize("bags", [None, "bags"])
def test_every_split_is_the_best_over_omega_and_candidates(scope, bags):
    rng, X, mapper, Xb, rw, hw = _tree_problem(3)
    d = Xb.shape[1]
    bag_ids = None if bags is None else rng.integers(0, 12, d)
    _, tester = _tester(X, 3, seed=1, mapper=mapper, n_subsets=4)
    params = GrowthParams(max_leaves=10, min_samples_leaf=10)
    mu, norm = 0.01, naive.sse(rw)
    g = _grow_logged(Xb, mapper, rw, hw, tester, scope, params, mu, norm, bag_ids, (9,))
    assert g.tree.n_leaves >= 6
    _check_choices(g)


# -- 11. feature bags ------------------------------------------------------------------------------

def test_free_features_are_the_features_of_used_bags():
    bags = np.array([7, 3, 7, 3, 9, 7, 1, 9])
    usage = FeatureUsage(8, 0.5, bags=bags)
    assert usage.free_features().tolist() == []
    usage.mark_used(2)  # bag 7
    assert usage.free_features().tolist() == [0, 2, 5]
    np.testing.assert_array_equal(usage.penalty(), np.where(bags == 7, 0.0, 0.5))
    usage.mark_used(0)  # the same bag: nothing new
    assert usage.free_features().tolist() == [0, 2, 5]
    usage.mark_used(6)  # bag 1, a single feature
    usage.mark_used(4)  # bag 9
    assert usage.free_features().tolist() == [0, 2, 4, 5, 6, 7]
    assert usage.free_features().dtype == np.int64
    assert usage.order == [2, 0, 6, 4]


@pytest.mark.parametrize("scope", ["node", "tree"])
def test_one_used_bag_of_all_features_gives_the_agbm_tree(scope):
    """A used bag makes all its features Omega: with one bag holding every feature, GT-GBM searches every
    feature at every node, as A-GBM does."""
    _, X, mapper, Xb, rw, hw = _tree_problem(1)
    n, d = Xb.shape
    rows = np.arange(n, dtype=np.int32)
    _, tester = _tester(X, 2, seed=0, mapper=mapper, n_subsets=2, subset_size=4)
    params = GrowthParams(max_leaves=10, min_samples_leaf=8)

    def usage():
        u = FeatureUsage(d, 0.05, bags=np.zeros(d, dtype=int))
        u.mark_used(5)
        return u

    norm = naive.sse(rw)
    ref = TreeGrower(Xb, mapper, params).grow(rows, rw, hw, usage(), norm, hw_is_one=True)
    grown = TreeGrower(Xb, mapper, params, group_tests(tester, scope)).grow(rows, rw, hw, usage(), norm,
                                                                            hw_is_one=True)
    assert _assert_same_tree(grown, ref).n_leaves == 10


@pytest.mark.parametrize("Est", [GBFSClassifier, GBFSRegressor])
@pytest.mark.parametrize("scope", ["node", "tree"])
def test_estimator_gtgbm_with_bags_uses_whole_bags(clf_data, reg_data, Est, scope):
    """Bag 0 = the informative columns 0, 1, 2.  With a penalty too high for a second and third feature,
    GT-GBM without bags stops short of all three; with the bag the first one makes the other two free."""
    X, y = clf_data if Est is GBFSClassifier else reg_data
    kw = dict(method="gtgbm", group_test_scope=scope, n_target_features=3, mu=0.2, n_estimators=15,
              max_leaves=8, min_samples_leaf=5, random_state=0)
    bagged = Est(feature_bags=np.repeat(np.arange(4), 3), **kw).fit(X, y)
    plain = Est(**kw).fit(X, y)
    assert set(bagged.selected_features_.tolist()) == {0, 1, 2}
    assert set(plain.selected_features_.tolist()) < {0, 1, 2}
