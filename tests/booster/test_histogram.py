"""Histogram kernels against np.add.at; subtraction against building the sibling directly; the
flat layout with per-feature bin counts."""

from __future__ import annotations

import naive
import numpy as np
import pytest
from numba import njit

from gbfs.booster.kernels._types import C_CH, G_CH, H_CH, HISTOGRAM_DTYPE, MISSING_BIN
from gbfs.booster.kernels.histogram import (
    HistogramLayout,
    add_pair,
    build_histogram,
    gather,
    subtract_histograms,
)


def _problem(seed, n=300, d=7, max_bin=40):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, max_bin, size=(n, d)).astype(np.uint8)
    X[:, 0] = rng.integers(0, 255, n)  # the full range of value bins
    X[:, 1] = rng.integers(0, 2, n)    # a binary feature: 3 bins with its missing one
    X[rng.random((n, d)) < 0.1] = MISSING_BIN
    X[:, -1] = 3  # constant column
    X = np.asfortranarray(X)
    rw = rng.normal(size=n)
    hw = rng.random(n) + 0.1
    n_bins = np.array([int(X[X[:, f] != MISSING_BIN, f].max()) + 1 for f in range(d)], dtype=np.int32)
    n_bins[2] += 7  # value bins no row uses (a bin mapper fitted on other rows) stay zero
    return rng, X, rw, hw, HistogramLayout(n_bins)


def _build(X, rows, rw, hw, layout, features=None, fill=np.nan):
    hist = layout.new()
    hist[...] = fill  # pooled histograms are reused without zeroing: the kernel must reset them
    r_ord = np.empty(rows.shape[0])
    h_ord = np.empty(rows.shape[0])
    gather(rw, rows, r_ord)
    gather(hw, rows, h_ord)
    features = np.arange(X.shape[1]) if features is None else features
    # the kernel reads feature f from column cols[f] of its matrix: store the columns shuffled
    cols = np.random.default_rng(X.shape[1]).permutation(X.shape[1])
    block = np.empty_like(X, order="F")
    block[:, cols] = X
    build_histogram(block, cols, rows, r_ord, h_ord, features, layout.offsets, layout.n_bins, hist)
    return hist


def _ref(X, rows, rw, hw, layout):
    return naive.flat_histogram(X, rows, rw, hw, layout.n_bins)


