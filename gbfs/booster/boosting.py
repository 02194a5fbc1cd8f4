"""The boosting loop: Algorithm 3 of the GT-GBM paper / Algorithm 1 of GBFS.

Each iteration is one :class:`~gbfs.booster.tree_step.TreeStep` (residuals, rows and weights, one
penalised tree, shrunk leaf values, updated scores) followed by the evaluation of the train and
validation sets and a ``history_`` record.  Omega (a :class:`~gbfs.criteria.penalty.Usage`) lives across
iterations.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..criteria.penalty import Usage
from .callbacks import CallbackEnv, EarlyStopException, reset_all
from .feature_search import FeatureSearch
from .grower import GrowthParams
from .losses.loss import loss_for
from .losses.metrics import rmse, roc_auc
from .tree import PackedEnsemble, Tree
from .tree_step import TreeStep


@dataclass
class BoostingParams:
    loss: str = "logistic"
    method: str = "agbm"  # a name in gbfs.criteria.methods.METHODS
    n_estimators: int = 100
    learning_rate: float = 0.1
    criterion: str = "sse"  # "sse": Eq. 1 of the papers; "newton": hessian-weighted gain
    leaf_estimate: str = "mean"  # "mean": mean residual; "newton": sum r / (sum h + lambda)
    growth: GrowthParams = field(default_factory=GrowthParams)
    group_test_scope: str = "tree"  # GT-GBM only: "tree" (once per tree) or "node" (Algorithm 2)
    group_test_rows: int | None = None  # GT-GBM only: row sample size of a group test
    sampler: object | None = None  # gbfs.sampling.samplers.RowSampler: rows and weights of each tree
    # a selection fit (refit mode) ends once Omega can no longer change (its budget is full) or has
    # not grown for ``selection_patience`` trees: its trees are discarded, only the selection is kept
    stop_when_full: bool = False
    selection_patience: int | None = None
    # ranking (loss "lambdarank"): the training rows' query offsets, and the k of NDCG@k
    query: np.ndarray | None = None
    eval_at: int = 10
    # multiclass (loss "softmax"): the number of classes, one tree each per round
    n_classes: int = 2


@dataclass
class BoostingResult:
    trees: list
    init_score: float
    history: list
    best_iteration: int | None


class Evaluator:
    """Running raw scores of one data set and its metrics (``{name}_loss``, ``_auc``, ``_rmse``;
    a ranking loss's ``_ndcg@k`` and ``_mrr``)."""

    def __init__(self, name: str, X_binned: np.ndarray, y: np.ndarray, init_score: float, loss):
        self.name, self.X_binned, self.y = name, X_binned, y
        self.loss = loss
        self.raw = np.full(y.shape[0], init_score, dtype=np.float64)

    def add_tree(self, tree: Tree) -> None:
        PackedEnsemble([tree]).predict_binned(self.X_binned, self.raw)

    def record(self, rec: dict) -> None:
        rec[f"{self.name}_loss"] = self.loss.loss(self.y, self.raw)
        if self.loss.name == "logistic":
            rec[f"{self.name}_auc"] = roc_auc(self.y, self.raw)
        if hasattr(self.loss, "metrics"):
            rec.update({f"{self.name}_{k}": v for k, v in self.loss.metrics(self.y, self.raw).items()})
            return
        # for classifiers the RMSE of the predicted probabilities: the GT-GBM paper's Table 3 /
        # Figure 2 metric
        rec[f"{self.name}_rmse"] = rmse(self.y, self.loss.inverse_link(self.raw))


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
        from .multiclass_boosting import boost_softmax

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


def close_round(it: int, rec: dict, evaluators, history: list, callbacks, model, params: BoostingParams,
                usage: Usage) -> bool:
    """End boosting round ``it``: add every evaluator's metrics to ``rec``, append it to
    ``history``, run the callbacks (which may raise :class:`EarlyStopException`); returns whether
    the selection has settled (:func:`selection_settled`), so the loop may end."""
    for ev in evaluators:
        ev.record(rec)
    history.append(rec)
    for cb in callbacks:
        cb(CallbackEnv(model=model, iteration=it, record=rec, history=history,
                       end_iteration=params.n_estimators))
    return selection_settled(params, usage, history)


def selection_settled(params: BoostingParams, usage: Usage, history: list) -> bool:
    """Whether a selection fit may end: its budget is full, or Omega has not grown for
    ``selection_patience`` records."""
    if params.stop_when_full and usage.full:
        return True
    p = params.selection_patience
    if p is None or len(history) <= p:
        return False
    return history[-1]["n_features_used"] == history[-1 - p]["n_features_used"]
