""":class:`gbfs.GBFSClassifier` on more than two classes: its fitted state, prediction and model file.

A fit on ``K > 2`` classes boosts the softmax (:mod:`gbfs.booster.multiclass_boosting`): every round grows
one tree per class, all against one Omega, so a feature is paid for once for the whole model.  The
estimator then keeps its trees round-major (``trees_[i]`` belongs to class ``i % K``, LightGBM's
order), one packed ensemble per class, and ``init_score_`` as the array of the classes' initial
scores.  ``n_iter_`` counts rounds.  A model file holds the same keys as a binary one, with
``init_score`` a list of ``K`` floats.
"""

from __future__ import annotations

import numpy as np

from ..booster.losses.softmax import SoftmaxLoss
from ..booster.tree import PackedEnsemble
from ._params import numba_threads, prediction_threads


def is_multiclass(est) -> bool:
    """Whether ``est`` is a classifier fitted (or being fitted) on more than two classes."""
    classes = getattr(est, "classes_", None)
    return classes is not None and classes.shape[0] > 2


def target_params(n_classes: int) -> dict:
    """The :class:`gbfs.booster.rounds.BoostingParams` fields of a fit on ``n_classes`` classes: the
    softmax on more than two."""
    return {"loss": SoftmaxLoss(int(n_classes))} if n_classes > 2 else {}


def class_codes(y: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Each label's position in the sorted ``classes``, as float64 (the boosting loop's ``y``)."""
    return np.searchsorted(classes, y).astype(np.float64)


def ensemble(trees: list, n_classes: int, best_iteration) -> tuple[list, list]:
    """The trees a multiclass classifier keeps (rounds up to ``best_iteration``) and each class's
    packed ensemble (tree ``i`` belongs to class ``i % n_classes``)."""
    if best_iteration is not None:
        trees = trees[:(best_iteration + 1) * n_classes]
    return trees, [PackedEnsemble(trees[k::n_classes]) for k in range(n_classes)]


def raw_predict(est, X) -> np.ndarray:
    """The ``(n_samples, K)`` raw scores of checked rows ``X``."""
    K = est.classes_.shape[0]
    raw = np.empty((X.shape[0], K))
    col = np.empty(X.shape[0])
    bm = est._bin_mapper
    with numba_threads(prediction_threads(est)):
        for k in range(K):
            col[:] = est.init_score_[k]
            est._packed[k].predict_raw(X, col, bm.categories_to_bins if bm.has_categorical else None)
            raw[:, k] = col
    return raw


def probabilities(raw: np.ndarray) -> np.ndarray:
    """The class probabilities of raw scores (the softmax of each row)."""
    return SoftmaxLoss.inverse_link(raw)


def init_score_from_json(value, n_classes: int, n_trees: int, parse) -> np.ndarray:
    """A multiclass file's ``init_score`` (``parse`` reads one finite float), checked against its
    classes and trees."""
    if not isinstance(value, list) or len(value) != n_classes:
        raise ValueError(f"init_score must be a list of {n_classes} floats, one per class")
    if n_trees % n_classes:
        raise ValueError(f"trees must hold a whole number of rounds of {n_classes} trees (one per "
                         f"class), got {n_trees}")
    return np.array([parse(v, f"init_score[{k}]") for k, v in enumerate(value)])
