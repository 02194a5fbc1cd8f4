"""GT-GBM on shards: the precompute per partition, the group tests of a node summed on the driver.

GT-GBM (Algorithm 2 of the GT-GBM paper, :mod:`gbfs.criteria.group_testing`) precomputes, for
``p`` random subsets of the features, prefix sums of the standardised binned features along each
subset's order.  A row's prefix sums are its own, so every shard precomputes exactly its rows'
share of the single-process precompute (:meth:`GroupTester.from_subsets` on its rows, with the
subsets the driver draws from the fit's seed as one process draws them).

At a node, the binary search halves every subset until one feature is left; each half is scored
by the best split of its pseudo-feature binned into equal-width bins between its min and max over
the node's rows.  Across shards each halving level is two reductions: the shards' minima and
maxima of every half (exact whatever the order), then, with those global bounds, every shard bins
its rows as one process bins them and sends the bins' sums, which the driver adds in partition
order and scans with the same kernel.  The driver keeps the better half of every subset.  So the
candidates are the single-process candidates up to the order of the histograms' float additions
(as the split search's histograms are), with both scopes (``group_test_scope`` "node" and "tree")
and with ``group_test_rows`` (the driver draws the positions of the node's sample from the same
stream in the same order as one process, and every shard keeps its own of them).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..booster.growing.feature_search import GroupTestsPerNode, GroupTestsPerTree
from ..booster.kernels._types import N_BINS
from ..booster.kernels.portable import total
from ..criteria import group_testing as G


@njit(parallel=True, cache=True)
def _bounds(Xb, z_values, prefix, col_of, subsets, ks, los, his, rows, out):
    """``out[t] = (min, max)`` of the pseudo-feature of positions ``los[t]..his[t]`` of subset
    ``ks[t]`` over ``rows`` (non-empty)."""
    n = rows.shape[0]
    for t in prange(ks.shape[0]):
        z = np.empty(n, dtype=np.float32)  # float32, as the single-process search stores it
        k = np.int64(ks[t])  # int64, as the single-process search passes it: one compilation
        out[t, 0], out[t, 1] = G.half_values(Xb, z_values, prefix, col_of, subsets[k], k, los[t], his[t],
                                             rows, n, z)


@njit(parallel=True, cache=True)
def _histograms(Xb, z_values, prefix, col_of, subsets, ks, los, his, mns, mxs, live, rows, r_ord, h_ord,
                n_bins, out):
    """``out[t]``: the equal-width histogram over ``[mns[t], mxs[t]]`` (the node's bounds over all
    shards) of half ``t``'s pseudo-feature on ``rows``; zero where not ``live``."""
    n = rows.shape[0]
    for t in prange(ks.shape[0]):
        if not live[t]:
            continue
        z = np.empty(n, dtype=np.float32)
        bins = np.empty(n, dtype=np.uint8)
        hist = np.zeros((N_BINS, 3))
        k = np.int64(ks[t])  # int64, as the single-process search passes it: one compilation
        G.half_values(Xb, z_values, prefix, col_of, subsets[k], k, los[t], his[t], rows, n, z)
        G.fill_pseudo_hist(z, mns[t], mxs[t], r_ord, h_ord, hist, n_bins, bins)
        out[t] = hist[:n_bins]


class ShardTests:
    """A shard's share of the precompute and the rows of the node under test.

    Parameters
    ----------
    X_binned : ndarray of uint8, Fortran-ordered
        The shard's binned rows.
    z_values : ndarray of float64, shape (n_features, 256)
        The global bin mapper's ``standardised_values_``.
    subsets : ndarray of int64, shape (p, m)
        The driver's subsets (:func:`gbfs.criteria.group_testing.draw_subsets`).
    """

    def __init__(self, X_binned: np.ndarray, z_values: np.ndarray, subsets: np.ndarray):
        self.tester = G.GroupTester.from_subsets(X_binned, z_values, np.ascontiguousarray(subsets))
        self.rows = self.r = self.h = None

    @property
    def nbytes(self) -> int:
        return self.tester.nbytes

    def node(self, rows: np.ndarray, r_ord: np.ndarray, h_ord: np.ndarray) -> np.ndarray:
        """Test a node on these rows; returns ``[rows, sum r, sum h]`` (``h_ord`` empty: unit h)."""
        self.rows, self.r, self.h = rows, r_ord, h_ord
        return self._sums()

    def sample(self, pick: np.ndarray, offsets: np.ndarray, index: int) -> np.ndarray:
        """Keep this shard's positions of the node's sample ``pick`` (positions in the node's rows
        of all shards, this shard's starting at ``offsets[index]``); returns :meth:`node`'s sums."""
        lo = offsets[index]
        mine = pick[(pick >= lo) & (pick < lo + self.rows.shape[0])] - lo
        self.rows, self.r = self.rows[mine], self.r[mine]
        self.h = self.h[mine] if self.h.shape[0] else self.h
        return self._sums()

    def _sums(self) -> np.ndarray:
        n = self.rows.shape[0]
        return np.array([n, total(self.r) if n else 0.0, total(self.h) if self.h.shape[0] else float(n)])

    def bounds(self, ks, los, his) -> np.ndarray:
        """``(min, max)`` of each half's pseudo-feature on the node's rows (``(inf, -inf)`` if none)."""
        out = np.empty((ks.shape[0], 2))
        out[:, 0], out[:, 1] = np.inf, -np.inf
        if self.rows.shape[0]:
            t = self.tester
            _bounds(t.Xb, t.z_values, t.prefix, t.col_of, t.subsets, ks, los, his, self.rows, out)
        return out

    def histograms(self, ks, los, his, mns, mxs, live) -> np.ndarray:
        """Each half's :data:`GT_BINS`-bin histogram between the global bounds, shape (halves, bins, 3)."""
        t = self.tester
        out = np.zeros((ks.shape[0], t.n_bins, 3))
        if self.rows.shape[0]:
            _histograms(t.Xb, t.z_values, t.prefix, t.col_of, t.subsets, ks, los, his, mns, mxs, live,
                        self.rows, self.r, self.h, t.n_bins, out)
        return out


