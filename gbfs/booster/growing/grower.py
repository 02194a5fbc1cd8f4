"""Best-first tree growth with penalised split selection.

(Longer than the ~400-line guide on purpose: one class, whose numeric, row-wise sparse and
subtraction paths share every node's state and are the learner's hot path; split apart they would
pass that state back and forth.)

The grower is plain Python over numba kernels, as in pygbm.  Its inputs are the
rows used for this tree with their weighted residuals/second channel (so row
samplers plug in without touching it), the feature-usage state Omega (shared with
the whole ensemble) and the normaliser (1 for GBFS, SSE_root for A-GBM).

Growth is best-first: the pending leaf with the largest penalised score is split
next, until ``max_leaves`` is reached or no pending leaf has a positive score (the
papers' rule: a node is a leaf when no split has a positive penalised score).
Every split that adds a new feature (bag) to Omega lowers penalties, so all pending
leaves are re-scored from their cached per-feature gains before the next pick --
the refresh that LightGBM's CEGB missed (its issues 3245 and 3679).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from ..kernels._types import C_CH, ROW_DTYPE
from ..kernels.categorical import CAT_DEFAULTS, bins_of
from ..kernels.histogram import HistogramLayout, build_histogram, build_histogram_serial, gather
from ..kernels.portable import total
from ..kernels.sparse_binned import block_of, entries_of, to_dense
from ..kernels.sparse_rows import MIN_SPARSE_FEATURES, SERIAL_BINS, SPARSE_SHARE, SparseRows, flat_bins
from ..kernels.splitting import (
    SplitRule,
    Splits,
    best_splits_per_feature,
    best_splits_per_feature_serial,
    build_and_scan,
    build_and_scan_serial,
    build_subtract_and_scan,
    build_subtract_and_scan_serial,
    penalized_best,
    subtract_and_scan,
    subtract_and_scan_serial,
)
from ..tree import PackedEnsemble, TreeBuilder
from ..usage import Usage
from .categorical_search import CategoricalSearch
from .columns import Columns
from .feature_search import FeatureSearch
from .partition import GrownTree, Node, split_partition
from .pruning import Pruning

#: up to this much work a node's kernels run on one thread.  Work is histogram updates per feature:
#: its rows plus each pass over its bins (zeroing and scanning ``width`` bins costs about as much as
#: adding as many rows).  A parallel kernel wakes its threads at every call -- about 40 us with passive
#: OpenMP waiting, the default, and more in CPU time -- so on 2 cores a search is about 1.25x faster in
#: parallel at this much work (about 0.17 ms on one thread) and gains too little for its extra CPU time
#: below it (measured over 20-617 features of 100-1560 Isolet rows)
SERIAL_WORK = 120_000


def runs_serially(n_rows: int, n_features: int, width: int) -> bool:
    """Is a kernel call over ``n_rows`` rows of ``n_features`` features, each with passes over
    ``width`` bins, work for one thread (:data:`SERIAL_WORK`)?"""
    return n_features * (n_rows + width) <= SERIAL_WORK


def _histogram_kernel(n_rows: int, features: np.ndarray, width: int):
    """The histogram kernel for ``n_rows`` rows of ``features`` (zeroing ``width`` bins each): one
    thread for small work."""
    return build_histogram_serial if runs_serially(n_rows, features.shape[0], width) else build_histogram


def scans_serially(offsets: np.ndarray, features: np.ndarray) -> bool:
    """Whether subtracting and scanning ``features``' histograms is work for one thread: at most
    :data:`~gbfs.booster.kernels.sparse_rows.SERIAL_BINS` bins (64 features of 255 bins, or
    hundreds of one-hot columns of two)."""
    return flat_bins(features, offsets) <= SERIAL_BINS


#: a split must gain more than this share of its tree's ``sum w g^2 / h`` (the gain normaliser plus
#: the root's own term, which bounds every term of every split gain of the tree): below it a "gain"
#: is floating-point roundoff -- a pure node's split, which would mark an unrelated feature as used
ROUNDOFF_GAIN = 1e-10
#: the left set of a numeric split: none (split_partition then compares with the threshold)
NUMERIC = np.empty(0, dtype=np.uint32)


@dataclass
class GrowthParams:
    """Tree-shape and regularisation parameters (validated by the estimator)."""

    max_depth: int | None = None
    max_leaves: int | None = 31
    min_samples_leaf: int = 20
    min_node_fraction: float | None = None  # the papers' alpha
    min_child_weight: float = 1e-3
    reg_lambda: float = 0.0
    min_split_gain: float = 0.0  # a split must gain more than this (unpenalised gain units)
    # Histograms kept for the subtraction trick may use at most this multiple of the binned
    # matrix's memory at one byte per entry (rows x features, whatever its storage); beyond it
    # children are built directly from their rows.
    histogram_memory_ratio: float = 1.5
    # A node's histogram is kept only if it has at least this many rows: for smaller nodes building
    # both children from rows is cheaper than the extra passes over a (n_features x 256) histogram.
    subtraction_min_rows: int = 2048
    # Features with at most this share of rows outside their most frequent bin are built row-wise from an
    # index of their other entries (gbfs.booster.kernels.sparse_rows); 0 keeps every feature column-wise.
    sparse_share: float = SPARSE_SHARE
    sparse_min_features: int = MIN_SPARSE_FEATURES  # fewer sparse features: all column-wise
    # how min_samples_leaf counts a child: "rows" exactly, or "hessian" as LightGBM's
    # min_data_in_leaf does (each histogram bin counts round(H_bin * n_node / H_node) rows);
    # the estimators resolve their "auto"
    leaf_count: str = "rows"
    # categorical split search (gbfs.booster.kernels.categorical.cat_settings order): cat_smooth, cat_l2,
    # max_cat_threshold, min_data_per_group, max_cat_to_onehot
    cat_settings: tuple = tuple(CAT_DEFAULTS.values())
    # how a node's best split is found: "histogram" over the bins, or "exact" over every cut between
    # distinct raw values (gbfs.booster.growing.exact: the sort-based search of the papers)
    split_search: str = "histogram"


class TreeGrower:
    """Grows one tree per call; keeps reusable buffers across the trees of a fit.

    Parameters
    ----------
    X_binned : ndarray of uint8, Fortran-ordered, shape (n_rows, n_features), or SparseBinned
        A :class:`~gbfs.booster.kernels.sparse_binned.SparseBinned` matrix's sparse columns are built from
        the row-wise index only; if this grower's settings do not index all of them, it grows on
        a dense copy.
    bin_mapper : BinMapper
        Gives the number of bins per feature and the raw thresholds.
    params : GrowthParams
    search : FeatureSearch or None
        Which features each node scans (:mod:`gbfs.booster.growing.feature_search`): every feature (None, the
        default), or GT-GBM's Omega and group-test candidates per node or per tree.
    """

    #: a small row sample may be grown on a compact copy of its rows (``X_binned`` of :meth:`grow`)
    compacts = True
    #: with a budget of one histogram, both children of a kept histogram are searched in one pass
    fuses_pairs = True

    def __init__(self, X_binned, bin_mapper, params: GrowthParams, search: FeatureSearch | None = None):
        n, d = X_binned.shape
        self._configure(bin_mapper, params, search, n, d)
        self.X_binned, self.sparse = self._index(X_binned)
        self._columns = Columns(self.X_binned)
        self._scratch_hist = None  # the sparse features' bins of a node whose histogram is not kept
        self.pruning = Pruning(self._fill_counts, n, self.layout, self._numeric(self.features),
                               params.min_samples_leaf)
        self._r_ord = np.empty(n, dtype=np.float64)
        self._h_ord = np.empty(n, dtype=np.float64)
        self._buffer = np.empty(n, dtype=ROW_DTYPE)
        self._no_rows = np.empty(0, dtype=ROW_DTYPE)
        self._no_h = np.empty(0, dtype=np.float64)
        self._counts = None  # _root_counts

    def _configure(self, bin_mapper, params: GrowthParams, search: FeatureSearch | None, n: int,
                   d: int) -> None:
        """The state that depends on the bins, the settings and the data's shape, not on its rows
        (:class:`~gbfs.booster.growing.remote.RemoteGrower` holds none)."""
        self._min_gain = params.min_split_gain  # grow() adds the roundoff floor of its tree
        self.search = FeatureSearch() if search is None else search
        self.bin_mapper = bin_mapper
        self.layout = HistogramLayout(bin_mapper.n_bins_non_missing_)
        self.n_bins, self.offsets = self.layout.n_bins, self.layout.offsets
        self.params = params
        self.n_features = d
        self.features = np.arange(d, dtype=np.int64)
        self._n_chunks = max(1, min(d, 8 * numba.get_num_threads()))
        hist_bytes = max(self.layout.nbytes, 1)
        # kept histograms within the budget; the matrix counts at one byte per entry whatever its
        # storage, so the trees do not depend on it
        self._max_hists = int(params.histogram_memory_ratio * n * d // hist_bytes)
        self._n_hists = 0
        self._free_hists: list[np.ndarray] = []
        self._dummy_hist = np.empty((1, 3))
        self._free_splits: list[Splits] = []  # split records of finished nodes, reused (_alloc_split_arrays)
        # categorical features have their own search (None: there are none)
        self.cats = CategoricalSearch.build(bin_mapper, self.features, params)

    def _index(self, X_binned):
        """The matrix to grow on and its row-wise index of sparse features (None: none)."""
        p = self.params
        exclude = None if self.cats is None else self.cats.is_cat
        block, cols = block_of(X_binned)
        index = SparseRows.build(block, self.layout, p.sparse_share, p.sparse_min_features, exclude,
                                 cols=cols, entries=entries_of(X_binned))
        stored = np.flatnonzero(cols < 0)
        if stored.shape[0] and (index is None or not np.all(np.isin(stored, index.features))):
            return self._index(to_dense(X_binned))  # settings that build some stored column by column
        return X_binned, index

    def _fill_counts(self, hist, features) -> None:
        """Counts of ``features`` over all rows (zero residuals, unit second channel), for pruning;
        counts of every feature are also kept as the root's count table (:meth:`_root_counts`), so
        the fit passes over its rows once for both."""
        n = self.X_binned.shape[0]
        zeros, no_h = np.zeros(n), np.empty(0)
        indexed = np.zeros(features.shape[0], dtype=bool) if self.sparse is None else \
            np.isin(features, self.sparse.features)
        rowwise, columns = features[indexed], features[~indexed]
        for X, cols, part in self._columns.parts(columns):
            kernel = _histogram_kernel(n, part, self.layout.max_width)
            kernel(X, cols, self._no_rows, zeros, no_h, part, self.offsets, self.n_bins, hist)
        if rowwise.shape[0]:
            self.sparse.build_histogram(self._no_rows, zeros, no_h, 0.0, float(n), float(n), self.offsets,
                                        hist, rowwise)
        if self._counts is None and features.shape[0] == self.n_features and self._keeps_root_counts():
            self._counts = np.ascontiguousarray(hist[:, C_CH])

    # -- histogram pool: buffers are reused across nodes and trees (page-faulting a fresh
    #    30 MB histogram per node costs more than filling it) and capped in number
    def _get_hist(self):
        if self._free_hists:
            return self._free_hists.pop()
        self._n_hists += 1
        return self.layout.new()

    def split_rule(self, node, count_rows: bool = False) -> SplitRule:
        """``node``'s :class:`SplitRule`: its totals and the growth settings (``count_rows``: rows are
        counted exactly whatever ``leaf_count`` says)."""
        p = self.params
        return SplitRule(node.sum_g, node.sum_h, float(node.count), float(p.min_samples_leaf),
                         0.0 if count_rows else self._count_factor(node), p.min_child_weight, p.reg_lambda)

    def _count_factor(self, node) -> float:
        """The rows a unit of hessian counts for in ``node`` under ``leaf_count="hessian"`` (0: rows
        are counted exactly, also whenever every hessian is 1)."""
        if self.params.leaf_count != "hessian" or self._h_is_count:
            return 0.0
        return node.count / (node.sum_h + 2e-15) if node.sum_h > 0 else 0.0

    def _fuses_pairs(self) -> bool:
        """Does a split's pair of children share one pass
        (:func:`~gbfs.booster.kernels.splitting.build_subtract_and_scan`)?

        Only when the histogram budget holds exactly one histogram -- wide, short data such as
        Gisette, where one histogram is about as large as the binned matrix.  The two-pass search
        needs a second buffer for the smaller child, so it builds every node of such data from its
        rows; one pass subtracts along the larger children with the one buffer.  With room for
        more the two ways take the same time (measured at the Epsilon shape) and the two-pass
        search is kept.  Only the column kernels fuse: categorical features and the row-wise
        sparse index fill their own bins.
        """
        return self.fuses_pairs and self._max_hists == 1 and self.cats is None and self.sparse is None

    def _can_keep(self, holding: bool = False) -> bool:
        """May a node keep a histogram (``holding``: the one it already has, a larger child's)?

        One buffer stays free for the transient smaller child of a later subtraction; a budget of one
        histogram keeps it along the larger children of fused pairs, which need no second buffer.
        """
        if self._fuses_pairs():
            return holding or len(self._free_hists) > 0 or self._n_hists < 1
        return len(self._free_hists) > 1 or self._n_hists + 1 < self._max_hists

    def _release(self, node):
        if node.hist is not None:
            self._free_hists.append(node.hist)
            node.hist = None

    def release_buffers(self) -> None:
        self._free_hists.clear()
        self._n_hists = 0

    def grow(self, rows: np.ndarray, rw: np.ndarray, hw: np.ndarray, usage: Usage,
             norm: float, hw_is_one: bool = False, X_binned: np.ndarray | None = None,
             normaliser: float | None = None) -> GrownTree:
        """Grow a tree on ``rows``.

        Parameters
        ----------
        rows : ndarray of int32
            Rows of ``X_binned`` used for this tree (sorted).
        rw, hw : ndarray of float64, shape (n_rows,)
            Per-row weighted residual ``w_i r_i`` and second channel (``w_i`` for the
            SSE criterion, ``w_i h_i`` for Newton); only entries in ``rows`` are read.
        usage : Usage
            Omega (:class:`~gbfs.booster.usage.Usage`); updated in place as splits use new features.
        norm : float
            Divisor of the gain: 1 (GBFS) or SSE_root (A-GBM).
        hw_is_one : bool
            ``hw`` is 1 for every row (SSE criterion, unit weights): the histogram kernels then
            skip the second channel and copy the count into it.
        X_binned : ndarray of uint8, Fortran-ordered, optional
            The matrix of this tree (default: the grower's): a compact copy of a row sample has
            fewer rows but the same columns, and ``rows`` then index the copy.
        normaliser : float, optional
            The tree's gain normaliser (:func:`gbfs.booster.normaliser.tree_normaliser`, ``inf`` when no
            split can gain): scales the roundoff floor of split gains (:data:`ROUNDOFF_GAIN`).
            None: only ``min_split_gain``.
        """
        if X_binned is not None and self.sparse is not None:
            raise ValueError("a grower with a row-wise sparse index grows on its own matrix only")
        # the matrix the column kernels read (a sample's compact copy is dense and whole)
        self.matrix = self._columns if X_binned is None else Columns(X_binned)
        self._rw, self._hw = rw, hw
        n = rows.shape[0]
        self._partition = np.array(rows, dtype=ROW_DTYPE)
        # the root reads columns directly when it holds every row in order (no sampler)
        self._all_rows = n == self.matrix.n_rows and (n == 0 or (rows[0] == 0 and rows[-1] == n - 1))
        root_rw, root_hw = (rw, hw) if self._all_rows else (rw[rows], hw[rows])  # no copy per tree
        return self.grow_from_root(n, total(root_rw), total(root_hw), usage, norm, hw_is_one, normaliser)

    def grow_from_root(self, n: int, sum_g: float, sum_h: float, usage: Usage, norm: float,
                       hw_is_one: bool = False, normaliser: float | None = None) -> GrownTree:
        """Grow a tree from a root of ``n`` rows with channel sums ``sum_g``, ``sum_h`` (the other
        arguments as :meth:`grow`): the best-first loop, which reaches the rows only through
        ``_fused``, ``_histogram_by_columns``, ``_partition_rows``, ``gathered`` and
        ``_fill_counts`` (:class:`~gbfs.booster.growing.remote.RemoteGrower` replaces them)."""
        self._usage, self._norm = usage, norm
        self._h_is_count = hw_is_one
        p = self.params
        self._min_count = max(2 * p.min_samples_leaf,
                              math.ceil(p.min_node_fraction * n) if p.min_node_fraction else 0, 2)
        builder = TreeBuilder()
        root = Node(builder.add_node(n), 0, n, 0, sum_g, sum_h)
        root.dead = self.pruning.root(p.leaf_count != "hessian" or hw_is_one)
        self._min_gain = p.min_split_gain
        if normaliser is not None:  # every term of a gain is at most normaliser + G^2 / (H + lambda)
            scale = normaliser + root.sum_g ** 2 / max(root.sum_h + p.reg_lambda, 1e-300)
            self._min_gain = max(self._min_gain, ROUNDOFF_GAIN * scale)
        self.search.begin_tree(self, root, usage)
        pending, done = [], []
        if self.splittable(root):
            self._search(root)
            pending.append(root)
        else:
            done.append(root)
        n_leaves = 1
        while pending and (p.max_leaves is None or n_leaves < p.max_leaves):
            for node in pending:  # refresh: Omega may have grown since the node was scored
                if node.version != usage.version:
                    self._complete(node)
                    self._score(node)
            best = max(pending, key=lambda nd: nd.score)
            if not best.score > 0.0:
                break
            pending.remove(best)
            children = self._split(best, builder)
            n_leaves += 1
            for child in children:
                (pending if child.splits is not None else done).append(child)
        for node in pending:
            self._release(node)
        leaves = sorted(done + pending, key=lambda nd: nd.start)
        for node in leaves:
            self._free_split_arrays(node)
        return GrownTree(builder, self._partition,
                         np.array([nd.id for nd in leaves], dtype=np.int64),
                         np.array([nd.start for nd in leaves], dtype=np.int64),
                         np.array([nd.end for nd in leaves], dtype=np.int64))

    # -- helpers ---------------------------------------------------------------------------------
    def splittable(self, node) -> bool:
        p = self.params
        if p.max_depth is not None and node.depth >= p.max_depth:
            return False
        # zero hessians and no reg_lambda have no Newton gain (LambdaRank, one relevance): a leaf
        h_ok = node.sum_h >= 2 * p.min_child_weight and node.sum_h + p.reg_lambda > 0.0
        return node.count >= self._min_count and h_ok

    def _keep_hist(self, node, holding: bool = False) -> bool:
        """Keep this node's histogram so its children can use the subtraction trick (``holding``: the
        node already holds one)?"""
        p = self.params
        if p.max_depth is not None and node.depth + 1 >= p.max_depth:
            return False  # its children are leaves
        if self.search.per_node:
            return False  # each child searches its own feature set: nothing to subtract from
        if node.count < max(self._min_count + p.min_samples_leaf, p.subtraction_min_rows):
            return False
        return self._can_keep(holding)

    def gathered(self, node):
        """The node's rows and their residual / second channel in row order.

        For a root holding every training row in order the kernels get an empty row array and
        the full vectors (no gather, no indirection).
        """
        h_empty = self._no_h if self._h_is_count else None
        if node.count == self.matrix.n_rows and node.start == 0 and self._all_rows:
            return self._no_rows, self._rw, self._hw if h_empty is None else h_empty
        rows = self._partition[node.start:node.end]
        r_ord = self._r_ord[:node.count]
        gather(self._rw, rows, r_ord)
        if h_empty is not None:
            return rows, r_ord, h_empty
        h_ord = self._h_ord[:node.count]
        gather(self._hw, rows, h_ord)
        return rows, r_ord, h_ord

    def _alloc_split_arrays(self, node) -> None:
        d = self.n_features
        # a restricted search or a full budget scans a subset: the others stay at -inf (never chosen)
        restricted = self.search.restricted or self._usage.full or node.dead is not None
        if self._free_splits:  # four small allocations per node add up on small data
            node.splits = self._free_splits.pop()
            if restricted:
                node.splits.gain.fill(-np.inf)
        else:
            node.splits = Splits.empty(d, -np.inf if restricted else None)
        if self.cats is not None:
            self.cats.alloc(node)

    def _search(self, node, keep=None, features=None) -> None:
        """Best split per feature of ``node`` from its rows (fused build + scan)."""
        keep = self._keep_hist(node) if keep is None else keep
        self._alloc_split_arrays(node)
        if keep:
            node.hist = self._get_hist()
        rows, r_ord, h_ord = self.gathered(node)
        if features is None:
            features = self.search.node_features(self, node, self._usage, rows, r_ord, h_ord)
        node.searched = features
        self._build_and_scan(node, rows, r_ord, h_ord, features, keep)
        self._score(node)

    def _numeric(self, features: np.ndarray) -> np.ndarray:
        return features if self.cats is None else self.cats.numeric_of(features)

    def _scan_categorical(self, node, rows, r_ord, h_ord, features) -> None:
        if self.cats is not None:
            self.cats.scan(self, node, rows, r_ord, h_ord, features)

    def _build_and_scan(self, node, rows, r_ord, h_ord, features, keep) -> None:
        self._scan_categorical(node, rows, r_ord, h_ord, features)
        sparse = self.sparse if features is self.features else None
        live = self.pruning.live
        if sparse is None:
            numeric = live(self._numeric(features), node.dead)
            self._fused(node, rows, r_ord, h_ord, numeric, keep, node.hist if keep else self._dummy_hist)
            node.dead = self.pruning.after_search(node.dead, numeric, node.splits.gain)
            return
        # the row-wise index covers every sparse feature at once: used when all features are searched
        if not keep and self._scratch_hist is None:
            self._scratch_hist = self.layout.new()
        hist = node.hist if keep else self._scratch_hist
        dense, rowwise = live(sparse.dense_features, node.dead), live(sparse.features, node.dead)
        self._fused(node, rows, r_ord, h_ord, dense, keep, hist)
        serial = sparse.build_histogram(rows, r_ord, h_ord, node.sum_g, node.sum_h, float(node.count),
                                        self.offsets, hist, rowwise)
        scan = best_splits_per_feature_serial if serial else best_splits_per_feature
        scan(hist, rowwise, self.offsets, self.n_bins, self.split_rule(node), node.splits)
        node.dead = self.pruning.after_search(self.pruning.after_search(node.dead, dense, node.splits.gain),
                                              rowwise, node.splits.gain)

    def _fill_histogram(self, node, rows, r_ord, h_ord, features) -> None:
        """``node.hist`` for ``features`` without a split search (the subtraction's smaller child)."""
        live, dead = self.pruning.live, node.dead
        if self.sparse is None or features is not self.features:
            self._histogram_by_columns(node, rows, r_ord, h_ord, live(self._numeric(features), dead))
            return
        self._histogram_by_columns(node, rows, r_ord, h_ord, live(self.sparse.dense_features, dead))
        self.sparse.build_histogram(rows, r_ord, h_ord, node.sum_g, node.sum_h, float(node.count),
                                    self.offsets, node.hist, live(self.sparse.features, dead))

    def _histogram_by_columns(self, node, rows, r_ord, h_ord, features) -> None:
        for X, cols, part in self.matrix.parts(features):
            kernel = _histogram_kernel(node.count, part, self.layout.max_width)
            kernel(X, cols, rows, r_ord, h_ord, part, self.offsets, self.n_bins, node.hist)

    def _fused(self, node, rows, r_ord, h_ord, features, keep, hist) -> None:
        rule = self.split_rule(node)
        counts = self._root_counts() if rows.shape[0] == 0 and self.matrix is self._columns else self._no_h
        for X, cols, part in self.matrix.parts(features):
            if runs_serially(node.count, part.shape[0], self.layout.max_width):
                build_and_scan_serial(X, cols, rows, r_ord, h_ord, part, keep, hist, self.offsets,
                                      self.n_bins, rule, node.splits, counts)
                continue
            n_chunks = max(1, min(self._n_chunks, part.shape[0]))
            build_and_scan(X, cols, rows, r_ord, h_ord, part, n_chunks, keep, hist, self.offsets, self.n_bins,
                           rule, node.splits, counts)

    def _root_counts(self) -> np.ndarray:
        """Every feature's bin counts over all rows (flat layout), which a root without sampling
        copies instead of counting its rows again at every tree; empty (count as you go) where the
        histogram budget holds fewer than two histograms (the table is a third of one) or a
        row-wise index builds the sparse columns."""
        if self._counts is None:
            if self._keeps_root_counts():
                self._fill_counts(self.layout.new(), self.features)  # keeps the table
            else:
                self._counts = self._no_h
        return self._counts

    def _keeps_root_counts(self) -> bool:
        return self._max_hists >= 2 and self.sparse is None

    # -- pending nodes ---------------------------------------------------------------------------
    def _complete(self, node) -> None:
        """A restricted search (GT-GBM): evaluate a pending node on the features that joined Omega
        after its search.

        Algorithm 2 checks every used feature at the split (line 1); best-first growth scores a
        node before its siblings' splits add features to Omega, so those are added here.
        """
        if not self.search.completes or node.searched is None:
            return
        missing = np.setdiff1d(self._usage.free_features(), node.searched, assume_unique=True)
        if missing.size == 0:
            return
        rows, r_ord, h_ord = self.gathered(node)
        self._build_and_scan(node, rows, r_ord, h_ord, missing, False)
        node.searched = np.union1d(node.searched, missing)
        self._release(node)  # its kept histogram lacks the new features: children build from rows

    def _search_by_subtraction(self, large, parent_hist, small_hist, features) -> None:
        """Best splits of ``large`` from ``parent - small``; the parent's buffer becomes large's."""
        self._alloc_split_arrays(large)
        large.searched = features
        if self.cats is not None:
            subtracts = self.cats.subtracts(large)
            rows = (self._no_rows, self._no_h, self._no_h) if subtracts else self.gathered(large)
            self._scan_categorical(large, *rows, features)
        numeric = self.pruning.live(self._numeric(features), large.dead)
        serial = scans_serially(self.offsets, numeric)
        kernel = subtract_and_scan_serial if serial else subtract_and_scan
        kernel(parent_hist, small_hist, numeric, self.offsets, self.n_bins, self.split_rule(large),
               large.splits)
        large.dead = self.pruning.after_search(large.dead, numeric, large.splits.gain)
        large.hist = parent_hist
        if not self._keep_hist(large):
            self._release(large)
        self._score(large)

    def _search_pair(self, parent, small, large, features) -> None:
        """Both children of ``parent`` from its kept histogram, with no second buffer: the smaller
        one's bins from its rows, the larger one's as ``parent - small`` in the parent's buffer,
        feature by feature (:func:`~gbfs.booster.kernels.splitting.build_subtract_and_scan`; the
        sums of a separate build and subtraction).  The larger child keeps the buffer."""
        scan_small = self.splittable(small)
        numeric = self.pruning.live(features, parent.dead)
        self._alloc_split_arrays(large)
        large.searched = features
        splits_s = large.splits  # not written when the smaller child is not searched
        if scan_small:
            self._alloc_split_arrays(small)
            small.searched, splits_s = features, small.splits
        parent_hist, parent.hist = parent.hist, None
        rows, r_ord, h_ord = self.gathered(small)
        tail = (parent_hist, self.offsets, self.n_bins, scan_small, self.split_rule(small), splits_s,
                self.split_rule(large), large.splits)
        for X, cols, part in self.matrix.parts(numeric):
            nf = part.shape[0]
            if runs_serially(small.count, nf, 2 * self.layout.max_width):
                build_subtract_and_scan_serial(X, cols, rows, r_ord, h_ord, part, *tail)
            else:
                chunks = max(1, min(self._n_chunks, nf))
                build_subtract_and_scan(X, cols, rows, r_ord, h_ord, part, chunks, *tail)
        large.hist = parent_hist
        for child in (small, large) if scan_small else (large,):
            child.dead = self.pruning.after_search(child.dead, numeric, child.splits.gain)
            self._score(child)
        if not self._keep_hist(large, holding=True):
            self._release(large)

    def _score(self, node) -> None:
        node.feature, node.score = penalized_best(node.splits.gain, self._usage.penalty(), self._norm,
                                                  self._min_gain)
        node.version = self._usage.version

    def _split(self, node, builder):
        f = node.feature
        b = int(node.splits.bin[f])
        ml = bool(node.splits.missing_left[f])
        categorical = self.cats is not None and self.cats.is_cat[f]
        bits = self.cats.bits(node, f) if categorical else NUMERIC
        n_left = self._partition_rows(node, f, b, ml, bits)
        lg, lh, lc = node.splits.left_sums[f].tolist()  # Python floats: cheaper arithmetic below
        assert int(lc) == n_left, "histogram and partition disagree"
        left = Node(builder.add_node(n_left), node.start, node.start + n_left, node.depth + 1, lg, lh)
        right = Node(builder.add_node(node.count - n_left), node.start + n_left, node.end,
                      node.depth + 1, node.sum_g - lg, node.sum_h - lh)
        threshold = math.nan if categorical else self._threshold(node, f, b)
        builder.set_split(node.id, f, threshold, b, ml, left.id, right.id, float(node.splits.gain[f]))
        if categorical:
            builder.set_categories(node.id, bins_of(bits))
        self._usage.mark_used(f)
        left.dead = right.dead = node.dead
        self._search_children(node, left, right)
        # free the per-feature arrays of an internal node
        self._free_split_arrays(node)
        node.cat_bits = node.cat_hist = None
        return left, right

    def _free_split_arrays(self, node) -> None:
        if node.splits is not None:
            self._free_splits.append(node.splits)
            node.splits = None

    def _threshold(self, node, f: int, b: int) -> float:
        """The raw threshold of ``node``'s split of feature ``f`` at bin ``b``."""
        return self.bin_mapper.threshold(f, b)

    def add_scores(self, tree, raw: np.ndarray, X_binned) -> None:
        """``raw += tree(X)`` for every row of the binned matrix ``X_binned`` (rows a sample left out
        are scored by the tree too)."""
        PackedEnsemble.of_tree(tree).predict_binned(X_binned, raw)

    def _partition_rows(self, node, f: int, b: int, ml: bool, bits) -> int:
        """Reorder ``node``'s rows so that its left child's come first; returns their number."""
        return split_partition(self._partition, node.start, node.end, self.matrix.column(f), b, ml, bits,
                               self._buffer)

    def _search_children(self, parent, left, right) -> None:
        """Split search of the splittable children: subtraction when the parent kept its histogram."""
        small, large = (left, right) if left.count <= right.count else (right, left)
        if self.cats is not None:
            self.cats.pair(parent, small, large)
        wanted = self.search.child_features(self, self._usage) if parent.hist is not None else None
        if wanted is not None and wanted is not self.features and parent.searched is not self.features \
                and not np.all(np.isin(wanted, parent.searched, assume_unique=True)):
            wanted = None  # GT-GBM tree scope: Omega grew beyond the parent's histogram
        if wanted is not None and self.splittable(large) and self._fuses_pairs():
            self._search_pair(parent, small, large, wanted)
            return
        if wanted is not None and self.splittable(large):
            # the smaller child's histogram must exist in full for the subtraction
            if self.splittable(small):
                self._search(small, keep=True, features=wanted)
            else:
                small.hist = self._get_hist()
                rows, r_ord, h_ord = self.gathered(small)
                self._fill_histogram(small, rows, r_ord, h_ord, wanted)
            parent_hist, parent.hist = parent.hist, None
            self._search_by_subtraction(large, parent_hist, small.hist, wanted)
            if not (self.splittable(small) and self._keep_hist(small)):
                self._release(small)
            return
        self._release(parent)
        for child in (small, large):
            if self.splittable(child):
                self._search(child)
