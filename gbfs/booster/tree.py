"""Fitted trees and ensemble prediction kernels.

A tree is a set of parallel node arrays (pygbm's predictor records, without a
structured dtype so the model file is plain JSON).  Node 0 is the root; a leaf has
``feature == -1``.  ``value`` already includes the learning rate.

For prediction the trees of an ensemble are packed into one flat set of arrays
(child indices made absolute) so one parallel kernel walks all trees for each row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse
from numba import njit

from .kernels._types import MISSING_BIN
from .kernels.categorical import CAT_WORDS, bits_of, in_set
from .kernels.sparse_binned import columns_for
from .kernels.tasks import run_tasks


@dataclass
class Tree:
    feature: np.ndarray  # int32, -1 for leaves
    threshold: np.ndarray  # float64 raw threshold: x <= threshold goes left
    bin_threshold: np.ndarray  # int32: bin <= bin_threshold goes left
    missing_left: np.ndarray  # bool: NaN goes left
    left: np.ndarray  # int32 child ids, -1 for leaves
    right: np.ndarray
    value: np.ndarray  # float64 leaf values (shrunk), 0 for internal nodes
    gain: np.ndarray  # float64 unpenalised gain of the split, 0 for leaves
    count: np.ndarray  # int64 training rows reaching the node
    # categorical splits (gbfs.booster.kernels.categorical): node id -> sorted bins going left; such a node
    # has threshold NaN, bin_threshold -1 and missing_left False (missing values go right)
    cat_left: dict[int, np.ndarray] = field(default_factory=dict)

    FIELDS = ("feature", "threshold", "bin_threshold", "missing_left", "left", "right", "value",
              "gain", "count")
    DTYPES = (np.int32, np.float64, np.int32, np.bool_, np.int32, np.int32, np.float64, np.float64,
              np.int64)

    @property
    def n_nodes(self) -> int:
        return int(self.feature.shape[0])

    @property
    def n_leaves(self) -> int:
        return int(np.sum(self.feature < 0))

    def used_features(self) -> np.ndarray:
        """Split features in node order (node order is the order of the splits)."""
        return self.feature[self.feature >= 0]


class TreeBuilder:
    """Append-only node store used by the grower."""

    def __init__(self):
        self.cols = {name: [] for name in Tree.FIELDS}
        self.cat_left: dict[int, np.ndarray] = {}

    def add_node(self, count: int) -> int:
        c = self.cols  # a leaf until set_split (one append per field: this runs for every node)
        c["feature"].append(-1)
        c["threshold"].append(np.inf)
        c["bin_threshold"].append(-1)
        c["missing_left"].append(False)
        c["left"].append(-1)
        c["right"].append(-1)
        c["value"].append(0.0)
        c["gain"].append(0.0)
        c["count"].append(count)
        return len(c["feature"]) - 1

    def set_split(self, node, feature, threshold, bin_threshold, missing_left, left, right, gain):
        c = self.cols
        c["feature"][node] = feature
        c["threshold"][node] = threshold
        c["bin_threshold"][node] = bin_threshold
        c["missing_left"][node] = missing_left
        c["left"][node] = left
        c["right"][node] = right
        c["gain"][node] = gain

    def set_categories(self, node: int, bins: np.ndarray) -> None:
        """Make ``node``'s split categorical: ``bins`` go left."""
        self.cat_left[node] = np.asarray(bins, dtype=np.int32)

    def build(self, values: np.ndarray) -> Tree:
        arrays = {name: np.asarray(self.cols[name], dtype=dt) for name, dt in zip(Tree.FIELDS, Tree.DTYPES)}
        arrays["value"] = np.asarray(values, dtype=np.float64)
        return Tree(**arrays, cat_left=dict(self.cat_left))


#: a sparse matrix is predicted in blocks of about this many dense values (8 MiB)
_PREDICT_BLOCK_VALUES = 1 << 20
_ONE_ROOT = np.zeros(1, dtype=np.int32)
_NO_CAT_BITS = np.zeros((0, CAT_WORDS), dtype=np.uint32)


