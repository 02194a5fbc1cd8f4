"""Histogram kernels against np.add.at; subtraction against building the sibling directly."""

from __future__ import annotations

import naive
import numpy as np
import pytest

from gbfs._types import HISTOGRAM_DTYPE, MISSING_BIN, N_BINS
from gbfs.histogram import (
    build_histogram,
    build_histogram_features,
    gather,
    new_histogram,
    subtract_histograms,
)


def _problem(seed, n=300, d=7, max_bin=40):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, max_bin, size=(n, d)).astype(np.uint8)
    X[:, 0] = rng.integers(0, 255, n)  # the full range of value bins
    X[rng.random((n, d)) < 0.1] = MISSING_BIN
    X[:, -1] = 3  # constant column
    X = np.asfortranarray(X)
    rw = rng.normal(size=n)
    hw = rng.random(n) + 0.1
    return rng, X, rw, hw


def _build(X, rows, rw, hw, features=None, fill=np.nan):
    hist = new_histogram(X.shape[1])
    hist[...] = fill  # pooled histograms are reused without zeroing: the kernel must reset them
    r_ord = np.empty(rows.shape[0])
    h_ord = np.empty(rows.shape[0])
    gather(rw, rows, r_ord)
    gather(hw, rows, h_ord)
    if features is None:
        build_histogram(X, rows, r_ord, h_ord, hist)
    else:
        build_histogram_features(X, rows, r_ord, h_ord, features, hist)
    return hist


def test_new_histogram_layout():
    h = new_histogram(5)
    assert h.shape == (5, N_BINS, 3) and h.dtype == HISTOGRAM_DTYPE


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
    rng, X, rw, hw = _problem(seed)
    rows = np.sort(rng.choice(X.shape[0], 173, replace=False)).astype(np.int32)
    hist = _build(X, rows, rw, hw)
    ref = naive.histogram(X, rows, rw, hw)
    np.testing.assert_allclose(hist, ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(hist[..., 2], ref[..., 2])  # counts are exact
    # per-feature totals equal the node sums, the missing bin included
    np.testing.assert_allclose(hist[..., 0].sum(axis=1), rw[rows].sum(), rtol=1e-10)
    np.testing.assert_array_equal(hist[..., 2].sum(axis=1), rows.shape[0])


def test_build_histogram_unsorted_rows_and_empty_node():
    rng, X, rw, hw = _problem(5)
    rows = rng.permutation(X.shape[0])[:50].astype(np.int32)
    np.testing.assert_allclose(_build(X, rows, rw, hw), naive.histogram(X, rows, rw, hw), atol=1e-12)
    empty = np.zeros(0, dtype=np.int32)
    np.testing.assert_array_equal(_build(X, empty, rw, hw), 0.0)


def test_build_histogram_float32_gradients_summed_in_float64():
    rng, X, rw, hw = _problem(6)
    rows = np.arange(X.shape[0], dtype=np.int32)
    r32 = rw.astype(np.float32)
    h32 = hw.astype(np.float32)
    hist = new_histogram(X.shape[1])
    build_histogram(X, rows, r32, h32, hist)
    assert hist.dtype == np.float64
    ref = naive.histogram(X, rows, r32.astype(np.float64), h32.astype(np.float64))
    np.testing.assert_allclose(hist, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("features", [[2], [0, 4], [5, 1, 3]])
def test_build_histogram_features_touches_only_listed(features):
    rng, X, rw, hw = _problem(7)
    rows = np.sort(rng.choice(X.shape[0], 120, replace=False)).astype(np.int32)
    sentinel = 12345.0
    hist = _build(X, rows, rw, hw, features=np.array(features, dtype=np.int64), fill=sentinel)
    ref = naive.histogram(X, rows, rw, hw)
    for f in range(X.shape[1]):
        if f in features:
            np.testing.assert_allclose(hist[f], ref[f], rtol=1e-12, atol=1e-12)
        else:
            assert np.all(hist[f] == sentinel), f"feature {f} was written"


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("in_place", [False, True])
def test_subtraction_equals_sibling(seed, in_place):
    rng, X, rw, hw = _problem(seed + 10)
    parent = np.sort(rng.choice(X.shape[0], 220, replace=False)).astype(np.int32)
    in_child = rng.random(parent.shape[0]) < 0.35
    child, sibling = parent[in_child], parent[~in_child]
    hp = _build(X, parent, rw, hw)
    hc = _build(X, child, rw, hw)
    direct = _build(X, sibling, rw, hw)
    out = hp if in_place else new_histogram(X.shape[1])
    subtract_histograms(hp, hc, out)
    np.testing.assert_allclose(out, direct, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(out[..., 2], direct[..., 2])
    np.testing.assert_allclose(out, naive.histogram(X, sibling, rw, hw), rtol=0, atol=1e-9)


@pytest.mark.parametrize("all_rows", [True, False])
def test_unit_second_channel_and_all_rows_fast_paths(all_rows):
    """Empty ``h_ord`` (unit weights) copies the count into channel 1; empty ``rows`` means all rows."""
    rng, X, rw, _ = _problem(11)
    n = X.shape[0]
    rows = np.arange(n, dtype=np.int32) if all_rows else np.sort(rng.choice(n, n // 3, replace=False))
    rows = rows.astype(np.int32)
    ones = np.ones(n)
    expected = naive.histogram(X, rows, rw, ones)
    hist = new_histogram(X.shape[1])
    hist[...] = np.nan
    if all_rows:
        build_histogram(X, np.empty(0, dtype=np.int32), rw, np.empty(0), hist)
    else:
        r_ord = np.empty(rows.shape[0])
        gather(rw, rows, r_ord)
        build_histogram(X, rows, r_ord, np.empty(0), hist)
    np.testing.assert_allclose(hist, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(hist[:, :, 1], hist[:, :, 2])
