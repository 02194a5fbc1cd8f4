"""The grower's search over categorical features (:mod:`gbfs.booster.kernels.categorical`).

Categorical features never enter the numeric features' flat histograms or the row-wise sparse
index: each searched node keeps its own small histogram of them, ``(n_categorical, 256, 3)``,
built from its rows, or, for the larger child of a split whose smaller child has one, as
``parent - smaller`` (the subtraction trick).  A restricted search (GT-GBM) that scans only some
categorical features builds them from rows and keeps no histogram.
"""

from __future__ import annotations

import numpy as np

from ..kernels._types import MISSING_BIN
from ..kernels.categorical import (
    CAT_WORDS,
    build_and_scan_categorical,
    build_and_scan_categorical_serial,
    subtract_and_scan_categorical,
)

#: below this many row-features a node's categorical search runs on one thread (as the grower's)
SERIAL_WORK = 60_000


class CategoricalSearch:
    """The categorical features of a grower's matrix and their per-node search.

    Attributes
    ----------
    is_cat : ndarray of bool, shape (n_features,)
    categorical, numeric : ndarray of int64
        The categorical features and the others.
    """

    def __init__(self, is_cat: np.ndarray, features: np.ndarray, params):
        self.is_cat = is_cat
        self.all_features = features
        self.categorical = np.flatnonzero(is_cat).astype(np.int64)
        self.numeric = np.flatnonzero(~is_cat).astype(np.int64)
        self.slot = np.full(is_cat.shape[0], -1, dtype=np.int64)
        self.slot[self.categorical] = np.arange(self.categorical.shape[0])
        self.settings = np.asarray(params.cat_settings, dtype=np.float64)
        self.params = params

    @classmethod
    def build(cls, bin_mapper, features: np.ndarray, params) -> CategoricalSearch | None:
        """The search of ``bin_mapper``'s categorical features; None when it has none."""
        is_cat = getattr(bin_mapper, "categorical_", None)
        if is_cat is None or not is_cat.any():
            return None
        return cls(np.asarray(is_cat, dtype=bool), features, params)

    def numeric_of(self, features: np.ndarray) -> np.ndarray:
        """The numeric ones of ``features`` (all of them: the array of numeric features)."""
        return self.numeric if features is self.all_features else features[~self.is_cat[features]]

    def alloc(self, node) -> None:
        node.cat_bits = np.zeros((self.categorical.shape[0], CAT_WORDS), dtype=np.uint32)

    def bits(self, node, f: int) -> np.ndarray:
        """The left set of ``node``'s best split on categorical feature ``f``."""
        return node.cat_bits[self.slot[f]]

    def pair(self, parent, small, large) -> None:
        """After ``parent``'s split: ``large``'s histogram will be ``parent - small`` once
        ``small`` has its own."""
        if parent.cat_hist is not None and not isinstance(parent.cat_hist, tuple):
            large.cat_hist = (parent, small)

    @staticmethod
    def subtracts(node) -> bool:
        """Will ``node``'s search subtract (no rows needed)?"""
        return isinstance(node.cat_hist, tuple) and node.cat_hist[0].cat_hist is not None \
            and isinstance(node.cat_hist[1].cat_hist, np.ndarray)

    def scan(self, grower, node, rows, r_ord, h_ord, features) -> None:
        """Best category sets of the categorical ones of ``features`` into the node's split arrays."""
        cats = self.categorical if features is self.all_features else features[self.is_cat[features]]
        if cats.shape[0] == 0:
            return
        full = cats.shape[0] == self.categorical.shape[0]
        args = (grower.split_rule(node, count_rows=True), self.settings, node.splits, node.cat_bits)
        if full and self.subtracts(node):
            parent, sibling = node.cat_hist
            node.cat_hist, parent.cat_hist = parent.cat_hist, None   # the parent's buffer becomes ours
            subtract_and_scan_categorical(node.cat_hist, sibling.cat_hist, cats, self.slot, grower.n_bins,
                                          *args)
            return
        node.cat_hist = np.empty((self.categorical.shape[0], MISSING_BIN + 1, 3))
        kernel = (build_and_scan_categorical_serial if node.count * cats.shape[0] <= SERIAL_WORK
                  else build_and_scan_categorical)
        kernel(grower.matrix.block, rows, r_ord, h_ord, cats, self.slot, grower.n_bins, node.cat_hist, *args)
        if not full:
            node.cat_hist = None   # it lacks some categorical features: nothing to subtract from
