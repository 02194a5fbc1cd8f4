"""Learning to rank: the LambdaRank objective and the ranking metrics NDCG@k and MRR.

Rows come in query groups (LightGBM's convention: ``group`` holds the sizes of consecutive
groups; here as offsets, ``offsets[q]:offsets[q + 1]`` are query ``q``'s rows).  Labels are graded
relevances, non-negative integers, with gain ``2^label - 1``.

LambdaRank (Burges 2010, "From RankNet to LambdaRank to LambdaMART", and LightGBM's
``lambdarank`` with its defaults): within a query the rows are sorted by the current score; every
pair (i, j) with different labels and i among the first ``truncation_level`` positions gives the
pairwise logistic gradient weighted by the NDCG change of swapping the pair,

    lambda_ij = sigma * |dNDCG_ij| / (1 + exp(sigma (s_high - s_low))),
    |dNDCG_ij| = (G_high - G_low) |1/log2(2 + r_high) - 1/log2(2 + r_low)| / maxDCG@truncation,

divided by ``0.01 + |s_high - s_low|`` (LightGBM's ``lambdarank_norm``, unless every score of the
query ties), with hessian ``sigma^2 |dNDCG_ij| p (1 - p)``; the lambdas of a query are then scaled
by ``log2(1 + S) / S``, ``S`` their total.  The booster fits trees to the residuals ``r = -g``
(the higher-labelled row of a pair is pushed up).

NDCG@k is LightGBM's: DCG of the top k by score (ties: the earlier row first) over the best
possible DCG@k; a query whose rows all have label 0 counts 1.  MRR is the mean over queries with
a relevant row (label > 0) of 1 / the rank of the first one.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

#: LightGBM's defaults: lambdarank_truncation_level, sigmoid, lambdarank_norm
TRUNCATION_LEVEL = 30
SIGMA = 1.0
MAX_LABEL = 31  # label gains 2^label - 1 stay exact in float64


@njit(cache=True, nogil=True, inline="always")
def _discount(rank):
    return 1.0 / math.log2(2.0 + rank)


@njit(cache=True, nogil=True)
def _max_dcg(labels, k):
    """DCG@k of the best ordering of ``labels``."""
    s = -np.sort(-labels)  # descending
    total = 0.0
    for i in range(min(k, s.shape[0])):
        total += (2.0 ** s[i] - 1.0) * _discount(i)
    return total


@njit(cache=True, nogil=True)
def _query_lambdas(y, s, r, h, truncation_level, sigma, norm):
    """Residuals (-gradient) and hessians of one query's rows, in place."""
    n = y.shape[0]
    for i in range(n):
        r[i] = 0.0
        h[i] = 0.0
    if n < 2:
        return
    max_dcg = _max_dcg(y, truncation_level)
    if max_dcg <= 0.0:
        return
    inv_max_dcg = 1.0 / max_dcg
    order = np.argsort(-s, kind="mergesort")  # by score, descending; ties keep row order
    best, worst = s[order[0]], s[order[n - 1]]
    total = 0.0
    for a in range(min(n - 1, truncation_level)):
        i = order[a]
        for b in range(a + 1, n):
            j = order[b]
            if y[i] == y[j]:
                continue
            if y[i] > y[j]:
                high, low, high_rank, low_rank = i, j, a, b
            else:
                high, low, high_rank, low_rank = j, i, b, a
            delta_score = s[high] - s[low]
            gap = (2.0 ** y[high] - 1.0) - (2.0 ** y[low] - 1.0)
            delta_ndcg = gap * abs(_discount(high_rank) - _discount(low_rank)) * inv_max_dcg
            if norm and best != worst:
                delta_ndcg /= 0.01 + abs(delta_score)
            p = 1.0 / (1.0 + math.exp(sigma * delta_score))
            lam = sigma * delta_ndcg * p
            hess = sigma * sigma * delta_ndcg * p * (1.0 - p)
            r[high] += lam
            r[low] -= lam
            h[high] += hess
            h[low] += hess
            total += 2.0 * lam
    if norm and total > 0.0:
        factor = math.log2(1.0 + total) / total
        for i in range(n):
            r[i] *= factor
            h[i] *= factor


@njit(cache=True)
def lambdarank_residuals(y, raw, offsets, truncation_level, sigma, norm, r, h):
    """LambdaRank residuals and hessians of every query (``offsets``: query boundaries)."""
    for q in range(offsets.shape[0] - 1):
        a, b = offsets[q], offsets[q + 1]
        _query_lambdas(y[a:b], raw[a:b], r[a:b], h[a:b], truncation_level, sigma, norm)


@njit(cache=True)
def _ndcg_mrr(y, raw, offsets, k):
    n_q = offsets.shape[0] - 1
    ndcg = 0.0
    rr = 0.0
    n_rel = 0
    for q in range(n_q):
        a, b = offsets[q], offsets[q + 1]
        yq, sq = y[a:b], raw[a:b]
        order = np.argsort(-sq, kind="mergesort")
        best = _max_dcg(yq, k)
        if best <= 0.0:
            ndcg += 1.0
        else:
            dcg = 0.0
            for i in range(min(k, b - a)):
                dcg += (2.0 ** yq[order[i]] - 1.0) * _discount(i)
            ndcg += dcg / best
        for i in range(b - a):
            if yq[order[i]] > 0:
                rr += 1.0 / (i + 1.0)
                n_rel += 1
                break
    return ndcg / max(n_q, 1), (rr / n_rel if n_rel else np.nan)


