"""Split search against brute force over every feature, threshold and missing direction, and the
penalised choice (GBFS / A-GBM with costs and bags) against a brute-force argmax."""

from __future__ import annotations

import naive
import numpy as np
import pytest

from gbfs.booster.kernels._types import MISSING_BIN
from gbfs.booster.kernels.histogram import HistogramLayout
from gbfs.booster.kernels.splitting import SplitRule, Splits, best_splits_per_feature, penalized_best
from gbfs.criteria.penalty import FeatureUsage

N_BINS = np.array([1, 2, 5, 9, 12, 30, 3, 6], dtype=np.int32)  # value bins of each feature


def _problem(seed, n=140, weights=False):
    """Binned data with NaNs in some columns, a node subset of its rows, rw and hw."""
    rng = np.random.default_rng(seed)
    d = N_BINS.shape[0]
    X = np.column_stack([rng.integers(0, nb, n) for nb in N_BINS]).astype(np.uint8)
    X[:, 5] = np.minimum(X[:, 5], rng.integers(0, 30, n))  # skewed: some bins rare or empty
    for f, frac in ((2, 0.2), (3, 0.05), (6, 0.6), (7, 0.97)):
        X[rng.random(n) < frac, f] = MISSING_BIN
    X = np.asfortranarray(X)
    rows = np.sort(rng.choice(n, int(0.7 * n), replace=False)).astype(np.int32)
    rw = rng.normal(size=n) + 0.5 * (X[:, 4] > 6)
    hw = rng.random(n) * 2 + 0.05 if weights else np.ones(n)
    assert d == X.shape[1]
    return X, rows, rw, hw


def _kernel(X, rows, rw, hw, msl, mcw, lam, n_bins=N_BINS):
    d = X.shape[1]
    layout = HistogramLayout(n_bins)
    hist = naive.flat_histogram(X, rows, rw, hw, n_bins)
    splits = Splits.empty(d)
    rule = SplitRule(float(rw[rows].sum()), float(hw[rows].sum()), float(rows.shape[0]), float(msl), 0.0, mcw,
                     lam)
    best_splits_per_feature(hist, np.arange(d), layout.offsets, layout.n_bins, rule, splits)
    return splits


def _assert_same_splits(X, rows, rw, hw, msl, mcw, lam, n_bins=N_BINS):
    gain, bin_, ml, left = _kernel(X, rows, rw, hw, msl, mcw, lam, n_bins)
    rgain, rbin, rml, rleft = naive.best_splits(X, rows, rw, hw, n_bins, msl, mcw, lam)
    np.testing.assert_array_equal(np.isfinite(gain), np.isfinite(rgain))
    ok = np.isfinite(rgain)
    scale = max(1.0, float(np.max(np.abs(rgain[ok]), initial=0.0)))
    np.testing.assert_allclose(gain[ok], rgain[ok], rtol=0, atol=1e-10 * scale)
    # {missing} | {non-missing} has two representations with equal gain (see
    # naive.mirrored_missing_split); the kernel may report either here, and
    # test_missing_split_representation_is_deterministic checks that it does not depend on rounding
    same = (bin_ == rbin) & (ml == rml)
    for f in np.flatnonzero(ok & ~same):
        assert naive.mirrored_missing_split(X[rows, f], rbin[f], rml[f]) == (bin_[f], ml[f]), \
            f"feature {f}: kernel split (bin {bin_[f]}, missing_left {ml[f]}), reference (bin {rbin[f]}, " \
            f"missing_left {rml[f]})"
    np.testing.assert_allclose(left[ok & same], rleft[ok & same], rtol=1e-12, atol=1e-10)
    assert np.all(gain[~ok] == -np.inf)
    # the reported split, applied to the rows, gives the reported left sums
    for f in np.flatnonzero(ok):
        lrows, _ = naive.split_rows(rows, X[:, f], bin_[f], ml[f])
        assert lrows.shape[0] == left[f, 2]
        np.testing.assert_allclose(rw[lrows].sum(), left[f, 0], atol=1e-10)
        np.testing.assert_allclose(hw[lrows].sum(), left[f, 1], atol=1e-10)
    return gain, bin_, ml, left


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("msl,mcw,lam,weights", [
    (1, 1e-3, 0.0, False),   # the papers' SSE criterion
    (15, 1e-3, 0.0, False),  # min_samples_leaf binding
    (1, 12.0, 0.0, True),    # min_child_weight binding (weighted second channel)
    (3, 1e-3, 2.5, True),    # L2 regularisation
    (5, 4.0, 1.0, True),     # everything at once
])
def test_best_splits_match_brute_force(seed, msl, mcw, lam, weights):
    X, rows, rw, hw = _problem(seed, weights=weights)
    gain, *_ = _assert_same_splits(X, rows, rw, hw, msl, mcw, lam)
    assert gain[0] == -np.inf  # a single-bin feature without NaN has no split


