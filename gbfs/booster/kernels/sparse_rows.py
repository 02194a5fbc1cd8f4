"""Row-wise histograms of mostly-default features (zero-bin skipping).

Text counts and one-hot columns hold one value -- zero -- in almost every row.  Scanning such a
column costs a histogram update per row of the node whatever it holds; LightGBM avoids it by
bundling exclusive features (EFB).  Here the same saving comes from the other classic trick: the
rows of each node visit only their *non-default* entries of the sparse features (a CSR index of
flat histogram bins, built once per fit from the binned matrix), and each sparse feature's
default bin -- its most frequent one, zero's bin for sparse data -- is derived from the node's
totals::

    hist[f, default_f] = (G, H, count)_node - sum of f's other bins

so a node costs ``sum over its rows of their non-default entries`` instead of
``rows x features``.  Every feature keeps its own bins in the flat histogram and is scanned as
itself, so the first-use penalty of an original feature stays exact: the index is a storage trick,
not a feature.  Counts are exact; the derived sums of residuals and hessians differ from a dense
build in the last bits (different summation order), so a matrix that takes this path grows the
same trees as the dense kernels up to rounding ties.

A feature is *sparse* when at most ``max_share`` of the rows are outside its default bin
(LightGBM's ``sparse_threshold`` is the complement, 0.8); the others keep the column-wise kernels.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._types import C_CH, G_CH, H_CH, MISSING_BIN
from .histogram import add_pair
from .tasks import run_tasks

#: a feature is sparse when at most this share of rows is outside its most frequent bin
SPARSE_SHARE = 0.2
#: the row-wise path is used only when it covers at least this many features (below that the
#: column kernels are as fast and the index is not worth its memory)
MIN_SPARSE_FEATURES = 8
#: a large node is accumulated in this many row chunks in parallel (fixed: sums are reproducible
#: across machines), each of at least MIN_CHUNK_ROWS rows, when its entries are at least CHUNK_WORK
#: times the sparse bins each extra chunk zeroes and adds
ROW_CHUNKS = 4
MIN_CHUNK_ROWS = 4096
CHUNK_WORK = 4
#: per-feature passes over at most this many bins run on one thread: waking the thread pool costs
#: more (tens of microseconds with passive OpenMP waiting) than zeroing or scanning them
SERIAL_BINS = 16_384


def flat_bins(features: np.ndarray, offsets: np.ndarray) -> int:
    """Bins of ``features`` in the flat histogram (value and missing bins)."""
    return int((offsets[features + 1] - offsets[features]).sum())


@njit(cache=True, nogil=True)
def _default_bins(lo, hi, X_binned, n_bins, default, n_other):
    """Per feature ``lo..hi-1`` its most frequent bin (local: missing is ``n_bins[f]``; ties: lowest)
    and the number of rows outside it (once per fit: :func:`gbfs.booster.kernels.tasks.run_tasks`)."""
    n = X_binned.shape[0]
    counts = np.empty(MISSING_BIN + 1, dtype=np.int64)
    for f in range(lo, hi):
        for b in range(MISSING_BIN + 1):
            counts[b] = 0
        for i in range(n):
            counts[X_binned[i, f]] += 1
        best = 0
        for b in range(1, MISSING_BIN + 1):
            if counts[b] > counts[best]:
                best = b
        default[f] = min(best, n_bins[f])
        n_other[f] = n - counts[best]


@njit(cache=True)
def _row_index(X_binned, cols, e_ptr, e_rows, e_bins, features, default, offsets, n_bins, indptr, idx):
    """CSR of the non-default flat bins of ``features`` per row (features in increasing order).

    Feature ``f`` is column ``cols[f]`` of ``X_binned``, or (``cols[f] < 0``) the entries
    ``e_ptr[f]..e_ptr[f + 1] - 1`` of ``e_rows`` / ``e_bins``, all outside its default bin."""
    n = indptr.shape[0] - 1
    counts = np.zeros(n + 1, dtype=np.int64)
    for k in range(features.shape[0]):
        f = features[k]
        j = cols[f]
        if j < 0:
            for e in range(e_ptr[f], e_ptr[f + 1]):
                counts[e_rows[e] + 1] += 1
            continue
        for i in range(n):
            if min(np.int64(X_binned[i, j]), n_bins[f]) != default[f]:
                counts[i + 1] += 1
    indptr[0] = 0
    for i in range(n):
        indptr[i + 1] = indptr[i] + counts[i + 1]
    pos = indptr[:n].copy()
    for k in range(features.shape[0]):
        f = features[k]
        j = cols[f]
        if j < 0:
            for e in range(e_ptr[f], e_ptr[f + 1]):
                i = e_rows[e]
                idx[pos[i]] = offsets[f] + min(np.int64(e_bins[e]), n_bins[f])
                pos[i] += 1
            continue
        for i in range(n):
            b = min(np.int64(X_binned[i, j]), n_bins[f])
            if b != default[f]:
                idx[pos[i]] = offsets[f] + b
                pos[i] += 1


@njit(cache=True, nogil=True, inline="always")
def _zero_feature(hist, f, offsets):
    for b in range(offsets[f], offsets[f + 1]):
        hist[b, G_CH] = 0.0
        hist[b, H_CH] = 0.0
        hist[b, C_CH] = 0.0


@njit(parallel=True, cache=True)
def _zero_bins(hist, features, offsets):
    for k in prange(features.shape[0]):
        _zero_feature(hist, features[k], offsets)


@njit(cache=True, nogil=True)
def _zero_bins_serial(hist, features, offsets):
    for k in range(features.shape[0]):
        _zero_feature(hist, features[k], offsets)


@njit(cache=True, nogil=True)
def _accumulate_rows(indptr, idx, rows, r_ord, h_ord, hist, first_row):
    """Add each node row's residual / second channel / count to its non-default bins (``rows``
    empty: the rows ``first_row, first_row + 1, ...``)."""
    all_rows = rows.shape[0] == 0
    unit = h_ord.shape[0] == 0
    for i in range(r_ord.shape[0]):
        row = np.uint64(first_row + i) if all_rows else np.uint64(np.uint32(rows[i]))
        r = r_ord[i]
        h = 1.0 if unit else h_ord[i]
        # unsigned indices: no negative-index wraparound code in the loop
        for k in range(np.uint64(indptr[row]), np.uint64(indptr[row + np.uint64(1)])):
            j = np.uint64(idx[k])
            add_pair(hist, j, r, h)
            hist[j, C_CH] += 1.0


@njit(parallel=True, cache=True)
def _accumulate_rows_chunked(indptr, idx, rows, r_ord, h_ord, features, offsets, hist, scratch):
    """:func:`_accumulate_rows` over ``scratch.shape[0] + 1`` fixed row chunks in parallel: chunk 0
    into ``hist``, chunk c into ``scratch[c - 1]``, then added in chunk order over the bins of
    ``features`` -- the same sums whatever the number of threads.  The bins of other sparse features
    collect scratch values that nothing reads."""
    n_chunks = scratch.shape[0] + 1
    n = r_ord.shape[0]
    for c in prange(n_chunks):
        lo = c * n // n_chunks
        hi = (c + 1) * n // n_chunks
        out = hist if c == 0 else scratch[c - 1]
        if c > 0:
            for k in range(features.shape[0]):
                for b in range(offsets[features[k]], offsets[features[k] + 1]):
                    out[b, G_CH] = 0.0
                    out[b, H_CH] = 0.0
                    out[b, C_CH] = 0.0
        if rows.shape[0] == 0:
            _accumulate_rows(indptr, idx, rows, r_ord[lo:hi], h_ord[lo:hi] if h_ord.shape[0] else h_ord,
                             out, lo)
        else:
            h_part = h_ord[lo:hi] if h_ord.shape[0] else h_ord
            _accumulate_rows(indptr, idx, rows[lo:hi], r_ord[lo:hi], h_part, out, 0)
    for k in prange(features.shape[0]):
        for b in range(offsets[features[k]], offsets[features[k] + 1]):
            for c in range(n_chunks - 1):
                add_pair(hist, b, scratch[c, b, G_CH], scratch[c, b, H_CH])
                hist[b, C_CH] += scratch[c, b, C_CH]


@njit(cache=True, nogil=True, inline="always")
def _derive_feature(hist, f, offsets, default, sum_g, sum_h, sum_c):
    g = sum_g
    h = sum_h
    c = sum_c
    d_bin = offsets[f] + default[f]
    for b in range(offsets[f], offsets[f + 1]):
        if b != d_bin:
            g -= hist[b, G_CH]
            h -= hist[b, H_CH]
            c -= hist[b, C_CH]
    hist[d_bin, G_CH] = g
    hist[d_bin, H_CH] = h
    hist[d_bin, C_CH] = c


@njit(parallel=True, cache=True)
def _derive_default_bins(hist, features, offsets, default, sum_g, sum_h, sum_c):
    """``hist[f, default_f] = node totals - f's other bins`` for every sparse feature."""
    for k in prange(features.shape[0]):
        _derive_feature(hist, features[k], offsets, default, sum_g, sum_h, sum_c)


