"""Split finding with a per-feature penalty.

The search has two stages so that the penalty is an *input*, never a code path:

1. :func:`best_splits_per_feature` scans every feature's histogram and returns, per
   feature, the best unpenalised gain

       gain = G_L^2 / (H_L + lambda) + G_R^2 / (H_R + lambda) - G^2 / (H + lambda),

   which for ``H`` = sum of row weights and ``lambda = 0`` is exactly the SSE
   reduction SSE(node) - SSE_L - SSE_R of the residuals (Eq. 1 of the GT-GBM paper),
   and for ``H`` = sum of hessians is the Newton gain of LightGBM/XGBoost.
2. :func:`penalized_best` picks the feature maximising

       gain_j / norm - penalty_j,

   with ``norm = 1`` for GBFS (Eq. 1; Eq. 14 of the GBFS paper) and
   ``norm = SSE_root`` for A-GBM (the normalised criterion of Section 2 of the
   GT-GBM paper), ``penalty_j = mu * c_j * 1{bag(j) unused}``.

Because the penalty is constant per feature, the per-feature best gains of a
pending leaf are all that is needed to re-rank it when the used set grows, which is
how the grower refreshes every pending leaf after each split (the refresh that
LightGBM's CEGB missed twice: LightGBM issues 3245/3679).

Every kernel takes a node's :class:`SplitRule` (its totals and the growth settings) and writes the
node's :class:`Splits` (the best split of each feature, one record per feature).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from ._types import C_CH, G_CH, H_CH, MISSING_BIN
from .histogram import accumulate, accumulate4, accumulate4_counted
from .scan import scan_feature_in, scan_scratch


class SplitRule(NamedTuple):
    """What decides a node's admissible splits and their gains: the node's totals (``sum_c`` its row
    count) and the growth settings.  ``count_factor`` 0 counts a child's rows exactly for
    ``min_samples_leaf``; otherwise each bin counts ``round(H_bin * count_factor)`` rows, as
    LightGBM's ``min_data_in_leaf`` does."""

    sum_g: float
    sum_h: float
    sum_c: float
    min_samples_leaf: float
    count_factor: float
    min_child_weight: float
    reg_lambda: float


class Splits(NamedTuple):
    """A node's best split of every feature, one record per feature by field: its ``gain`` (``-inf``:
    no admissible split), threshold ``bin`` (-1 for a category set), ``missing_left``, and
    ``left_sums``, the left child's (G, H, count) in the channels ``G_CH``, ``H_CH``, ``C_CH``."""

    gain: np.ndarray
    bin: np.ndarray
    missing_left: np.ndarray
    left_sums: np.ndarray

    @classmethod
    def empty(cls, n_features: int, gain: float | None = None) -> Splits:
        """Records of ``n_features`` features (gains ``gain``, or left uninitialised)."""
        return cls(np.empty(n_features) if gain is None else np.full(n_features, gain),
                   np.empty(n_features, dtype=np.int32), np.empty(n_features, dtype=np.bool_),
                   np.empty((n_features, 3), dtype=np.float64))


@njit(cache=True, nogil=True)
def _store_split(f, res, splits):
    splits.gain[f] = res[0]
    splits.bin[f] = res[1]
    splits.missing_left[f] = res[2]
    splits.left_sums[f, G_CH] = res[3]
    splits.left_sums[f, H_CH] = res[4]
    splits.left_sums[f, C_CH] = res[5]


#: ranges of features a parallel scan is cut into, each allocating its scan scratch once: a constant,
#: as numba's thread count inside a kernel would keep it from its cache
SCAN_CHUNKS = 64


@njit(cache=True, nogil=True)
def _scan_range(hist, features, lo, hi, offsets, n_bins, rule, splits):
    """Split records of ``features[lo:hi]`` from the flat ``hist``, with one scan scratch for all."""
    ts, left = scan_scratch()
    for k in range(lo, hi):
        f = features[k]
        _store_split(f, scan_feature_in(hist[offsets[f]:offsets[f + 1]], n_bins[f], rule, ts, left), splits)


@njit(parallel=True, cache=True)
def best_splits_per_feature(hist, features, offsets, n_bins, rule, splits):
    """Fill the split records of ``features`` from the flat ``hist``; parallel over
    :data:`SCAN_CHUNKS` ranges of features."""
    n_feat = features.shape[0]
    n_chunks = min(n_feat, SCAN_CHUNKS)
    for c_ in prange(n_chunks):
        c = np.int64(c_)  # signed, as the serial kernel's bounds: one compilation of the range
        _scan_range(hist, features, c * n_feat // n_chunks, (c + 1) * n_feat // n_chunks, offsets, n_bins,
                    rule, splits)


