"""The column kernels' view of the matrix a tree grows on, whatever its storage.

The column kernels read feature ``f`` as column ``cols[f]`` of a Fortran-ordered uint8 matrix.  For
a dense array that is the array itself; for a :class:`~gbfs.booster.kernels.sparse_binned.SparseBinned`
matrix it is its dense block, and a sparse column -- normally built only from the row-wise index
-- is materialised when a restricted search (``max_features`` reached, a feature subset) asks for
it column by column.  Those columns are kept for the rest of the fit: a restricted search asks for
the same few used features at every node, and reading them exactly as a dense matrix would keeps
the trees identical to a fit on the dense array.
"""

from __future__ import annotations

import numpy as np

from ..kernels.sparse_binned import SparseBinned, block_of


class Columns:
    """Feature columns of one binned matrix for the column kernels.

    Parameters
    ----------
    X_binned : ndarray of uint8 (Fortran-ordered) or SparseBinned
    """

    def __init__(self, X_binned):
        self.X_binned = X_binned
        self.block, self.cols = block_of(X_binned)
        self.n_rows = X_binned.shape[0]
        self._stored = isinstance(X_binned, SparseBinned) and bool(np.any(self.cols < 0))
        self._extra = np.empty((self.n_rows, 0), dtype=np.uint8, order="F")
        self._extra_cols = np.full(self.cols.shape[0], -1, dtype=np.int64)
        self._split_col = None  # a stored column materialised for one split (column)

    def parts(self, features: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """``features`` as ``(matrix, cols, features)`` groups the column kernels can read."""
        if not self._stored:
            return [(self.block, self.cols, features)]
        in_block = self.cols[features] >= 0
        if in_block.all():
            return [(self.block, self.cols, features)]
        stored = features[~in_block]
        self._materialise(stored)
        out = [(self._extra, self._extra_cols, stored)]
        if in_block.any():
            out.insert(0, (self.block, self.cols, features[in_block]))
        return out

    def _materialise(self, features: np.ndarray) -> None:
        new = features[self._extra_cols[features] < 0]
        if new.shape[0] == 0:
            return
        k = self._extra.shape[1]
        self._extra = np.asfortranarray(np.hstack([self._extra, self.X_binned.take(new)]))
        self._extra_cols[new] = np.arange(k, k + new.shape[0])

    def column(self, f: int) -> np.ndarray:
        """Feature ``f``'s bins for every row (a view of the block, or a materialised column, valid
        until the next call)."""
        if self.cols[f] >= 0:
            return self.block[:, self.cols[f]]
        if self._extra_cols[f] >= 0:
            return self._extra[:, self._extra_cols[f]]
        # one buffer for every split's column: it is read once, by the split's partition; two
        # columns, as numpy flags a one-column array C- as well as F-contiguous (another compilation)
        if self._split_col is None:
            self._split_col = np.empty((self.n_rows, 2), dtype=np.uint8, order="F")
        self.X_binned.column_into(f, self._split_col)
        return self._split_col[:, 0]
