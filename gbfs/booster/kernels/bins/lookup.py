"""Raw values to bins: ``#{edges < value}`` per feature, NaN to the missing bin.

A branchless lower bound over a feature's edges takes eight dependent steps for 254 edges; a
per-feature lookup grid (:func:`_grid`) first narrows the search to the edges a value's cell of the
edges' range can hold -- about three edges on dense data, compared in a fixed run with no branch --
and zeros, most cells of count data, take their known bin.  Every value gets exactly the bin of
the full search.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .._types import MISSING_BIN
from ..tasks import run_tasks

_FEATURE_BLOCK = 16  # features transformed together, so each row read is one cache line
_ROW_TILE = 256  # rows of a block binned per tile: the tile (32 KiB at float64) stays in L1


@njit(cache=True, nogil=True, inline="always")
def _search(v, e, first, size):
    """``first + #{e[first:first + size] < v}`` by a branchless lower bound."""
    lo = first
    while size > 0:
        half = size >> 1
        step = size - half
        lo = lo + step if e[lo + half] < v else lo
        size = half
    return lo


@njit(cache=True, nogil=True, inline="always")
def bin_of(v, e, n_edges):
    """``#{e[:n_edges] < v}`` (NaN -> MISSING_BIN) by a branchless lower bound: random values make
    a branchy binary search mispredict at every level."""
    if np.isnan(v):
        return MISSING_BIN
    return _search(v, e, 0, n_edges)


#: cells of a feature's lookup grid (:func:`_grid`): about one edge per cell at 255 bins
GRID_CELLS = 256


@njit(cache=True, nogil=True)
def _grid(e, n_edges, lower, upper):
    """A feature's lookup grid: ``GRID_CELLS`` equal cells between its first and last edge, cell
    ``c`` holding the range ``[lower[c], upper[c])`` of edge positions its values can have --
    ``#{e < b_(c-1)}`` and ``#{e < b_(c+2)}`` for the cell boundaries ``b_k = lo + k w``, one cell of
    margin on each side, so a value placed one cell off by rounding still finds its count.
    Returns ``(lo, 1 / w)``, or ``(0, 0)`` when the edges are too few, not finite or too close
    for the grid to be exact (the search then spans every edge)."""
    if n_edges < 8:
        return 0.0, 0.0
    lo = e[0]
    hi = e[n_edges - 1]
    w = (hi - lo) / GRID_CELLS
    if not (np.isfinite(lo) and np.isfinite(hi) and w > 1e-9 * max(abs(lo), abs(hi))):
        return 0.0, 0.0
    k = 0
    for c in range(GRID_CELLS):
        b = lo + (c - 1) * w
        while k < n_edges and e[k] < b:
            k += 1
        lower[c] = k
    k = 0
    for c in range(GRID_CELLS):
        b = lo + (c + 2) * w
        while k < n_edges and e[k] < b:
            k += 1
        upper[c] = k
    return lo, 1.0 / w


#: the widest grid cell (edge positions) counted linearly; wider cells use the binary search
LINEAR_CELL = 8


@njit(cache=True, nogil=True, inline="always")
def column_grid(e, n_edges, lower, upper):
    """A feature's lookup (:func:`_grid` into ``lower``, ``upper``): returns ``(zero, lo, inv,
    widest)`` -- the bin of 0.0, the grid's origin and inverse cell width (0: no grid) and the widest
    cell's run of edges."""
    zero = np.uint8(bin_of(0.0, e, n_edges))
    lo, inv = _grid(e, n_edges, lower, upper)
    widest = np.int64(0)
    for c in range(GRID_CELLS if inv != 0.0 else 0):
        widest = max(widest, np.int64(upper[c] - lower[c]))
    return zero, lo, inv, widest


@njit(cache=True, nogil=True)
def bin_values(values, j, m, e, n_edges, lo, inv, lower, widest, zero, out, i0, f):
    """``out[i0 + i, f] = #{e[:n_edges] < values[j, i]}`` (NaN -> MISSING_BIN) for ``i < m``: one
    feature's values.

    Inside the lookup grid (:func:`column_grid`) a value's count is ``lower[c]`` plus the edges of its
    cell's range it exceeds: a fixed run of at most ``widest`` comparisons per feature, with no
    data-dependent branch (a binary search over two or three edges mispredicts at almost every
    step).  The loop body is written out here: as an inlined function it ran 30 % slower.
    """
    if inv == 0.0 or widest > LINEAR_CELL:
        for i in range(m):
            x = values[j, i]
            out[i0 + i, f] = zero if x == 0.0 else bin_of(x, e, n_edges)
        return
    for i in range(m):
        x = values[j, i]
        t = (x - lo) * inv
        if x == 0.0:
            b = zero
        elif np.isnan(x):
            b = MISSING_BIN
        elif t < 0.0:      # below the first edge (-inf included)
            b = 0
        elif t >= GRID_CELLS:   # at or above the last edge
            b = _search(x, e, 0, n_edges)
        else:
            a = lower[int(t)]
            b = a
            for k in range(a, min(a + widest, n_edges)):
                b += e[k] < x
        out[i0 + i, f] = b


