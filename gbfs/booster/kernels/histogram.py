"""Histogram kernels over one flat buffer with per-feature bin counts.

A node's histogram is one ``(total_bins, 3)`` float64 array: feature ``f`` owns the rows
``offsets[f]:offsets[f + 1]`` -- its ``n_bins[f]`` value bins followed by its missing-value bin --
so a feature with 3 distinct values costs 4 bins, not 256 (:class:`HistogramLayout`).  Per bin
the sums of the weighted residual, of the second channel (row weight for the papers' first-order
SSE criterion, weighted hessian for the Newton criterion) and the row count are adjacent, so one
update touches one cache line.

The binned matrix keeps NaN in bin 255 (:data:`gbfs.booster.kernels._types.MISSING_BIN`); the kernels map it
to
the feature's own missing slot ``n_bins[f]`` with one ``min``, as every value bin is below it.

Only the smaller child of a split is built from rows; its sibling is ``parent - smaller`` (the
subtraction trick of LightGBM), which costs one pass over the histogram instead of a pass over
the larger child's rows.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from ._types import C_CH, G_CH, H_CH, HISTOGRAM_DTYPE, MISSING_BIN

# add_pair writes the two channels with one two-wide access, so they must be neighbours
assert H_CH == G_CH + 1


class HistogramLayout:
    """Where each feature's bins live in a flat histogram.

    Parameters
    ----------
    n_bins_non_missing : array of int, shape (n_features,)
        Value bins of each feature (``BinMapper.n_bins_non_missing_``); each feature gets one
        more bin for its missing values.

    Attributes
    ----------
    n_bins : ndarray of int32
    offsets : ndarray of int64, shape (n_features + 1,)
        Feature ``f``'s bins are rows ``offsets[f]:offsets[f + 1]`` of the flat histogram.
    total : int
        Rows of the flat histogram.
    max_width : int
        Widest feature (bins including the missing one), the size of per-feature scratch buffers.
    """

    def __init__(self, n_bins_non_missing: np.ndarray):
        self.n_bins = np.ascontiguousarray(n_bins_non_missing, dtype=np.int32)
        if np.any(self.n_bins < 1) or np.any(self.n_bins > MISSING_BIN):
            raise ValueError(f"n_bins_non_missing must be in [1, {MISSING_BIN}]")
        self.offsets = np.zeros(self.n_bins.shape[0] + 1, dtype=np.int64)
        np.cumsum(self.n_bins.astype(np.int64) + 1, out=self.offsets[1:])
        self.total = int(self.offsets[-1])
        self.max_width = int(self.n_bins.max()) + 1 if self.n_bins.size else 1

    @property
    def nbytes(self) -> int:
        """Bytes of one histogram."""
        return self.total * 3 * np.dtype(HISTOGRAM_DTYPE).itemsize

    def new(self) -> np.ndarray:
        return np.empty((max(self.total, 1), 3), dtype=HISTOGRAM_DTYPE)

    def feature(self, hist: np.ndarray, f: int) -> np.ndarray:
        """Feature ``f``'s bins (a view): value bins, then the missing bin."""
        return hist[self.offsets[f]:self.offsets[f + 1]]


@intrinsic
def add_pair(typingctx, hist, b, g, h):
    """``hist[b, G_CH] += g; hist[b, H_CH] += h`` as one two-wide vector read-modify-write.

    The two channels are neighbours in a bin, but LLVM keeps two scalar load-add-store triples
    for them; one ``<2 x double>`` addition halves the stores of a histogram update, the limit of
    the kernels' inner loops (about 15 % per row and feature).  Each lane is the same IEEE
    addition as alone -- SSE2, part of every x86-64 CPU, and every other 64-bit target have it --
    so the sums are the same bits on any machine.  ``hist`` is a C-ordered float64
    ``(bins, 3)`` array (any other layout gets the two scalar updates); ``b`` is not
    bounds-checked, as the kernels' indexing is not.
    """
    if not (isinstance(hist, types.Array) and hist.ndim == 2 and hist.dtype == types.float64
            and isinstance(b, types.Integer) and isinstance(g, (types.Float, types.Integer))
            and isinstance(h, (types.Float, types.Integer))):
        return None

    def codegen(context, builder, signature, args):
        arr_t, b_t, g_t, h_t = signature.args
        arr = context.make_array(arr_t)(context, builder, args[0])
        row = context.cast(builder, args[1], b_t, types.intp)
        gv = context.cast(builder, args[2], g_t, types.float64)
        hv = context.cast(builder, args[3], h_t, types.float64)

        def at(channel):
            return cgutils.get_item_pointer2(
                context, builder, data=arr.data, shape=cgutils.unpack_tuple(builder, arr.shape),
                strides=cgutils.unpack_tuple(builder, arr.strides), layout=arr_t.layout,
                inds=[row, context.get_constant(types.intp, channel)])

        if arr_t.layout != "C":
            for channel, v in ((G_CH, gv), (H_CH, hv)):
                ptr = at(channel)
                builder.store(builder.fadd(builder.load(ptr), v), ptr)
            return context.get_dummy_value()
        pair = ir.VectorType(ir.DoubleType(), 2)
        ptr = builder.bitcast(at(G_CH), pair.as_pointer())
        add = ir.Constant(pair, ir.Undefined)
        add = builder.insert_element(add, gv, ir.Constant(ir.IntType(32), 0))
        add = builder.insert_element(add, hv, ir.Constant(ir.IntType(32), 1))
        builder.store(builder.fadd(builder.load(ptr, align=8), add), ptr, align=8)
        return context.get_dummy_value()

    return types.void(hist, b, g, h), codegen


