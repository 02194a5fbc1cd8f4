"""A column's bin edges and the mean of each bin's values, from its sorted values.

The kernels behind :meth:`gbfs.booster.binning.BinMapper.fit` (its docstring states the rule:
one bin per value up to ``max_bins`` distinct values, with LightGBM's ``min_data_in_bin`` greedy
merge, else equal-frequency quantiles), run over ranges of columns by
:func:`gbfs.booster.kernels.tasks.run_tasks`.  Only a column's values other than +0.0 are sorted;
the zeros are counted and never written out (:func:`_at` reads the sorted column they make), so a
mostly-zero column -- text counts, one-hot codes -- costs its non-zeros.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .._types import MISSING_BIN
from ..radix import digit_bits, sort_floats, sort_floats_with_rows
from .lookup import bin_sorted


@njit(cache=True, nogil=True)
def _at(nz, neg, n_zero, i):
    """Value ``i`` of a sorted column held as its sorted values other than +0.0 (``nz``, of which
    the first ``neg`` sort below +0.0) with a run of ``n_zero`` values +0.0 between them."""
    if i < neg:
        return nz[i]
    if i < neg + n_zero:
        return 0.0
    return nz[i - n_zero]


@njit(cache=True, nogil=True)
def _greedy_edges(values, lo, hi, prev, in_bin, min_data_in_bin, out, n_edges):
    """LightGBM's greedy walk over ``values[lo:hi]``, after ``prev`` (NaN: no value yet): a bin
    closes at a value change once it holds ``min_data_in_bin`` values, its edge the midpoint.
    Returns the walk's state ``(prev, in_bin, n_edges)``."""
    for i in range(lo, hi):
        v = values[i]
        if not np.isnan(prev):
            in_bin += 1
            if v != prev and in_bin >= min_data_in_bin:
                out[n_edges] = prev * 0.5 + v * 0.5  # no overflow near +-DBL_MAX
                n_edges += 1
                in_bin = 0
        prev = v
    return prev, in_bin, n_edges