def _gains(source, ks, los, his, tols, sums: tuple, rule: tuple) -> np.ndarray:
    """GT score of each half (positions ``los[t]..his[t]`` of subset ``ks[t]``) on the node's rows
    of every shard: their global bounds, then their histograms summed in partition order."""
    group = source.group
    b = np.stack(group.call("gt_bounds", ks, los, his))
    mns, mxs = b[:, :, 0].min(axis=0), b[:, :, 1].max(axis=0)  # exact in any order
    live = mxs - mns > tols  # a spread within tol is float32 rounding: no split
    hists = source.fold(group.call("gt_histograms", ks, los, his, mns, mxs, live))
    gains = np.full(ks.shape[0], -np.inf)
    full = np.zeros((N_BINS, 3))  # bins GT_BINS.. (the missing bin included) stay zero
    for t in np.flatnonzero(live):
        full[:G.GT_BINS] = hists[t]
        gains[t] = G.pseudo_hist_gain(full, G.GT_BINS, *sums, *rule)
    return gains


def candidates(source, subsets: np.ndarray, node, pick, rule: tuple) -> np.ndarray:
    """The candidate set C of the grower's ``node`` (Algorithm 2, lines 2-10) from the shards.

    ``source`` is the fit's :class:`~gbfs.dask.engine.ShardSource`; ``pick`` the positions of the
    node's group-test sample (None: all its rows, whose sums are the node's); ``rule`` =
    ``(min_samples_leaf, min_child_weight, reg_lambda)`` of the tests.
    """
    parts = source.with_splits("gt_node", int(node.start), int(node.end), source.unit_h)
    sums = (node.sum_g, node.sum_h, float(node.count))
    if pick is not None:
        offsets = np.cumsum([0] + [int(a[0]) for a in parts[:-1]])
        count, sum_g, sum_h = source.fold(source.group.call("gt_sample", pick, offsets)).tolist()
        sums = (sum_g, sum_h, count)
    p, m = subsets.shape
    lo, hi = np.zeros(p, dtype=np.int64), np.full(p, m, dtype=np.int64)
    best = np.full(p, -np.inf)
    if m == 1:  # one feature per subset: nothing to halve, the feature is tested alone
        best = _gains(source, np.arange(p), lo, hi, np.full(p, G.halves(0, 1)[1]), sums, rule)
    while np.any(hi - lo > 1):  # one halving level of every subset not yet down to one feature
        act = np.flatnonzero(hi - lo > 1)
        split = [G.halves(a, b) for a, b in zip(lo[act], hi[act])]
        mid = np.array([s[0] for s in split], dtype=np.int64)
        gains = _gains(source, np.repeat(act, 2), np.stack([lo[act], mid], axis=1).ravel(),
                       np.stack([mid, hi[act]], axis=1).ravel(), np.repeat([s[1] for s in split], 2),
                       sums, rule)
        for j, k in enumerate(act):
            lo[k], hi[k], best[k] = G.keep_better(lo[k], mid[j], hi[k], gains[2 * j], gains[2 * j + 1])
    feature = subsets[np.arange(p), lo]
    return np.unique(feature[np.isfinite(best)])


class _OnShards:
    """GT-GBM's search asking the shards (:func:`candidates`) instead of reading rows here."""

    reads_rows = False

    def __init__(self, subsets: np.ndarray, rows_cap: int | None = None, rng=None):
        super().__init__(None, rows_cap, rng)
        self.subsets, self.source = subsets, None

    def bind(self, source) -> None:
        """The fit's :class:`~gbfs.dask.engine.ShardSource` (made after the search)."""
        self.source = source

    def candidates(self, grower, node, rows, r_ord, h_ord) -> np.ndarray:
        p = grower.params
        pick = self.row_sample(node.count)
        msl, mcw = ((float(p.min_samples_leaf), p.min_child_weight) if pick is None
                    else self.sample_limits(p, pick.shape[0], node.count))
        return candidates(self.source, self.subsets, node, pick, (msl, mcw, p.reg_lambda))


class ShardTestsPerNode(_OnShards, GroupTestsPerNode):
    """:class:`~gbfs.booster.growing.feature_search.GroupTestsPerNode` on shards."""


class ShardTestsPerTree(_OnShards, GroupTestsPerTree):
    """:class:`~gbfs.booster.growing.feature_search.GroupTestsPerTree` on shards."""


SCOPES = {"node": ShardTestsPerNode, "tree": ShardTestsPerTree}
