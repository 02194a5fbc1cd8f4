"""Evaluation metrics recorded in ``history_`` (and used by the harness)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from sklearn.metrics import average_precision_score

from ..kernels.portable import binary_log_loss, dot, mean, total
from ..kernels.radix import argsort_floats

_BYTE_DIGITS_BELOW = 1 << 14


@njit(cache=True)
def _auc_sorted(y_sorted, s_sorted):
    """Mann-Whitney AUC; tied scores share their average rank."""
    n = y_sorted.shape[0]
    n_pos = 0.0
    rank_sum = 0.0
    i = 0
    while i < n:
        j = i
        while j + 1 < n and s_sorted[j + 1] == s_sorted[i]:
            j += 1
        avg_rank = (i + j) / 2.0 + 1.0
        for k in range(i, j + 1):
            if y_sorted[k] > 0.5:
                n_pos += 1.0
                rank_sum += avg_rank
        i = j + 1
    n_neg = n - n_pos
    if n_pos == 0.0 or n_neg == 0.0:
        return np.nan
    return (rank_sum - n_pos * (n_pos + 1.0) / 2.0) / (n_pos * n_neg)


def roc_auc(y: np.ndarray, score: np.ndarray) -> float:
    """Area under the ROC curve of scores ``score`` for labels ``y`` in {0, 1} (NaN if one class)."""
    score = np.ascontiguousarray(score, dtype=np.float64)
    # + 0.0: -0.0 becomes 0.0, the tie it is; byte digits for a few thousand scores (an early-stopping
    # set scored after every tree), where 16-bit digits would clear 65 536 counters per pass
    order = argsort_floats(score + 0.0, 8 if score.shape[0] < _BYTE_DIGITS_BELOW else 16)
    return float(_auc_sorted(np.asarray(y, dtype=np.float64)[order], score[order]))


def rmse(y: np.ndarray, pred: np.ndarray) -> float:
    return math.sqrt(mean((np.asarray(y, dtype=np.float64) - pred) ** 2))


def log_loss(y: np.ndarray, proba: np.ndarray) -> float:
    return binary_log_loss(y, proba)


def average_precision(y: np.ndarray, score: np.ndarray) -> float:
    """Area under the precision-recall curve as average precision (scikit-learn's step-wise sum,
    no interpolation); NaN without a positive label."""
    y = np.asarray(y, dtype=np.float64)
    if not np.any(y > 0.5):
        return float("nan")
    return float(average_precision_score(y > 0.5, score))


def task_weighted(values, sizes) -> float:
    """The multitask "Total" of the GT-GBM paper (Figures 4-5): the tasks' metrics averaged with
    weights proportional to their numbers of rows; tasks whose metric is undefined (NaN, e.g. an
    AUC on one class) are left out.  NaN if every task's is."""
    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(sizes, dtype=np.float64)
    ok = np.isfinite(v) & (w > 0)
    if not np.any(ok):
        return float("nan")
    return dot(v[ok], w[ok]) / total(w[ok])