@njit(cache=True, nogil=True, inline="always")
def _zero(hf, nb):
    for b in range(nb + 1):
        hf[b, G_CH] = 0.0
        hf[b, H_CH] = 0.0
        hf[b, C_CH] = 0.0


@njit(cache=True, nogil=True, inline="always")
def accumulate(col, rows, r_ord, h_ord, hf, nb):
    """Sums of one feature over the node's rows (``r_ord``/``h_ord`` are gathered by row order).

    ``hf`` has ``nb + 1`` bins: the value bins and the missing bin ``nb`` (bin 255 of the binned
    column).  ``rows`` empty means "all rows, in order" (the root without sampling): reading the
    column directly is ~40% faster than through the index array.  ``h_ord`` empty means the
    second channel equals the count (the papers' SSE criterion with unit row weights): the
    residual and a unit weight go into the first two channels by one :func:`add_pair`, and the
    count channel is copied from the second afterwards.  Otherwise the residual and second channel
    are one :func:`add_pair` and the count a second update.
    """
    _zero(hf, nb)
    n = r_ord.shape[0]
    unit = h_ord.shape[0] == 0
    # unsigned rows and bins: numba emits no negative-index wraparound for them, and without it
    # the read-modify-writes run about 18 % faster (same additions, same order)
    last = np.uint64(nb)
    if rows.shape[0] == 0 and unit:
        for i in range(n):
            b = min(np.uint64(col[i]), last)
            add_pair(hf, b, r_ord[i], 1.0)
    elif rows.shape[0] == 0:
        for i in range(n):
            b = min(np.uint64(col[i]), last)
            add_pair(hf, b, r_ord[i], h_ord[i])
            hf[b, C_CH] += 1.0
    elif unit:
        for i in range(n):
            b = min(np.uint64(col[np.uint32(rows[i])]), last)
            add_pair(hf, b, r_ord[i], 1.0)
    else:
        for i in range(n):
            b = min(np.uint64(col[np.uint32(rows[i])]), last)
            add_pair(hf, b, r_ord[i], h_ord[i])
            hf[b, C_CH] += 1.0
    if unit:
        for b in range(nb + 1):
            hf[b, C_CH] = hf[b, H_CH]


@njit(parallel=True, cache=True)
def build_histogram(X_binned, cols, rows, r_ord, h_ord, features, offsets, n_bins, hist):
    """Fill the bins of ``features`` in the flat ``hist`` for the rows ``rows`` (empty: all rows);
    parallel over features, the others are untouched.  Feature ``f`` is column ``cols[f]`` of
    ``X_binned`` (the identity for a dense matrix; the dense block's columns for a
    :class:`~gbfs.booster.kernels.sparse_binned.SparseBinned`).

    ``X_binned`` is Fortran-ordered so each feature's column is contiguous and the
    per-feature sums stay in L1 (at most 6 KiB) while its column is streamed.
    """
    for k in prange(features.shape[0]):
        f = features[k]
        accumulate(X_binned[:, cols[f]], rows, r_ord, h_ord, hist[offsets[f]:offsets[f + 1]], n_bins[f])


@njit(cache=True, nogil=True)
def build_histogram_serial(X_binned, cols, rows, r_ord, h_ord, features, offsets, n_bins, hist):
    """:func:`build_histogram` on one thread, for small work (no thread-pool wake-up; a small fit
    compiles no parallel kernel for it)."""
    for k in range(features.shape[0]):
        f = features[k]
        accumulate(X_binned[:, cols[f]], rows, r_ord, h_ord, hist[offsets[f]:offsets[f + 1]], n_bins[f])


@njit(parallel=True, cache=True)
def subtract_histograms(parent, child, out):
    """``out = parent - child`` over a whole flat histogram (``out`` may be ``parent``)."""
    for b in prange(parent.shape[0]):
        for c in range(3):
            out[b, c] = parent[b, c] - child[b, c]


