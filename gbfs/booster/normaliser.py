"""A-GBM's divisor of the split gain: the tree's gain normaliser (GT-GBM paper, Section 2).

GBFS compares raw gains with ``mu`` (Eq. 1); A-GBM and GT-GBM divide every gain of a tree by the
largest gain any split of that tree can reach, SSE_root with the first-order criterion, so that
``mu`` in [0, 1] means the same on every data set, target scale and tree.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .kernels.portable import dot, total


def root_sse(rw: np.ndarray, w_sum: float, rsq_w_sum: float) -> float:
    """SSE of the residuals at the tree root, ``sum w r^2 - (sum w r)^2 / sum w`` (A-GBM's SSE_r)."""
    return rsq_w_sum - total(rw) ** 2 / w_sum


#: hessians below this count as this in the Newton normaliser (XGBoost's floor of p(1 - p)): a
#: probability rounded to exactly 0 or 1 would otherwise make the normaliser infinite
HESSIAN_FLOOR = 1e-16


def gain_normaliser(g_sum: float, h_sum: float, g2_over_h: float, reg_lambda: float) -> float:
    """A-GBM's divisor of the gain: the largest gain any split of this tree can reach.

    ``N = sum_i w_i g_i^2 / h_i - G^2 / (H + lambda)`` over the tree's (weighted) root rows, with
    ``G = sum w g`` and ``H = sum w h``.  With the first-order criterion (``h = 1``) and
    ``lambda = 0`` this is exactly SSE_root, the normaliser of A-GBM (GT-GBM paper, Section 2);
    with hessians it is its Newton counterpart.

    Proof sketch that every split gain ``g_v`` at every node ``v`` satisfies ``0 <= g_v <= N``
    (for ``lambda = 0`` gains are non-negative): by Cauchy-Schwarz, for any set S of rows
    ``(sum_S w g)^2 <= (sum_S w g^2 / h) (sum_S w h)``, so ``G_S^2 / (H_S + lambda) <=
    sum_S w g^2 / h``.  Hence ``g_v = G_L^2/(H_L+lambda) + G_R^2/(H_R+lambda) - G_v^2/(H_v+lambda)
    <= sum_v w g^2/h - G_v^2/(H_v+lambda)``, and applying Cauchy-Schwarz once more to the
    root's rows split into ``v`` and the rest, ``G^2/(H+lambda) <= G_v^2/(H_v+lambda) +
    sum_rest w g^2/h``, which gives ``g_v <= N``.  ``N`` is the gain of the finest partition (a
    leaf per row), i.e. the largest Newton gain achievable at the root.  Multiplying ``y`` by
    ``c`` (squared error) multiplies ``g`` and so every gain and ``N`` by ``c^2``: the normalised
    gain, and so the selection, is invariant to the scale of the target.

    When ``H + lambda = 0`` (every hessian is 0 and ``lambda = 0``, e.g. LambdaRank on rows whose
    queries all hold one relevance: no pair, so no gradient) no split has a Newton gain: ``N`` is
    0, which :func:`tree_normaliser` turns into an infinite divisor, and the tree is a leaf.
    """
    den = h_sum + reg_lambda
    if not den > 0.0:
        return 0.0
    return g2_over_h - g_sum * g_sum / den


@njit(cache=True)
def sum_g2_over_h(r, h, floor):
    total = 0.0
    for i in range(r.shape[0]):
        total += r[i] * r[i] / max(h[i], floor)
    return total


def weighted_newton_sums(r, h, rows, w) -> tuple[float, float]:
    h_s = h[rows]
    return sum_g2_over_h(r[rows] * np.sqrt(w), h_s, HESSIAN_FLOOR), dot(w, h_s)


def tree_normaliser(params, sse: float, g_sum: float, w_sum: float, newton_sums) -> float:
    """:func:`gain_normaliser` of one tree (A-GBM's and GT-GBM's divisor of the gain; GBFS divides
    by 1 but records it too, as the scale of its ``mu``); ``params`` is the BoostingParams.

    ``newton_sums()`` returns ``(sum w g^2 / h, sum w h)`` over the root rows; it is only called
    for the Newton criterion (an O(n) pass the first-order mode does not need).
    """
    lam = params.growth.reg_lambda
    if not params.criterion.hessian_weighted:
        n = sse if lam == 0.0 else gain_normaliser(g_sum, w_sum, sse + g_sum * g_sum / w_sum, lam)
    else:
        g2h, h_sum = newton_sums()
        n = gain_normaliser(g_sum, h_sum, g2h, lam)
    return n if n > 0 else np.inf
