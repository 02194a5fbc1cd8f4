"""A binned matrix that keeps its mostly-default columns sparse: memory in proportion to the entries.

A bag-of-words matrix binned into one byte per entry is ``rows x vocabulary`` bytes -- gigabytes for
a corpus whose non-zeros take megabytes.  :class:`SparseBinned` stores a column whose rows are, all
but at most ``max_share`` of them, in the bin of zero as the (row, bin) pairs of its other rows
(CSC) -- the share and the least number of such columns of
:mod:`gbfs.booster.kernels.sparse_rows`, which builds them row-wise -- and only the remaining
columns as a Fortran-ordered ``uint8`` block.  It is what
:meth:`gbfs.booster.binning.BinMapper.transform` returns for a scipy.sparse input with enough such
columns; nothing in between is ever dense.

The learner reads it where it reads a binned array:

- the histograms of the sparse columns come from the row-wise index
  (:class:`gbfs.booster.kernels.sparse_rows.SparseRows`), built from the pairs directly, and those of
  the block columns from the column kernels through ``col_of``;
- a split on a sparse column partitions its node through one materialised column (``n`` bytes);
- a tree scores rows through the columns it uses (:func:`columns_for`).

Every original feature keeps its own bins, gains and first-use price: this is storage, not a
transformation of the features, and a fit on it grows exactly the trees of a fit on the same data
as a dense array.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._types import X_BINNED_DTYPE
from .bins.lookup import GRID_CELLS, bin_of, bin_values, column_grid
from .sparse_rows import MIN_SPARSE_FEATURES, SPARSE_SHARE
from .tasks import run_tasks


@njit(cache=True, nogil=True)
def _entry_bins(lo, hi, indptr, data, edges, n_edges, zero, bins, n_other):
    """Columns ``lo..hi-1``: zero's bin, each stored value's bin and the entries outside zero's bin.
    A column of many entries (a numeric feature among one-hot codes) looks them up in its grid
    (:func:`~gbfs.booster.kernels.bins.lookup.column_grid`), which costs a few hundred entries'
    binary searches to build; ``bins`` as a one-column matrix for it."""
    lower = np.empty(GRID_CELLS, dtype=np.int32)
    upper = np.empty(GRID_CELLS, dtype=np.int32)
    bins_2d = bins.reshape((1, bins.shape[0])).T
    for f in range(lo, hi):
        e, ne = edges[f], n_edges[f]
        a, b = np.int64(indptr[f]), np.int64(indptr[f + 1])  # int64 as binning's: one compilation
        if b - a >= GRID_CELLS:
            z, low, inv, widest = column_grid(e, ne, lower, upper)
            bin_values(data[a:b].reshape((1, b - a)), np.int64(0), b - a, e, ne, low, inv, lower, widest, z,
                       bins_2d, a, np.int64(0))
        else:
            z = np.uint8(bin_of(0.0, e, ne))
            for k in range(a, b):
                bins[k] = bin_of(data[k], e, ne)
        zero[f] = z
        c = 0
        for k in range(a, b):
            c += bins[k] != z
        n_other[f] = c


@njit(cache=True, nogil=True)
def _fill(lo, hi, indptr, indices, bins, zero, col_of, dense, new_ptr, new_rows, new_bins):
    """Columns ``lo..hi-1``: a dense column is zero's bin plus its entries; a sparse one keeps its
    entries outside zero's bin at ``new_ptr[f]``."""
    for f in range(lo, hi):
        z = zero[f]
        j = col_of[f]
        if j >= 0:
            for i in range(dense.shape[0]):
                dense[i, j] = z
            for k in range(indptr[f], indptr[f + 1]):
                dense[indices[k], j] = bins[k]
        else:
            p = new_ptr[f]
            for k in range(indptr[f], indptr[f + 1]):
                if bins[k] != z:
                    new_rows[p] = indices[k]
                    new_bins[p] = bins[k]
                    p += 1


@njit(cache=True, nogil=True)
def _materialise(lo, hi, indptr, rows, bins, default, col_of, dense, features, out):
    """Columns ``features[lo..hi-1]`` of the full matrix into ``out``'s columns ``lo..hi-1``."""
    for k in range(lo, hi):
        f = features[k]
        j = col_of[f]
        if j >= 0:
            for i in range(out.shape[0]):
                out[i, k] = dense[i, j]
        else:
            d = default[f]
            for i in range(out.shape[0]):
                out[i, k] = d
            for e in range(indptr[f], indptr[f + 1]):
                out[rows[e], k] = bins[e]


