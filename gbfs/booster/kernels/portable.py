"""Sums, dot products and means in one fixed order, the same on every CPU.

numpy's ``sum``/``mean`` pick a SIMD loop at run time (SSE, AVX2, AVX-512: a different number of
partial sums, so a different rounding), ``np.dot`` and ``@`` call the OpenBLAS kernel chosen for the
host CPU, and numpy's float64 ``log``/``exp`` have AVX-512 versions that round differently from the
C library's.  A last-bit difference in an initial score, a root SSE or a validation loss changes a
stored model or the iteration early stopping keeps, so everything that decides a model reduces here
instead: plain loops compiled without fast-math flags, which LLVM may not reorder, with eight partial
sums in fixed lanes (the lanes are part of the definition, so a wider or narrower SIMD unit computes
the same numbers; they also let the loop run at several additions per cycle).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

#: the number of partial sums; part of the result's definition, never to be tuned per machine
LANES = 8


@njit(cache=True, nogil=True, inline="always")
def combine_lanes(acc):
    """The eight partial sums of the reductions here, added in a fixed pairwise tree."""
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))


@njit(cache=True, nogil=True)
def ordered_sum(a):
    """Sum of a 1-D float array: element i goes to partial sum ``i % 8``, the eight are added
    pairwise; the same result on every CPU."""
    acc = np.zeros(LANES, dtype=np.float64)
    n = a.shape[0]
    full = n - n % LANES
    for i in range(0, full, LANES):
        for j in range(LANES):
            acc[j] += a[i + j]
    for i in range(full, n):
        acc[i - full] += a[i]
    return combine_lanes(acc)


@njit(cache=True, nogil=True)
def ordered_dot(a, b):
    """``sum_i a_i b_i`` in the order of :func:`ordered_sum` (no fused multiply-add: products are
    rounded before they are added, as on a CPU without FMA)."""
    acc = np.zeros(LANES, dtype=np.float64)
    n = a.shape[0]
    full = n - n % LANES
    for i in range(0, full, LANES):
        for j in range(LANES):
            acc[j] += a[i + j] * b[i + j]
    for i in range(full, n):
        acc[i - full] += a[i] * b[i]
    return combine_lanes(acc)


@njit(cache=True, nogil=True)
def ordered_matvec(A, x):
    """``A @ x`` for a 2-D ``A``, each row by :func:`ordered_dot` (BLAS's ``dgemv`` rounds by CPU)."""
    out = np.empty(A.shape[0], dtype=np.float64)
    for i in range(A.shape[0]):
        out[i] = ordered_dot(A[i], x)
    return out


def total(a: np.ndarray) -> float:
    """:func:`ordered_sum` of any array-like (flattened, as float64)."""
    return float(ordered_sum(np.ascontiguousarray(a, dtype=np.float64).ravel()))


def dot(a: np.ndarray, b: np.ndarray) -> float:
    """:func:`ordered_dot` of two 1-D array-likes of one length."""
    return float(ordered_dot(np.ascontiguousarray(a, dtype=np.float64),
                             np.ascontiguousarray(b, dtype=np.float64)))


def mean(a: np.ndarray) -> float:
    """Mean by :func:`ordered_sum` (NaN for an empty array, as ``np.mean`` without its warning)."""
    a = np.ascontiguousarray(a, dtype=np.float64).ravel()
    return float(ordered_sum(a)) / a.shape[0] if a.shape[0] else math.nan


def std(a: np.ndarray, ddof: int = 0) -> float:
    """Standard deviation ``sqrt(sum (a - mean)^2 / (n - ddof))`` by :func:`mean` and :func:`dot`."""
    a = np.ascontiguousarray(a, dtype=np.float64).ravel()
    d = a - mean(a)
    return math.sqrt(dot(d, d) / (a.shape[0] - ddof))


def matvec(A: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``A @ x`` by :func:`ordered_matvec` (``A`` 2-D, ``x`` 1-D; float64 result)."""
    return ordered_matvec(np.ascontiguousarray(A, dtype=np.float64),
                          np.ascontiguousarray(x, dtype=np.float64))


@njit(cache=True, nogil=True)
def _log_loss(y, p):
    total = 0.0
    for i in range(y.shape[0]):
        q = min(max(p[i], 1e-15), 1.0 - 1e-15)
        total += y[i] * math.log(q) + (1.0 - y[i]) * math.log1p(-q)
    return -total / y.shape[0]


def binary_log_loss(y: np.ndarray, proba: np.ndarray) -> float:
    """Mean binary log-loss with probabilities clipped to [1e-15, 1 - 1e-15]; the logarithms are the
    C library's (numpy's AVX-512 ``log`` rounds differently), summed in row order."""
    return float(_log_loss(np.ascontiguousarray(y, dtype=np.float64),
                           np.ascontiguousarray(proba, dtype=np.float64)))


@njit(cache=True, nogil=True)
def _exp2(x):
    out = np.empty(x.shape[0], dtype=np.float64)
    for i in range(x.shape[0]):
        out[i] = 2.0 ** x[i]
    return out


@njit(cache=True, nogil=True)
def _log2(x):
    out = np.empty(x.shape[0], dtype=np.float64)
    for i in range(x.shape[0]):
        out[i] = math.log2(x[i])
    return out


def exp2(x: np.ndarray) -> np.ndarray:
    """``2 ** x`` elementwise by the C library's ``pow`` (numpy's AVX-512 ``power`` rounds differently)."""
    x = np.asarray(x, dtype=np.float64)
    return _exp2(np.ascontiguousarray(x).ravel()).reshape(x.shape)


def log2(x: np.ndarray) -> np.ndarray:
    """``log2(x)`` elementwise by the C library's ``log2`` (numpy's AVX-512 ``log2`` rounds differently)."""
    x = np.asarray(x, dtype=np.float64)
    return _log2(np.ascontiguousarray(x).ravel()).reshape(x.shape)