@njit(cache=True, nogil=True)
def gather(values, rows, out):
    """``out[i] = values[rows[i]]``: gradients in the node's row order, read once per node.

    Serial: O(n_node) and memory-bound, cheaper than a parallel launch.
    """
    for i in range(rows.shape[0]):
        out[i] = values[np.uint32(rows[i])]  # unsigned: no wraparound code


@njit(cache=True, nogil=True, inline="always")
def accumulate4(c0, c1, c2, c3, rows, r_ord, h_ord, h0, h1, h2, h3, n0, n1, n2, n3):
    """:func:`accumulate` of four features in one pass over the rows: each row's residual and
    second channel are read once, and the four histograms' updates are independent, so they
    overlap where one feature's would wait on the previous row's update of the same bin.  Every
    bin receives the same additions in the same order as from :func:`accumulate`: the sums are
    bit for bit the same."""
    _zero(h0, n0)
    _zero(h1, n1)
    _zero(h2, n2)
    _zero(h3, n3)
    n = r_ord.shape[0]
    unit = h_ord.shape[0] == 0
    direct = rows.shape[0] == 0
    m0, m1, m2, m3 = np.uint64(n0), np.uint64(n1), np.uint64(n2), np.uint64(n3)  # unsigned: see accumulate
    if unit:
        for i in range(n):
            row = np.uint64(i) if direct else np.uint64(np.uint32(rows[i]))
            g = r_ord[i]
            b = min(np.uint64(c0[row]), m0)
            add_pair(h0, b, g, 1.0)
            b = min(np.uint64(c1[row]), m1)
            add_pair(h1, b, g, 1.0)
            b = min(np.uint64(c2[row]), m2)
            add_pair(h2, b, g, 1.0)
            b = min(np.uint64(c3[row]), m3)
            add_pair(h3, b, g, 1.0)
        for hf, nb in ((h0, n0), (h1, n1), (h2, n2), (h3, n3)):
            for b in range(nb + 1):
                hf[b, C_CH] = hf[b, H_CH]
    else:
        for i in range(n):
            row = np.uint64(i) if direct else np.uint64(np.uint32(rows[i]))
            g = r_ord[i]
            h = h_ord[i]
            b = min(np.uint64(c0[row]), m0)
            add_pair(h0, b, g, h)
            h0[b, C_CH] += 1.0
            b = min(np.uint64(c1[row]), m1)
            add_pair(h1, b, g, h)
            h1[b, C_CH] += 1.0
            b = min(np.uint64(c2[row]), m2)
            add_pair(h2, b, g, h)
            h2[b, C_CH] += 1.0
            b = min(np.uint64(c3[row]), m3)
            add_pair(h3, b, g, h)
            h3[b, C_CH] += 1.0


@njit(cache=True, nogil=True, inline="always")
def _set_counts(hf, nb, counts, unit):
    for b in range(nb + 1):
        hf[b, C_CH] = counts[b]
        if unit:
            hf[b, H_CH] = counts[b]


@njit(cache=True, nogil=True, inline="always")
def accumulate4_counted(c0, c1, c2, c3, r_ord, h_ord, h0, h1, h2, h3, n0, n1, n2, n3, k0, k1, k2, k3):
    """:func:`accumulate4` over every row in order (a root without sampling), with each feature's bin
    counts over all rows given (``k0`` ... ``k3``): one read-modify-write per row and feature fewer.
    The counts are the same exact integers the rows would add up to."""
    _zero(h0, n0)
    _zero(h1, n1)
    _zero(h2, n2)
    _zero(h3, n3)
    unit = h_ord.shape[0] == 0
    m0, m1, m2, m3 = np.uint64(n0), np.uint64(n1), np.uint64(n2), np.uint64(n3)
    if unit:
        for i in range(r_ord.shape[0]):
            g = r_ord[i]
            h0[min(np.uint64(c0[i]), m0), G_CH] += g
            h1[min(np.uint64(c1[i]), m1), G_CH] += g
            h2[min(np.uint64(c2[i]), m2), G_CH] += g
            h3[min(np.uint64(c3[i]), m3), G_CH] += g
    else:
        for i in range(r_ord.shape[0]):
            g = r_ord[i]
            h = h_ord[i]
            b = min(np.uint64(c0[i]), m0)
            add_pair(h0, b, g, h)
            b = min(np.uint64(c1[i]), m1)
            add_pair(h1, b, g, h)
            b = min(np.uint64(c2[i]), m2)
            add_pair(h2, b, g, h)
            b = min(np.uint64(c3[i]), m3)
            add_pair(h3, b, g, h)
    _set_counts(h0, n0, k0, unit)
    _set_counts(h1, n1, k1, unit)
    _set_counts(h2, n2, k2, unit)
    _set_counts(h3, n3, k3, unit)
