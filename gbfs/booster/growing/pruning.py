"""Features that cannot split a node's descendants: skipped, exactly, in the children's searches.

A node's rows are a subset of its parent's, so for any threshold (and missing-value direction) each
child side holds at most the rows and the hessian it held in the parent.  When ``min_samples_leaf``
counts rows exactly (``leaf_count="rows"``), the admissibility of a split -- both sides with at least
``min_samples_leaf`` rows and ``min_child_weight`` hessian, and ``H + lambda > 0`` -- can therefore
only be lost going down the tree, never gained: a feature without an admissible split in a node
(its best gain ``-inf``) has none in any descendant.  The children skip it, as LightGBM skips the
features its parent found unsplittable; the trees are exactly those of a full search, since a
skipped feature's gain would have been ``-inf`` anyway.

The same argument over all training rows gives a fit-level filter (LightGBM's
``feature_pre_filter``): a feature whose every threshold leaves fewer than ``min_samples_leaf`` rows
on a side -- a rare word of a bag-of-words matrix, a near-constant column -- never splits, so no
node scans it.  On text data most of the vocabulary is such a column.

Under ``leaf_count="hessian"`` a child's rows are estimated from its hessians relative to the
node's, which is not monotone down the tree: nothing is skipped then.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..kernels.histogram import HistogramLayout
from ..kernels.sparse_rows import SERIAL_BINS, flat_bins
from ..kernels.splitting import SplitRule, Splits, best_splits_per_feature, best_splits_per_feature_serial


def unsplittable(fill_counts, n: int, layout: HistogramLayout, features: np.ndarray,
                 min_samples_leaf: int) -> np.ndarray:
    """Boolean mask over the features: the ``features`` without a threshold (and missing direction)
    that leaves ``min_samples_leaf`` rows on each side, over all ``n`` rows.

    ``fill_counts(hist, features)`` fills the flat ``hist`` of those features over all rows with
    zero residuals and unit second channel (the grower's kernels, whatever the matrix's storage).
    """
    d = layout.n_bins.shape[0]
    dead = np.zeros(d, dtype=bool)
    if n == 0 or features.shape[0] == 0:
        return dead
    hist = layout.new()
    fill_counts(hist, features)
    # counts only: zero residuals, unit hessians, lambda 1 (so every non-empty side is admissible
    # unless it is too small); an admissible split gains 0, an inadmissible one -inf
    rule = SplitRule(0.0, float(n), float(n), float(max(min_samples_leaf, 1)), 0.0, 0.0, 1.0)
    splits = Splits.empty(d, -np.inf)
    # few bins: one thread (no thread-pool wake-up; and a small fit compiles no parallel scan)
    scan = best_splits_per_feature_serial if flat_bins(features, layout.offsets) <= SERIAL_BINS \
        else best_splits_per_feature
    scan(hist, features, layout.offsets, layout.n_bins, rule, splits)
    dead[features] = splits.gain[features] == -np.inf
    return dead


class Pruning:
    """The skipped features of one grower: the fit-level filter and each node's inherited set.

    A node's ``dead`` is a boolean mask over features (None: nothing skipped); children share their
    parent's mask until their own search adds to it.
    """

    def __init__(self, fill_counts, n: int, layout: HistogramLayout, numeric: np.ndarray,
                 min_samples_leaf: int):
        self._args = (fill_counts, n, layout, numeric, min_samples_leaf)
        self._root = None

    def root(self, exact: bool) -> np.ndarray | None:
        """The mask a tree's root starts from: the fit-level filter when rows are counted exactly
        (``exact``), else None (nothing is skipped)."""
        if not exact:
            return None
        if self._root is None:
            self._root = unsplittable(*self._args)
        return self._root

    @staticmethod
    def live(features: np.ndarray, dead: np.ndarray | None) -> np.ndarray:
        """``features`` without the skipped ones."""
        return features if dead is None else _live(features, dead)

    @staticmethod
    def after_search(dead: np.ndarray | None, scanned: np.ndarray, gain: np.ndarray) -> np.ndarray | None:
        """The mask a node hands its children: ``dead`` plus the ``scanned`` features it found
        without an admissible split (a new mask only when it adds one: children share it)."""
        return None if dead is None else _after_search(dead, scanned, gain)


# one compiled pass each instead of three numpy calls: they run at every searched node
@njit(cache=True, nogil=True)
def _live(features, dead):
    out = np.empty_like(features)
    k = 0
    for f in features:
        if not dead[f]:
            out[k] = f
            k += 1
    return out[:k]


@njit(cache=True, nogil=True)
def _after_search(dead, scanned, gain):
    out = dead
    copied = False
    for f in scanned:
        if gain[f] == -np.inf and not out[f]:
            if not copied:
                out = dead.copy()
                copied = True
            out[f] = True
    return out
