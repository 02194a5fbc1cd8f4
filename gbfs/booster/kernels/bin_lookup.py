"""Raw values to bins: ``#{edges < value}`` per feature, NaN to the missing bin.

A branchless lower bound over a feature's edges takes eight dependent steps for 254 edges; a
per-feature lookup grid (:func:`_grid`) first narrows the search to the edges a value's cell of the
edges' range can hold, about two steps on dense data, and zeros -- most cells of count data -- take
their known bin.  Every value gets exactly the bin of the full search.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._types import MISSING_BIN

_FEATURE_BLOCK = 16  # features transformed together, so each row read is one cache line


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
def _bin_of(v, e, n_edges):
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


@njit(parallel=True, cache=True)
def map_to_bins(X, edges, n_edges, out):
    """``out[i, f] = #{edges[f] < X[i, f]}``, NaN -> MISSING_BIN.

    Parallel over blocks of features: a row's block is one contiguous read of a
    C-ordered X and each output column is written sequentially (Fortran order).  Zeros (most
    cells of count data) take their known bin; other values search only the edges their cell of
    the feature's lookup grid (:func:`_grid`) can hold -- about two instead of eight steps of a
    binary search over 254 edges, the same count.
    """
    n, d = X.shape
    n_blocks = (d + _FEATURE_BLOCK - 1) // _FEATURE_BLOCK
    for blk in prange(n_blocks):
        f0 = blk * _FEATURE_BLOCK
        f1 = min(d, f0 + _FEATURE_BLOCK)
        width = f1 - f0
        zero = np.empty(width, dtype=np.uint8)
        lo = np.empty(width)
        inv = np.empty(width)
        lower = np.empty((width, GRID_CELLS), dtype=np.int32)
        upper = np.empty((width, GRID_CELLS), dtype=np.int32)
        for f in range(f0, f1):
            zero[f - f0] = _bin_of(0.0, edges[f], n_edges[f])
            lo[f - f0], inv[f - f0] = _grid(edges[f], n_edges[f], lower[f - f0], upper[f - f0])
        for i in range(n):
            for j in range(width):
                f = f0 + j
                v = X[i, f]
                if v == 0.0:
                    out[i, f] = zero[j]
                elif inv[j] == 0.0 or np.isnan(v):
                    out[i, f] = _bin_of(v, edges[f], n_edges[f])
                else:
                    t = (v - lo[j]) * inv[j]
                    if t < 0.0:      # below the first edge (-inf included)
                        out[i, f] = 0
                    elif t >= GRID_CELLS:   # at or above the last edge
                        out[i, f] = _bin_of(v, edges[f], n_edges[f])
                    else:
                        c = int(t)
                        out[i, f] = _search(v, edges[f], lower[j, c], upper[j, c] - lower[j, c])


@njit(parallel=True, cache=True)
def map_csc_to_bins(indptr, indices, data, edges, n_edges, out):
    """:func:`map_to_bins` of a CSC matrix: zero's bin everywhere, then the stored values."""
    for f in prange(indptr.shape[0] - 1):
        zero = _bin_of(0.0, edges[f], n_edges[f])
        for i in range(out.shape[0]):
            out[i, f] = zero
        for k in range(indptr[f], indptr[f + 1]):
            out[indices[k], f] = _bin_of(data[k], edges[f], n_edges[f])
