"""Losses: residuals (negative gradients) and hessians as numba kernels.

The papers fit each tree to the residuals ``r_i = -dl/dF(x_i)`` (the ``g_i`` of
Eq. 1 of the GT-GBM paper and Eq. 14 of the GBFS paper); the hessian is only used
by the optional Newton criterion and leaf values.

The kernels are serial for the data sizes of the papers: they are O(n), and a parallel launch
costs more than the work.  The logistic loss calls ``exp`` (and ``log1p``) once per row, which
numba cannot vectorise under strict IEEE semantics; from :data:`PARALLEL_ROWS` rows its per-row
work is spread over the threads -- each row's values are the serial kernel's, and the mean loss
still adds the rows' terms one by one in row order, so every number is the same bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange
from scipy.special import expit

from ..kernels.portable import mean

#: from this many rows the logistic loss's per-row work runs on every thread (a thread wake-up
#: costs tens of microseconds; 16k rows of exp take about 0.1 ms)
PARALLEL_ROWS = 16_384


@njit(cache=True, nogil=True, inline="always")
def _logistic_row(y, raw, r, h, i):
    p = 1.0 / (1.0 + math.exp(-raw[i]))
    r[i] = y[i] - p
    h[i] = p * (1.0 - p)


@njit(cache=True, nogil=True, inline="always")
def _logistic_term(y, f):
    # log(1 + exp(f)) - y f = max(f, 0) + log(1 + exp(-|f|)) - y f, finite for large |f|; with no
    # branch on the sign of f, which mispredicts on scores around 0 (f <= 0 adds 0.0 first: the
    # same bits)
    return max(f, 0.0) + math.log1p(math.exp(-abs(f))) - y * f


@njit(cache=True)
def _logistic_residuals(y, raw, r, h):
    for i in range(y.shape[0]):
        _logistic_row(y, raw, r, h, i)


@njit(parallel=True, cache=True)
def _logistic_residuals_parallel(y, raw, r, h):
    for i in prange(y.shape[0]):
        _logistic_row(y, raw, r, h, i)


@njit(cache=True)
def _logistic_loss(y, raw):
    total = 0.0
    for i in range(y.shape[0]):
        total += _logistic_term(y[i], raw[i])
    return total / y.shape[0]


@njit(parallel=True, cache=True)
def _logistic_terms(y, raw, out):
    for i in prange(y.shape[0]):
        out[i] = _logistic_term(y[i], raw[i])


@njit(cache=True, nogil=True)
def _mean_in_order(terms):
    """Mean of ``terms`` added one by one in order: :func:`_logistic_loss`'s sum, bit for bit."""
    total = 0.0
    for i in range(terms.shape[0]):
        total += terms[i]
    return total / terms.shape[0]


@njit(cache=True)
def _squared_residuals(y, raw, r, h):
    for i in range(y.shape[0]):
        r[i] = y[i] - raw[i]
        h[i] = 1.0


@njit(cache=True)
def _squared_loss(y, raw):
    total = 0.0
    for i in range(y.shape[0]):
        e = y[i] - raw[i]
        total += 0.5 * e * e
    return total / y.shape[0]


class Pointwise:
    """What every loss tells the boosting loop: the trees a round grows (one; the softmax one per
    class), how ``min_samples_leaf`` counts a child's rows by default (``leaf_count="auto"``),
    whether its scores rank a binary target (AUC is recorded), and the loss on other rows (the same:
    a pointwise loss needs nothing of the rows; a ranking loss their query groups)."""

    trees_per_round = 1
    leaf_count = "rows"
    scores_auc = False
    #: the loss's numba kernels, set by each loss: ``residual_kernel(y, raw, r, h)`` writes the
    #: residuals and hessians into ``r`` and ``h``, ``loss_kernel(y, raw)`` returns the mean loss
    residual_kernel = None
    loss_kernel = None

    @classmethod
    def with_offsets(cls, offsets):
        return cls

    @classmethod
    def residuals(cls, y: np.ndarray, raw: np.ndarray, r: np.ndarray, h: np.ndarray) -> None:
        cls.residual_kernel(y, raw, r, h)

    @classmethod
    def loss(cls, y: np.ndarray, raw: np.ndarray) -> float:
        return float(cls.loss_kernel(y, raw))


class LogisticLoss(Pointwise):
    """Binary log-loss on labels in {0, 1}; raw scores are log-odds."""

    name = "logistic"
    scores_auc = True
    residual_kernel = staticmethod(_logistic_residuals)
    loss_kernel = staticmethod(_logistic_loss)

    @classmethod
    def residuals(cls, y: np.ndarray, raw: np.ndarray, r: np.ndarray, h: np.ndarray) -> None:
        kernel = _logistic_residuals_parallel if y.shape[0] >= PARALLEL_ROWS else _logistic_residuals
        kernel(y, raw, r, h)

    @classmethod
    def loss(cls, y: np.ndarray, raw: np.ndarray) -> float:
        if y.shape[0] < PARALLEL_ROWS:
            return float(_logistic_loss(y, raw))
        terms = np.empty(y.shape[0])
        _logistic_terms(y, raw, terms)
        return float(_mean_in_order(terms))

    @staticmethod
    def init_score(y: np.ndarray) -> float:
        p = min(max(mean(y), 1e-15), 1 - 1e-15)
        return math.log(p / (1.0 - p))

    @staticmethod
    def inverse_link(raw: np.ndarray) -> np.ndarray:
        return expit(raw)  # no overflow warning for large negative scores


class SquaredLoss(Pointwise):
    """Half squared error; raw scores are predictions."""

    name = "squared_error"
    residual_kernel = staticmethod(_squared_residuals)
    loss_kernel = staticmethod(_squared_loss)

    @staticmethod
    def init_score(y: np.ndarray) -> float:
        return mean(y)

    @staticmethod
    def inverse_link(raw: np.ndarray) -> np.ndarray:
        return raw


LOSSES = {LogisticLoss.name: LogisticLoss, SquaredLoss.name: SquaredLoss}


def loss_for(params, offsets=None):
    """The loss of a fit's ``params`` (a :class:`gbfs.booster.rounds.BoostingParams`) on the rows of
    a data set: ``params.loss``, or for a ranking loss the same loss on the query groups ``offsets``."""
    return params.loss if offsets is None else params.loss.with_offsets(offsets)