def ndcg_at(y: np.ndarray, score: np.ndarray, offsets: np.ndarray, k: int = 10) -> float:
    """Mean NDCG@k over the queries (see the module docstring)."""
    return float(_ndcg_mrr(np.asarray(y, np.float64), np.asarray(score, np.float64),
                           np.asarray(offsets, np.int64), int(k))[0])


def mrr(y: np.ndarray, score: np.ndarray, offsets: np.ndarray) -> float:
    """Mean reciprocal rank of the first relevant row (label > 0), over the queries that have one."""
    return float(_ndcg_mrr(np.asarray(y, np.float64), np.asarray(score, np.float64),
                           np.asarray(offsets, np.int64), 1)[1])


def precision_at(y: np.ndarray, score: np.ndarray, offsets: np.ndarray, k: int = 2) -> float:
    """Mean precision@k over the queries: the share of relevant rows (label > 0) among a query's ``k``
    highest scores (ties in row order, as :func:`ndcg_at`), over ``min(k, query size)`` -- the
    GT-GBM paper's "prec@k=2" of its Table 7."""
    y, score, offsets = np.asarray(y), np.asarray(score, np.float64), np.asarray(offsets, np.int64)
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    shares = []
    for a, b in zip(offsets[:-1], offsets[1:]):
        top = np.argsort(-score[a:b], kind="stable")[:k]
        shares.append(float(np.count_nonzero(y[a:b][top] > 0)) / len(top))
    return float(np.mean(shares)) if shares else float("nan")


def group_offsets(group, n_rows: int, name: str = "group") -> np.ndarray:
    """Query offsets from LightGBM's ``group`` (sizes of consecutive query groups, summing to the
    number of rows); a ValueError names ``name`` otherwise."""
    if group is None:
        raise ValueError(f"{name} is required for ranking: the sizes of the consecutive query groups")
    sizes = np.asarray(group)
    if sizes.ndim != 1 or sizes.size == 0 or sizes.dtype.kind not in "iu" and not (
            sizes.dtype.kind == "f" and np.all(sizes == np.floor(sizes))):
        raise ValueError(f"{name} must be a 1-D array of positive integer group sizes, got {group!r:.80}")
    sizes = sizes.astype(np.int64)
    if np.any(sizes < 1):
        raise ValueError(f"{name} holds a group size below 1: {int(sizes[sizes < 1][0])}")
    if int(sizes.sum()) != n_rows:
        raise ValueError(f"{name} sizes sum to {int(sizes.sum())}, but there are {n_rows} rows")
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def check_relevance(y, name: str = "y") -> np.ndarray:
    """Graded relevance labels: integers in [0, 31] (as float64)."""
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {y.shape}")
    values = y.astype(np.float64) if y.dtype.kind in "iufb" else None
    if values is None or not np.all(np.isfinite(values)) or np.any(values != np.floor(values)) \
            or np.any(values < 0) or np.any(values > MAX_LABEL):
        raise ValueError(f"{name} must hold relevance grades: integers in [0, {MAX_LABEL}]")
    return values


class LambdaRankLoss:
    """LambdaRank on graded relevances in query groups (an instance per data set's ``offsets``).

    ``loss`` is ``1 - NDCG@eval_at`` (lower is better, so early stopping on ``val_loss`` keeps the
    best ranking); raw scores are ranking scores (``inverse_link`` is the identity).
    """

    name = "lambdarank"
    trees_per_round = 1
    leaf_count = "rows"
    scores_auc = False

    def __init__(self, offsets: np.ndarray, eval_at: int = 10, truncation_level: int = TRUNCATION_LEVEL,
                 sigma: float = SIGMA, norm: bool = True):
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.eval_at, self.truncation_level, self.sigma, self.norm = eval_at, truncation_level, sigma, norm

    def with_offsets(self, offsets: np.ndarray) -> LambdaRankLoss:
        return LambdaRankLoss(offsets, self.eval_at, self.truncation_level, self.sigma, self.norm)

    @staticmethod
    def init_score(y: np.ndarray) -> float:
        return 0.0  # a constant shift ranks nothing (LightGBM does not boost from an average either)

    def residuals(self, y: np.ndarray, raw: np.ndarray, r: np.ndarray, h: np.ndarray) -> None:
        lambdarank_residuals(y, raw, self.offsets, self.truncation_level, self.sigma, self.norm, r, h)

    def loss(self, y: np.ndarray, raw: np.ndarray) -> float:
        return 1.0 - ndcg_at(y, raw, self.offsets, self.eval_at)

    def metrics(self, y: np.ndarray, raw: np.ndarray) -> dict:
        return {f"ndcg@{self.eval_at}": ndcg_at(y, raw, self.offsets, self.eval_at),
                "mrr": mrr(y, raw, self.offsets)}

    @staticmethod
    def inverse_link(raw: np.ndarray) -> np.ndarray:
        return raw
