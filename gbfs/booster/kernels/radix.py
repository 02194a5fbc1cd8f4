"""LSD radix sorts of float64 values on order-preserving integer keys.

A float's bits, with the sign bit flipped for non-negative values and all bits flipped for
negative ones, compare as unsigned integers in the order of the floats (NaN-free input).  A pass
where every key has the same digit is skipped, so columns with few distinct values (binning) and
scores with a narrow range sort in few passes.  Binning sorts values (:func:`sort_floats`); the
AUC ranks scores (:func:`argsort_floats`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

_SIGN = np.uint64(1 << 63)


@njit(cache=True, nogil=True)
def _keys(values):
    keys = values.view(np.uint64).copy()
    for i in range(keys.shape[0]):  # negative: flip all bits; non-negative: flip the sign bit
        k = keys[i]
        keys[i] = ~k if k & _SIGN else k | _SIGN
    return keys


@njit(cache=True, nogil=True)
def _digit_starts(keys, shift, mask, counts):
    """``counts[d]`` = first output position of digit ``d``; False when all keys share one digit."""
    n = keys.shape[0]
    for d in range(counts.shape[0]):  # element loops: numba compiles slice assignments slowly
        counts[d] = 0
    for i in range(n):
        counts[(keys[i] >> shift) & mask] += 1
    for d in range(counts.shape[0]):
        if counts[d] == n:
            return False
    total = 0
    for c in range(counts.shape[0]):
        t = counts[c]
        counts[c] = total
        total += t
    return True


#: at most this many values are sorted by insertion: a radix pass costs its 2^bits counters
#: whatever the number of values (a text column has a few dozen non-zeros)
_INSERTION_BELOW = 48


@njit(cache=True, nogil=True)
def sort_floats(values, bits=11):
    """Sorted copy of NaN-free float64 ``values`` (2-3x faster than ``np.sort`` on 10^4-10^5).  The
    keys are distinct for distinct bit patterns, so any sort of them gives the same array."""
    src = _keys(values)
    if src.shape[0] < _INSERTION_BELOW:
        for i in range(1, src.shape[0]):
            k = src[i]
            j = i - 1
            while j >= 0 and src[j] > k:
                src[j + 1] = src[j]
                j -= 1
            src[j + 1] = k
        return _floats(src)
    dst = np.empty_like(src)
    mask = np.uint64((1 << bits) - 1)
    counts = np.empty(1 << bits, dtype=np.int64)
    for p in range((64 + bits - 1) // bits):
        shift = np.uint64(bits * p)
        if not _digit_starts(src, shift, mask, counts):
            continue
        for i in range(src.shape[0]):
            digit = (src[i] >> shift) & mask
            dst[counts[digit]] = src[i]
            counts[digit] += 1
        src, dst = dst, src
    return _floats(src)


@njit(cache=True, nogil=True)
def _floats(keys):
    """The floats of sorted keys (:func:`_keys` undone in place)."""
    for i in range(keys.shape[0]):
        k = keys[i]
        keys[i] = k & ~_SIGN if k & _SIGN else ~k
    return keys.view(np.float64)


@njit(cache=True, nogil=True)
def argsort_floats(values, bits=16):
    """Stable argsort of NaN-free float64 ``values`` (-0.0 sorts before 0.0: add 0.0 first to tie
    them); 4-6x faster than ``np.argsort(kind="stable")`` on 10^5-10^6 values."""
    keys = _keys(values)
    n = keys.shape[0]
    order = np.arange(n)
    tmp = np.empty(n, dtype=np.int64)
    mask = np.uint64((1 << bits) - 1)
    counts = np.empty(1 << bits, dtype=np.int64)
    for p in range((64 + bits - 1) // bits):
        shift = np.uint64(bits * p)
        if not _digit_starts(keys, shift, mask, counts):
            continue
        for i in range(n):
            j = order[i]
            digit = (keys[j] >> shift) & mask
            tmp[counts[digit]] = j
            counts[digit] += 1
        order, tmp = tmp, order
    return order
