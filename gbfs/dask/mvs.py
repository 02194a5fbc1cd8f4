"""MVS on shards: one threshold over all rows, found by reductions, then every shard draws its rows.

Minimal variance sampling keeps row ``i`` with probability ``p_i = min(1, v_i / mu)``, ``v`` the
regularized ``|g|`` (Theorem 2 of the MVS paper), ``mu`` the threshold with ``sum_i p_i = s N``
over *all* rows.  One process finds ``mu`` exactly by a quickselect (Algorithm 2); across
partitions the same equation is solved by reductions: each round sends a few dozen candidate
thresholds, every shard answers, for each, its rows with ``v >= mu`` and the sum of its ``v``
below it, and the driver keeps the bracket where ``f(mu) = n_large + sum_small / mu`` crosses
``s N`` (``f`` is continuous and decreasing), until it is ``1e-12`` wide.  The sample size then
matches the single-process sampler's expectation to that precision; the draws are each shard's own.
"""

from __future__ import annotations

import numpy as np

#: candidate thresholds per round trip, and the bracket's relative width at which the search stops
CANDIDATES = 32
TOLERANCE = 1e-12
MAX_ROUNDS = 64


def lam_of(sampler, sum_r: float, sum_h: float) -> float:
    """The sampler's lambda from the sums over all rows (MVS Adaptive's ``(sum g / sum h)^2``, the
    fixed ``mvs_lambda`` of MVS)."""
    if sampler.kind == "mvs_adaptive":
        return (sum_r / sum_h) ** 2 if sum_h > 0.0 else 0.0
    return float(sampler.mvs_lambda)


def threshold(group, n_rows: int, target: float, n_positive: int, v_max: float,
              fold) -> tuple[float, float]:
    """``(mu, p_zero)``: the threshold over all shards' values, or ``(0, p_zero)`` when fewer than
    ``target`` values are positive (those rows then all stay and the zeros share what is left)."""
    if n_positive <= target:
        return 0.0, (target - n_positive) / (n_rows - n_positive)
    lo, hi = 0.0, v_max * n_rows / target  # f(hi) <= target < f(0+) = n_positive
    for _ in range(MAX_ROUNDS):
        if hi - lo <= TOLERANCE * hi:
            break
        mus = (np.geomspace(hi * 1e-12, hi, CANDIDATES + 2) if lo == 0.0
               else np.linspace(lo, hi, CANDIDATES + 2))[1:-1]
        sums = fold(group.call("mvs_sums", mus))
        f = sums[0] + sums[1] / mus
        above = np.flatnonzero(f >= target)  # f decreases: these are the candidates below mu
        lo = float(mus[above[-1]]) if above.size else lo
        below = np.flatnonzero(f < target)
        hi = float(mus[below[0]]) if below.size else hi
    return 0.5 * (lo + hi), 0.0


def draw(group, sampler, stats: dict, it: int, seed: tuple, fold) -> list:
    """Every shard's MVS sample of this tree (after its residuals over all rows, whose sums
    ``stats`` give MVS Adaptive's lambda); returns the shards' statistics of their samples."""
    lam = lam_of(sampler, stats["sum_r"], stats["sum_h"])  # the sampler's h: the criterion's
    info = group.call("mvs_values", lam)
    n_rows = group.n_rows
    target = sampler.subsample * n_rows
    n_positive = int(sum(i[0] for i in info))
    mu, p_zero = threshold(group, n_rows, target, n_positive, max(float(i[1]) for i in info), fold)
    return group.call("mvs_draw", mu, p_zero, it, seed)
