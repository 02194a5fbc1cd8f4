"""The multiclass softmax loss: gradients, hessians, metrics.

A model of ``K`` classes has one raw score per class, ``F_k(x)``, and predicts
``p_k = exp(F_k) / sum_j exp(F_j)``.  The loss is the multiclass log-loss
``l = -log p_y``; its negative gradient for class ``k`` is ``r_k = 1{y = k} - p_k``.
As in LightGBM's ``multiclass`` objective (and Friedman's multiclass gradient boosting,
Algorithm 6 of "Greedy function approximation"), each round grows one tree per class on
these residuals, with the diagonal hessian scaled by ``K / (K - 1)``:
``h_k = K / (K - 1) * p_k (1 - p_k)``, and each class's score starts at the log of its
share of the training rows.

All classes' residuals of a round are taken at the scores the round started from: the
trees of a round are fitted to one gradient, as in LightGBM, so the order of the classes
does not matter.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from scipy.special import softmax

from .metrics import roc_auc

#: the smallest class share whose log is an initial score (LightGBM's kEpsilon)
MIN_CLASS_SHARE = 1e-15


@njit(cache=True, inline="always")
def _logsumexp(row):
    """``log(sum_k exp(row[k]))``, shifted by the row's maximum to stay finite."""
    m = row[0]
    for c in range(1, row.shape[0]):
        if row[c] > m:
            m = row[c]
    s = 0.0
    for c in range(row.shape[0]):
        s += math.exp(row[c] - m)
    return m + math.log(s)


@njit(cache=True)
def row_logsumexp(raw, out):
    """``out[i] = log(sum_k exp(raw[i, k]))`` for every row."""
    for i in range(raw.shape[0]):
        out[i] = _logsumexp(raw[i])


@njit(cache=True)
def class_residuals(y_k, raw_k, lse, factor, r, h):
    """Class ``k``'s residuals ``1{y = k} - p_k`` and hessians ``factor p_k (1 - p_k)``, with
    ``p_k = exp(raw_k - lse)`` (``lse``: every row's log-sum-exp at the round's start)."""
    for i in range(y_k.shape[0]):
        p = math.exp(raw_k[i] - lse[i])
        r[i] = y_k[i] - p
        h[i] = factor * p * (1.0 - p)


@njit(cache=True)
def _log_loss(codes, raw):
    total = 0.0
    for i in range(raw.shape[0]):
        total += _logsumexp(raw[i]) - raw[i, int(codes[i])]
    return total / raw.shape[0]


class SoftmaxLoss:
    """The multiclass log-loss on class codes ``0 .. K-1``; raw scores have shape ``(n, K)``.

    Parameters
    ----------
    n_classes : int
        ``K``, at least 3 (two classes are the binary :class:`gbfs.booster.losses.loss.LogisticLoss`).
    """

    name = "softmax"
    leaf_count = "hessian"  # LightGBM's count for the many small hessians of the classes
    scores_auc = False

    def __init__(self, n_classes: int):
        self.n_classes = int(n_classes)
        self.trees_per_round = self.n_classes  # one tree per class
        self.hessian_factor = self.n_classes / (self.n_classes - 1.0)

    def init_scores(self, codes: np.ndarray) -> np.ndarray:
        """``log`` of each class's share of ``codes`` (LightGBM's ``BoostFromScore``)."""
        share = np.bincount(codes.astype(np.int64), minlength=self.n_classes) / codes.shape[0]
        # the C library's log: numpy's AVX-512 log rounds differently on other CPUs
        return np.array([math.log(max(s, MIN_CLASS_SHARE)) for s in share])

    def loss(self, codes: np.ndarray, raw: np.ndarray) -> float:
        """Mean ``-log p_y``."""
        return float(_log_loss(codes, np.ascontiguousarray(raw)))

    @staticmethod
    def inverse_link(raw: np.ndarray) -> np.ndarray:
        """The class probabilities, row by row."""
        return softmax(raw, axis=1)

    def metrics(self, codes: np.ndarray, raw: np.ndarray) -> dict:
        """``auc``: macro one-vs-rest AUC of the probabilities (classes absent from ``codes``, or
        alone in it, are left out: their AUC is undefined); ``accuracy`` of the arg-max class."""
        return {"auc": macro_auc(codes, self.inverse_link(raw)),
                "accuracy": float(np.mean(np.argmax(raw, axis=1) == codes))}


def macro_auc(codes: np.ndarray, proba: np.ndarray) -> float:
    """One-vs-rest AUC of every class's probability column, averaged with equal weights (as
    scikit-learn's ``roc_auc_score(multi_class="ovr", average="macro")``); classes whose AUC is
    undefined on these rows are left out, NaN if all are."""
    aucs = [roc_auc((codes == k).astype(np.float64), proba[:, k]) for k in range(proba.shape[1])]
    aucs = [a for a in aucs if not math.isnan(a)]
    return float(np.mean(aucs)) if aucs else float("nan")


def proba_scores(codes: np.ndarray, proba: np.ndarray) -> dict[str, float]:
    """Multiclass log-loss, macro AUC (:func:`macro_auc`) and accuracy of class probabilities
    (one column per class, rows summing to 1) against the class codes ``0 .. K-1``."""
    loss = SoftmaxLoss(max(proba.shape[1], 3)).loss(codes, np.log(np.maximum(proba, 1e-300)))
    return {"loss": loss, "auc": macro_auc(codes, proba),
            "accuracy": float(np.mean(np.argmax(proba, axis=1) == codes))}


class ClassGradient:
    """One class's view of a :class:`SoftmaxLoss` for a :class:`gbfs.booster.tree_step.TreeStep`: its
    initial score and the residuals of the round (:meth:`start_round` fixes every row's
    log-sum-exp before the round's first tree)."""

    name = "softmax"

    def __init__(self, shared: RoundScores, k: int):
        self.shared, self.k = shared, k

    def init_score(self, y_k: np.ndarray) -> float:
        return float(self.shared.init[self.k])

    def residuals(self, y_k, raw_k, r, h) -> None:
        class_residuals(y_k, raw_k, self.shared.lse, self.shared.loss.hessian_factor, r, h)


class RoundScores:
    """The softmax state every class's tree of a round shares: the initial scores and every row's
    log-sum-exp over the classes' running scores at the round's start."""

    def __init__(self, loss: SoftmaxLoss, codes: np.ndarray):
        self.loss = loss
        self.init = loss.init_scores(codes)
        self.lse = np.empty(codes.shape[0])
        self._raw = np.empty((codes.shape[0], loss.n_classes))

    def start_round(self, class_raw: list) -> None:
        """Fix the log-sum-exp of the scores ``class_raw`` (one array per class)."""
        for k, raw in enumerate(class_raw):
            self._raw[:, k] = raw
        row_logsumexp(self._raw, self.lse)
