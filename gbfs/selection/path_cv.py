"""How the selection path scores and chooses its candidates: one validation split, or k-fold
cross-validation on the training rows with the one-standard-error rule.

A budget's candidates are a handful of feature sets refitted without penalty.  Scored on one
validation split of a few hundred rows their order is close to a coin flip; ``selection_path(cv=k)``
scores every candidate by k-fold cross-validation on the training rows instead -- each fold's fit on
the other folds, early-stopped and scored on its own held-out rows, all folds cut from the one
binned matrix the path shares -- and takes, among the candidates a budget may answer with, the
fewest features whose mean is within one standard error of the best mean (Breiman et al.'s
one-standard-error rule, as in scikit-learn's and glmnet's model selection).  The chosen set is then
refitted on every training row.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.utils import _safe_indexing

from ..booster.callbacks import early_stopping
from ..booster.kernels.sparse_binned import take_rows
from ..booster.losses.metrics import rmse, roc_auc
from ..booster.losses.softmax import macro_auc


def score(model, X, y, classifier: bool) -> float:
    """Higher is better: AUC (two classes), macro one-vs-rest AUC of the probabilities (more
    classes, as a multiclass fit's ``val_auc``), minus RMSE (regressor)."""
    if not classifier:
        return -rmse(y, model.predict(X))
    classes = model.classes_
    if classes.shape[0] == 2:
        return roc_auc((y == classes[1]).astype(np.float64), model.decision_function(X))
    y = np.asarray(y)
    codes = np.full(y.shape[0], -1)  # a label the model was not fitted on is a negative of every class
    for k, c in enumerate(classes):
        codes[y == c] = k
    return macro_auc(codes, model.predict_proba(X))


@dataclasses.dataclass
class Folds:
    """The folds of the training rows: per fold a prepared training set (the other folds' rows of
    the shared binned matrix, the held-out rows as its eval set) and the held-out raw rows."""

    preps: list
    held_X: list
    held_y: list
    classifier: bool

    @property
    def k(self) -> int:
        return len(self.preps)


def check_folds(cv: int, y, classifier: bool) -> None:
    """Refuse a ``cv`` the training rows cannot fill, before any fit: every fold needs a row (of
    every class, for a classifier's stratified folds)."""
    y = np.asarray(y)
    if classifier:
        labels, counts = np.unique(y, return_counts=True)
        if counts.min() < cv:
            raise ValueError(f"cv={cv} folds need at least {cv} rows of every class; class "
                             f"{labels[np.argmin(counts)].item()!r} has {int(counts.min())}")
    elif y.shape[0] < cv:
        raise ValueError(f"cv={cv} folds need at least {cv} training rows; y has {y.shape[0]}")


def make_folds(prep, X, y, k: int, classifier: bool, early_stopping_rounds: int | None = None) -> Folds:
    """``k`` folds of ``prep``'s rows, stratified by class for a classifier, shuffled with the fit's
    seed (the same folds for the same ``random_state``).  A fold's eval set is its held-out rows,
    so ``prep``'s early stopping (on ``"val"``) stops each fold's fits there, as ``lightgbm.cv``
    does; ``early_stopping_rounds`` adds one when ``prep`` has none (the path had no eval set)."""
    y_raw = np.asarray(y)
    n = prep.X_binned.shape[0]
    kind = StratifiedKFold if classifier else KFold
    splitter = kind(n_splits=k, shuffle=True, random_state=int(prep.seed) % (2 ** 32))
    preps, held_X, held_y = [], [], []
    for train, held in splitter.split(np.zeros((n, 1)), y_raw if classifier else None):
        callbacks = list(prep.callbacks)
        if early_stopping_rounds is not None:
            callbacks.append(early_stopping(early_stopping_rounds, "val_loss"))
        preps.append(dataclasses.replace(
            prep, X_binned=take_rows(prep.X_binned, train), y=prep.y[train],
            evals=[("val", take_rows(prep.X_binned, held), prep.y[held])], tester=None,
            callbacks=callbacks, timings=dict(prep.timings)))
        held_X.append(_safe_indexing(X, held))
        held_y.append(y_raw[held])
    return Folds(preps, held_X, held_y, classifier)


def cross_validate(fit: Callable, folds: Folds) -> dict:
    """``fit(prep)`` on every fold: ``{"cv_mean", "cv_se", "cv_scores", "cv_trees"}``, the standard
    error being the folds' sample standard deviation over sqrt(k); ``cv_trees`` is the mean number
    of trees the folds kept (their early-stopping points), which a refit without an eval set uses."""
    scores, trees = [], []
    for prep, X_held, y_held in zip(folds.preps, folds.held_X, folds.held_y):
        model = fit(prep)
        scores.append(score(model, X_held, y_held, folds.classifier))
        trees.append(int(model.n_iter_))
    s = np.asarray(scores, dtype=np.float64)
    se = float(np.std(s, ddof=1) / math.sqrt(s.size)) if s.size > 1 else 0.0
    return {"cv_mean": float(np.mean(s)), "cv_se": se, "cv_scores": s.tolist(),
            "cv_trees": max(1, int(round(float(np.mean(trees)))))}


def one_standard_error(options: list, mean: Callable, se: Callable, size: Callable):
    """The one-standard-error rule: among ``options`` whose ``mean`` is at least the best mean
    minus that option's standard error, the one of smallest ``size`` (ties: the higher mean, then
    the earlier).  With every ``se`` 0 this is the best mean (ties: fewer features)."""
    best = max(options, key=mean)
    floor = mean(best) - se(best)
    near = [o for o in options if mean(o) >= floor]
    return min(near, key=lambda o: (size(o), -mean(o)))
