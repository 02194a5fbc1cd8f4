"""GT-GBM's group tests (Section 4 / Algorithm 2 of the GT-GBM paper): the precompute against direct
float64 sums (naive_gt), the node search against a numpy binary search over the same subsets, and
what the search is for: s = 1 finds the single relevant feature, and the Figure-1 generator's three
relevant features are among the root candidates."""

from __future__ import annotations

import naive_gt
import numpy as np
import pytest
from group_test_cases import (
    NO_H,
    NO_ROWS,
    bin_edges,
    make_tester,
    messy_matrix,
    node_search,
)

from gbfs.booster.binning import BinMapper
from gbfs.criteria import group_testing as gt
from gbfs.data.synthetic.generators import make_figure1_regression

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
        pl, tester = make_tester(X, 1, seed=seed)
        assert tester.subsets.shape == (1, d)
        np.testing.assert_array_equal(np.sort(tester.subsets[0]), np.arange(d))  # [d], in random order
        r = y - y.mean()
        feature, gain = node_search(tester, NO_ROWS, r, NO_H, 20)
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


def test_the_precompute_of_a_partition_of_the_rows_is_their_share():
    """A Dask fit's shards precompute their own rows for the driver's subsets: the rows' slice of
    the precompute of all rows, bit for bit."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 25))
    mapper = BinMapper(255, None, rng).fit(X)
    Xb = np.asfortranarray(mapper.transform(X))
    pl = gt.plan(300, 25, 3)
    whole = gt.GroupTester.precompute(Xb, mapper.standardised_values_, pl, np.random.default_rng(7))
    subsets = gt.draw_subsets(pl, 25, np.random.default_rng(7))
    np.testing.assert_array_equal(subsets, whole.subsets)
    for a, b in [(0, 120), (120, 121), (121, 300)]:
        part = gt.GroupTester.from_subsets(np.asfortranarray(Xb[a:b]), mapper.standardised_values_, subsets)
        np.testing.assert_array_equal(part.prefix, whole.prefix[:, :, a:b])


@pytest.mark.parametrize("order", ["C", "F"])
def test_standardised_values_are_min_max_of_the_binned_features(order):
    """z = (mean of the training values in x's bin - min) / (max - min); NaN: the column's standardised
    mean; constant or all-NaN column: 0.  Columns with few values (one bin each) give the paper's
    (x - min) / (max - min) exactly, continuous ones within their bin's spread."""
    X = messy_matrix(700, 20, seed=0)
    X[:, 15] = np.round(X[:, 15] / 100.0)  # another column with fewer than 255 values
    X = np.asfortranarray(X) if order == "F" else X
    mapper = BinMapper(min_data_in_bin=1).fit(X)  # few-valued columns: one bin per value
    _, tester = make_tester(X, 4, mapper=mapper)
    Z = tester.standardised()
    ref = naive_gt.standardise_binned(X, bin_edges(mapper))
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
    X = messy_matrix(n, d, seed=1)
    mapper = BinMapper().fit(X)
    pl, tester = make_tester(X, s, seed=2, direct_sum_below=direct_sum_below, mapper=mapper)
    m = pl.subset_size
    assert tester.subsets.shape == (pl.n_subsets, m)
    assert tester.prefix.shape == (pl.n_subsets, pl.n_stored, n)
    assert tester.nbytes == pl.nbytes
    Z = naive_gt.standardise_binned(X, bin_edges(mapper))
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


@pytest.mark.parametrize("direct_sum_below", [1, 2, gt.DIRECT_SUM_BELOW])
@pytest.mark.parametrize("m", [1, 2, 5, 16, 33])
def test_prefix_sums_are_the_sequential_float64_sums_bit_for_bit(direct_sum_below, m):
    """Every stored prefix is the float64 sum of its subset's standardised columns added one at a
    time in subset order (then float32), over row blocks and whatever the boundaries: the pairs of
    features the kernel adds in one pass round exactly as two passes."""
    n, d = 2500, 40  # more rows than one block of the kernel
    X = messy_matrix(n, d, seed=4)
    mapper = BinMapper().fit(X)
    Xb = np.asfortranarray(mapper.transform(X))
    rng = np.random.default_rng(m)
    subsets = np.stack([rng.permutation(d)[:m] for _ in range(3)]).astype(np.int64)
    tester = gt.GroupTester.from_subsets(Xb, mapper.standardised_values_, subsets, direct_sum_below)
    for k in range(3):
        acc = np.zeros(n)
        sums = {}
        for t, f in enumerate(subsets[k]):
            acc = acc + mapper.standardised_values_[f][Xb[:, f]]
            sums[t + 1] = acc.astype(np.float32)
        for c, upto in enumerate(tester.stored):
            np.testing.assert_array_equal(tester.prefix[k, c], sums[int(upto)], err_msg=f"k={k} upto={upto}")


@pytest.mark.parametrize("n", [0, 1, 2, 7, 64, 1001])
def test_min_max_equals_numpy_bit_for_bit(n):
    """The pseudo-features' integer-keyed min and max are NumPy's, as float64, over negatives,
    both signed zeros, subnormals and large magnitudes; only the first ``n`` values count."""
    rng = np.random.default_rng(n)
    special = np.array([0.0, -0.0, 1e-42, -1e-42, 3e38, -3e38, 1.0, -1.0], dtype=np.float32)
    for trial in range(20):
        v = (rng.standard_normal(n + 5) * 10.0 ** rng.integers(-3, 4)).astype(np.float32)
        if trial % 2:
            v[rng.integers(0, n + 5, size=min(n, 4))] = rng.choice(special, size=min(n, 4))
        got = gt.min_max(v, n)
        if n == 0:
            assert got == (np.inf, -np.inf)
            continue
        want = (float(v[:n].min()), float(v[:n].max()))
        assert got == want and all(isinstance(x, float) for x in got), (got, want)
        if want[0] == 0.0:  # -0.0 and +0.0 tie: either may come back, both bin alike
            continue
        assert np.float64(got[0]).tobytes() == np.float64(want[0]).tobytes()


def test_subsets_are_random_subsets_in_random_order():
    X = np.random.default_rng(0).random((50, 30))
    pl, tester = make_tester(X, 3, seed=5)  # 28 subsets of 10 features
    S = tester.subsets
    assert all(len(set(row.tolist())) == pl.subset_size for row in S)
    assert len({tuple(row) for row in S}) == pl.n_subsets
    assert len({tuple(sorted(row)) for row in S}) == pl.n_subsets  # not one set in several orders
    counts = np.bincount(S.ravel(), minlength=30)
    assert counts.min() > 0  # 280 draws over 30 features: each appears (expected 9.3 each)


# -- 4. the node search against a numpy binary search ----------------------------------------------

def _search_problem(seed, n=500, d=60):
    rng = np.random.default_rng(seed)
    X = messy_matrix(n, d, seed)
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
    pl, tester = make_tester(X, s, delta=0.2, seed=s, mapper=mapper)
    rows = NO_ROWS if node == "root" else np.sort(rng.choice(n, 260, replace=False)).astype(np.int32)
    r = y if node == "root" else y[rows]
    r = r - r.mean()
    h = rng.uniform(0.2, 3.0, r.shape[0]) if weights == "explicit" else NO_H
    h_ref = h if weights == "explicit" else np.ones(r.shape[0])
    Z = naive_gt.standardise_binned(X, bin_edges(mapper))

    def values(k, lo, hi):
        return naive_gt.pseudo_feature(Z, tester.subsets, k, lo, hi, rows)

    for msl in (7, 60):
        feature, gain = node_search(tester, rows, r, h, msl)
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
    _, tester = make_tester(X, 3, seed=7)
    r = y - y.mean()
    msl = X.shape[0] // 2 + 1
    feature, gain = node_search(tester, NO_ROWS, r, NO_H, msl)
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
    order = make_tester(np.random.default_rng(1).random((2, d)), 1)[1].subsets[0]
    rng = np.random.default_rng(5)
    X = rng.random((n, d)) * np.pi
    b = (rng.random(n) < 0.5).astype(float)
    X[:, order[16:]] = b[:, None]  # positions 16..31 of the subset: one binary column, 16 times
    pl, tester = make_tester(X, 1)
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
    feature, _ = node_search(tester, rows, r, NO_H, 5)
    assert 0 < z.max() - z.min() <= 8 * 2.0**-24 * 32  # float32 rounding only (15.999999 and 16.0)
    np.testing.assert_array_equal(feature, ref_feature)


@pytest.mark.parametrize("weights", ["unit", "explicit"])
@pytest.mark.parametrize("budget", ["default", "three_slots"])
def test_kept_bins_give_the_searches_of_binning_anew(weights, budget):
    """Searches over every row keep the tested halves' bins and counts for later searches (trees):
    every search's features and scores equal, bit for bit, those of the kernel that bins every half
    anew -- with constant halves, and with a budget that fills after three halves per subset (the
    later halves are binned anew).  Searches on some rows keep nothing."""
    rng, X, y = _search_problem(seed=11)
    n = X.shape[0]
    _, tester = make_tester(X, 4, delta=0.2, seed=11)
    p, m = tester.subsets.shape
    if budget == "three_slots":
        tester = gt.GroupTester(tester.Xb, tester.z_values, tester.subsets, tester.stored, tester.prefix,
                                pseudo_bin_bytes=3 * p * (n + 8 * gt.GT_BINS))
    rows = np.sort(rng.choice(n, 260, replace=False)).astype(np.int32)
    node_search(tester, rows, y[rows] - y[rows].mean(), NO_H, 7)
    assert tester.kept_bytes == 0  # some rows only: nothing kept
    changed = 0
    for t in range(8):  # residuals of successive trees
        r = y - y.mean() + rng.standard_normal(n) * (0.3 + t)
        h = rng.uniform(0.2, 3.0, n) if weights == "explicit" else NO_H
        sum_h = float(h.sum()) if h.shape[0] else float(n)
        for msl in (7, 60):
            feature, gain = node_search(tester, NO_ROWS, r, h, msl)
            ref_feature, ref_gain = np.empty(p, np.int64), np.empty(p)
            gt.group_tests(tester.Xb, tester.z_values, tester.prefix, tester.col_of, tester.subsets, NO_ROWS,
                           r, h, tester.n_bins, float(r.sum()), sum_h, float(n), float(msl), 1e-3, 0.0,
                           ref_feature, ref_gain, gt.PseudoBins.empty())
            np.testing.assert_array_equal(feature, ref_feature)
            assert gain.tobytes() == ref_gain.tobytes()
            changed += int(np.any(feature != tester.subsets[:, 0]))
    assert changed > 0
    kept = tester.kept_bytes
    assert kept > 0
    if budget == "three_slots":
        assert kept == 3 * p * (n + 8 * gt.GT_BINS)  # every subset's three slots taken, no more
