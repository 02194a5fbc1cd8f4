"""GOSS on shards: the single-process sample, drawn across partitions.

GOSS (:class:`gbfs.sampling.samplers.GOSS`) keeps the ``a`` rows of largest ``|g|`` over *all*
rows (ties at the a-th largest value to the lowest rows) and draws ``b`` of the other ``N - a``
by Knuth's selection sampling, one uniform per row from the fit's sample stream, in row order.
Across partitions:

1. the a-th largest key over all rows is found exactly by reductions, as :mod:`gbfs.dask.mvs` finds
   its threshold: each round sends candidate values, every shard counts its keys at or above
   each, and the driver keeps the bracket where the count crosses ``a`` -- bisecting the keys'
   float64 bit patterns, which order non-negative floats -- until few keys are left in it, which
   the shards then send;
2. the ties at that value go to the partitions in partition order (each partition's to its
   lowest rows), so every shard keeps exactly the top rows one process keeps;
3. selection sampling is one pass over the rows in order whose state is the number of rows
   still needed and left, so the shards run it one after another, each from the state the last
   one handed on, with the uniforms one process draws for its rows: the stream's PCG64 generator
   is advanced to the shard's first row (one 64-bit draw per uniform).

So a Dask fit draws the rows and weights of the single-process GOSS sample: the model is the
single-process model up to the order of float additions, as without a sampler.  Step 3 costs one
round trip per partition, in turn.
"""

from __future__ import annotations

import numpy as np

#: candidate values per round trip; keys fetched once this few are left in the bracket
CANDIDATES = 32
FETCH_BELOW = 4096


def _bits(v: float) -> int:
    return int(np.array(v, dtype=np.float64).view(np.int64))


def _value(bits: int) -> float:
    return float(np.array(bits, dtype=np.int64).view(np.float64))


def kth_largest(group, a: int, v_max: float, fold) -> float:
    """The ``a``-th largest key over all shards (``1 <= a <= N``; ``v_max`` the largest)."""
    lo, hi = 0, _bits(v_max) + 1  # count(key >= lo) >= a > count(key >= hi); keys are >= 0
    n_lo, n_hi = group.n_rows, 0
    while hi - lo > 1:
        if n_lo - n_hi <= FETCH_BELOW:  # few keys in [lo, hi): the shards send them
            keys = np.sort(np.concatenate(group.call("goss_between", _value(lo), _value(hi))))[::-1]
            return float(keys[a - n_hi - 1])
        # in integers: float64 cannot tell bit patterns 2^62 apart by less than 2^10
        bits = np.unique([lo + (hi - lo) * j // (CANDIDATES + 1) for j in range(1, CANDIDATES + 1)])
        bits = bits[(bits > lo) & (bits < hi)].astype(np.int64)
        counts = fold(group.call("goss_at_least", bits.view(np.float64)))
        above = np.flatnonzero(counts >= a)  # counts decrease with the candidate
        if above.size:
            lo, n_lo = int(bits[above[-1]]), int(counts[above[-1]])
        below = np.flatnonzero(counts < a)
        if below.size:
            hi, n_hi = int(bits[below[0]]), int(counts[below[0]])
    return _value(lo)


def draw(group, sampler, it: int, offset: int, seed: tuple, fold) -> list:
    """Every shard's rows and weights of GOSS's sample of tree ``it`` (after their residuals over
    all rows); ``offset``: the uniforms the stream drew before this tree.  Returns the shards'
    statistics of their samples."""
    n = group.n_rows
    if not sampler.draws(it):  # every row with weight 1, no uniform drawn
        return [stats for stats, _ in group.call("goss_draw", None, 0, 0, 0, 1.0, 0, seed)]
    a, b, w_other = sampler.sizes(n)
    info = group.call("goss_keys", sampler)
    tops = [0] * group.n_partitions
    kth = np.inf
    if a > 0:
        kth = kth_largest(group, a, max(float(i[1]) for i in info), fold)
        counts = group.call("goss_top", kth)
        ties = a - sum(int(c[0]) for c in counts)  # ties at kth go to the lowest rows
        for p, (n_above, n_equal) in enumerate(counts):
            take = min(ties, int(n_equal))
            tops[p], ties = int(n_above) + take, ties - take
    need, left, start, out = b, n - a, offset, []
    for p in range(group.n_partitions):  # selection sampling: one pass over the rows, in order
        stats, taken = group.call_one(p, "goss_draw", kth, tops[p], need, left, w_other, start, seed)
        out.append(stats)
        n_p = int(info[p][0])
        need, left, start = need - taken, left - (n_p - tops[p]), start + n_p
    return out
