"""Exact split search: every threshold between two distinct raw values of a node's rows.

The histogram search (:mod:`gbfs.booster.kernels.splitting`) considers at most 255 thresholds per
feature, the edges of its bins.  The exact search considers every cut between consecutive distinct
values, as a sort-based learner does (XGBoost's ``tree_method="exact"``, the CART search of the
GBFS and GT-GBM papers).  It is the baseline of the GT-GBM paper's cost model (Section 4.2, Table 1):

- **presorted** (A-GBM, GBFS: every feature searched): each feature's rows are sorted once per fit,
  ``O(n log n)`` per feature; a node's rows keep a contiguous segment of every feature's sorted list
  (its "sorted value pairs passed to child nodes"), split stably with the node, so a node costs
  ``O(m)`` per feature it searches and ``O(m d)`` to split the lists of all ``d`` features;
- **sorting per node** (GT-GBM: only Omega and the group tests' candidates searched): the node's
  values of each searched feature are sorted on the spot, ``O(m log m)`` per feature and no state
  ("GT-GBM does not need to precompute the sorted value pairs").

Thresholds are midpoints between consecutive distinct values (``x <= t`` goes left); missing values
(NaN) go to whichever side gains more, as in the histogram search.  Rows are counted exactly for
``min_samples_leaf``.  Sums run in the feature's sorted order, one fixed order on every machine.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._types import C_CH, G_CH, H_CH
from .scan import split_gain


@njit(cache=True, nogil=True)
def _cut(lo, hi):
    """A threshold ``t`` with ``lo <= t < hi`` for two consecutive distinct values: their midpoint as
    the binning computes its edges (no overflow near the largest floats), or ``lo`` where it rounds
    to ``hi`` (adjacent floats)."""
    t = lo * 0.5 + hi * 0.5
    return t if t < hi else lo


@njit(cache=True, nogil=True)
def scan_sorted(xs, gs, hs, n_valid, rule):
    """Best threshold of one feature whose node rows are in ascending order of value.

    ``xs[:n_valid]`` are the sorted non-missing values, ``xs[n_valid:]`` the missing ones; ``gs`` and
    ``hs`` the rows' residual and second channel in the same order.  Returns (gain, threshold,
    missing_left, left g, left h, left count); gain ``-inf``: no admissible split.  The candidate
    splits are those of :func:`gbfs.booster.kernels.scan.scan_feature` with a bin per distinct
    value: missing rows right or (when there are some) left, and "every non-missing row left"
    (threshold ``inf``) only with missing rows to send right.
    """
    m = xs.shape[0]
    parent_term = rule.sum_g * rule.sum_g / (rule.sum_h + rule.reg_lambda)
    mg = 0.0
    mh = 0.0
    for i in range(n_valid, m):
        mg += gs[i]
        mh += hs[i]
    mc = float(m - n_valid)
    has_missing = m > n_valid
    best = -np.inf
    best_t = np.nan
    best_ml = False
    blg = 0.0
    blh = 0.0
    blc = 0.0
    cg = 0.0
    ch = 0.0
    for i in range(n_valid):
        cg += gs[i]
        ch += hs[i]
        last = i == n_valid - 1
        if not last and xs[i + 1] == xs[i]:
            continue  # no cut between equal values
        cc = float(i + 1)
        if not last or has_missing:
            gain = split_gain(cg, ch, cc, rule, parent_term)
            if gain > best:
                best = gain
                best_t = np.inf if last else _cut(xs[i], xs[i + 1])
                best_ml = (not has_missing) and cc >= rule.sum_c - cc
                blg = cg
                blh = ch
                blc = cc
        if has_missing and not last:
            gain = split_gain(cg + mg, ch + mh, cc + mc, rule, parent_term)
            if gain > best:
                best = gain
                best_t = _cut(xs[i], xs[i + 1])
                best_ml = True
                blg = cg + mg
                blh = ch + mh
                blc = cc + mc
    return best, best_t, best_ml, blg, blh, blc


@njit(cache=True, nogil=True, inline="always")
def _store(f, res, gain, threshold, missing_left, left_sums):
    gain[f] = res[0]
    threshold[f] = res[1]
    missing_left[f] = res[2]
    left_sums[f, G_CH] = res[3]
    left_sums[f, H_CH] = res[4]
    left_sums[f, C_CH] = res[5]


@njit(cache=True, nogil=True)
def _n_valid(xs, m):
    """Sorted values put NaN last: the number of non-missing ones."""
    k = m
    while k > 0 and np.isnan(xs[k - 1]):
        k -= 1
    return k


@njit(cache=True, nogil=True)
def _presorted_chunk(X, lists, start, end, rw, hw, unit_h, features, lo, hi, rule, gain, threshold,
                     missing_left, left_sums):
    m = end - start
    xs = np.empty(m, dtype=np.float64)
    gs = np.empty(m, dtype=np.float64)
    hs = np.ones(m, dtype=np.float64)
    for k in range(lo, hi):
        f = features[k]
        for i in range(m):
            row = lists[f, start + i]
            xs[i] = X[row, f]
            gs[i] = rw[row]
            if not unit_h:
                hs[i] = hw[row]
        _store(f, scan_sorted(xs, gs, hs, _n_valid(xs, m), rule), gain, threshold, missing_left, left_sums)


@njit(parallel=True, cache=True)
def presorted_best_splits(X, lists, start, end, rw, hw, unit_h, features, n_chunks, rule, gain, threshold,
                          missing_left, left_sums):
    """Best exact split of each of ``features`` for the node whose rows are ``lists[f, start:end]`` in
    feature ``f``'s order (:func:`tree_lists`); ``rw``, ``hw`` by row id (``unit_h``: every second
    channel is 1).  Parallel over ``n_chunks`` chunks of features."""
    n_feat = features.shape[0]
    for c in prange(n_chunks):
        _presorted_chunk(X, lists, start, end, rw, hw, unit_h, features, c * n_feat // n_chunks,
                         (c + 1) * n_feat // n_chunks, rule, gain, threshold, missing_left, left_sums)


@njit(cache=True, nogil=True)
def presorted_best_splits_serial(X, lists, start, end, rw, hw, unit_h, features, rule, gain, threshold,
                                 missing_left, left_sums):
    """:func:`presorted_best_splits` on one thread (small nodes: no thread-pool wake-up)."""
    # np.int64(0), not 0: a literal compiles the chunk function a second time
    _presorted_chunk(X, lists, start, end, rw, hw, unit_h, features, np.int64(0), features.shape[0], rule,
                     gain, threshold, missing_left, left_sums)


@njit(cache=True, nogil=True)
def _sorting_chunk(X, rows, r_ord, h_ord, features, lo, hi, rule, gain, threshold, missing_left,
                   left_sums):
    m = r_ord.shape[0]
    vals = np.empty(m, dtype=np.float64)
    xs = np.empty(m, dtype=np.float64)
    gs = np.empty(m, dtype=np.float64)
    hs = np.ones(m, dtype=np.float64)
    all_rows = rows.shape[0] == 0
    unit_h = h_ord.shape[0] == 0
    for k in range(lo, hi):
        f = features[k]
        for i in range(m):
            vals[i] = X[i if all_rows else rows[i], f]
        order = np.argsort(vals, kind="mergesort")  # stable: ties keep row order, one sum order
        for i in range(m):
            j = order[i]
            xs[i] = vals[j]
            gs[i] = r_ord[j]
            if not unit_h:
                hs[i] = h_ord[j]
        _store(f, scan_sorted(xs, gs, hs, _n_valid(xs, m), rule), gain, threshold, missing_left, left_sums)


@njit(parallel=True, cache=True)
def sorted_best_splits(X, rows, r_ord, h_ord, features, n_chunks, rule, gain, threshold, missing_left,
                       left_sums):
    """Best exact split of each of ``features`` for the node of ``rows`` (empty: every row of ``X``
    in order), sorting the node's values of each feature; ``r_ord``, ``h_ord`` in the order of
    ``rows`` (``h_ord`` empty: every second channel is 1).  Parallel over chunks of features."""
    n_feat = features.shape[0]
    for c in prange(n_chunks):
        _sorting_chunk(X, rows, r_ord, h_ord, features, c * n_feat // n_chunks, (c + 1) * n_feat // n_chunks,
                       rule, gain, threshold, missing_left, left_sums)


@njit(cache=True, nogil=True)
def sorted_best_splits_serial(X, rows, r_ord, h_ord, features, rule, gain, threshold, missing_left,
                              left_sums):
    """:func:`sorted_best_splits` on one thread."""
    _sorting_chunk(X, rows, r_ord, h_ord, features, np.int64(0), features.shape[0], rule, gain, threshold,
                   missing_left, left_sums)


@njit(parallel=True, cache=True)
def presort(X):
    """Every feature's rows in ascending order of value, NaN last, ties in row order: shape
    ``(n_features, n_rows)``, one contiguous list per feature."""
    n, d = X.shape
    order = np.empty((d, n), dtype=np.int32)
    for f in prange(d):
        order[f] = np.argsort(X[:, f], kind="mergesort").astype(np.int32)
    return order


@njit(parallel=True, cache=True)
def tree_lists(order, in_tree, lists):
    """``lists[f]`` starts with the rows of this tree (``in_tree[row]``; empty: every row) in feature
    ``f``'s order, taken from the fit's :func:`presort`."""
    d, n = order.shape
    every = in_tree.shape[0] == 0
    for f in prange(d):
        j = 0
        for i in range(n):
            row = order[f, i]
            if every or in_tree[row]:
                lists[f, j] = row
                j += 1


@njit(cache=True, nogil=True)
def split_rows(partition, start, end, col, threshold, missing_left, side, buffer):
    """Stable in-place split of ``partition[start:end]`` by ``col[row] <= threshold`` (NaN by
    ``missing_left``); marks each row's side in ``side`` (1: left); returns the left child's size."""
    n_left = 0
    for i in range(start, end):
        row = partition[i]
        x = col[row]
        go_left = missing_left if np.isnan(x) else x <= threshold
        side[row] = go_left
        n_left += go_left
    _split_list(partition[start:end], side, buffer)
    return n_left


@njit(cache=True, nogil=True)
def _split_list(seg, side, buffer):
    n_left = 0
    n_right = 0
    for i in range(seg.shape[0]):
        row = seg[i]
        if side[row]:
            seg[n_left] = row
            n_left += 1
        else:
            buffer[n_right] = row
            n_right += 1
    for k in range(n_right):
        seg[n_left + k] = buffer[k]


@njit(parallel=True, cache=True)
def split_lists(lists, start, end, side, n_chunks):
    """Split every feature's segment ``lists[f, start:end]`` stably by ``side`` (left rows first),
    so each child's rows stay sorted in every feature's order."""
    d = lists.shape[0]
    for c in prange(n_chunks):
        buffer = np.empty(end - start, dtype=lists.dtype)
        for f in range(c * d // n_chunks, (c + 1) * d // n_chunks):
            _split_list(lists[f, start:end], side, buffer)