@njit(cache=True, nogil=True)
def best_splits_per_feature_serial(hist, features, offsets, n_bins, rule, splits):
    """:func:`best_splits_per_feature` on one thread (few bins: no thread-pool wake-up)."""
    _scan_range(hist, features, np.int64(0), features.shape[0], offsets, n_bins, rule, splits)


def penalized_best(gain: np.ndarray, penalty: np.ndarray, norm: float,
                   min_gain: float = 0.0) -> tuple[int, float]:
    """Feature maximising ``gain / norm - penalty`` and its score (ties: lowest index), among the
    features whose gain is above ``min_gain`` when it is positive (``min_split_gain`` and the
    roundoff floor: too small a gain is no split).

    Returns ``(-1, -inf)`` when no feature has an admissible split.
    """
    f, score = _penalized_best(gain, penalty, float(norm), float(min_gain))
    return int(f), float(score)


@njit(cache=True, nogil=True)
def _penalized_best(gain, penalty, norm, min_gain):
    # one pass instead of four numpy calls: it runs for every scored node
    best = -np.inf
    f = -1
    for j in range(gain.shape[0]):
        g = gain[j] if min_gain <= 0.0 or gain[j] > min_gain else -np.inf
        s = g / norm - penalty[j]
        if s > best:
            best = s
            f = j
    if not np.isfinite(best):
        return -1, -np.inf
    return f, best


# -- fused kernels: build (or subtract) a histogram and scan it while it is still in cache ----------
#
# With thousands of features a node histogram is tens of MB (Gisette: 5000 x 256 x 24 B = 30 MB), so
# separate build / subtract / scan passes are bound by memory traffic, not by the row work.  These
# kernels handle one feature at a time: its (at most 6 KiB) histogram is filled and scanned in L1,
# and written to the node's histogram buffer only when the grower keeps it for a later subtraction.

@njit(cache=True, nogil=True, inline="always")
def _build_scan_one(X_binned, j, rows, r_ord, h_ord, f, hf, nb, rule, splits, ts, left):
    accumulate(X_binned[:, j], rows, r_ord, h_ord, hf, nb)
    _store_split(f, scan_feature_in(hf, nb, rule, ts, left), splits)


@njit(cache=True, nogil=True, inline="always")
def _build_scan_four(X_binned, cols, rows, r_ord, h_ord, features, k, keep, hist, offsets, n_bins, rule,
                     splits, scratch, counts, ts, left):
    f0, f1, f2, f3 = features[k], features[k + 1], features[k + 2], features[k + 3]
    h0 = hist[offsets[f0]:offsets[f0 + 1]] if keep else scratch[0]
    h1 = hist[offsets[f1]:offsets[f1 + 1]] if keep else scratch[1]
    h2 = hist[offsets[f2]:offsets[f2 + 1]] if keep else scratch[2]
    h3 = hist[offsets[f3]:offsets[f3 + 1]] if keep else scratch[3]
    c0, c1 = X_binned[:, cols[f0]], X_binned[:, cols[f1]]
    c2, c3 = X_binned[:, cols[f2]], X_binned[:, cols[f3]]
    if counts.shape[0] > 0:
        accumulate4_counted(c0, c1, c2, c3, r_ord, h_ord, h0, h1, h2, h3, n_bins[f0], n_bins[f1], n_bins[f2],
                            n_bins[f3], counts[offsets[f0]:offsets[f0 + 1]],
                            counts[offsets[f1]:offsets[f1 + 1]], counts[offsets[f2]:offsets[f2 + 1]],
                            counts[offsets[f3]:offsets[f3 + 1]])
    else:
        accumulate4(c0, c1, c2, c3, rows, r_ord, h_ord, h0, h1, h2, h3, n_bins[f0], n_bins[f1], n_bins[f2],
                    n_bins[f3])
    _store_split(f0, scan_feature_in(h0, n_bins[f0], rule, ts, left), splits)
    _store_split(f1, scan_feature_in(h1, n_bins[f1], rule, ts, left), splits)
    _store_split(f2, scan_feature_in(h2, n_bins[f2], rule, ts, left), splits)
    _store_split(f3, scan_feature_in(h3, n_bins[f3], rule, ts, left), splits)


