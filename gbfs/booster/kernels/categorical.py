"""Native splits on categorical features: a set of categories goes left, the rest right.

A categorical feature is binned one bin per category (:class:`gbfs.booster.binning.BinMapper`: its most
frequent ``max_bins`` categories; rarer and unseen categories share the missing bin with NaN), so
a node's histogram holds each category's sums (G_c, H_c, n_c).  The split search is LightGBM's
(``FeatureHistogram::FindBestThresholdCategorical``), with the same parameters and defaults:

* at most ``max_cat_to_onehot`` categories: **one-vs-rest** -- each category alone against all
  others, gain ``G_c^2/(H_c+lambda) + (G-G_c)^2/(H-H_c+lambda) - G^2/(H+lambda)``;
* otherwise **many-vs-many** (Fisher's ordering): the categories with at least ``cat_smooth``
  rows are sorted by ``G_c / (H_c + cat_smooth)``; the left set is a prefix of that order taken
  from either end, of at most ``min(max_cat_threshold, (m + 1) / 2)`` categories, scored every
  ``min_data_per_group`` rows with the regularisation ``lambda + cat_l2`` on both children
  (the parent term keeps ``lambda``, so a many-vs-many split pays for its freedom).

The missing bin (NaN, rare and unseen categories) always goes right, as in LightGBM: a category
never seen in training is predicted like a missing value.  A split's left set is a 256-bit set
over the feature's bins (:data:`CAT_WORDS` words of ``uint32``).  The split's gain enters the
penalised criterion like any other (the first-use penalty is per feature, whatever its number of
categories).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._types import C_CH, G_CH, H_CH
from .histogram import accumulate

#: uint32 words of one split's left set (one bit per bin, 256 bins)
CAT_WORDS = 8

#: LightGBM's defaults: cat_smooth, cat_l2, max_cat_threshold, min_data_per_group, max_cat_to_onehot
CAT_DEFAULTS = {"cat_smooth": 10.0, "cat_l2": 10.0, "max_cat_threshold": 32, "min_data_per_group": 100,
                "max_cat_to_onehot": 4}


def cat_settings(cat_smooth: float, cat_l2: float, max_cat_threshold: int, min_data_per_group: int,
                 max_cat_to_onehot: int) -> np.ndarray:
    """The search's settings as the float64 vector the kernels take (in :data:`CAT_DEFAULTS`'
    order)."""
    return np.array([cat_smooth, cat_l2, max_cat_threshold, min_data_per_group, max_cat_to_onehot],
                    dtype=np.float64)


@njit(cache=True, nogil=True, inline="always")
def _children(lg, lh, sum_g, sum_h, l2):
    rg = sum_g - lg
    rh = sum_h - lh
    if lh + l2 <= 0.0 or rh + l2 <= 0.0:
        return -np.inf  # a child of zero hessians has no Newton step (as splitting.split_gain)
    return lg * lg / (lh + l2) + rg * rg / (rh + l2)


@njit(cache=True, nogil=True)
def scan_categorical(hf, nb, rule, cat, bits):
    """Best category set of one feature under ``rule`` (a :class:`~gbfs.booster.kernels.splitting.SplitRule`;
    rows are counted exactly): ``(gain, G_L, H_L, n_L)``; its left set is written to ``bits``
    (cleared when no split is admissible, gain ``-inf``).

    ``hf`` holds the feature's ``nb`` category bins then its missing bin; ``cat`` is
    :func:`cat_settings`.
    """
    sum_g, sum_h, sum_c = rule.sum_g, rule.sum_h, rule.sum_c
    min_samples_leaf, min_child_weight = rule.min_samples_leaf, rule.min_child_weight
    reg_lambda = rule.reg_lambda
    cat_smooth, cat_l2 = cat[0], cat[1]
    max_cat_threshold, min_data_per_group, max_onehot = int(cat[2]), cat[3], int(cat[4])
    for w in range(bits.shape[0]):
        bits[w] = 0
    parent = sum_g * sum_g / (sum_h + reg_lambda)
    best = -np.inf
    blg = 0.0
    blh = 0.0
    blc = 0.0
    if nb <= max_onehot:
        best_t = -1
        for t in range(nb):
            c = hf[t, C_CH]
            h = hf[t, H_CH]
            if c == 0.0 or c < min_samples_leaf or h < min_child_weight:
                continue
            if sum_c - c < min_samples_leaf or sum_h - h < min_child_weight:
                continue
            gain = _children(hf[t, G_CH], h, sum_g, sum_h, reg_lambda) - parent
            if gain > best:
                best, best_t, blg, blh, blc = gain, t, hf[t, G_CH], h, c
        if best_t >= 0:
            bits[best_t >> 5] |= np.uint32(1) << np.uint32(best_t & 31)
        return best, blg, blh, blc
    # LightGBM counts rows by hessian share (its histograms hold no counts): the candidates and
    # the groups use that estimate, so the sets scored are LightGBM's; the leaf-size limits below
    # use the exact counts, which the partition must match
    per_h = sum_c / sum_h if sum_h > 0.0 else 0.0
    idx = np.empty(nb, dtype=np.int64)
    ctr = np.empty(nb, dtype=np.float64)
    m = 0
    for t in range(nb):
        if np.floor(hf[t, H_CH] * per_h + 0.5) >= cat_smooth:
            idx[m] = t
            # channel 0 holds -gradient: ordered by gradient, ties and directions go as LightGBM's
            ctr[m] = -hf[t, G_CH] / (hf[t, H_CH] + cat_smooth)
            m += 1
    order = idx[:m][np.argsort(ctr[:m], kind="mergesort")]  # stable: ties keep the bin order
    max_num_cat = min(max_cat_threshold, (m + 1) // 2)
    l2 = reg_lambda + cat_l2
    best_dir = 1
    best_i = -1
    for d in range(2):
        lg = 0.0
        lh = 0.0
        lc = 0.0
        le = 0.0  # the estimated count of the left rows
        group = 0.0
        for i in range(min(m, max_num_cat)):
            t = order[i] if d == 0 else order[m - 1 - i]
            lg += hf[t, G_CH]
            lh += hf[t, H_CH]
            lc += hf[t, C_CH]
            e = np.floor(hf[t, H_CH] * per_h + 0.5)
            le += e
            group += e
            if lc < min_samples_leaf or lh < min_child_weight:
                continue
            if sum_c - lc < min_samples_leaf or sum_c - le < min_data_per_group \
                    or sum_h - lh < min_child_weight:
                break
            if group < min_data_per_group:
                continue
            group = 0.0
            gain = _children(lg, lh, sum_g, sum_h, l2) - parent
            if gain > best:
                best, best_dir, best_i, blg, blh, blc = gain, d, i, lg, lh, lc
    for i in range(best_i + 1):
        t = order[i] if best_dir == 0 else order[m - 1 - i]
        bits[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
    return best, blg, blh, blc


@njit(cache=True, nogil=True, inline="always")
def _store(f, slot, hf, nb, rule, cat, splits, bits):
    res = scan_categorical(hf, nb, rule, cat, bits[slot])
    splits.gain[f] = res[0]
    splits.bin[f] = -1
    splits.missing_left[f] = False
    splits.left_sums[f, G_CH] = res[1]
    splits.left_sums[f, H_CH] = res[2]
    splits.left_sums[f, C_CH] = res[3]


@njit(cache=True, nogil=True, inline="always")
def _build_scan_one(X_binned, rows, r_ord, h_ord, f, slots, n_bins, hist, rule, cat, splits, bits):
    hf = hist[slots[f]]
    accumulate(X_binned[:, f], rows, r_ord, h_ord, hf, n_bins[f])
    _store(f, slots[f], hf, n_bins[f], rule, cat, splits, bits)


@njit(parallel=True, cache=True)
def build_and_scan_categorical(X_binned, rows, r_ord, h_ord, features, slots, n_bins, hist, rule, cat, splits,
                               bits):
    """Histogram (into ``hist[slots[f]]``) and best category set of each categorical feature in
    ``features`` over ``rows`` (empty: all rows); parallel over features.  ``slots[f]`` is feature
    ``f``'s row of ``hist`` and ``bits``; the record's ``bin`` is set to -1, ``missing_left`` to False
    (the missing bin goes right)."""
    for k in prange(features.shape[0]):
        _build_scan_one(X_binned, rows, r_ord, h_ord, features[k], slots, n_bins, hist, rule, cat, splits,
                        bits)


@njit(cache=True, nogil=True)
def build_and_scan_categorical_serial(X_binned, rows, r_ord, h_ord, features, slots, n_bins, hist, rule, cat,
                                      splits, bits):
    """:func:`build_and_scan_categorical` on one thread (small nodes: no thread-pool wake-up)."""
    for k in range(features.shape[0]):
        _build_scan_one(X_binned, rows, r_ord, h_ord, features[k], slots, n_bins, hist, rule, cat, splits,
                        bits)


@njit(cache=True, nogil=True)
def subtract_and_scan_categorical(parent, small, features, slots, n_bins, rule, cat, splits, bits):
    """``parent -= small`` on each feature's bins (the parent's histogram becomes its larger
    child's: LightGBM's subtraction trick), then its best category set.  Serial: a few features
    of at most 256 bins each."""
    for k in range(features.shape[0]):
        f = features[k]
        s = slots[f]
        for b in range(n_bins[f] + 1):
            for c in range(3):
                parent[s, b, c] -= small[s, b, c]
        _store(f, s, parent[s], n_bins[f], rule, cat, splits, bits)


@njit(cache=True, nogil=True, inline="always")
def in_set(bits, b) -> bool:
    """Is bin ``b`` in the left set ``bits``?"""
    return (bits[b >> 5] >> np.uint32(b & 31)) & np.uint32(1) != 0


def bins_of(bits: np.ndarray) -> np.ndarray:
    """The sorted bins of a left set."""
    flags = np.unpackbits(np.asarray(bits, dtype="<u4").view(np.uint8), bitorder="little")
    return np.flatnonzero(flags).astype(np.int32)


def bits_of(bins) -> np.ndarray:
    """The left set holding ``bins``."""
    mask = np.zeros(CAT_WORDS * 32, dtype=np.uint8)
    mask[np.asarray(bins, dtype=np.int64)] = 1
    return np.packbits(mask, bitorder="little").view("<u4").astype(np.uint32)