def test_constraints_actually_bind():
    """The parametrisation above is meaningful: the constraints change some chosen splits."""
    X, rows, rw, hw = _problem(0, weights=True)
    free = naive.best_splits(X, rows, rw, hw, N_BINS, 1, 0.0, 0.0)
    for msl, mcw in ((15, 1e-3), (1, 12.0)):
        tight = naive.best_splits(X, rows, rw, hw, N_BINS, msl, mcw, 0.0)
        assert np.any(free[1] != tight[1]) or np.any(free[0] != tight[0])


def test_gain_is_sse_reduction():
    """With unit weights and lambda = 0 the gain is SSE(node) - SSE(L) - SSE(R) (GT-GBM Eq. 1)."""
    X, rows, rw, hw = _problem(11)
    gain, bin_, ml, _ = _kernel(X, rows, rw, hw, 1, 1e-3, 0.0)
    for f in np.flatnonzero(np.isfinite(gain)):
        lrows, rrows = naive.split_rows(rows, X[:, f], bin_[f], ml[f])
        sse_red = naive.sse(rw[rows]) - naive.sse(rw[lrows]) - naive.sse(rw[rrows])
        np.testing.assert_allclose(gain[f], sse_red, rtol=1e-9, atol=1e-10)


def test_missing_values_tried_on_both_sides():
    # feature 0: bins 0/1 carry nothing; the NaN rows carry the signal, so they must be isolated
    # on one side; the best split puts the NaN rows alone (all non-missing left, missing right)
    x = np.array([0] * 10 + [1] * 10 + [MISSING_BIN] * 6, dtype=np.uint8)
    r = np.array([0.0] * 20 + [5.0] * 6)
    r[:20] += np.linspace(-0.01, 0.01, 20)
    X = np.asfortranarray(x[:, None])
    rows = np.arange(26, dtype=np.int32)
    nb = np.array([2], dtype=np.int32)
    gain, bin_, ml, left = _assert_same_splits(X, rows, r, np.ones(26), 1, 1e-3, 0.0, nb)
    assert bin_[0] == 1 and not ml[0] and left[0, 2] == 20
    # now NaN rows resemble bin 0: missing goes left with bin 0
    r2 = np.array([3.0] * 10 + [-3.0] * 10 + [3.0] * 6)
    gain, bin_, ml, left = _assert_same_splits(X, rows, r2, np.ones(26), 1, 1e-3, 0.0, nb)
    assert bin_[0] == 0 and ml[0] and left[0, 2] == 16
    # NaN rows resemble bin 1: missing goes right
    r3 = np.array([3.0] * 10 + [-3.0] * 10 + [-3.0] * 6)
    gain, bin_, ml, left = _assert_same_splits(X, rows, r3, np.ones(26), 1, 1e-3, 0.0, nb)
    assert bin_[0] == 0 and not ml[0] and left[0, 2] == 10


def test_missing_split_representation_is_deterministic():
    """The partition {missing} | {non-missing} must always be reported the same way.

    When bin 0 holds none of the node's rows, "threshold 0, missing left" (left = the missing rows)
    and "every non-missing bin left, missing right" are the same partition with left and right
    swapped, so the same gain up to rounding.  The kernel evaluates both and keeps whichever
    rounds higher, so the split stored in the tree -- and where unseen values of the node's empty
    low bins go at prediction time (with the NaNs, or not) -- is decided by rounding noise.  The
    specification lists the second form ("all non-missing left, missing right"); the reference
    uses it.
    """
    rng = np.random.default_rng(0)
    reps = {}
    for trial in range(60):
        n = 30
        x = rng.integers(1, 6, n).astype(np.uint8)  # bin 0 empty
        miss = rng.random(n) < 0.4
        x[miss] = MISSING_BIN
        r = rng.normal(size=n) * rng.uniform(0.1, 10) + np.where(miss, 30.0, 0.0)  # NaN rows stand out
        X = np.asfortranarray(x[:, None])
        rows = np.arange(n, dtype=np.int32)
        gain, bin_, ml, left = _kernel(X, rows, r, np.ones(n), 1, 1e-3, 0.0, np.array([6], np.int32))
        ref = naive.best_split_feature(x, r, np.ones(n), 6, 1, 1e-3, 0.0)
        assert ref[1] == x[~miss].max() and not ref[2]  # reference: non-missing left, missing right
        reps.setdefault((int(bin_[0]) == ref[1], bool(ml[0]) == ref[2]), []).append(trial)
    assert list(reps) == [(True, True)], {k: len(v) for k, v in reps.items()}