def test_layout_sizes_each_feature_to_its_bins():
    layout = HistogramLayout(np.array([1, 2, 255, 3]))
    np.testing.assert_array_equal(layout.offsets, [0, 2, 5, 261, 265])
    assert layout.total == 265 and layout.max_width == 256
    h = layout.new()
    assert h.shape == (265, 3) and h.dtype == HISTOGRAM_DTYPE
    assert layout.nbytes == 265 * 3 * 8
    assert layout.feature(h, 1).shape == (3, 3)
    with pytest.raises(ValueError, match="n_bins_non_missing"):
        HistogramLayout(np.array([0, 3]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gather(seed):
    rng = np.random.default_rng(seed)
    values = rng.normal(size=100)
    rows = np.sort(rng.choice(100, 37, replace=False)).astype(np.int32)
    out = np.empty(37)
    gather(values, rows, out)
    np.testing.assert_array_equal(out, values[rows])


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_build_histogram_matches_add_at(seed):
    rng, X, rw, hw, layout = _problem(seed)
    rows = np.sort(rng.choice(X.shape[0], 173, replace=False)).astype(np.int32)
    hist = _build(X, rows, rw, hw, layout)
    ref = _ref(X, rows, rw, hw, layout)
    np.testing.assert_allclose(hist, ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(hist[:, 2], ref[:, 2])  # counts are exact
    # per-feature totals equal the node sums, the missing bin included
    for f in range(X.shape[1]):
        hf = layout.feature(hist, f)
        np.testing.assert_allclose(hf[:, 0].sum(), rw[rows].sum(), rtol=1e-10)
        assert hf[:, 2].sum() == rows.shape[0]
        assert hf[-1, 2] == np.count_nonzero(X[rows, f] == MISSING_BIN)  # the missing bin is last


def test_build_histogram_unsorted_rows_and_empty_node():
    rng, X, rw, hw, layout = _problem(5)
    rows = rng.permutation(X.shape[0])[:50].astype(np.int32)
    np.testing.assert_allclose(_build(X, rows, rw, hw, layout), _ref(X, rows, rw, hw, layout), atol=1e-12)
    empty = np.zeros(0, dtype=np.int32)
    np.testing.assert_array_equal(_build(X, empty, rw, hw, layout), 0.0)


def test_build_histogram_float32_gradients_summed_in_float64():
    rng, X, rw, hw, layout = _problem(6)
    rows = np.arange(X.shape[0], dtype=np.int32)
    r32 = rw.astype(np.float32)
    h32 = hw.astype(np.float32)
    hist = layout.new()
    every = np.arange(X.shape[1])
    build_histogram(X, every, rows, r32, h32, every, layout.offsets, layout.n_bins, hist)
    assert hist.dtype == np.float64
    ref = naive.flat_histogram(X, rows, r32.astype(np.float64), h32.astype(np.float64), layout.n_bins)
    np.testing.assert_allclose(hist, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("features", [[2], [0, 4], [5, 1, 3]])
def test_build_histogram_features_touches_only_listed(features):
    rng, X, rw, hw, layout = _problem(7)
    rows = np.sort(rng.choice(X.shape[0], 120, replace=False)).astype(np.int32)
    sentinel = 12345.0
    hist = _build(X, rows, rw, hw, layout, features=np.array(features, dtype=np.int64), fill=sentinel)
    ref = _ref(X, rows, rw, hw, layout)
    for f in range(X.shape[1]):
        if f in features:
            np.testing.assert_allclose(layout.feature(hist, f), layout.feature(ref, f), rtol=1e-12,
                                       atol=1e-12)
        else:
            assert np.all(layout.feature(hist, f) == sentinel), f"feature {f} was written"


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("in_place", [False, True])
def test_subtraction_equals_sibling(seed, in_place):
    rng, X, rw, hw, layout = _problem(seed + 10)
    parent = np.sort(rng.choice(X.shape[0], 220, replace=False)).astype(np.int32)
    in_child = rng.random(parent.shape[0]) < 0.35
    child, sibling = parent[in_child], parent[~in_child]
    hp = _build(X, parent, rw, hw, layout)
    hc = _build(X, child, rw, hw, layout)
    direct = _build(X, sibling, rw, hw, layout)
    out = hp if in_place else layout.new()
    subtract_histograms(hp, hc, out)
    np.testing.assert_allclose(out, direct, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(out[:, 2], direct[:, 2])
    np.testing.assert_allclose(out, _ref(X, sibling, rw, hw, layout), rtol=0, atol=1e-9)


@pytest.mark.parametrize("all_rows", [True, False])
def test_unit_second_channel_and_all_rows_fast_paths(all_rows):
    """Empty ``h_ord`` (unit weights) copies the count into channel 1; empty ``rows`` means all rows."""
    rng, X, rw, _, layout = _problem(11)
    n = X.shape[0]
    rows = np.arange(n, dtype=np.int32) if all_rows else np.sort(rng.choice(n, n // 3, replace=False))
    rows = rows.astype(np.int32)
    expected = _ref(X, rows, rw, np.ones(n), layout)
    hist = layout.new()
    hist[...] = np.nan
    features = np.arange(X.shape[1])
    if all_rows:
        build_histogram(X, features, np.empty(0, dtype=np.int32), rw, np.empty(0), features,
                        layout.offsets, layout.n_bins, hist)
    else:
        r_ord = np.empty(rows.shape[0])
        gather(rw, rows, r_ord)
        build_histogram(X, features, rows, r_ord, np.empty(0), features, layout.offsets, layout.n_bins,
                        hist)
    np.testing.assert_allclose(hist, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(hist[:, 1], hist[:, 2])


@pytest.mark.parametrize("all_rows", [False, True])
@pytest.mark.parametrize("unit", [False, True])
def test_four_features_in_one_pass_are_the_one_feature_sums_bit_for_bit(all_rows, unit):
    """accumulate4 adds each bin's values in the same row order as accumulate: the same bits, for
    features of different widths, through the row index or reading every row, with and without
    the second channel; and the grower's fused kernel gives every feature's split record exactly as
    one feature at a time does, with a remainder of fewer than four features."""
    from numba import njit

    from gbfs.booster.kernels.histogram import accumulate, accumulate4
    from gbfs.booster.kernels.scan import scan_feature
    from gbfs.booster.kernels.splitting import SplitRule, Splits, build_and_scan

    rng, X, rw, hw, layout = _problem(5)
    n, d = X.shape
    rows = np.arange(n) if all_rows else np.sort(rng.choice(n, 170, replace=False))
    rows = rows.astype(np.int32)
    r_ord, h_ord = rw[rows].copy(), hw[rows].copy()
    kernel_rows = np.empty(0, dtype=np.int32) if all_rows else rows
    kernel_h = np.empty(0) if unit else h_ord
    nb = layout.n_bins

    @njit
    def one(col, hf, k):
        accumulate(col, kernel_rows, r_ord, kernel_h, hf, k)

    @njit
    def four(a, b, c, e, h0, h1, h2, h3, n0, n1, n2, n3):
        accumulate4(a, b, c, e, kernel_rows, r_ord, kernel_h, h0, h1, h2, h3, n0, n1, n2, n3)

    picks = [0, 2, 1, 5]
    got = [np.full((nb[f] + 1, 3), np.nan) for f in picks]
    four(*(X[:, f] for f in picks), *got, *(nb[f] for f in picks))
    for f, hf in zip(picks, got):
        want = np.full((nb[f] + 1, 3), np.nan)
        one(X[:, f], want, nb[f])
        np.testing.assert_array_equal(hf, want)

    rule = SplitRule(float(r_ord.sum()), float(n if unit else h_ord.sum()), float(rows.shape[0]), 3.0, 0.0,
                     1e-3, 0.2)
    features = np.arange(d, dtype=np.int64)  # seven: one group of four and three one at a time
    # a root of every row may copy its counts from a table over all rows instead of adding them
    every = naive.flat_histogram(X, np.arange(n), np.zeros(n), np.ones(n), nb)[:, 2].copy()
    tables = [np.empty(0), every] if all_rows else [np.empty(0)]
    for counts in tables:
        hist = layout.new()
        splits = Splits.empty(d)
        build_and_scan(X, np.arange(d), kernel_rows, r_ord, kernel_h, features, 1, True, hist, layout.offsets,
                       nb, rule, splits, counts)
        for f in range(d):
            want = np.full((nb[f] + 1, 3), np.nan)
            one(X[:, f], want, nb[f])
            np.testing.assert_array_equal(layout.feature(hist, f), want)
            res = scan_feature(want, nb[f], rule)
            assert (splits.gain[f], splits.bin[f], splits.missing_left[f], *splits.left_sums[f]) == res


@njit
def _pairs(hist, bins, g, h):
    for i in range(bins.shape[0]):
        add_pair(hist, bins[i], g[i], h[i])


@njit
def _pairs_scalar(hist, bins, g, h):
    for i in range(bins.shape[0]):
        hist[bins[i], G_CH] += g[i]
        hist[bins[i], H_CH] += h[i]


@pytest.mark.parametrize("layout", ["C", "strided"])
@pytest.mark.parametrize("dtypes", [(np.float64, np.uint64), (np.float32, np.uint8), (np.int64, np.int32)])
def test_add_pair_is_the_two_scalar_additions_bit_for_bit(layout, dtypes):
    """The two-wide update adds each channel exactly as the scalar code does: the same sums bit
    for bit, the third channel untouched, for C-ordered bins and (through the scalar fallback) a
    strided view, with narrower or integer inputs converted as numba converts them."""
    vdt, bdt = dtypes
    rng = np.random.default_rng(3)
    bins = rng.integers(0, 17, 5000).astype(bdt)
    g = (rng.normal(size=5000) * 1e3).astype(vdt)
    h = (rng.random(5000) * 1e-3 + 1).astype(vdt) if vdt != np.int64 else rng.integers(-9, 9, 5000)
    start = rng.normal(size=(17, 3))
    if layout == "C":
        ours, ref = start.copy(), start.copy()
    else:
        ours, ref = np.zeros((34, 3)), np.zeros((34, 3))
        ours[::2], ref[::2] = start, start
        ours, ref = ours[::2], ref[::2]
    _pairs(ours, bins, g, h)
    _pairs_scalar(ref, bins, g, h.astype(np.float64) if vdt == np.int64 else h)
    assert np.array_equal(ours.view(np.uint64), ref.view(np.uint64))
    assert np.array_equal(ours[:, C_CH], start[:, C_CH])
    assert not np.array_equal(ours[:, G_CH], start[:, G_CH])
