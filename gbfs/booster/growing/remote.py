"""A grower whose rows live elsewhere: node histograms come from a :class:`HistogramSource`.

Data-parallel boosting (:mod:`gbfs.dask`) keeps every row on the worker that holds it.  The tree is
grown where the decisions are taken, by :class:`~gbfs.booster.growing.grower.TreeGrower`'s own
best-first loop (:meth:`~gbfs.booster.growing.grower.TreeGrower.grow_from_root`): the same split
scan, penalty, Omega refresh, pruning and histogram subtraction, on histograms summed over the
workers.  Only the work on rows is asked of the source: a node's histogram, the partition of its
rows at a split, the row counts of the pruning filter.

A node is named by its range ``start..end`` of the *virtual* partition: the rows of all workers
in a fixed order, a split sending the left child's ``n_left`` rows to the front of the range, as
one process's partition does.  The ranges are what one process would hold, so the leaves come in
the same order, and every worker finds its own rows of a node from the same name.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from ..kernels._types import C_CH, ROW_DTYPE
from ..kernels.splitting import best_splits_per_feature, best_splits_per_feature_serial
from .grower import GrowthParams, TreeGrower, scans_serially
from .partition import GrownTree
from .pruning import Pruning


class HistogramSource(Protocol):
    """What a :class:`RemoteGrower` asks of the rows it does not hold."""

    def histogram(self, start: int, end: int, features: np.ndarray, out: np.ndarray) -> None:
        """Fill the bins of ``features`` in the flat histogram ``out`` with the sums over the
        rows of node ``start..end``."""

    def split(self, start: int, end: int, n_left: int, feature: int, bin_threshold: int,
              missing_left: bool) -> None:
        """Split node ``start..end``: bins ``<= bin_threshold`` of ``feature`` (the missing bin
        by ``missing_left``) go to the left child ``start..start + n_left``."""

    def counts(self, features: np.ndarray, out: np.ndarray) -> None:
        """Fill the bins of ``features`` in ``out`` over all rows with zero residuals and a unit
        second channel (the row counts of the pruning filter)."""


class RemoteGrower(TreeGrower):
    """A :class:`~gbfs.booster.growing.grower.TreeGrower` over ``n_rows`` rows held by ``source``.

    Parameters
    ----------
    source : HistogramSource
    n_rows : int
        Rows of the whole data set.
    bin_mapper : BinMapper
        The global bins every holder of rows binned them with.
    params : GrowthParams
    search : FeatureSearch or None
        Every feature or, once a budget is full, Omega, or a search that asks the rows' holders
        itself (:mod:`gbfs.dask.group_tests`); a search that reads rows here is refused.
    """

    #: the rows' holders send a node's histogram, not the sums of one feature at a time
    fuses_pairs = False

    def __init__(self, source: HistogramSource, n_rows: int, bin_mapper, params: GrowthParams, search=None):
        self._configure(bin_mapper, params, search, n_rows, int(bin_mapper.n_edges_.shape[0]))
        if self.cats is not None:
            raise ValueError("categorical features are not supported by a remote grower")
        if self.search.reads_rows:
            raise ValueError(f"{type(self.search).__name__} reads rows: it cannot search remote rows")
        self.source = source
        self.X_binned, self.sparse = None, None
        self.pruning = Pruning(self._fill_counts, n_rows, self.layout, self.features, params.min_samples_leaf)
        self._no_rows = np.empty(0, dtype=ROW_DTYPE)
        self._no_h = np.empty(0, dtype=np.float64)
        self._partition = self._no_rows  # the leaves' ranges are virtual: no row array
        self._remote_scratch = None

    def grow(self, *args, **kwargs) -> GrownTree:
        raise TypeError("a RemoteGrower holds no rows: use grow_from_root")

    def gathered(self, node):
        return self._no_rows, self._no_h, self._no_h

    def _scratch(self) -> np.ndarray:
        if self._remote_scratch is None:
            self._remote_scratch = self.layout.new()
        return self._remote_scratch

    def _fused(self, node, rows, r_ord, h_ord, features, keep, hist) -> None:
        # the summed histogram, then the grower's scan: each feature's record is what the fused
        # kernel writes from the same bins
        hist = hist if keep else self._scratch()
        self.source.histogram(node.start, node.end, features, hist)
        serial = scans_serially(self.offsets, features)
        scan = best_splits_per_feature_serial if serial else best_splits_per_feature
        scan(hist, features, self.offsets, self.n_bins, self.split_rule(node), node.splits)

    def _histogram_by_columns(self, node, rows, r_ord, h_ord, features) -> None:
        self.source.histogram(node.start, node.end, features, node.hist)

    def _partition_rows(self, node, f, b, ml, bits) -> int:
        # the node's histogram counted the left child's rows exactly; the holders check it
        n_left = int(node.splits.left_sums[f, C_CH])
        self.source.split(node.start, node.end, n_left, int(f), int(b), bool(ml))
        return n_left

    def _fill_counts(self, hist, features) -> None:
        self.source.counts(features, hist)
