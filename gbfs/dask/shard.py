"""One partition's rows where they live: binned once, with their labels, scores and residuals.

A :class:`Shard` answers what the driver's grower asks of rows
(:class:`~gbfs.booster.growing.remote.HistogramSource`): its residuals' sums, its share of a node's
histogram, the split of its rows at a tree node, its leaves' sums, the update of its scores.  It
uses the library's own kernels (the loss's residuals, ``build_histogram``, ``split_partition``) on
its rows in their order, so a shard holding every row computes exactly what one process does.

Nodes are named by their range of the driver's virtual partition (``start..end``); each shard
keeps its own rows of every live node as a range of its own partition array.
"""

from __future__ import annotations

import numpy as np

from ..booster.growing.grower import NUMERIC
from ..booster.growing.partition import split_partition
from ..booster.kernels._types import C_CH, G_CH, H_CH, ROW_DTYPE
from ..booster.kernels.histogram import HistogramLayout, build_histogram, gather
from ..booster.kernels.portable import dot, total
from ..booster.normaliser import HESSIAN_FLOOR, sum_g2_over_h
from ..booster.tree import PackedEnsemble, Tree
from ..booster.tree_step import add_leaf_values, leaf_sums
from ..sampling.kernels import mvs_select, regularized_abs, selection_pass, top_mask
from .group_tests import ShardTests

#: the statistics :meth:`Shard.residuals` returns, in this order: the tree's rows, ``sum w r``,
#: ``sum w r^2``, ``sum w``, the second channel's sum (``w`` or ``w h``), the Newton normaliser's
#: ``sum w r^2 / h`` and ``sum w h``, and the largest ``|r|`` of all rows
RESIDUAL_STATS = ("n", "sum_r", "sum_rr", "w_sum", "sum_h", "sum_g2_over_h", "sum_wh", "max_abs_r")


def feature_bins(offsets: np.ndarray, features: np.ndarray) -> np.ndarray:
    """The rows of a flat histogram that hold ``features``' bins, feature by feature."""
    starts = offsets[features]
    lengths = offsets[features + 1] - starts
    first = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    return first + np.arange(int(lengths.sum()), dtype=np.int64)


def channels(unit_h: bool) -> list[int]:
    """The histogram channels a shard sends: with unit weights the second channel is the count."""
    return [G_CH, C_CH] if unit_h else [G_CH, H_CH, C_CH]


