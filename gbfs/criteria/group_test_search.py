"""GT-GBM's search at a node: the binary search of every subset over its pseudo-features.

Algorithm 2, lines 4-10 of the GT-GBM paper.  Every subset is halved until one feature is left;
each half is scored by GT(half) = the best gain of a split on its pseudo-feature over the node's
rows, binned into :data:`GT_BINS` equal-width bins between the pseudo-feature's min and max in the
node (O(rows), no sort), and the better half is kept.  The survivors are the candidate set C.

A half's bins depend on the node's rows and the fixed pseudo-feature values only, not on the
residuals.  A search over every training row in order (GT-GBM's default, once per tree at the
root) therefore keeps the bins and bin counts of the halves it has tested (``cache``, a
:class:`~gbfs.criteria.group_testing.PseudoBins`), and a later tree fills their histograms from
them: one pass over the rows for both halves of a test, one read-modify-write per row and half
(two with hessians).  Every bin gets the same additions in the same order as when the values are
binned anew, so the scores and the candidates are the same bit for bit.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..booster.kernels._types import C_CH, G_CH, H_CH, N_BINS
from ..booster.kernels.histogram import add_pair
from ..booster.kernels.scan import scan_feature_in, scan_scratch
from ..booster.kernels.splitting import SplitRule

GT_BINS = 64  # equal-width bins of a pseudo-feature inside a node
F32_NOISE = 8.0 * 2.0**-24  # relative rounding of a float32 prefix difference (a few ulps, two terms)


@njit(cache=True, nogil=True)
def min_max(values, n):
    """Exact ``(min, max)`` of ``values[:n]`` (float32, no NaN), as float64; ``(inf, -inf)`` when
    ``n`` is 0.

    Compared as integers: mapping an IEEE-754 bit pattern ``b`` to ``b ^ ((b >> 31) & 0x7FFFFFFF)``
    orders the integers as the floats (negatives' magnitude bits flipped; -0.0 just below +0.0,
    which bins a pseudo-feature the same), and the map is its own inverse.  Integer min/max
    reductions vectorise; the float ones stay scalar under strict IEEE semantics (NaN and signed
    zeros), which every kernel that decides a model keeps -- and the min and max of a set do not
    depend on the order they are taken in, so every host gets the same pair.
    """
    if n == 0:
        return np.inf, -np.inf
    keys = values[:n].view(np.int32)
    lo = np.int32(0x7FFFFFFF)
    hi = np.int32(-0x80000000)
    for i in range(n):
        b = keys[i]
        key = b ^ ((b >> 31) & 0x7FFFFFFF)
        lo = min(lo, key)
        hi = max(hi, key)
    pair = np.empty(2, dtype=np.int32)
    pair[0] = lo ^ ((lo >> 31) & 0x7FFFFFFF)
    pair[1] = hi ^ ((hi >> 31) & 0x7FFFFFFF)
    floats = pair.view(np.float32)
    return np.float64(floats[0]), np.float64(floats[1])


@njit(cache=True, nogil=True)
def half_values(Xb, z_values, prefix, col_of, subset, k, lo, hi, rows, n, out):
    """Pseudo-feature ``sum_{t in [lo, hi)} z_{subset[t]}`` of the node's rows into ``out``.

    Returns its (min, max) over the rows (:func:`min_max`, a pass over ``out`` while it is in
    cache).  ``rows`` empty means rows ``0..n-1``.  The loops are duplicated per case so that none
    of them branches per row.
    """
    all_rows = rows.shape[0] == 0
    c_lo = col_of[lo]
    c_hi = col_of[hi]
    if c_hi >= 0 and c_lo == -2:  # lo == 0: the stored prefix is the value
        top = prefix[k, c_hi]
        if all_rows:
            for i in range(n):
                out[i] = top[i]
        else:
            for i in range(n):
                out[i] = top[rows[i]]
        return min_max(out, n)
    if c_hi >= 0 and c_lo >= 0:  # stored boundaries: one subtraction per row
        top = prefix[k, c_hi]
        bot = prefix[k, c_lo]
        if all_rows:
            for i in range(n):
                out[i] = top[i] - bot[i]
        else:
            for i in range(n):
                out[i] = top[rows[i]] - bot[rows[i]]
        return min_max(out, n)
    for i in range(n):  # a small half: sum its few standardised columns directly
        out[i] = 0.0
    for t in range(lo, hi):
        f = subset[t]
        col = Xb[:, f]
        z = z_values[f]
        if all_rows:
            for i in range(n):
                out[i] += z[col[i]]
        else:
            for i in range(n):
                out[i] += z[col[rows[i]]]
    return min_max(out, n)


@njit(cache=True, nogil=True)
def pseudo_bins(z, mn, mx, n_bins, bins):
    """Equal-width bin of each value of a pseudo-feature over [mn, mx] into ``bins`` (uint8)."""
    scale = n_bins / (mx - mn)
    top = n_bins - 1
    for i in range(z.shape[0]):
        bins[i] = min(int((z[i] - mn) * scale), top)


@njit(cache=True, nogil=True)
def fill_binned_hist(bins, r_ord, h_ord, hist, n_bins):
    """Histogram of the residual / second channel / count over a pseudo-feature's ``bins``, added in
    row order (``h_ord`` empty: unit weights)."""
    for b in range(n_bins):  # bins n_bins..255 (incl. the missing bin) stay zero
        hist[b, G_CH] = 0.0
        hist[b, H_CH] = 0.0
        hist[b, C_CH] = 0.0
    if h_ord.shape[0] == 0:
        for i in range(bins.shape[0]):
            b = bins[i]
            add_pair(hist, b, r_ord[i], 1.0)
        for b in range(n_bins):
            hist[b, C_CH] = hist[b, H_CH]
    else:
        for i in range(bins.shape[0]):
            b = bins[i]
            add_pair(hist, b, r_ord[i], h_ord[i])
            hist[b, C_CH] += 1.0


@njit(cache=True, nogil=True, inline="always")
def _start_counted(hist, counts, n_bins, unit):
    """A histogram's bins before its rows are added: zero sums and the given counts (the second
    channel is the count with unit weights)."""
    for b in range(n_bins):
        hist[b, G_CH] = 0.0
        hist[b, H_CH] = counts[b] if unit else 0.0
        hist[b, C_CH] = counts[b]


@njit(cache=True, nogil=True)
def _fill_counted(bins, counts, r_ord, h_ord, hist, n_bins):
    """:func:`fill_binned_hist` with the count of each bin given (the same exact integers): one
    read-modify-write per row fewer."""
    unit = h_ord.shape[0] == 0
    _start_counted(hist, counts, n_bins, unit)
    if unit:
        for i in range(bins.shape[0]):
            hist[bins[i], G_CH] += r_ord[i]
    else:
        for i in range(bins.shape[0]):
            b = bins[i]
            add_pair(hist, b, r_ord[i], h_ord[i])


@njit(cache=True, nogil=True)
def _fill_pair_counted(bins_l, bins_r, counts_l, counts_r, r_ord, h_ord, hist_l, hist_r, n_bins):
    """:func:`_fill_counted` of both halves of a test in one pass over the rows: each residual is
    read once and the two histograms' updates are independent, so they overlap; each bin gets the
    same additions in the same order as from two passes."""
    unit = h_ord.shape[0] == 0
    _start_counted(hist_l, counts_l, n_bins, unit)
    _start_counted(hist_r, counts_r, n_bins, unit)
    if unit:
        for i in range(bins_l.shape[0]):
            g = r_ord[i]
            hist_l[bins_l[i], G_CH] += g
            hist_r[bins_r[i], G_CH] += g
    else:
        for i in range(bins_l.shape[0]):
            g = r_ord[i]
            h = h_ord[i]
            bl = bins_l[i]
            br = bins_r[i]
            add_pair(hist_l, bl, g, h)
            add_pair(hist_r, br, g, h)


@njit(cache=True, nogil=True)
def _stored_slot(cache, k, node):
    """The slot of a half whose bins are stored and not constant, else -1."""
    if node >= cache.slot_of.shape[1]:
        return -1
    slot = cache.slot_of[k, node]
    return slot if slot >= 0 and not cache.flat[k, slot] else -1


@njit(cache=True, nogil=True)
def fill_pseudo_hist(z, mn, mx, r_ord, h_ord, hist, n_bins, bins):
    """Equal-width histogram of a pseudo-feature over [mn, mx] (``h_ord`` empty: unit weights).

    The bins are computed first in a loop of their own (``bins``: uint8 scratch of ``z``'s length),
    so that the float arithmetic is not interleaved with the dependent histogram updates; the
    updates follow in row order.
    """
    pseudo_bins(z, mn, mx, n_bins, bins)
    fill_binned_hist(bins, r_ord, h_ord, hist, n_bins)


@njit(cache=True, nogil=True)
def _half_gain(Xb, z_values, prefix, col_of, subset, k, lo, hi, node, rows, n, z, tol, r_ord, h_ord, hist,
               n_bins, sum_g, sum_h, sum_c, min_samples_leaf, min_child_weight, reg_lambda, bins, cache, ts,
               left):
    """GT score of the half ``[lo, hi)`` of subset ``k``, node ``node`` of the halving tree (the
    whole subset is node 1, the halves of node ``t`` are ``2t`` and ``2t + 1``).

    ``cache`` (:class:`~gbfs.criteria.group_testing.PseudoBins`; empty when the node's rows are
    not every row in order) keeps the bins of the halves tested before: they depend on the rows
    and the fixed pseudo-feature values only, so a later tree reads them instead of recomputing
    values, bounds and bins -- the same bins, the same histogram, bit for bit.
    """
    slot = -1
    if node < cache.slot_of.shape[1]:
        slot = cache.slot_of[k, node]
        if slot >= 0:
            if cache.flat[k, slot]:
                return -np.inf
            _fill_counted(cache.bins[k, slot], cache.counts[k, slot], r_ord, h_ord, hist, n_bins)
            return pseudo_hist_gain_in(hist, n_bins, sum_g, sum_h, sum_c, min_samples_leaf, min_child_weight,
                                       reg_lambda, ts, left)
        if cache.used[k] < cache.bins.shape[1]:
            slot = cache.used[k]
            cache.used[k] += 1
            cache.slot_of[k, node] = slot
    mn, mx = half_values(Xb, z_values, prefix, col_of, subset, k, lo, hi, rows, n, z)
    if not mx - mn > tol:  # constant in this node (up to float32 rounding): no split
        if slot >= 0:
            cache.flat[k, slot] = True
        return -np.inf
    out = bins
    if slot >= 0:
        cache.flat[k, slot] = False
        out = cache.bins[k, slot]
    pseudo_bins(z, mn, mx, n_bins, out)
    fill_binned_hist(out, r_ord, h_ord, hist, n_bins)
    if slot >= 0:
        for b in range(n_bins):
            cache.counts[k, slot, b] = hist[b, C_CH]
    return pseudo_hist_gain_in(hist, n_bins, sum_g, sum_h, sum_c, min_samples_leaf, min_child_weight,
                               reg_lambda, ts, left)


@njit(cache=True, nogil=True)
def pseudo_hist_gain(hist, n_bins, sum_g, sum_h, sum_c, min_samples_leaf, min_child_weight, reg_lambda):
    """GT(half) from the pseudo-feature's filled histogram (:func:`fill_pseudo_hist`): its best
    split gain, or -inf when none is admissible."""
    ts, left = scan_scratch()
    return pseudo_hist_gain_in(hist, n_bins, sum_g, sum_h, sum_c, min_samples_leaf, min_child_weight,
                               reg_lambda, ts, left)


@njit(cache=True, nogil=True)
def pseudo_hist_gain_in(hist, n_bins, sum_g, sum_h, sum_c, min_samples_leaf, min_child_weight, reg_lambda,
                        ts, left):
    """:func:`pseudo_hist_gain` with the scan's scratch (:func:`~gbfs.booster.kernels.scan.scan_scratch`)
    from its caller: a subset's binary search tests two halves per level (18 tests at Gisette's shape)."""
    # rows counted exactly: a group test only ranks halves, the split itself is searched after it
    rule = SplitRule(sum_g, sum_h, sum_c, min_samples_leaf, 0.0, min_child_weight, reg_lambda)
    return scan_feature_in(hist, np.int32(n_bins), rule, ts, left)[0]  # int32, as the kernels' n_bins


@njit(cache=True, nogil=True)
def halves(lo, hi):
    """The two halves ``[lo, mid)`` and ``[mid, hi)`` of a subset's range: ``mid`` and the
    tolerance of a spread that is float32 rounding (prefixes are at most ``hi``, as z <= 1)."""
    return lo + (hi - lo) // 2, F32_NOISE * hi


@njit(cache=True, nogil=True)
def keep_better(lo, mid, hi, gl, gr):
    """The half the binary search keeps (ties keep the left): ``(lo, hi, its GT score)``."""
    if gr > gl:
        return mid, hi, gr
    return lo, mid, gl


@njit(parallel=True, cache=True)
def group_tests(Xb, z_values, prefix, col_of, subsets, rows, r_ord, h_ord, n_bins, sum_g, sum_h, sum_c,
                min_samples_leaf, min_child_weight, reg_lambda, out_feature, out_gain, cache):
    """Binary search of every subset (Algorithm 2, lines 4-10), parallel over subsets.

    ``out_feature[k]`` is the feature subset ``k`` ends on and ``out_gain[k]`` the GT score
    of that last single-feature half (-inf when no half had an admissible split).  ``cache``: see
    :func:`_half_gain` (each subset's slots are its own: no two threads write one).
    """
    p, m = subsets.shape
    n = r_ord.shape[0]
    # every index passed on is int64, never a literal or prange's unsigned index: each distinct
    # argument type compiles the half kernels once more (six versions, about 7 s of a first fit)
    zero, one = np.int64(0), np.int64(1)
    for k_ in prange(p):
        k = np.int64(k_)
        zl = np.empty(n, dtype=np.float32)
        bins = np.empty(n, dtype=np.uint8)
        hist = np.zeros((N_BINS, 3))  # no missing values in a pseudo-feature: bin 255 stays 0
        hist_r = np.zeros((N_BINS, 3))
        ts, left = scan_scratch()  # the scans' scratch, for every test of this subset
        lo = zero
        hi = np.int64(m)
        node = one
        best = -np.inf
        if m == 1:  # one feature per subset (s = d): nothing to halve, the feature is tested alone
            best = _half_gain(Xb, z_values, prefix, col_of, subsets[k], k, zero, one, node, rows, n, zl,
                              F32_NOISE, r_ord, h_ord, hist, n_bins, sum_g, sum_h, sum_c, min_samples_leaf,
                              min_child_weight, reg_lambda, bins, cache, ts, left)
        while hi - lo > 1:
            mid, tol = halves(lo, hi)
            sl = _stored_slot(cache, k, 2 * node)
            sr = _stored_slot(cache, k, 2 * node + 1)
            if sl >= 0 and sr >= 0:  # both halves seen before: one pass for both histograms
                _fill_pair_counted(cache.bins[k, sl], cache.bins[k, sr], cache.counts[k, sl],
                                   cache.counts[k, sr], r_ord, h_ord, hist, hist_r, n_bins)
                gl = pseudo_hist_gain_in(hist, n_bins, sum_g, sum_h, sum_c, min_samples_leaf,
                                         min_child_weight, reg_lambda, ts, left)
                gr = pseudo_hist_gain_in(hist_r, n_bins, sum_g, sum_h, sum_c, min_samples_leaf,
                                         min_child_weight, reg_lambda, ts, left)
                lo, hi, best = keep_better(lo, mid, hi, gl, gr)
                node = 2 * node + (lo == mid)
                continue
            gl = _half_gain(Xb, z_values, prefix, col_of, subsets[k], k, lo, mid, 2 * node, rows, n, zl, tol,
                            r_ord, h_ord, hist, n_bins, sum_g, sum_h, sum_c, min_samples_leaf,
                            min_child_weight, reg_lambda, bins, cache, ts, left)
            gr = _half_gain(Xb, z_values, prefix, col_of, subsets[k], k, mid, hi, 2 * node + 1, rows, n, zl,
                            tol, r_ord, h_ord, hist, n_bins, sum_g, sum_h, sum_c, min_samples_leaf,
                            min_child_weight, reg_lambda, bins, cache, ts, left)
            lo, hi, best = keep_better(lo, mid, hi, gl, gr)
            node = 2 * node + (lo == mid)
        out_feature[k] = subsets[k, lo]
        out_gain[k] = best
