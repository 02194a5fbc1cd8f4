"""The numerical part of the row samplers of :mod:`gbfs.sampling.samplers`: numba kernels (MVS threshold and
selection, GOSS/SGB selection) and the checked MVS functions built on them, :func:`mvs_threshold`
and :func:`mvs_probabilities` (both re-exported by :mod:`gbfs.sampling.samplers`).

Ibragimov & Gusev, "Minimal Variance Sampling in Stochastic Gradient Boosting" (NeurIPS 2019):
Theorem 2 (p_i = min(1, g_hat_i / mu)), Algorithm 1 (sampling) and Algorithm 2 ("Calculate
Threshold").  The kernels draw nothing: every uniform they read is passed in, so the callers in
:mod:`gbfs.sampling.samplers` own all randomness and the same Generator state gives the same rows.  Arguments
of the kernels are not validated (their callers do it).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..validation import check_real


@njit(cache=True, nogil=True)
def regularized_abs(g, h, lam):
    """g_hat_i = sqrt(g_i^2 + lambda h_i^2), the 'regularized absolute value' of Theorem 2."""
    out = np.empty(g.shape[0], dtype=np.float64)
    for i in range(g.shape[0]):
        out[i] = np.sqrt(g[i] * g[i] + lam * h[i] * h[i])
    return out


@njit(cache=True, nogil=True, inline="always")
def _pick(u, size):
    # min(): u * size may round up to size when u is within 2^-53 of 1
    return min(int(u * size), size - 1)


@njit(cache=True, nogil=True, inline="always")
def _below(v, c):
    return v if v < c else 0.0


@njit(cache=True, nogil=True)
def _threshold_step(a, size, c, sum_small, n_large, target, out):
    """One step of Algorithm 2 on ``a[:size]`` with candidate ``c``; kept values go to ``out[:k]``.

    Two passes (count, then compact the side that survives) instead of an in-place 3-way
    partition: the first pass is branch-free and the second writes only the kept side, and
    compacting forwards is safe when ``out is a``.  Returns (found, mu, sum_small, n_large, k).
    """
    n_lt = 0
    n_gt = 0
    # the sum of the values below c in eight fixed lanes, without fast-math: reassociated, LLVM would sum in
    # as many lanes as the host's SIMD unit holds, so mu -- and the rows MVS samples -- would differ between
    # CPUs; fixed lanes (as in gbfs.booster.kernels.portable) round the same everywhere and still vectorise
    # (1.0 ms a step on 10^6 values, against 0.66 ms reassociated)
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    full = size - size % 8
    for i in range(0, full, 8):
        s0 += _below(a[i], c)
        s1 += _below(a[i + 1], c)
        s2 += _below(a[i + 2], c)
        s3 += _below(a[i + 3], c)
        s4 += _below(a[i + 4], c)
        s5 += _below(a[i + 5], c)
        s6 += _below(a[i + 6], c)
        s7 += _below(a[i + 7], c)
    for i in range(full, size):
        s0 += _below(a[i], c)
    # the counts are integers: their order cannot change them
    for i in range(size):
        v = a[i]
        n_lt += v < c
        n_gt += v > c
    sum_lt = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    n_eq = size - n_lt - n_gt
    # f(c) = sum_i min(1, v_i / c); at c == 0 the zeros contribute nothing for any mu > 0, so the
    # threshold is larger: treat f(0) as +inf and discard the zeros into the "small" side
    up = True
    if c > 0.0:
        f = n_large + n_eq + n_gt + (sum_small + sum_lt) / c
        if f == target:
            return True, c, sum_small, n_large, 0
        up = f > target
    # branch-free compaction (unconditional store, conditional advance): with the values in
    # random order a branch here is mispredicted half the time, which costs more than the store
    k = 0
    if up:      # mu > c: values <= c are below the threshold (p = v / mu)
        sum_small += sum_lt + n_eq * c
        for i in range(size):
            v = a[i]
            out[k] = v
            k += v > c
    else:       # mu < c: values >= c are above it (p = 1)
        n_large += n_eq + n_gt
        for i in range(size):
            v = a[i]
            out[k] = v
            k += v < c
    return False, 0.0, sum_small, n_large, k


@njit(cache=True, nogil=True)
def threshold(values, target, pivots):
    """Algorithm 2 ("Calculate Threshold"), iterative; see :func:`gbfs.sampling.samplers.mvs_threshold`."""
    n = values.shape[0]
    if target >= n:
        return values.min()
    work = np.empty(n, dtype=np.float64)
    # the first step reads ``values`` and writes the surviving side to ``work``; later steps
    # compact ``work`` in place, so ``values`` is never modified and never copied whole
    c = values[_pick(pivots[0], n)]
    found, mu, sum_small, n_large, size = _threshold_step(values, n, c, 0.0, 0, target, work)
    step = 1
    while not found and size > 0:
        c = work[_pick(pivots[step % pivots.shape[0]], size)]
        step += 1
        found, mu, sum_small, n_large, size = _threshold_step(work, size, c, sum_small, n_large,
                                                              target, work)
    if found:
        return mu
    # every value is classified: f(mu) = n_large + sum_small / mu = target.  n_large < target
    # holds (a side only moves to "large" when f(c) < target); sum_small == 0 means fewer than
    # target positive values, where no threshold exists and 0 is returned
    return sum_small / (target - n_large)


@njit(cache=True, nogil=True, inline="always")
def _prob(v, mu, p_zero):
    """Theorem 2: p = min(1, g_hat / mu); mu == 0 (no threshold): 1 for g_hat > 0, else p_zero."""
    if mu > 0.0:
        return min(1.0, v / mu)
    return 1.0 if v > 0.0 else p_zero


# error_model="numpy": 1 / p of an unkept row with p == 0 is stored (inf) and then overwritten
@njit(cache=True, nogil=True, error_model="numpy")
def mvs_select(values, mu, p_zero, u):
    """Bernoulli(p_i) selection (row i kept iff u_i < p_i) with weights 1 / p_i, in one fused kernel."""
    n = values.shape[0]
    k = 0
    for i in range(n):
        k += u[i] < _prob(values[i], mu, p_zero)
    if k == 0:  # never an empty tree: keep the row of largest p (p is increasing in g_hat)
        best = np.argmax(values)
        rows = np.full(1, best, dtype=np.int32)
        return rows, np.full(1, 1.0 / _prob(values[best], mu, p_zero))
    # branch-free compaction as in _threshold_step; the spare slot takes stores after the last keep
    rows = np.empty(k + 1, dtype=np.int32)
    weights = np.empty(k + 1, dtype=np.float64)
    j = 0
    for i in range(n):
        p = _prob(values[i], mu, p_zero)
        rows[j] = i
        weights[j] = 1.0 / p
        j += u[i] < p
    return rows[:k], weights[:k]


@njit(cache=True, nogil=True)
def top_mask(key, kth, a):
    """Mask of exactly ``a`` rows of largest ``key``: all above ``kth`` (the a-th largest value),
    then ties at ``kth`` in row order."""
    n_above = 0
    for i in range(key.shape[0]):
        n_above += key[i] > kth
    ties = a - n_above
    top = np.empty(key.shape[0], dtype=np.bool_)
    for i in range(key.shape[0]):
        tie = key[i] == kth and ties > 0
        top[i] = key[i] > kth or tie
        ties -= tie
    return top


@njit(cache=True, nogil=True)
def sequential_select(top, n_top, k, u, w_other):
    """Rows with ``top`` set (weight 1) plus exactly ``k`` of the others, uniformly without
    replacement (weight ``w_other``), in ascending order.

    Knuth's selection sampling (Algorithm S): the i-th non-top row is kept with probability
    (still needed) / (still left), which yields a uniform k-subset in one O(N) pass, already
    sorted; LightGBM's GOSS draws its "other" rows the same way.  Branch-free like mvs_select.
    """
    return selection_pass(top, n_top, k, top.shape[0] - n_top, u, w_other)


@njit(cache=True, nogil=True)
def selection_pass(top, n_top, need, left, u, w_other):
    """:func:`sequential_select`'s pass over rows that continue a longer sequence: Algorithm S
    entered with ``need`` rows still to draw of ``left`` non-top rows from here on, so that
    consecutive passes over the parts of the rows draw what one pass over all rows draws.
    Returns the rows and weights; ``need`` less the number drawn is what the next part needs."""
    k = min(need, top.shape[0] - n_top)  # at most this many are drawn here
    rows = np.empty(n_top + k + 1, dtype=np.int32)
    weights = np.empty(n_top + k + 1, dtype=np.float64)
    j = 0
    for i in range(top.shape[0]):
        is_top = top[i]
        other = 1 - np.int64(is_top)
        take_other = other * (u[i] * left < need)
        rows[j] = i
        weights[j] = 1.0 if is_top else w_other
        j += is_top + take_other
        need -= take_other
        left -= other
    return rows[:j], weights[:j]


def mvs_threshold(values: np.ndarray, sample_size: float, pivots: np.ndarray) -> float:
    """The threshold mu of Theorem 2: ``sum_i min(1, values_i / mu) == sample_size``.

    Found in expected O(N) by the quickselect-style Algorithm 2 ("Calculate Threshold"): a random
    candidate c splits the remaining values into < c, == c and > c; f(c) = n_large + #(>= c) +
    (sum_small + sum(< c)) / c decides the side that holds mu, the other side is folded into
    ``sum_small`` (values below mu, p = v / mu) or ``n_large`` (values above mu, p = 1).  When every
    value is classified, mu = sum_small / (sample_size - n_large).

    Parameters
    ----------
    values : ndarray of float64, shape (N,)
        The regularized absolute values g_hat (finite, >= 0); not modified.
    sample_size : float
        Expected sample size s * N, > 0.
    pivots : ndarray of float64
        Uniforms in [0, 1) drawn by the caller; step t picks its candidate with pivots[t % len].

    Returns
    -------
    float
        mu > 0; ``min(values)`` when ``sample_size >= N`` (every p is 1); 0.0 when fewer than
        ``sample_size`` values are positive (no threshold exists, see :func:`mvs_probabilities`).
    """
    values = np.ascontiguousarray(values, dtype=np.float64)
    pivots = np.ascontiguousarray(pivots, dtype=np.float64)
    if values.ndim != 1 or values.shape[0] == 0:
        raise ValueError(f"values must be a non-empty 1-D array, got shape {values.shape}")
    if not (np.all(np.isfinite(values)) and values.min() >= 0.0):
        raise ValueError("values must be finite and >= 0")
    check_real("sample_size", sample_size, low=0.0, low_open=True)
    if pivots.ndim != 1 or pivots.shape[0] == 0 or not np.all((pivots >= 0.0) & (pivots < 1.0)):
        raise ValueError("pivots must be a non-empty 1-D array of uniforms in [0, 1)")
    return float(threshold(values, float(sample_size), pivots))


def uniform_p_zero(values: np.ndarray, target: float) -> float:
    """Probability of the zero rows when mu == 0: the budget left after every positive row."""
    n_pos = int(np.count_nonzero(values))
    return (target - n_pos) / (values.shape[0] - n_pos)


def mvs_probabilities(g: np.ndarray, h: np.ndarray | None, lam: float, subsample: float,
                      pivots: np.ndarray) -> np.ndarray:
    """MVS inclusion probabilities p_i = min(1, g_hat_i / mu) (Theorem 2), g_hat_i = sqrt(g_i^2 + lam h_i^2).

    They sum to ``subsample * N`` (Eq. 5).  lam = 0 is importance sampling (p proportional to |g|
    below the cap), lam -> infinity with constant h is SGB (p = subsample).  When fewer than
    ``subsample * N`` rows have g_hat > 0 no threshold exists (mu = 0): those rows get p = 1 and
    the remaining budget is spread uniformly over the zero rows, so with all g_hat == 0 every
    p = subsample (uniform sampling); this is the limit of MVS as lam -> 0+ with constant h.
    ``h`` None means unit hessians (the first-order case of Section 2.1).
    """
    subsample = check_real("subsample", subsample, low=0.0, low_open=True, high=1.0)
    lam = check_real("lam", lam, low=0.0)
    g, h = check_gh(g, h)
    values = regularized_abs(g, h, lam)
    target = subsample * values.shape[0]
    mu = mvs_threshold(values, target, pivots)
    if mu > 0.0:
        return np.minimum(1.0, values / mu)
    return np.where(values > 0.0, 1.0, uniform_p_zero(values, target))


def check_gh(g, h):
    """g and h as contiguous float64 of one shape (h = 1 when None), or a ValueError."""
    g = np.ascontiguousarray(g, dtype=np.float64)
    if g.ndim != 1 or g.shape[0] == 0:
        raise ValueError(f"g must be a non-empty 1-D array, got shape {g.shape}")
    h = np.ones_like(g) if h is None else np.ascontiguousarray(h, dtype=np.float64)
    if h.shape != g.shape:
        raise ValueError(f"h must have the shape of g {g.shape}, got {h.shape}")
    return g, h