class Shard:
    """The rows of one partition.

    Parameters
    ----------
    X_binned : ndarray of uint8, Fortran-ordered, shape (n, n_features)
        The partition binned with the global bins.
    y : ndarray of float64
        Encoded labels (the estimator's encoding: 0/1 for a classifier).
    n_bins_non_missing : ndarray of int
        The global bin mapper's ``n_bins_non_missing_`` (the histogram layout).
    loss : loss class
    hessian_weighted, leaf_newton : bool
        The criterion's second channel is the hessian; leaves are Newton steps.
    """

    def __init__(self, X_binned: np.ndarray, y: np.ndarray, n_bins_non_missing: np.ndarray, loss,
                 hessian_weighted: bool, leaf_newton: bool, index: int = 0):
        self.X = np.asfortranarray(X_binned)
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        self.loss = loss
        self.layout = HistogramLayout(n_bins_non_missing)
        self.hessian_weighted, self.leaf_newton = hessian_weighted, leaf_newton
        n = self.y.shape[0]
        self.cols = np.arange(self.X.shape[1], dtype=np.int64)
        self.raw = np.zeros(n)
        self.r, self.h = np.empty(n), np.empty(n)
        self._partition = np.arange(n, dtype=ROW_DTYPE)
        self._buffer = np.empty(n, dtype=ROW_DTYPE)
        self._r_ord, self._h_ord = np.empty(n), np.empty(n)
        self._ranges: dict = {}
        self._root = (0, n)
        self._hist = self.layout.new()
        self.index = index  # the partition's index: its row samples' seed
        self._sampled = False
        self._rw, self._hw, self._den = self.r, self.h, self.h
        self.tests = None  # GT-GBM's precompute of these rows (gbfs.dask.group_tests)

    @property
    def n(self) -> int:
        return int(self.y.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes this shard holds (binned rows, per-row channels, one histogram)."""
        arrays = (self.X, self.y, self.raw, self.r, self.h, self._partition, self._buffer, self._r_ord,
                  self._h_ord, self._hist)
        return int(sum(a.nbytes for a in arrays)) + (0 if self.tests is None else self.tests.nbytes)

    # -- the fit's state ------------------------------------------------------------------------
    def label_sum(self) -> float:
        return total(self.y)

    def restrict(self, columns: np.ndarray, n_bins_non_missing: np.ndarray) -> None:
        """Keep only ``columns`` (a refit on a selection); the histogram layout follows."""
        self.tests = None  # a refit searches every selected feature: no group tests
        self.X = np.asfortranarray(self.X[:, columns])
        self.cols = np.arange(self.X.shape[1], dtype=np.int64)
        self.layout = HistogramLayout(n_bins_non_missing)
        self._hist = self.layout.new()

    def start(self, init_score: float, hessian_weighted: bool, leaf_newton: bool) -> None:
        """Begin a fit: every score at ``init_score``, the fit's criterion and leaf estimate."""
        self.raw[:] = init_score
        self.hessian_weighted, self.leaf_newton = hessian_weighted, leaf_newton

    def residuals(self, update=None, sample=None) -> np.ndarray:
        """Begin a tree: the last tree's ``update`` (:meth:`update`), the residuals of the current
        scores and the tree's rows -- every row with weight 1, or with ``sample`` = ``(sampler,
        iteration, seed)`` the rows and weights the sampler draws from this shard's residuals with
        the generator seeded ``[*seed, index, iteration]``; returns :data:`RESIDUAL_STATS`."""
        self.update(update)
        r, h = self.r, self.h
        self.loss.residuals(self.y, self.raw, r, h)
        max_abs = self._max_abs = float(np.max(np.abs(r))) if self.n else 0.0
        self._ranges = {}  # the root is named by the first request (:meth:`_range`)
        self._sampled = sample is not None
        if not self._sampled or not self.n:
            self._partition[:] = np.arange(self.n, dtype=ROW_DTYPE)
            self._root = (0, self.n)
            self._rw, self._hw, self._den = r, h, h
            g2h = sum_g2_over_h(r, h, HESSIAN_FLOOR) if self.hessian_weighted else 0.0
            sum_h = total(h)
            return np.array([self.n, total(r), dot(r, r), float(self.n),
                             sum_h if self.hessian_weighted else float(self.n), g2h, sum_h, max_abs])
        sampler, it, seed = sample
        rows, w = sampler.sample(r, h if self.hessian_weighted else None, it,
                                 np.random.default_rng([*seed, self.index, it]))
        return np.array([*self._weigh(rows, w), max_abs])

    # -- MVS with one threshold over all rows (gbfs.dask.mvs) ------------------------------------
    def mvs_values(self, lam: float) -> np.ndarray:
        """MVS's regularized ``|g|`` of this shard's rows (after :meth:`residuals` without a sample),
        kept sorted for the threshold search; returns ``[positive values, largest value]``."""
        h = self.h if self.hessian_weighted else np.ones(self.n)  # the sampler's h: None means 1
        self._v = regularized_abs(self.r, h, lam)
        self._v_sorted = np.sort(self._v)
        self._v_prefix = np.concatenate([[0.0], np.cumsum(self._v_sorted)])
        return np.array([np.count_nonzero(self._v), self._v_sorted[-1] if self.n else 0.0])

    def mvs_sums(self, mus: np.ndarray) -> np.ndarray:
        """For each candidate threshold: the rows with ``v >= mu`` and the sum of the ``v`` below it."""
        below = np.searchsorted(self._v_sorted, mus, side="left")
        return np.stack([(self.n - below).astype(np.float64), self._v_prefix[below]])

    def mvs_draw(self, mu: float, p_zero: float, it: int, seed: tuple) -> np.ndarray:
        """Keep row i with probability ``min(1, v_i / mu)`` (``p_zero`` for ``v = 0`` when ``mu`` is 0),
        weight its inverse, with the generator seeded ``[*seed, index, it]``; returns
        :data:`RESIDUAL_STATS` of the sample."""
        if not self.n:
            return np.array([0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
        u = np.random.default_rng([*seed, self.index, it]).random(self.n)
        rows, w = mvs_select(self._v, mu, p_zero, u)
        self._sampled = True
        return np.array([*self._weigh(rows, w), self._max_abs])

    # -- GOSS with the single-process sample (gbfs.dask.goss) -------------------------------------
    def goss_keys(self, sampler) -> np.ndarray:
        """GOSS's keys of this shard's rows (after :meth:`residuals` without a sample), kept sorted
        for the search of the a-th largest; returns ``[rows, largest key]``."""
        h = self.h if self.hessian_weighted else np.ones(self.n)  # the sampler's h: None means 1
        self._key = sampler.key(self.r, h)
        self._key_sorted = np.sort(self._key)
        return np.array([self.n, self._key_sorted[-1] if self.n else 0.0])

    def goss_at_least(self, values: np.ndarray) -> np.ndarray:
        """For each value: this shard's keys at or above it."""
        return (self.n - np.searchsorted(self._key_sorted, values, side="left")).astype(np.float64)

    def goss_between(self, lo: float, hi: float) -> np.ndarray:
        """This shard's keys in ``[lo, hi)``."""
        s = self._key_sorted
        return s[np.searchsorted(s, lo, side="left"):np.searchsorted(s, hi, side="left")]

    def goss_top(self, kth: float) -> np.ndarray:
        """``[keys above kth, keys equal to it]``."""
        s = self._key_sorted
        below, upto = np.searchsorted(s, kth, side="left"), np.searchsorted(s, kth, side="right")
        return np.array([self.n - upto, upto - below])

    def goss_draw(self, kth, n_top: int, need: int, left: int, w_other: float, start: int, seed: tuple):
        """Keep the ``n_top`` rows of key ``>= kth`` (ties to the lowest rows) and continue the
        selection sampling of the others from ``need`` still to draw of ``left`` (with the
        stream's uniforms from its ``start``-th, one per row); ``kth`` None: every row, weight 1.
        Returns :data:`RESIDUAL_STATS` of the sample and the number of other rows drawn."""
        if kth is None:
            rows, w = np.arange(self.n, dtype=np.int32), np.ones(self.n)
        elif not self.n:
            return np.zeros(len(RESIDUAL_STATS)), 0
        else:
            top = top_mask(self._key, kth, n_top) if n_top > 0 else np.zeros(self.n, dtype=np.bool_)
            bits = np.random.PCG64(np.random.SeedSequence(list(seed)))  # default_rng(list(seed))'s
            bits.advance(start)  # one 64-bit draw per uniform
            u = np.random.Generator(bits).random(self.n)
            rows, w = selection_pass(top, n_top, need, left, u, w_other)
        self._sampled = True
        return np.array([*self._weigh(rows, w), self._max_abs]), int(rows.shape[0] - n_top)

    def _weigh(self, rows: np.ndarray, w: np.ndarray) -> list:
        """The sampled tree's rows and weighted channels (as the one-process step's buffers)."""
        if self._rw is self.r:
            self._rw, self._hw, self._den = np.zeros(self.n), np.zeros(self.n), np.zeros(self.n)
        r_s, h_s = self.r[rows], self.h[rows]
        wr, wh = w * r_s, w * h_s
        hw = wh if self.hessian_weighted else w
        self._rw[rows], self._hw[rows] = wr, hw
        self._den[rows] = wh if self.leaf_newton else w
        k = rows.shape[0]
        self._partition[:k] = rows
        self._root = (0, k)
        g2h = sum_g2_over_h(r_s * np.sqrt(w), h_s, HESSIAN_FLOOR) if self.hessian_weighted else 0.0
        return [k, total(wr), dot(wr, r_s), total(w), total(hw), g2h, dot(w, h_s)]

    def _range(self, key) -> tuple[int, int]:
        """This shard's range of node ``key`` of the partition (the first node asked is the root)."""
        if not self._ranges:
            self._ranges[key] = self._root
        return self._ranges[key]

    # -- what the grower asks ---------------------------------------------------------------------
    def split(self, splits: list) -> list[int]:
        """Apply splits ``(start, end, n_left, feature, bin, missing_left)`` in order; returns
        this shard's left-child row counts."""
        out = []
        for start, end, n_left, f, b, ml in splits:
            lo, hi = self._range((start, end))
            del self._ranges[(start, end)]
            k = split_partition(self._partition, lo, hi, self.X[:, f], b, ml, NUMERIC, self._buffer)
            self._ranges[(start, start + n_left)] = (lo, lo + k)
            self._ranges[(start + n_left, end)] = (lo + k, hi)
            out.append(int(k))
        return out

    def histogram(self, splits: list, start: int, end: int, features: np.ndarray, unit_h: bool):
        """Apply the pending ``splits``, then this shard's histogram of node ``start..end`` over
        ``features``: the bins of :func:`feature_bins`, the channels of :func:`channels`."""
        counts = self.split(splits)
        lo, hi = self._range((start, end))
        h_empty = np.empty(0)
        if not self._sampled and len(self._ranges) == 1 and hi - lo == self.n:
            # the root of a tree on every row: the columns in order, no row index
            rows, r_ord, h_ord = np.empty(0, dtype=ROW_DTYPE), self.r, (h_empty if unit_h else self.h)
        else:
            rows = self._partition[lo:hi]
            r_ord = self._r_ord[:hi - lo]
            gather(self._rw, rows, r_ord)
            h_ord = h_empty
            if not unit_h:
                h_ord = self._h_ord[:hi - lo]
                gather(self._hw, rows, h_ord)
        hist = self._hist
        build_histogram(self.X, self.cols, rows, r_ord, h_ord, features, self.layout.offsets,
                        self.layout.n_bins, hist)
        picked = hist[feature_bins(self.layout.offsets, features)][:, channels(unit_h)]
        return counts, np.ascontiguousarray(picked)

    # -- GT-GBM's group tests (gbfs.dask.group_tests) ---------------------------------------------
    def gt_precompute(self, z_values: np.ndarray, subsets: np.ndarray) -> None:
        """GT-GBM's precompute of this shard's rows for the driver's ``subsets``."""
        self.tests = ShardTests(self.X, z_values, subsets)

    def gt_node(self, splits: list, start: int, end: int, unit_h: bool) -> tuple[list[int], np.ndarray]:
        """Apply the pending ``splits``, then test node ``start..end`` on this shard's rows of it."""
        counts = self.split(splits)
        lo, hi = self._range((start, end))
        rows = self._partition[lo:hi].copy()
        h_ord = np.empty(0) if unit_h else self._hw[rows]
        return counts, self.tests.node(rows, self._rw[rows], h_ord)

    def gt_sample(self, pick: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        return self.tests.sample(pick, offsets, self.index)

    def gt_bounds(self, ks, los, his) -> np.ndarray:
        return self.tests.bounds(ks, los, his)

    def gt_histograms(self, ks, los, his, mns, mxs, live) -> np.ndarray:
        return self.tests.histograms(ks, los, his, mns, mxs, live)

    def counts(self, features: np.ndarray) -> np.ndarray:
        """Row counts of ``features``' bins over all rows (channel 0 zero, channel 1 the count)."""
        hist = self._hist
        zeros = np.zeros(self.n)
        build_histogram(self.X, self.cols, np.empty(0, dtype=ROW_DTYPE), zeros, np.empty(0), features,
                        self.layout.offsets, self.layout.n_bins, hist)
        return np.ascontiguousarray(hist[feature_bins(self.layout.offsets, features)])

    def leaf_sums(self, splits: list, leaves: list) -> tuple[list[int], np.ndarray]:
        """Apply the pending ``splits``, then each leaf's ``sum r`` and leaf denominator (``sum h``
        for Newton leaves, the row count otherwise), shape (2, n_leaves)."""
        counts = self.split(splits)
        bounds = np.array([self._range(key) for key in leaves], dtype=np.int64).reshape(-1, 2)
        # the one-process kernel over this shard's rows, in their order
        num, den = leaf_sums(self._partition, bounds[:, 0], bounds[:, 1], self._rw, self._den)
        if not self.leaf_newton and not self._sampled:  # the sum of unit weights: the row count
            den = (bounds[:, 1] - bounds[:, 0]).astype(np.float64)
        return counts, np.stack([num, den])

    def update(self, update=None, loss: bool = False) -> float:
        """Add the last tree to the scores (``update``: its leaves and their values; a
        :class:`~gbfs.booster.tree.Tree` when it grew on a row sample: it scores every row); returns
        ``n * mean loss`` of the rows when ``loss`` (the train loss's share), else 0."""
        if isinstance(update, Tree):
            PackedEnsemble.of_tree(update).predict_binned(self.X, self.raw)
        elif update is not None:
            leaves, values = update
            # the one-process kernel over this shard's rows: the same additions, row by row
            bounds = np.array([self._range(key) for key in leaves], dtype=np.int64).reshape(-1, 2)
            add_leaf_values(self._partition, bounds[:, 0], bounds[:, 1], np.asarray(values), self.raw)
        if not loss or not self.n:
            return 0.0
        return float(self.loss.loss(self.y, self.raw)) * self.n