@pytest.mark.parametrize("n_left", [4, 5, 6])
def test_missing_direction_without_missing_values_is_larger_child(n_left):
    x = np.array([0] * n_left + [1] * (10 - n_left), dtype=np.uint8)
    r = np.where(x == 0, 1.0, -1.0)
    X = np.asfortranarray(x[:, None])
    rows = np.arange(10, dtype=np.int32)
    gain, bin_, ml, _ = _assert_same_splits(X, rows, r, np.ones(10), 1, 1e-3, 0.0,
                                            np.array([2], dtype=np.int32))
    assert bin_[0] == 0 and ml[0] == (n_left >= 10 - n_left)


def test_no_admissible_split():
    rng = np.random.default_rng(3)
    X = np.asfortranarray(rng.integers(0, 4, size=(12, 3)).astype(np.uint8))
    X[:, 1] = MISSING_BIN  # all missing
    X[:, 2] = 2  # constant
    rows = np.arange(12, dtype=np.int32)
    rw = rng.normal(size=12)
    nb = np.array([4, 1, 4], dtype=np.int32)
    gain, bin_, ml, left = _kernel(X, rows, rw, np.ones(12), 7, 1e-3, 0.0, nb)  # 2 * 7 > 12
    assert np.all(gain == -np.inf)
    assert penalized_best(gain, np.zeros(3), 1.0) == (-1, -np.inf)
    assert naive.penalized_best(gain, np.zeros(3), 1.0) == (-1, -np.inf)
    gain, *_ = _kernel(X, rows, rw, np.ones(12), 1, 1e-3, 0.0, nb)
    assert np.isfinite(gain[0]) and gain[1] == -np.inf and gain[2] == -np.inf


# -- the penalty and the penalised choice ---------------------------------------------------------
@pytest.mark.parametrize("bags", [None, [0, 0, 1, 1, 1, 2, 3, 3], [7, 7, 7, 7, -1, -1, 40, 40]])
def test_feature_usage_penalty(bags):
    d, mu = 8, 0.3
    costs = np.array([1.0, 2.0, 0.5, 1.0, 3.0, 1.0, 0.0, 1.5])
    usage = FeatureUsage(d, mu, costs, None if bags is None else np.array(bags))
    used = np.zeros(d, dtype=bool)
    np.testing.assert_allclose(usage.penalty(), mu * costs)
    for f in (4, 1, 4, 0, 6):
        bag = np.arange(d) if bags is None else np.array(bags)
        bag_was_used = bool(np.any(used[bag == bag[f]]))
        version = usage.version
        changed = usage.mark_used(f)
        used[f] = True
        np.testing.assert_allclose(usage.penalty(), naive.penalty(mu, costs, bags, used))
        assert changed == (not bag_was_used)  # (feature 6 has cost 0: its bag changes, not the values)
        assert usage.version == version + int(changed)
    assert usage.order == [4, 1, 0, 6]
    np.testing.assert_array_equal(usage.used, used)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("norm", [1.0, 37.5])
def test_penalized_best_matches_brute_force(seed, norm):
    rng = np.random.default_rng(seed)
    d = 10
    gain = rng.random(d) * norm
    gain[rng.random(d) < 0.3] = -np.inf
    costs = rng.choice([0.0, 0.5, 1.0, 2.0], d)
    bags = rng.integers(0, 4, d)
    usage = FeatureUsage(d, 0.4, costs, bags)
    used = np.zeros(d, dtype=bool)
    for f in rng.choice(d, 3, replace=False):
        assert penalized_best(gain, usage.penalty(), norm) == pytest.approx(
            naive.penalized_best(gain, naive.penalty(0.4, costs, bags, used), norm))
        usage.mark_used(f)
        used[f] = True