@njit(cache=True, nogil=True)
def bin_sorted(values, order, nan_rows, n_edges, e, out, f):
    """Column ``f`` of ``out`` from the column's values other than +0.0 and NaN sorted
    (``values``, each from row ``order[i]``) and the rows of its NaNs (``nan_rows``); the other rows
    are +0.0.  One walk up the sorted values and the edges together gives each value
    ``#{e[:n_edges] < value}``, the bin :func:`map_to_bins` gives it, with no search."""
    n = out.shape[0]
    m = values.shape[0]
    if m + nan_rows.shape[0] < n:
        zero = np.uint8(bin_of(0.0, e, n_edges))
        for i in range(n):
            out[i, f] = zero
    for t in range(nan_rows.shape[0]):
        out[nan_rows[t], f] = MISSING_BIN
    b = 0
    for i in range(m):
        v = values[i]
        while b < n_edges and e[b] < v:
            b += 1
        out[order[i], f] = b


@njit(cache=True, nogil=True)
def _copy_tile(X, i0, m, f0, width, tile):
    """``tile[j, i] = X[i0 + i, f0 + j]``: rows ``i0..i0+m-1`` of a block, feature-major.  A function
    of its own: inside :func:`_bin_block` the same loop compiled to code that took twice as long
    (text_zipf's transform: 45 -> 22 ms on one thread)."""
    for i in range(m):
        for j in range(width):
            tile[j, i] = X[i0 + i, f0 + j]


@njit(cache=True, nogil=True)
def _bin_block(X, edges, n_edges, out, f0, width):
    """:func:`map_to_bins` of the ``width`` features from ``f0`` on (one task)."""
    n = X.shape[0]
    zero = np.empty(width, dtype=np.uint8)
    lo = np.empty(width)
    inv = np.empty(width)
    widest = np.zeros(width, dtype=np.int64)
    lower = np.empty((width, GRID_CELLS), dtype=np.int32)
    upper = np.empty((width, GRID_CELLS), dtype=np.int32)
    for j in range(width):
        zero[j], lo[j], inv[j], widest[j] = column_grid(edges[f0 + j], n_edges[f0 + j], lower[j], upper[j])
    tile = np.empty((width, _ROW_TILE), dtype=X.dtype)
    for i0 in range(0, n, _ROW_TILE):
        m = min(n, i0 + _ROW_TILE) - i0
        _copy_tile(X, i0, m, f0, width, tile)
        for j in range(width):
            f = f0 + j
            bin_values(tile, j, m, edges[f], n_edges[f], lo[j], inv[j], lower[j], widest[j], zero[j], out,
                       i0, f)


@njit(cache=True, nogil=True)
def _bin_blocks(lo, hi, X, edges, n_edges, out):
    """:func:`_bin_block` of the feature blocks ``lo..hi-1`` (a range of :func:`map_to_bins`)."""
    d = X.shape[1]
    for blk in range(lo, hi):
        f0 = blk * _FEATURE_BLOCK
        _bin_block(X, edges, n_edges, out, f0, min(d, f0 + _FEATURE_BLOCK) - f0)


def map_to_bins(X: np.ndarray, edges: np.ndarray, n_edges: np.ndarray, out: np.ndarray) -> None:
    """``out[i, f] = #{edges[f] < X[i, f]}``, NaN -> MISSING_BIN.

    Parallel over blocks of :data:`_FEATURE_BLOCK` features (:func:`gbfs.booster.kernels.tasks.run_tasks`).
    A tile of :data:`_ROW_TILE` rows of the block is copied from the C-ordered ``X`` (each row's
    block one contiguous read) into a feature-major buffer, and each feature's values are then
    binned in one tight loop whose output is a contiguous run of its Fortran-ordered column.
    Zeros (most cells of count data) take their known bin; other values search only the edges their
    cell of the feature's lookup grid (:func:`_grid`) can hold -- the same count as a binary search
    over every edge.
    """
    run_tasks(_bin_blocks, (X.shape[1] + _FEATURE_BLOCK - 1) // _FEATURE_BLOCK, X, edges, n_edges, out,
              task_cost=X.shape[0] * _FEATURE_BLOCK)


@njit(cache=True, nogil=True)
def _csc_columns(lo, hi, indptr, indices, data, edges, n_edges, out):
    """Columns ``lo..hi-1`` of :func:`map_csc_to_bins`."""
    for f in range(lo, hi):
        zero = bin_of(0.0, edges[f], n_edges[f])
        for i in range(out.shape[0]):
            out[i, f] = zero
        for k in range(indptr[f], indptr[f + 1]):
            out[indices[k], f] = bin_of(data[k], edges[f], n_edges[f])


def map_csc_to_bins(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, edges: np.ndarray,
                    n_edges: np.ndarray, out: np.ndarray) -> None:
    """:func:`map_to_bins` of a CSC matrix: zero's bin everywhere, then the stored values."""
    run_tasks(_csc_columns, indptr.shape[0] - 1, indptr, indices, data, edges, n_edges, out,
              task_cost=out.shape[0])