@njit(cache=True, nogil=True)
def _build_scan_range(X_binned, cols, rows, r_ord, h_ord, features, lo, hi, keep, hist, offsets, n_bins, rule,
                      splits, counts):
    """Features ``lo..hi-1`` of :func:`build_and_scan`.  A compiled function of its own, called by
    the parallel kernel's chunks and by the serial one alike: inlined, its code was compiled once
    into each (about 5 s of a first fit's compilation).  Its scratch histograms are its own, so a
    parallel chunk is this one call."""
    scratch = np.empty((4, MISSING_BIN + 1, 3), dtype=np.float64)
    ts, left = scan_scratch()
    k = lo
    while k + 4 <= hi:
        _build_scan_four(X_binned, cols, rows, r_ord, h_ord, features, k, keep, hist, offsets, n_bins, rule,
                         splits, scratch, counts, ts, left)
        k += 4
    for j in range(k, hi):
        f = features[j]
        hf = hist[offsets[f]:offsets[f + 1]] if keep else scratch[0]
        _build_scan_one(X_binned, cols[f], rows, r_ord, h_ord, f, hf, n_bins[f], rule, splits, ts, left)


@njit(parallel=True, cache=True)
def build_and_scan(X_binned, cols, rows, r_ord, h_ord, features, n_chunks, keep, hist, offsets, n_bins, rule,
                   splits, counts):
    """Histogram of ``features`` over ``rows`` and their best splits, in one pass per feature
    (feature ``f`` is column ``cols[f]`` of ``X_binned``, as in
    :func:`~gbfs.booster.kernels.histogram.build_histogram`); features go four at a time through
    :func:`~gbfs.booster.kernels.histogram.accumulate4`.

    If ``keep`` the histogram is written to the feature's bins of the flat ``hist`` (for a later
    subtraction); otherwise a per-chunk scratch histogram is used and ``hist`` is not touched.
    ``counts`` (empty: none) are every feature's bin counts over all rows, in the flat layout, for
    a node of every row in order (``rows`` empty): its groups of four then add no counts.
    """
    n_feat = features.shape[0]
    for c in prange(n_chunks):
        _build_scan_range(X_binned, cols, rows, r_ord, h_ord, features, c * n_feat // n_chunks,
                          (c + 1) * n_feat // n_chunks, keep, hist, offsets, n_bins, rule, splits, counts)


@njit(cache=True, nogil=True)
def build_and_scan_serial(X_binned, cols, rows, r_ord, h_ord, features, keep, hist, offsets, n_bins, rule,
                          splits, counts):
    """:func:`build_and_scan` on one thread, for small work: waking the thread pool costs more
    than a few thousand row-features (tens of microseconds, more with passive OpenMP waiting)."""
    # np.int64(0), not 0: a literal would compile the range function a second time
    _build_scan_range(X_binned, cols, rows, r_ord, h_ord, features, np.int64(0), features.shape[0], keep,
                      hist, offsets, n_bins, rule, splits, counts)


@njit(cache=True, nogil=True, inline="always")
def _subtract_scan_one(parent, small, f, offsets, n_bins, rule, splits, ts, left):
    p, s = parent[offsets[f]:offsets[f + 1]], small[offsets[f]:offsets[f + 1]]
    for b in range(p.shape[0]):  # from 0: the index is known non-negative (no wraparound code)
        p[b, G_CH] -= s[b, G_CH]
        p[b, H_CH] -= s[b, H_CH]
        p[b, C_CH] -= s[b, C_CH]
    _store_split(f, scan_feature_in(p, n_bins[f], rule, ts, left), splits)


@njit(cache=True, nogil=True, inline="always")
def _pair_rest(f, hf, parent, offsets, nb, scan_small, rule_s, splits_s, rule_l, splits_l, ts, left):
    """The smaller child's scan, ``parent -= small`` and the larger child's scan, for feature ``f``
    whose smaller-child bins are ``hf``."""
    if scan_small:
        _store_split(f, scan_feature_in(hf, nb, rule_s, ts, left), splits_s)
    p = parent[offsets[f]:offsets[f + 1]]
    for b in range(nb + 1):
        p[b, G_CH] -= hf[b, G_CH]
        p[b, H_CH] -= hf[b, H_CH]
        p[b, C_CH] -= hf[b, C_CH]
    _store_split(f, scan_feature_in(p, nb, rule_l, ts, left), splits_l)


@njit(cache=True, nogil=True)
def _pair_range(X_binned, cols, rows, r_ord, h_ord, features, lo, hi, parent, offsets, n_bins, scan_small,
                rule_s, splits_s, rule_l, splits_l):
    """Features ``lo..hi-1`` of :func:`build_subtract_and_scan`, compiled once for it and its serial
    version (as :func:`_build_scan_range`)."""
    scratch = np.empty((4, MISSING_BIN + 1, 3), dtype=np.float64)
    ts, left = scan_scratch()
    k = lo
    while k + 4 <= hi:
        f0, f1, f2, f3 = features[k], features[k + 1], features[k + 2], features[k + 3]
        accumulate4(X_binned[:, cols[f0]], X_binned[:, cols[f1]], X_binned[:, cols[f2]],
                    X_binned[:, cols[f3]], rows, r_ord, h_ord, scratch[0], scratch[1], scratch[2], scratch[3],
                    n_bins[f0], n_bins[f1], n_bins[f2], n_bins[f3])
        for q in range(4):
            f = features[k + q]
            _pair_rest(f, scratch[q], parent, offsets, n_bins[f], scan_small, rule_s, splits_s, rule_l,
                       splits_l, ts, left)
        k += 4
    for j in range(k, hi):
        f = features[j]
        accumulate(X_binned[:, cols[f]], rows, r_ord, h_ord, scratch[0], n_bins[f])
        _pair_rest(f, scratch[0], parent, offsets, n_bins[f], scan_small, rule_s, splits_s, rule_l, splits_l,
                   ts, left)


@njit(parallel=True, cache=True)
def build_subtract_and_scan(X_binned, cols, rows, r_ord, h_ord, features, n_chunks, parent, offsets, n_bins,
                            scan_small, rule_s, splits_s, rule_l, splits_l):
    """Both children of a split in one pass per feature: the smaller child's bins from its ``rows``
    (scanned into ``splits_s`` if ``scan_small``), then ``parent -= small`` -- the parent's buffer
    becomes the larger child's histogram -- scanned into ``splits_l``.

    The smaller child's bins live in a per-chunk scratch (in L1) and are never stored, so a
    subtraction needs one histogram buffer, not two.  The sums are those of :func:`build_and_scan`
    followed by :func:`subtract_and_scan`, bit for bit.
    """
    n_feat = features.shape[0]
    for c in prange(n_chunks):
        _pair_range(X_binned, cols, rows, r_ord, h_ord, features, c * n_feat // n_chunks,
                    (c + 1) * n_feat // n_chunks, parent, offsets, n_bins, scan_small, rule_s, splits_s,
                    rule_l, splits_l)


@njit(cache=True, nogil=True)
def build_subtract_and_scan_serial(X_binned, cols, rows, r_ord, h_ord, features, parent, offsets, n_bins,
                                   scan_small, rule_s, splits_s, rule_l, splits_l):
    """:func:`build_subtract_and_scan` on one thread, for small work."""
    _pair_range(X_binned, cols, rows, r_ord, h_ord, features, np.int64(0), features.shape[0], parent, offsets,
                n_bins, scan_small, rule_s, splits_s, rule_l, splits_l)


@njit(cache=True, nogil=True)
def _subtract_scan_range(parent, small, features, lo, hi, offsets, n_bins, rule, splits):
    """Features ``lo..hi-1`` of :func:`subtract_and_scan`, with one scan scratch for all of them (a
    compiled function of its own, shared with the serial kernel as :func:`_build_scan_range` is)."""
    ts, left = scan_scratch()
    for k in range(lo, hi):
        _subtract_scan_one(parent, small, features[k], offsets, n_bins, rule, splits, ts, left)


@njit(parallel=True, cache=True)
def subtract_and_scan(parent, small, features, offsets, n_bins, rule, splits):
    """Feature ``f``'s bins: ``parent -= small`` (the parent's buffer becomes the larger child's),
    then scan them; parallel over :data:`SCAN_CHUNKS` ranges of features."""
    n_feat = features.shape[0]
    n_chunks = min(n_feat, SCAN_CHUNKS)
    for c_ in prange(n_chunks):
        c = np.int64(c_)  # signed, as the serial kernel's bounds: one compilation of the range
        _subtract_scan_range(parent, small, features, c * n_feat // n_chunks, (c + 1) * n_feat // n_chunks,
                             offsets, n_bins, rule, splits)


@njit(cache=True, nogil=True)
def subtract_and_scan_serial(parent, small, features, offsets, n_bins, rule, splits):
    """:func:`subtract_and_scan` on one thread (a few features: no thread-pool wake-up)."""
    _subtract_scan_range(parent, small, features, np.int64(0), features.shape[0], offsets, n_bins, rule,
                         splits)