@njit(cache=True, nogil=True)
def _edges_of_sorted(nz, neg, n_zero, max_bins, min_data_in_bin, out):
    """Write the bin edges of a sorted, NaN-free column (:func:`_at`) into ``out``; return their
    count.  The values other than zero are walked as they are stored and the run of zeros in one
    step (no value changes inside it)."""
    m = nz.shape[0]
    n = m + n_zero
    if n == 0:
        return 0
    # count distinct values: the changes between stored neighbours, then the zeros' two borders
    n_distinct = 1
    for i in range(1, m):
        if nz[i] != nz[i - 1]:
            n_distinct += 1
    if n_zero > 0:
        if 0 < neg < m and nz[neg] != nz[neg - 1]:
            n_distinct -= 1  # these two are not neighbours: the zeros lie between them
        if m > 0:
            n_distinct += (neg > 0 and nz[neg - 1] != 0.0) + (neg < m and nz[neg] != 0.0)
    n_edges = 0
    if n_distinct <= max_bins:
        # every call with int64 arguments, none a literal constant: numba would compile another
        # version of the helper for a literal
        first = np.int64(0)
        prev, in_bin, n_edges = _greedy_edges(nz, first, neg, np.nan, first, min_data_in_bin, out, first)
        if n_zero > 0:
            prev, in_bin, n_edges = _greedy_edges(np.zeros(1), first, first + 1, prev, in_bin,
                                                  min_data_in_bin, out, n_edges)
            in_bin += n_zero - 1
        return _greedy_edges(nz, neg, m, prev, in_bin, min_data_in_bin, out, n_edges)[2]
    # equal-frequency edges: the q/n_bins quantiles with midpoint interpolation
    n_bins = max(1, min(max_bins, n // min_data_in_bin))
    for q in range(1, n_bins):
        pos = q * (n - 1) / n_bins
        lo = int(np.floor(pos))
        hi = int(np.ceil(pos))
        edge = _at(nz, neg, n_zero, lo) * 0.5 + _at(nz, neg, n_zero, hi) * 0.5
        if n_edges == 0 or edge > out[n_edges - 1]:
            out[n_edges] = edge
            n_edges += 1
    return n_edges


@njit(cache=True, nogil=True)
def _bin_sums(values, lo, hi, edges, n_edges, low, scale, out, b, acc, cnt, total):
    """Add ``values[lo:hi]`` (sorted) to the running sums of :func:`_standardised_bin_values`,
    writing each bin's standardised mean as the walk leaves it.  Returns ``(b, acc, cnt, total)``."""
    for i in range(lo, hi):
        v = values[i]
        while b < n_edges and edges[b] < v:  # the bin transform() gives v: #edges < v
            out[b] = ((acc / cnt) - low) * scale if cnt > 0 else -1.0
            b += 1
            acc = 0.0
            cnt = 0
        acc += v
        cnt += 1
        total += v
    return b, acc, cnt, total


@njit(cache=True, nogil=True)
def _standardised_bin_values(nz, neg, n_zero, edges, n_edges, out):
    """Min-max standardised mean of the sorted column's values (:func:`_at`) falling in each bin
    (GT-GBM's z).

    ``out[b] = (mean of the values in bin b - min) / (max - min)``; the missing bin gets
    the standardised mean of all values; a constant (or empty) column gets 0.
    """
    # element loops, not slice assignments: the same values, and numba compiles a slice assignment's
    # generic implementation for seconds in a fresh environment
    for k in range(out.shape[0]):
        out[k] = 0.0
    m = nz.shape[0]
    n = m + n_zero
    first = np.int64(0)  # int64 arguments, no literal constant (see _edges_of_sorted)
    if n == 0 or not _at(nz, neg, n_zero, n - 1) > _at(nz, neg, n_zero, first):
        return
    for k in range(n_edges + 1):
        out[k] = -1.0  # marks a bin no value fell in
    low = _at(nz, neg, n_zero, first)
    scale = 1.0 / (_at(nz, neg, n_zero, n - 1) - low)
    b, acc, cnt, total = _bin_sums(nz, first, neg, edges, n_edges, low, scale, out, first, 0.0, first, 0.0)
    if n_zero > 0:  # one zero, then the rest of them: adding +0.0 again changes no sum
        b, acc, cnt, total = _bin_sums(np.zeros(1), first, first + 1, edges, n_edges, low, scale, out, b, acc,
                                       cnt, total)
        cnt += n_zero - 1
    b, acc, cnt, total = _bin_sums(nz, neg, m, edges, n_edges, low, scale, out, b, acc, cnt, total)
    out[b] = ((acc / cnt) - low) * scale
    for k in range(n_edges + 1):  # a bin no (subsampled) value fell in
        if out[k] < 0.0:
            if k == 0:
                out[k] = 0.0
            elif k == n_edges:  # above the last edge, which is the max: values beyond the max
                out[k] = 1.0
            else:
                out[k] = (0.5 * (edges[k - 1] + edges[k]) - low) * scale
    out[MISSING_BIN] = (total / n - low) * scale


@njit(cache=True, nogil=True, inline="always")
def _below_zero(v):
    """``v`` sorts before +0.0 in the radix order: negative, or -0.0."""
    return v < 0.0 or (v == 0.0 and np.signbit(v))


@njit(cache=True, nogil=True)
def _fit_with_zeros(nz, n_zero, max_bins, min_data_in_bin, edges, z_values):
    """Edges and standardised bin values of the column of the sorted values ``nz`` and ``n_zero``
    values +0.0, in the radix sort's order (-0.0 before +0.0); returns the edge count.  The zeros
    are never written out: a text column of a handful of non-zeros costs its non-zeros."""
    neg = 0
    while neg < nz.shape[0] and _below_zero(nz[neg]):
        neg += 1
    n_edges = _edges_of_sorted(nz, neg, n_zero, max_bins, min_data_in_bin, edges)
    _standardised_bin_values(nz, neg, n_zero, edges, n_edges, z_values)
    return n_edges


#: columns gathered in one pass over a C-ordered matrix's rows (a row's values of the block share a
#: cache line; one column at a time reads a line per row for each column)
_BLOCK = 8


@njit(cache=True, nogil=True)
def _gather_block(X, f0, width, cols, rows, m, n_nan):
    """Columns ``f0..f0+width-1``'s values other than +0.0 and NaN: column ``j``'s ``m[j]`` of them at
    ``cols[j, :m[j]]`` in row order, and its NaNs counted in ``n_nan[j]``.  With ``rows`` (of ``cols``'
    shape; else of no columns) also their rows at ``rows[j, :m[j]]`` and the NaNs' rows from the end
    back (``rows[j, n - 1 - t]``).  A function of its own: the loop inlined in its caller compiled to
    slower code, as the tile copy of binning's lookup did."""
    n = X.shape[0]
    for j in range(width):
        m[j] = 0
        n_nan[j] = 0
    if rows.shape[1] == 0:
        for i in range(n):
            for j in range(width):
                v = X[i, f0 + j]
                if np.isnan(v):
                    n_nan[j] += 1
                elif not (v == 0.0 and not np.signbit(v)):
                    cols[j, m[j]] = v
                    m[j] += 1
        return
    for i in range(n):
        for j in range(width):
            v = X[i, f0 + j]
            if np.isnan(v):
                n_nan[j] += 1
                rows[j, n - n_nan[j]] = i
            elif not (v == 0.0 and not np.signbit(v)):
                cols[j, m[j]] = v
                rows[j, m[j]] = i
                m[j] += 1


@njit(cache=True, nogil=True)
def fit_edges(lo, hi, X, max_bins, min_data_in_bin, edges, n_edges, z_values, out, binning):
    """Edges of columns ``lo..hi-1`` of a dense ``X``: only a column's values other than +0.0 are
    sorted (a mostly-zero column, text counts, costs its non-zeros), and the zeros are counted.

    With ``binning`` (a fit on every row, :meth:`~gbfs.booster.binning.BinMapper.fit_transform`),
    ``out`` (uint8, ``X``'s shape, Fortran-ordered) also gets the columns' bins: each column's values
    are sorted with their rows and walked once against its edges
    (:func:`~gbfs.booster.kernels.bins.lookup.bin_sorted`) -- one read of ``X`` for both, no search
    per value, and a mostly-zero column costs its non-zeros again.  Without, ``out`` is not read
    (any Fortran-ordered uint8 matrix)."""
    n = X.shape[0]
    block = max(1, min(_BLOCK, hi - lo))  # a range of few columns (narrow data) holds no more
    cols = np.empty((block, n), dtype=np.float64)
    rows = np.empty((block, n if binning else 0), dtype=np.int32)
    m = np.zeros(block, dtype=np.int64)
    n_nan = np.zeros(block, dtype=np.int64)
    for f0 in range(lo, hi, block):
        width = min(hi, f0 + block) - f0
        _gather_block(X, f0, width, cols, rows, m, n_nan)
        for j in range(width):  # the zeros' count as a difference: no literal 0 passed on
            f = f0 + j
            zeros = n - m[j] - n_nan[j]
            if not binning:
                n_edges[f] = _fit_with_zeros(sort_floats(cols[j, :m[j]], digit_bits(m[j])), zeros, max_bins,
                                             min_data_in_bin, edges[f], z_values[f])
                continue
            values, order = sort_floats_with_rows(cols[j, :m[j]], rows[j, :m[j]], digit_bits(m[j]))
            n_edges[f] = _fit_with_zeros(values, zeros, max_bins, min_data_in_bin, edges[f], z_values[f])
            bin_sorted(values, order, rows[j, n - n_nan[j]:], n_edges[f], edges[f], out, f)


@njit(cache=True, nogil=True)
def fit_edges_csc(lo, hi, n, indptr, data, max_bins, min_data_in_bin, edges, n_edges, z_values):
    """:func:`fit_edges` of columns ``lo..hi-1`` of a CSC matrix: each column's implicit zeros,
    then its stored values."""
    for f in range(lo, hi):
        stored = np.empty(indptr[f + 1] - indptr[f], dtype=np.float64)
        m = 0
        for k in range(indptr[f], indptr[f + 1]):
            v = data[k]
            if not np.isnan(v):
                stored[m] = v
                m += 1
        # only the stored values are sorted; the implicit zeros are put in place around them
        zeros = n - (indptr[f + 1] - indptr[f])
        n_edges[f] = _fit_with_zeros(sort_floats(stored[:m], digit_bits(m)), zeros, max_bins,
                                     min_data_in_bin, edges[f], z_values[f])


__all__ = ["fit_edges", "fit_edges_csc"]