def test_penalized_best_penalty_changes_choice_and_ties():
    gain = np.array([5.0, 4.0, 4.0, -np.inf])
    assert penalized_best(gain, np.zeros(4), 1.0) == (0, 5.0)
    assert penalized_best(gain, np.array([2.0, 0.0, 0.0, 0.0]), 1.0) == (1, 4.0)  # tie: lowest index
    assert penalized_best(gain, np.array([2.0, 0.5, 0.0, 0.0]), 1.0) == (2, 4.0)
    f, s = penalized_best(gain, np.array([10.0, 10.0, 10.0, 0.0]), 2.0)  # A-GBM: gain / norm - pen
    assert (f, s) == (0, 2.5 - 10.0)  # negative but admissible: reported, the grower decides
    assert penalized_best(np.full(3, -np.inf), np.zeros(3), 1.0) == (-1, -np.inf)


def test_per_feature_gains_plus_penalty_equal_global_brute_force():
    """The two-stage search equals brute force over every (feature, threshold, direction) at once."""
    X, rows, rw, hw = _problem(21, weights=True)
    d = X.shape[1]
    costs = np.linspace(0.5, 2.0, d)
    bags = np.array([0, 1, 1, 2, 2, 3, 4, 4])
    used = np.zeros(d, dtype=bool)
    used[[4]] = True
    mu, norm, lam, msl, mcw = 0.8, 3.0, 1.0, 2, 0.5
    pen = naive.penalty(mu, costs, bags, used)
    gain, bin_, ml, _ = _kernel(X, rows, rw, hw, msl, mcw, lam)
    f, s = penalized_best(gain, pen, norm)
    best = (-np.inf, None)
    for g in range(d):
        col = X[rows, g]
        for t, m in naive.candidate_splits(col, N_BINS[g]):
            lm = naive.left_mask(col, t, bool(m))
            lr, rr = rows[lm], rows[~lm]
            if min(lr.size, rr.size) < msl or min(hw[lr].sum(), hw[rr].sum()) < mcw:
                continue
            sc = naive.split_gain(rw[lr].sum(), hw[lr].sum(), rw[rr].sum(), hw[rr].sum(), lam) / norm
            sc -= pen[g]
            if sc > best[0] + 1e-12:
                best = (sc, (g, frozenset(lr)))
    assert s == pytest.approx(best[0], rel=1e-10)
    lrows, _ = naive.split_rows(rows, X[:, f], bin_[f], ml[f])
    assert (f, frozenset(lrows)) == best[1]


# -- the walk of a small node's occupied bins -----------------------------------------------------

WIDE_BINS = np.array([1, 2, 63, 64, 65, 128, 129, 200, 254, 255], dtype=np.int32)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("msl,mcw,lam,weights", [(1, 1e-3, 0.0, False), (20, 1e-3, 0.0, True),
                                                 (3, 1e-3, 2.5, True)])
def test_small_nodes_of_many_bins_match_brute_force(seed, msl, mcw, lam, weights):
    """Nodes with fewer rows than bins (the occupied-bin walk) against brute force."""
    rng = np.random.default_rng(100 + seed)
    n = 60
    X = np.column_stack([rng.integers(0, nb, n) for nb in WIDE_BINS]).astype(np.uint8)
    X[rng.random(n) < 0.1, 4] = MISSING_BIN
    X = np.asfortranarray(X)
    rows = np.sort(rng.choice(n, 45, replace=False)).astype(np.int32)
    rw = rng.normal(size=n)
    hw = rng.random(n) * 2 + 0.05 if weights else np.ones(n)
    _assert_same_splits(X, rows, rw, hw, msl, mcw, lam, WIDE_BINS)


def _random_bins(rng, n_bins, n_rows, missing):
    """One feature's histogram of ``n_rows`` rows at random bins (some rows missing)."""
    hf = np.zeros((n_bins + 1, 3))
    for _ in range(n_rows):
        b = n_bins if missing and rng.random() < 0.2 else int(rng.integers(0, n_bins))
        g, h = rng.normal(), rng.uniform(0.01, 0.25)
        hf[b] += (g, h, 1.0)
    return hf


