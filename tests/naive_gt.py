"""Pure-numpy references for GT-GBM (Section 4 / Algorithm 2 of the GT-GBM paper), written from the
specification, not from the kernels of gbfs.criteria.group_testing.

* :func:`standardise`: min-max standardisation of every column (footnote 1 of the paper); a constant
  column becomes 0, a NaN the mean of the column's standardised non-missing values;
  :func:`standardise_binned` the same of the binned column (each value replaced by the mean of the
  training values in its bin), which is what gbfs standardises.
* :func:`pseudo_feature`: the sum of a contiguous range of a subset's standardised columns, in
  float64, column by column (no prefix sums).
* :func:`halving_tree`: every range the binary search of a subset can ever test.
* :func:`group_test_search`: the node search of Algorithm 2 (lines 4-10) on every subset.
"""

from __future__ import annotations

import math

import numpy as np


def default_n_subsets(s: int, delta: float) -> int:
    """Theorem 4.1: ``ceil(e * s * ln(s / delta))`` subsets; Algorithm 2 line 2: one subset if s = 1."""
    return 1 if s == 1 else math.ceil(math.e * s * math.log(s / delta))


def _varying_columns(X: np.ndarray):
    """``(j, col, ok, lo, hi)`` of every column of ``X`` whose non-NaN entries (``ok``) span
    ``lo < hi``; the others (constant, or no value at all) stay 0 when standardised."""
    for j in range(X.shape[1]):
        col = X[:, j]
        ok = ~np.isnan(col)
        if ok.any() and col[ok].max() > col[ok].min():
            yield j, col, ok, col[ok].min(), col[ok].max()


def standardise(X: np.ndarray) -> np.ndarray:
    """``(x - min) / (max - min)`` per column over the non-NaN entries, in float64."""
    X = np.asarray(X, dtype=np.float64)
    Z = np.zeros_like(X)
    for j, col, ok, lo, hi in _varying_columns(X):
        Z[ok, j] = (col[ok] - lo) / (hi - lo)
        Z[~ok, j] = Z[ok, j].mean()
    return Z


def standardise_binned(X: np.ndarray, edges_list) -> np.ndarray:
    """GT-GBM's z of the binned feature: the min-max standardised mean of the training values in each
    value's bin (``edges_list[j]``: the bin edges of column j, ``bin(x) = #{edges < x}``).

    Equal to :func:`standardise` for a column whose distinct values each have their own bin.  A NaN is
    the standardised mean of the column, a constant (or all-NaN) column 0.
    """
    X = np.asarray(X, dtype=np.float64)
    Z = np.zeros_like(X)
    for j, col, ok, lo, hi in _varying_columns(X):
        b = np.searchsorted(np.asarray(edges_list[j]), col[ok], side="left")
        means = {k: col[ok][b == k].mean() for k in np.unique(b)}
        Z[ok, j] = (np.array([means[k] for k in b]) - lo) / (hi - lo)
        Z[~ok, j] = (col[ok].mean() - lo) / (hi - lo)
    return Z


def pseudo_feature(Z: np.ndarray, subsets: np.ndarray, k: int, lo: int, hi: int, rows=None) -> np.ndarray:
    """``sum_{t in [lo, hi)} Z[rows, subsets[k, t]]`` in float64 (all rows if ``rows`` is None)."""
    Zr = Z if rows is None or len(rows) == 0 else Z[np.asarray(rows)]
    out = np.zeros(Zr.shape[0])
    for t in range(lo, hi):
        out += Zr[:, subsets[k, t]]
    return out


def halving_tree(m: int) -> list[tuple[int, int]]:
    """Every (lo, hi) the binary search can test on a subset of ``m`` positions (the root included)."""
    out = [(0, m)]
    stack = [(0, m)]
    while stack:
        lo, hi = stack.pop()
        if hi - lo < 2:
            continue
        mid = lo + (hi - lo) // 2
        for half in ((lo, mid), (mid, hi)):
            out.append(half)
            stack.append(half)
    return sorted(out)


def pseudo_gain(z, r, h, n_bins, min_samples_leaf, min_child_weight=0.0, lam=0.0) -> float:
    """Best split gain of the pseudo-feature ``z`` binned into ``n_bins`` equal-width bins on [min, max].

    ``bin = min(int((z - min) * n_bins / (max - min)), n_bins - 1)``; the left child is bins <= t for
    t = 0 .. n_bins - 2; gain = GL^2/(HL+lam) + GR^2/(HR+lam) - G^2/(H+lam).  -inf if the pseudo-feature
    is constant on the node or no threshold leaves ``min_samples_leaf`` rows (and ``min_child_weight``)
    on both sides.
    """
    z = np.asarray(z, dtype=np.float64)
    mn, mx = z.min(), z.max()
    if not mx > mn:
        return -np.inf
    b = np.minimum(((z - mn) * n_bins / (mx - mn)).astype(np.int64), n_bins - 1)
    # left child of threshold t = bins 0..t: cumulative sums of the per-bin sums
    GL = np.cumsum(np.bincount(b, weights=r, minlength=n_bins))[:-1]
    HL = np.cumsum(np.bincount(b, weights=h, minlength=n_bins))[:-1]
    NL = np.cumsum(np.bincount(b, minlength=n_bins))[:-1]
    G, H, N = r.sum(), h.sum(), z.shape[0]
    GR, HR, NR = G - GL, H - HL, N - NL
    ok = (NL >= min_samples_leaf) & (NR >= min_samples_leaf)
    ok &= (HL >= min_child_weight) & (HR >= min_child_weight)
    if not ok.any():
        return -np.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = GL * GL / (HL + lam) + GR * GR / (HR + lam) - G * G / (H + lam)
    return float(gain[ok].max())


def group_test_search(values, subsets, r, h, n_bins, min_samples_leaf, min_child_weight=0.0, lam=0.0):
    """Algorithm 2, lines 4-10, on every subset.

    ``values(k, lo, hi)`` gives the pseudo-feature of positions [lo, hi) of subset k on the node's rows;
    ``r``/``h`` are the node's residuals and weights.  Each subset is halved into [lo, mid) and
    [mid, hi) with ``mid = lo + (hi - lo) // 2``; the right half is kept only if its score is strictly
    larger.  Returns (feature, score of the last kept half) per subset.
    """
    p, m = subsets.shape
    feature = np.empty(p, dtype=np.int64)
    gain = np.full(p, -np.inf)
    for k in range(p):
        lo, hi = 0, m
        while hi - lo > 1:
            mid = lo + (hi - lo) // 2
            gl = pseudo_gain(values(k, lo, mid), r, h, n_bins, min_samples_leaf, min_child_weight, lam)
            gr = pseudo_gain(values(k, mid, hi), r, h, n_bins, min_samples_leaf, min_child_weight, lam)
            if gr > gl:
                lo, gain[k] = mid, gr
            else:
                hi, gain[k] = mid, gl
        feature[k] = subsets[k, lo]
    return feature, gain
