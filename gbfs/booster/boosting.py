"""The boosting loop: Algorithm 3 of the GT-GBM paper / Algorithm 1 of GBFS.

Each iteration is one :class:`~gbfs.booster.tree_step.TreeStep` (residuals, rows and weights, one
penalised tree, shrunk leaf values, updated scores) followed by the evaluation of the train and
validation sets and a ``history_`` record (:mod:`gbfs.booster.rounds`).  Omega (a
:class:`~gbfs.booster.usage.Usage`) lives across iterations.
"""

from __future__ import annotations

import time

from .callbacks import EarlyStopException, reset_all
from .growing.feature_search import FeatureSearch
from .losses.loss import loss_for
from .multiclass_boosting import boost_softmax
from .rounds import BoostingParams, BoostingResult, Evaluator, close_round
from .tree_step import TreeStep
from .usage import Usage


def boost(X_binned, y, bin_mapper, params: BoostingParams, usage: Usage, evals=(), callbacks=(),
          model=None, search: FeatureSearch | None = None, sample_rng=None) -> BoostingResult:
    """Fit ``params.n_estimators`` trees.

    Parameters
    ----------
    X_binned : ndarray of uint8, Fortran-ordered
    y : ndarray of float64 (labels in {0, 1} for the logistic loss, class codes for softmax)
    bin_mapper : fitted BinMapper
    usage : Usage
        Omega with mu, costs, bags and budget; updated in place.
    evals : sequence of (name, X_binned, y) or, for ranking, (name, X_binned, y, query offsets)
        Validation sets scored after every tree.
    callbacks : sequence of callables receiving a CallbackEnv
    model : object passed to callbacks as ``env.model``
    search : FeatureSearch or None
        The split search's feature restriction (the method's, e.g. GT-GBM's group tests).
    sample_rng : numpy Generator or None
        Source of the row sampler's draws.
    """
    if params.loss == "softmax":  # one tree per class per round: gbfs.booster.multiclass_boosting
        return boost_softmax(X_binned, y, bin_mapper, params, usage, evals, callbacks, model, search,
                             sample_rng)
    step = TreeStep(X_binned, y, bin_mapper, params, search, sample_rng)
    train = Evaluator("train", X_binned, y, step.init_score, step.loss)
    train.raw = step.raw  # train scores are updated through the partition, not re-predicted
    evaluators = [Evaluator(name, Xb, yv, step.init_score, loss_for(params, *extra))
                  for name, Xb, yv, *extra in evals]
    trees, history = [], []
    best_iteration = None
    reset_all(callbacks)
    start = time.perf_counter()
    try:
        for it in range(params.n_estimators):
            tree, stats = step.grow(it, usage)
            trees.append(tree)
            for ev in evaluators:
                ev.add_tree(tree)
            rec = {"iteration": it, "elapsed_seconds": time.perf_counter() - start,
                   "root_variance": stats.pop("root_variance"),
                   "gain_normaliser": stats.pop("gain_normaliser"),
                   "n_features_used": len(usage.order), **stats}
            if close_round(it, rec, [train, *evaluators], history, callbacks, model, params, usage):
                break
    except EarlyStopException as stop:
        best_iteration = stop.best_iteration
    finally:
        step.release()
    return BoostingResult(trees, step.init_score, history, best_iteration)