@pytest.mark.parametrize("seed", range(40))
def test_occupied_walk_equals_the_walk_of_every_bin_bit_for_bit(seed):
    """Scoring bin 0 and the occupied bins only gives exactly the record of scoring every bin, in
    both ``min_samples_leaf`` counts, with and without missing values, including the degenerate
    settings (no minimum leaf, no minimum weight) where an empty first bin has a finite gain."""
    from gbfs.booster.kernels.scan import scan_bins, scan_scratch

    rng = np.random.default_rng(seed)
    for n_bins in (1, 2, 3, 63, 64, 65, 127, 128, 129, 191, 192, 193, 254, 255):
        n_rows = int(rng.integers(1, 2 * n_bins + 3))
        hf = _random_bins(rng, n_bins, n_rows, missing=bool(rng.integers(0, 2)))
        sum_g, sum_h, sum_c = hf[:, 0].sum(), hf[:, 1].sum(), hf[:, 2].sum()
        for msl, mcw, lam in ((0.0, 0.0, 1.0), (1.0, 1e-3, 0.0), (5.0, 0.0, 0.5), (20.0, 1e-3, 0.0)):
            for factor in (0.0, sum_c / sum_h):
                rule = SplitRule(sum_g, sum_h, sum_c, msl, factor, mcw, lam)
                every = scan_bins(hf, n_bins, rule, False, *scan_scratch())
                occupied = scan_bins(hf, n_bins, rule, True, *scan_scratch())
                bits = [tuple(float(v).hex() for v in rec) for rec in (every, occupied)]
                assert bits[0] == bits[1], (n_bins, n_rows, msl, mcw, lam, factor, every, occupied)


# -- the fused kernels the grower runs: build (or subtract) + scan in one pass per feature ---------

def _split_arrays(d):
    return Splits.empty(d)


@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("path", ["rows", "all_rows", "unit_h", "subset_features"])
def test_build_and_scan_equals_histogram_then_scan(keep, path):
    from gbfs.booster.kernels.histogram import gather
    from gbfs.booster.kernels.splitting import build_and_scan

    X, rows, rw, hw = _problem(5, weights=path != "unit_h")
    d = X.shape[1]
    n = X.shape[0]
    if path == "all_rows":
        rows = np.arange(n, dtype=np.int32)
    features = np.array([1, 4, 6], dtype=np.int64) if path == "subset_features" else np.arange(d)
    r_ord, h_ord = np.empty(rows.shape[0]), np.empty(rows.shape[0])
    gather(rw, rows, r_ord)
    gather(hw, rows, h_ord)
    kernel_rows = np.empty(0, dtype=np.int32) if path == "all_rows" else rows
    kernel_h = np.empty(0) if path == "unit_h" else h_ord
    layout = HistogramLayout(N_BINS)
    hist = layout.new()
    hist[...] = np.nan
    out = _split_arrays(d)
    for a in out:
        a[...] = 0
    rule = SplitRule(float(r_ord.sum()), float(h_ord.sum()), float(rows.shape[0]), 3.0, 0.0, 1e-3, 0.5)
    build_and_scan(X, np.arange(d), kernel_rows, r_ord, kernel_h, features, 3, keep, hist, layout.offsets,
                   N_BINS, rule, out, np.empty(0))
    ref = _kernel(X, rows, rw, hw, 3, 1e-3, 0.5)
    for got, want in zip(out, ref):
        np.testing.assert_allclose(got[features], want[features], rtol=1e-12, atol=1e-12)
    expected_hist = naive.flat_histogram(X, rows, rw, hw, N_BINS)
    if keep:
        for f in features:
            np.testing.assert_allclose(layout.feature(hist, f), layout.feature(expected_hist, f),
                                       rtol=1e-12, atol=1e-12)
        others = np.setdiff1d(np.arange(d), features)
        assert all(np.all(np.isnan(layout.feature(hist, f))) for f in others), "unlisted features written"
    else:
        assert np.all(np.isnan(hist)), "keep=False must not touch the node histogram"


