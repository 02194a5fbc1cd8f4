"""Select, then refit: the relaxed refit of a selection and GBDT-topK in this booster.

A penalised fit is handicapped twice as a final model: its trees were grown under the penalty,
and its early trees were spent on choosing features.  The *relaxed refit* (as the relaxed lasso
refits the lasso's support without the penalty) keeps only the selection -- the features in order
of first use -- and grows an unpenalised booster on those columns: Newton gain and leaves (the
mode that matches LightGBM's accuracy), the same tree settings, early stopping on the eval set.

**GBDT-topK** (GT-GBM paper, Section 5.1) is the same refit on another selection: the top K
features of an unpenalised fit on all features, ranked by their total split gain (LightGBM's
``importance_type="gain"``) or by how often they split (``"split"``).

Both grow on the columns of the already binned matrix, so nothing is binned twice, and the refit
trees are mapped back to the original feature indices: the final model predicts on the full-width
data and its model file is an ordinary one.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..booster.boosting import boost
from ..booster.kernels.sparse_binned import take_columns
from ..booster.rounds import CRITERIA, LEAF_ESTIMATES, BoostingParams, BoostingResult
from ..booster.tree import Tree
from .methods import METHODS
from .penalty import FeatureUsage

IMPORTANCE_TYPES = ("gain", "split")


def importances(trees: list[Tree], n_features: int, importance_type: str = "gain") -> np.ndarray:
    """Per-feature importance as LightGBM defines it: the total (unpenalised) gain of the splits on
    each feature (``"gain"``), or their number (``"split"``)."""
    out = np.zeros(n_features, dtype=np.float64)
    for t in trees:
        inner = t.feature >= 0
        np.add.at(out, t.feature[inner], t.gain[inner] if importance_type == "gain" else 1.0)
    return out


def top_k(trees: list[Tree], n_features: int, k: int | None, importance_type: str = "gain",
          costs: np.ndarray | None = None, max_cost: float | None = None) -> np.ndarray:
    """GBDT-topK's selection: the ``k`` most important features (ties: the lower index first);
    features never used are not selected, so fewer than ``k`` may come back.

    With ``max_cost``: the features in order of importance, each taken while its cost (``costs``,
    default 1) fits in what is left of ``max_cost`` -- a more important feature that does not fit
    is passed over for less important ones that do -- and at most ``k`` of them (None: no count).
    """
    imp = importances(trees, n_features, importance_type)
    order = np.argsort(-imp, kind="stable")
    order = order[imp[order] > 0]
    if max_cost is None:
        return order[:k].astype(np.int64)
    return within_cost(order, np.ones(n_features) if costs is None else costs, max_cost, k)


def within_cost(order, costs: np.ndarray, max_cost: float, k: int | None = None) -> np.ndarray:
    """The features of ``order`` taken one by one while their ``costs`` fit in what is left of
    ``max_cost`` (a feature that does not fit is passed over for later ones that do), at most ``k``.

    The test and the order of the sum are :class:`~gbfs.criteria.penalty.FeatureUsage`'s, so a ranking under
    a cost cap and a penalised fit under ``max_cost`` spend the budget by the same rule.
    """
    costs = np.asarray(costs, dtype=np.float64)
    taken, spent = [], 0.0
    for j in order:
        if k is not None and len(taken) == k:
            break
        if spent + costs[j] <= max_cost:
            taken.append(int(j))
            spent += float(costs[j])
    return np.asarray(taken, dtype=np.int64)


def refit_params(params: BoostingParams) -> BoostingParams:
    """The refit's settings: unpenalised, Newton gain and leaves, the same trees and sampler."""
    return dataclasses.replace(params, method=METHODS["gbfs"], criterion=CRITERIA["newton"],
                               leaf_estimate=LEAF_ESTIMATES["newton"],
                               stop_when_full=False, selection_patience=None)


def refit(X_binned: np.ndarray, y: np.ndarray, bin_mapper, columns: np.ndarray, params: BoostingParams,
          evals=(), callbacks=(), model=None, sample_rng=None, X: np.ndarray | None = None) -> BoostingResult:
    """Grow an unpenalised booster on ``columns`` of ``X_binned``; trees index the original features.

    Parameters
    ----------
    X_binned : ndarray of uint8, Fortran-ordered, shape (n_rows, n_features)
    y : ndarray of float64
    bin_mapper : fitted BinMapper of all ``n_features`` columns
    columns : ndarray of int
        The selected features (at least one).
    params : BoostingParams
        The selection fit's settings; :func:`refit_params` derives the refit's.
    evals : sequence of (name, X_binned, y)
        Eval sets binned on all columns (early stopping and ``history_``); raw values with ``X``.
    X : ndarray of float or None
        The raw training values of all columns (the exact split search's).
    """
    columns = np.asarray(columns, dtype=np.int64)

    def sub(Xb):  # the selected columns, in the matrix's storage (Fortran-ordered when dense)
        return take_columns(Xb, columns)

    evals = [(name, sub(Xb), yv, *extra) for name, Xb, yv, *extra in evals]   # ranking: + query offsets
    result = boost(sub(X_binned), y, bin_mapper.subset(columns), refit_params(params),
                   FeatureUsage(columns.shape[0], 0.0), evals, callbacks, model=model, sample_rng=sample_rng,
                   X=None if X is None else sub(X))
    for t in result.trees:
        inner = t.feature >= 0
        t.feature[inner] = columns[t.feature[inner]].astype(t.feature.dtype)
    return result