@njit(cache=True)
def _rows_of(indptr, rows, bins, keep_pos, new_ptr, new_rows, new_bins):
    """The entries of the kept rows (``keep_pos[i]``: row ``i``'s position in the subset, or -1)."""
    p = 0
    new_ptr[0] = 0
    for f in range(indptr.shape[0] - 1):
        for e in range(indptr[f], indptr[f + 1]):
            q = keep_pos[rows[e]]
            if q >= 0:
                new_rows[p] = q
                new_bins[p] = bins[e]
                p += 1
        new_ptr[f + 1] = p
    return p


class SparseBinned:
    """A ``(n_rows, n_features)`` binned matrix: a dense block plus the sparse columns' entries.

    Attributes
    ----------
    shape : tuple of int
    dense : ndarray of uint8, Fortran-ordered, shape (n_rows, n_dense)
        The columns stored densely.
    col_of : ndarray of int64, shape (n_features,)
        Each feature's column in ``dense``, or -1 for a sparse one.
    indptr : ndarray of int64, shape (n_features + 1,)
        CSC pointers of the sparse features' entries (empty ranges for dense features).
    rows, bins : ndarray of int32 / uint8
        Row and bin of each entry outside its feature's ``default`` bin.
    default : ndarray of uint8, shape (n_features,)
        The bin of a sparse feature's rows without an entry (zero's bin).
    """

    dtype = np.dtype(X_BINNED_DTYPE)
    ndim = 2

    def __init__(self, dense, col_of, indptr, rows, bins, default):
        self.dense, self.col_of = dense, col_of
        self.indptr, self.rows, self.bins, self.default = indptr, rows, bins, default
        self.shape = (dense.shape[0], col_of.shape[0])

    @classmethod
    def from_csc(cls, X, edges: np.ndarray, n_edges: np.ndarray, max_share: float = SPARSE_SHARE,
                 min_columns: int = MIN_SPARSE_FEATURES) -> SparseBinned | None:
        """Bin a canonical CSC matrix ``X`` (sorted, no duplicates) with these edges; None when fewer
        than ``min_columns`` columns have at most ``max_share`` of rows outside zero's bin."""
        n, d = X.shape
        zero = np.empty(d, dtype=X_BINNED_DTYPE)
        n_other = np.empty(d, dtype=np.int64)
        bins = np.empty(X.data.shape[0], dtype=X_BINNED_DTYPE)
        run_tasks(_entry_bins, d, X.indptr, X.data, edges, n_edges, zero, bins, n_other,
                  task_cost=max(1, X.nnz // max(d, 1)))
        sparse = n_other <= max_share * n
        if n == 0 or np.count_nonzero(sparse) < max(1, min_columns):
            return None
        col_of = np.full(d, -1, dtype=np.int64)
        col_of[~sparse] = np.arange(np.count_nonzero(~sparse))
        dense = np.empty((n, np.count_nonzero(~sparse)), dtype=X_BINNED_DTYPE, order="F")
        indptr = np.zeros(d + 1, dtype=np.int64)
        np.cumsum(np.where(sparse, n_other, 0), out=indptr[1:])
        rows = np.empty(indptr[-1], dtype=np.int32)
        new_bins = np.empty(indptr[-1], dtype=X_BINNED_DTYPE)
        run_tasks(_fill, d, X.indptr, X.indices, bins, zero, col_of, dense, indptr, rows, new_bins,
                  task_cost=n)
        return cls(dense, col_of, indptr, rows, new_bins, zero)

    @property
    def nbytes(self) -> int:
        return int(self.dense.nbytes + self.indptr.nbytes + self.rows.nbytes + self.bins.nbytes
                   + self.col_of.nbytes + self.default.nbytes)

    @property
    def sparse_features(self) -> np.ndarray:
        return np.flatnonzero(self.col_of < 0)

    def take(self, features: np.ndarray) -> np.ndarray:
        """The Fortran-ordered ``(n_rows, len(features))`` uint8 array of these columns."""
        features = np.asarray(features, dtype=np.int64)
        out = np.empty((self.shape[0], features.shape[0]), dtype=X_BINNED_DTYPE, order="F")
        run_tasks(_materialise, features.shape[0], self.indptr, self.rows, self.bins, self.default,
                  self.col_of, self.dense, features, out, task_cost=self.shape[0])
        return out

    def column_into(self, f: int, out: np.ndarray) -> None:
        """Feature ``f``'s bins for every row into column 0 of ``out`` (uint8, Fortran-ordered, of
        this matrix's rows): a split's column without a new array or a thread-pool call."""
        _materialise(0, 1, self.indptr, self.rows, self.bins, self.default, self.col_of, self.dense,
                     np.array([f], dtype=np.int64), out)

    def toarray(self) -> np.ndarray:
        return self.take(np.arange(self.shape[1]))

    def columns(self, features: np.ndarray) -> SparseBinned:
        """The matrix of ``features`` only (feature ``k`` of it is ``features[k]`` here), still sparse."""
        features = np.asarray(features, dtype=np.int64)
        col_of = self.col_of[features]
        dense_cols = col_of[col_of >= 0]
        new_col = np.full(features.shape[0], -1, dtype=np.int64)
        new_col[col_of >= 0] = np.arange(dense_cols.shape[0])
        lengths = np.where(col_of < 0, self.indptr[features + 1] - self.indptr[features], 0)
        indptr = np.zeros(features.shape[0] + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        take = np.concatenate([np.arange(self.indptr[f], self.indptr[f + 1]) for f in features[col_of < 0]]
                              or [np.zeros(0, dtype=np.int64)]).astype(np.int64)
        return SparseBinned(np.asfortranarray(self.dense[:, dense_cols]), new_col, indptr, self.rows[take],
                            self.bins[take], self.default[features].copy())

    def take_rows(self, rows: np.ndarray) -> SparseBinned:
        """The matrix of ``rows`` only, in their order (no repeats), still sparse."""
        rows = np.asarray(rows, dtype=np.int64)
        keep_pos = np.full(self.shape[0], -1, dtype=np.int64)
        keep_pos[rows] = np.arange(rows.shape[0])
        if np.count_nonzero(keep_pos >= 0) != rows.shape[0]:
            raise ValueError("rows must not repeat")
        indptr = np.empty_like(self.indptr)
        new_rows = np.empty(self.rows.shape[0], dtype=np.int32)
        new_bins = np.empty(self.rows.shape[0], dtype=X_BINNED_DTYPE)
        p = _rows_of(self.indptr, self.rows, self.bins, keep_pos, indptr, new_rows, new_bins)
        return SparseBinned(np.asfortranarray(self.dense[rows]), self.col_of.copy(), indptr,
                            new_rows[:p].copy(), new_bins[:p].copy(), self.default.copy())


def take_rows(X_binned, rows: np.ndarray):
    """Rows of a binned matrix (array or :class:`SparseBinned`), in the same storage."""
    if isinstance(X_binned, SparseBinned):
        return X_binned.take_rows(rows)
    return np.asfortranarray(X_binned[rows])


def take_columns(X_binned, columns: np.ndarray):
    """Columns of a binned matrix (array or :class:`SparseBinned`), in the same storage."""
    if isinstance(X_binned, SparseBinned):
        return X_binned.columns(columns)
    return np.asfortranarray(X_binned[:, columns])


def to_dense(X_binned) -> np.ndarray:
    """A binned matrix as one Fortran-ordered uint8 array (for the parts of the learner that read
    every column by row: GT-GBM's group tests, multitask fits)."""
    return X_binned.toarray() if isinstance(X_binned, SparseBinned) else X_binned


def columns_for(X_binned, feature: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The dense columns a set of tree nodes reads and the nodes' features renumbered into them
    (leaves, feature -1, stay -1): how trees score a :class:`SparseBinned` matrix."""
    if not isinstance(X_binned, SparseBinned):
        return X_binned, feature
    used = np.unique(feature[feature >= 0])
    local = np.where(feature >= 0, np.searchsorted(used, feature), -1).astype(feature.dtype)
    return X_binned.take(used), local


def block_of(X_binned) -> tuple[np.ndarray, np.ndarray]:
    """The dense block the column kernels read and each feature's column in it (-1: stored sparse)."""
    if isinstance(X_binned, SparseBinned):
        dense = X_binned.dense
        if dense.shape[1] == 0:
            # numpy flags an (n, 0) or (n, 1) array C- as well as F-contiguous, and numba then
            # compiles every column kernel once more, for a C-ordered matrix (seconds per kernel):
            # two columns that no feature reads keep the block F-ordered only
            dense = np.zeros((dense.shape[0], 2), dtype=dense.dtype, order="F")
        return dense, X_binned.col_of
    return X_binned, np.arange(X_binned.shape[1], dtype=np.int64)


def entries_of(X_binned) -> tuple | None:
    """The sparse columns' ``(indptr, rows, bins, zero_bin)`` (None for a dense array)."""
    if isinstance(X_binned, SparseBinned):
        return X_binned.indptr, X_binned.rows, X_binned.bins, X_binned.default
    return None