class PackedEnsemble:
    """Trees concatenated for the prediction kernels."""

    @classmethod
    def of_tree(cls, tree: Tree) -> PackedEnsemble:
        """One tree, as ``PackedEnsemble([tree])`` packs it, without the concatenations: boosting
        scores every new tree on its evaluation sets, where at small sizes packing cost more than
        predicting."""
        if tree.cat_left:
            return cls([tree])
        packed = cls.__new__(cls)
        packed.roots = _ONE_ROOT
        packed.feature = tree.feature.astype(np.int32, copy=False)
        packed.threshold = tree.threshold.astype(np.float64, copy=False)
        packed.bin_threshold = tree.bin_threshold.astype(np.int32, copy=False)
        packed.missing_left = tree.missing_left.astype(np.bool_, copy=False)
        packed.value = tree.value.astype(np.float64, copy=False)
        # children are node ids or -1 already: the offset of a first tree is 0
        packed.left = tree.left.astype(np.int32, copy=False)
        packed.right = tree.right.astype(np.int32, copy=False)
        packed.cat_set = np.full(packed.feature.shape[0], -1, dtype=np.int32)
        packed.cat_bits = _NO_CAT_BITS
        packed.has_categorical = False
        return packed

    def __init__(self, trees: list[Tree]):
        offsets = np.cumsum([0] + [t.n_nodes for t in trees])
        self.roots = offsets[:-1].astype(np.int32)

        def cat(name, dtype):
            if not trees:
                return np.zeros(0, dtype=dtype)
            return np.concatenate([getattr(t, name) for t in trees]).astype(dtype)

        self.feature = cat("feature", np.int32)
        self.threshold = cat("threshold", np.float64)
        self.bin_threshold = cat("bin_threshold", np.int32)
        self.missing_left = cat("missing_left", np.bool_)
        self.value = cat("value", np.float64)
        left, right = [], []
        for t, off in zip(trees, self.roots):
            left.append(np.where(t.left >= 0, t.left + off, -1))
            right.append(np.where(t.right >= 0, t.right + off, -1))
        self.left = np.concatenate(left).astype(np.int32) if trees else np.zeros(0, np.int32)
        self.right = np.concatenate(right).astype(np.int32) if trees else np.zeros(0, np.int32)
        # categorical splits: cat_set[node] indexes the node's left set in cat_bits, else -1
        self.cat_set = np.full(self.feature.shape[0], -1, dtype=np.int32)
        sets = []
        for t, off in zip(trees, self.roots):
            for node, bins in sorted(t.cat_left.items()):
                self.cat_set[off + node] = len(sets)
                sets.append(bits_of(bins))
        self.cat_bits = np.array(sets, dtype=np.uint32).reshape(len(sets), CAT_WORDS)
        self.has_categorical = bool(sets)

    def predict_raw(self, X, out: np.ndarray, categorical=None) -> None:
        """Add the ensemble's output on raw rows (float64 or float32 C-ordered array, or a scipy.sparse
        matrix, densified a block of rows at a time) to ``out``.

        ``categorical``: a function giving a dense block with its categorical columns replaced by
        their bins (NaN for missing or unseen categories), as the categorical splits read them
        (:meth:`gbfs.booster.binning.BinMapper.categories_to_bins`); required when a tree has one.
        """
        if self.has_categorical and categorical is None:
            raise ValueError("this ensemble has categorical splits: pass categorical=")
        if not scipy.sparse.issparse(X):
            self._predict_block(X if categorical is None else categorical(X), out)
            return
        X = X.tocsr()
        step = max(1, _PREDICT_BLOCK_VALUES // max(1, X.shape[1]))
        for a in range(0, X.shape[0], step):
            block = np.ascontiguousarray(X[a:a + step].toarray(), dtype=np.float64)
            self._predict_block(block if categorical is None else categorical(block), out[a:a + step])

    def _predict_block(self, X: np.ndarray, out: np.ndarray) -> None:
        run_tasks(_predict_raw, X.shape[0], X, self.roots, self.feature, self.threshold, self.missing_left,
                  self.left, self.right, self.value, self.cat_set, self.cat_bits, out,
                  task_cost=self._row_cost, even=True)

    def predict_binned(self, X_binned, out: np.ndarray) -> None:
        """Add the ensemble's output on binned rows (training bin mapper; an array or a
        :class:`~gbfs.booster.kernels.sparse_binned.SparseBinned`, read through the columns the trees use)
        to ``out``."""
        X_binned, feature = columns_for(X_binned, self.feature)
        run_tasks(_predict_binned, X_binned.shape[0], X_binned, self.roots, feature, self.bin_threshold,
                  self.missing_left, self.left, self.right, self.value, self.cat_set, self.cat_bits, out,
                  task_cost=self._row_cost, even=True)

    @property
    def _row_cost(self) -> int:
        """Work of one row: a node visit per level of every tree (about)."""
        return max(1, 4 * self.roots.shape[0])


@njit(cache=True, nogil=True, inline="always")
def _nan(x) -> bool:
    return np.isnan(x)


@njit(cache=True, nogil=True, inline="always")
def _missing_bin(b) -> bool:
    return b == MISSING_BIN


@njit(cache=True, nogil=True, inline="always")
def _row_sum(X, i, missing, roots, feature, threshold, missing_left, left, right, value, cat_set, cat_bits):
    """Row ``i``'s sum over the trees of ``roots``: raw values against thresholds (``missing`` is
    :func:`_nan`) or bins against bin thresholds (``missing`` is :func:`_missing_bin`); a categorical
    split reads its category's bin in both."""
    acc = 0.0
    for t in range(roots.shape[0]):
        node = roots[t]
        while feature[node] >= 0:
            x = X[i, feature[node]]
            if missing(x):
                go_left = missing_left[node]
            elif cat_set[node] >= 0:
                go_left = in_set(cat_bits[cat_set[node]], np.int64(x))
            else:
                go_left = x <= threshold[node]
            node = left[node] if go_left else right[node]
        acc += value[node]
    return acc


@njit(cache=True, nogil=True)
def _predict_raw(lo, hi, X, roots, feature, threshold, missing_left, left, right, value, cat_set, cat_bits,
                 out):
    """Rows ``lo..hi-1`` of raw ``X``: ``out[i] +=`` their sum over the trees (a range of
    :func:`gbfs.booster.kernels.tasks.run_tasks`)."""
    for i in range(lo, hi):
        out[i] += _row_sum(X, i, _nan, roots, feature, threshold, missing_left, left, right, value, cat_set,
                           cat_bits)


@njit(cache=True, nogil=True)
def _predict_binned(lo, hi, X_binned, roots, feature, bin_threshold, missing_left, left, right, value,
                    cat_set, cat_bits, out):
    """:func:`_predict_raw` of binned rows."""
    for i in range(lo, hi):
        out[i] += _row_sum(X_binned, i, _missing_bin, roots, feature, bin_threshold, missing_left, left,
                           right, value, cat_set, cat_bits)
