"""The tree grower with the exact, sort-based split search (``split_search="exact"``).

:class:`ExactGrower` is :class:`~gbfs.booster.growing.grower.TreeGrower` -- the same best-first
growth, penalties, refresh of pending leaves and feature searches (GT-GBM's group tests included) --
with each node's split found on the raw values by :mod:`gbfs.booster.kernels.exact` instead of
histograms of bins, and rows sent left by ``x <= threshold``.  Which of the kernels' two ways a fit
uses follows the GT-GBM paper's cost model (Table 1): a search over every feature (GBFS, A-GBM)
keeps every feature's presorted row list and splits it with each node; a restricted search (GT-GBM)
sorts each node's values of the few features it scans.

The trees it grows split on raw thresholds only (their ``bin_threshold`` is -1): they are scored on
raw values (:meth:`ExactGrower.add_scores`, and the validation sets of an exact fit stay raw).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..kernels.exact import (
    presort,
    presorted_best_splits,
    presorted_best_splits_serial,
    sorted_best_splits,
    sorted_best_splits_serial,
    split_lists,
    split_rows,
    tree_lists,
)
from ..tree import PackedEnsemble
from .grower import GrowthParams, TreeGrower
from .pruning import Pruning

#: below this many row-features a node's exact search runs on one thread
EXACT_SERIAL_WORK = 15_000
#: below this many row-features a split's sorted lists are divided on one thread
LISTS_SERIAL_WORK = 60_000


class _NoPruning(Pruning):
    """Nothing is skipped: the fit-level filter counts rows per bin, not per raw value."""

    def __init__(self):
        super().__init__(None, 0, None, np.empty(0, dtype=np.int64), 0)

    def root(self, exact: bool) -> None:
        return None


class ExactGrower(TreeGrower):
    """Grows one tree per call with the exact split search.

    Parameters
    ----------
    X_binned : ndarray of uint8, Fortran-ordered
        The binned matrix (GT-GBM's group tests read it through their precompute; splits do not).
    X : ndarray of float, shape (n_rows, n_features)
        The raw training values the splits are searched and applied on.
    bin_mapper, params, search
        As :class:`~gbfs.booster.growing.grower.TreeGrower` (no row-wise sparse index is built).
    """

    #: a row sample is grown on the full matrix (its sorted lists index rows by id)
    compacts = False

    def __init__(self, X_binned, X: np.ndarray, bin_mapper, params: GrowthParams, search=None):
        super().__init__(X_binned, bin_mapper, dataclasses.replace(params, sparse_share=0.0), search)
        self.X = np.asfortranarray(X)
        self.pruning = _NoPruning()
        n, d = self.X.shape
        self._side = np.zeros(n, dtype=np.bool_)
        # a search over every feature (not GT-GBM's) keeps every feature's sorted row list
        self._order = None if self.search.restricted else presort(self.X)
        self._lists = None if self._order is None else np.empty_like(self._order)
        self._in_tree = np.zeros(n, dtype=np.bool_)
        self._thresholds: dict[int, np.ndarray] = {}

    def grow(self, rows, rw, hw, usage, norm, hw_is_one=False, X_binned=None, normaliser=None):
        """:meth:`TreeGrower.grow <gbfs.booster.growing.grower.TreeGrower.grow>` on the grower's own
        matrix (a compact copy of a sample is refused: ``compacts`` is False)."""
        if X_binned is not None:
            raise ValueError("the exact split search grows on its own matrix only")
        self._thresholds.clear()
        if self._lists is not None:
            n = self.X.shape[0]
            if rows.shape[0] == n:
                tree_lists(self._order, self._in_tree[:0], self._lists)
            else:
                self._in_tree[:] = False
                self._in_tree[rows] = True
                tree_lists(self._order, self._in_tree, self._lists)
        return super().grow(rows, rw, hw, usage, norm, hw_is_one, None, normaliser)

    def _keep_hist(self, node, holding: bool = False) -> bool:
        return False  # no histograms, no subtraction

    def _alloc_split_arrays(self, node) -> None:
        super()._alloc_split_arrays(node)
        self._thresholds[node.id] = np.full(self.n_features, np.nan)

    def _build_and_scan(self, node, rows, r_ord, h_ord, features, keep) -> None:
        s = node.splits
        out = (s.gain, self._thresholds[node.id], s.missing_left, s.left_sums)
        s.bin[features] = -1
        rule = self.split_rule(node, count_rows=True)
        serial = node.count * features.shape[0] <= EXACT_SERIAL_WORK
        chunks = max(1, min(self._n_chunks, features.shape[0]))
        if self._lists is not None:
            args = (self.X, self._lists, node.start, node.end, self._rw, self._hw, self._h_is_count, features)
            if serial:
                presorted_best_splits_serial(*args, rule, *out)
            else:
                presorted_best_splits(*args, chunks, rule, *out)
            return
        if serial:
            sorted_best_splits_serial(self.X, rows, r_ord, h_ord, features, rule, *out)
        else:
            sorted_best_splits(self.X, rows, r_ord, h_ord, features, chunks, rule, *out)

    def _threshold(self, node, f: int, b: int) -> float:
        return float(self._thresholds[node.id][f])

    def _partition_rows(self, node, f: int, b: int, ml: bool, bits) -> int:
        n_left = split_rows(self._partition, node.start, node.end, self.X[:, f],
                            self._thresholds[node.id][f], ml, self._side, self._buffer)
        if self._lists is not None:
            chunks = 1 if node.count * self.n_features <= LISTS_SERIAL_WORK else self._n_chunks
            split_lists(self._lists, node.start, node.end, self._side, chunks)
        return n_left

    def add_scores(self, tree, raw: np.ndarray, X_binned=None) -> None:
        """``raw += tree(X)`` for every training row, on the raw values (``X_binned`` unused)."""
        PackedEnsemble.of_tree(tree).predict_raw(self.X, raw)