@njit(cache=True, nogil=True)
def _derive_default_bins_serial(hist, features, offsets, default, sum_g, sum_h, sum_c):
    """:func:`_derive_default_bins` on one thread (few bins: no thread-pool wake-up)."""
    for k in range(features.shape[0]):
        _derive_feature(hist, features[k], offsets, default, sum_g, sum_h, sum_c)


class SparseRows:
    """The row-wise index of a binned matrix's sparse features.

    Attributes
    ----------
    features, dense_features : ndarray of int64
        The sparse features (built row-wise) and the others (column kernels), sorted.
    default : ndarray of int64, shape (n_features,)
        Each feature's most frequent bin in the flat layout's local numbering.
    indptr, idx : ndarray
        CSR over rows of the flat histogram bins of their non-default sparse entries.
    """

    def __init__(self, features, dense_features, default, indptr, idx, offsets):
        self.features, self.dense_features = features, dense_features
        self.default, self.indptr, self.idx = default, indptr, idx
        # the flat bins of the sparse features: how much chunked accumulation zeroes and adds up
        self.n_bins_total = flat_bins(features, offsets)
        self._entries_per_row = idx.shape[0] / max(1, indptr.shape[0] - 1)
        self._scratch = None

    def _chunks(self, n_rows: int) -> int:
        """Row chunks of a node: one, unless its entries outweigh the extra zeroing and adding of
        the sparse bins by :data:`CHUNK_WORK` (a property of the data, never of the thread count,
        so the sums do not depend on the machine)."""
        entries = n_rows * self._entries_per_row
        if n_rows < 2 * MIN_CHUNK_ROWS or entries < CHUNK_WORK * self.n_bins_total:
            return 1
        return int(min(ROW_CHUNKS, n_rows // MIN_CHUNK_ROWS))

    @classmethod
    def build(cls, X_binned: np.ndarray, layout, max_share: float = SPARSE_SHARE,
              min_features: int = MIN_SPARSE_FEATURES, exclude: np.ndarray | None = None,
              cols: np.ndarray | None = None, entries: tuple | None = None) -> SparseRows | None:
        """Index the features with at most ``max_share`` non-default rows; ``None`` when fewer than
        ``min_features`` qualify (or ``max_share`` is 0).  The features of the boolean mask
        ``exclude`` (categorical ones, searched by their own kernel) are in neither ``features`` nor
        ``dense_features``.

        Feature ``f`` is column ``f`` of ``X_binned``, or with ``cols`` column ``cols[f]``; a feature
        with ``cols[f] < 0`` is stored as ``entries = (indptr, rows, bins, zero_bin)``: the rows
        outside its bin ``zero_bin[f]`` (:class:`gbfs.booster.kernels.sparse_binned.SparseBinned`).
        """
        n = X_binned.shape[0]
        d = X_binned.shape[1] if cols is None else cols.shape[0]
        min_features = max(1, min_features)
        if max_share <= 0 or n == 0 or d < min_features:
            return None
        if cols is None:
            cols = np.arange(d, dtype=np.int64)
        block = np.flatnonzero(cols >= 0)
        default = np.empty(d, dtype=np.int64)
        n_other = np.empty(d, dtype=np.int64)
        if block.shape[0]:
            b_default = np.empty(block.shape[0], dtype=np.int64)
            b_other = np.empty(block.shape[0], dtype=np.int64)
            order = np.argsort(cols[block])  # block columns in storage order
            run_tasks(_default_bins, block.shape[0], X_binned, layout.n_bins[block[order]], b_default,
                      b_other, task_cost=n)
            default[block[order]], n_other[block[order]] = b_default, b_other
        if entries is None:
            entries = (np.zeros(d + 1, dtype=np.int64), np.zeros(0, np.int32), np.zeros(0, np.uint8),
                       np.zeros(d, np.uint8))
        e_ptr, e_rows, e_bins, zero = entries
        stored = np.flatnonzero(cols < 0)
        default[stored] = np.minimum(zero[stored], layout.n_bins[stored])
        n_other[stored] = e_ptr[stored + 1] - e_ptr[stored]
        sparse = n_other <= max_share * n
        other = np.ones(d, dtype=bool) if exclude is None else ~exclude
        sparse &= other
        if np.count_nonzero(sparse) < min_features:
            return None
        features = np.flatnonzero(sparse).astype(np.int64)
        indptr = np.empty(n + 1, dtype=np.int64)
        idx = np.empty(int(n_other[sparse].sum()), dtype=np.int32 if layout.total < 2**31 else np.int64)
        _row_index(X_binned, cols, e_ptr, e_rows, e_bins, features, default, layout.offsets, layout.n_bins,
                   indptr, idx)
        return cls(features, np.flatnonzero(~sparse & other).astype(np.int64), default, indptr, idx,
                   layout.offsets)

    @property
    def nbytes(self) -> int:
        return int(self.indptr.nbytes + self.idx.nbytes)

    def build_histogram(self, rows, r_ord, h_ord, sum_g, sum_h, sum_c, offsets, hist,
                        features: np.ndarray | None = None) -> bool:
        """Fill the bins of the sparse ``features`` (default: all) of the flat ``hist`` for a node.

        ``rows`` empty means all rows in order; ``h_ord`` empty means unit second channel (then
        channel 1 is the count); ``sum_*`` are the node's totals.  Every non-default entry of a
        row is added, so the bins of the sparse features left out hold values that mean nothing.
        Returns whether the per-feature passes ran on one thread (at most :data:`SERIAL_BINS`
        bins), which the caller's split scan of the same features follows.
        """
        # contiguous: a strided selection would compile every kernel below once more
        features = self.features if features is None else np.ascontiguousarray(features, dtype=np.int64)
        serial = flat_bins(features, offsets) <= SERIAL_BINS
        (_zero_bins_serial if serial else _zero_bins)(hist, features, offsets)
        n_chunks = self._chunks(r_ord.shape[0])
        if n_chunks == 1:
            _accumulate_rows(self.indptr, self.idx, rows, r_ord, h_ord, hist, 0)
        else:
            if self._scratch is None or self._scratch.shape[0] < n_chunks - 1:
                self._scratch = np.empty((n_chunks - 1,) + hist.shape, dtype=hist.dtype)
            _accumulate_rows_chunked(self.indptr, self.idx, rows, r_ord, h_ord, features, offsets, hist,
                                     self._scratch[:n_chunks - 1])
        derive = _derive_default_bins_serial if serial else _derive_default_bins
        derive(hist, features, offsets, self.default, sum_g, sum_h, sum_c)
        return serial