def test_subtract_and_scan_equals_scan_of_the_sibling():
    from gbfs.booster.kernels.splitting import subtract_and_scan

    X, rows, rw, hw = _problem(9, weights=True)
    d = X.shape[1]
    rng = np.random.default_rng(0)
    small = np.sort(rng.choice(rows, rows.shape[0] // 3, replace=False)).astype(np.int32)
    large = np.setdiff1d(rows, small).astype(np.int32)
    layout = HistogramLayout(N_BINS)
    parent_hist = naive.flat_histogram(X, rows, rw, hw, N_BINS)
    small_hist = naive.flat_histogram(X, small, rw, hw, N_BINS)
    out = _split_arrays(d)
    features = np.arange(d)
    rule = SplitRule(float(rw[large].sum()), float(hw[large].sum()), float(large.shape[0]), 2.0, 0.0, 1e-3,
                     0.0)
    subtract_and_scan(parent_hist, small_hist, features, layout.offsets, N_BINS, rule, out)
    np.testing.assert_allclose(parent_hist, naive.flat_histogram(X, large, rw, hw, N_BINS), rtol=1e-9,
                               atol=1e-9)
    ref = _kernel(X, large, rw, hw, 2, 1e-3, 0.0)
    np.testing.assert_array_equal(np.isfinite(out[0]), np.isfinite(ref[0]))
    ok = np.isfinite(ref[0])
    np.testing.assert_allclose(out[0][ok], ref[0][ok], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("serial", [False, True])
@pytest.mark.parametrize("scan_small", [True, False])
def test_build_subtract_and_scan_is_build_then_subtract_bit_for_bit(serial, scan_small):
    """Both children of a split in one pass: the smaller one's splits, the parent's buffer turned into
    the larger one's histogram and its splits -- exactly the two-pass kernels' bits, on the listed
    features only."""
    from gbfs.booster.kernels.histogram import gather
    from gbfs.booster.kernels.splitting import (
        build_and_scan,
        build_subtract_and_scan,
        build_subtract_and_scan_serial,
        subtract_and_scan,
    )

    X, rows, rw, hw = _problem(11, weights=True)
    d = X.shape[1]
    rng = np.random.default_rng(3)
    small = np.sort(rng.choice(rows, rows.shape[0] // 3, replace=False)).astype(np.int32)
    large = np.setdiff1d(rows, small).astype(np.int32)
    features = np.array([0, 2, 3, 5, 7], dtype=np.int64)
    layout = HistogramLayout(N_BINS)
    r_ord, h_ord = np.empty(small.shape[0]), np.empty(small.shape[0])
    gather(rw, small, r_ord)
    gather(hw, small, h_ord)
    rule_s = SplitRule(float(r_ord.sum()), float(h_ord.sum()), float(small.shape[0]), 2.0, 0.0, 1e-3, 0.3)
    rule_l = SplitRule(float(rw[large].sum()), float(hw[large].sum()), float(large.shape[0]), 2.0, 0.0, 1e-3,
                       0.3)
    cols = np.arange(d)
    # the two passes: build the smaller child (kept), subtract it from the parent
    parent_ref = naive.flat_histogram(X, rows, rw, hw, N_BINS)
    small_ref = layout.new()
    splits_s_ref, splits_l_ref = _split_arrays(d), _split_arrays(d)
    build_and_scan(X, cols, small, r_ord, h_ord, features, 2, True, small_ref, layout.offsets, N_BINS, rule_s,
                   splits_s_ref, np.empty(0))
    subtract_and_scan(parent_ref, small_ref, features, layout.offsets, N_BINS, rule_l, splits_l_ref)
    # the fused pass
    parent = naive.flat_histogram(X, rows, rw, hw, N_BINS)
    splits_s, splits_l = _split_arrays(d), _split_arrays(d)
    for a in (*splits_s, *splits_l):
        a[...] = 0
    args = (X, cols, small, r_ord, h_ord, features)
    tail = (parent, layout.offsets, N_BINS, scan_small, rule_s, splits_s, rule_l, splits_l)
    if serial:
        build_subtract_and_scan_serial(*args, *tail)
    else:
        build_subtract_and_scan(*args, 3, *tail)
    np.testing.assert_array_equal(parent, parent_ref)  # every feature: the unlisted ones untouched
    for got, want in zip(splits_l, splits_l_ref):
        np.testing.assert_array_equal(got[features], want[features])
    for got, want in zip(splits_s, splits_s_ref):
        if scan_small:
            np.testing.assert_array_equal(got[features], want[features])
        else:
            assert not np.any(got), "scan_small=False must not write the smaller child's splits"
    # and the parent's buffer is the larger child's histogram
    bins = np.concatenate([np.arange(layout.offsets[f], layout.offsets[f + 1]) for f in features])
    np.testing.assert_allclose(parent[bins], naive.flat_histogram(X, large, rw, hw, N_BINS)[bins], rtol=1e-9,
                               atol=1e-9)
