"""The one boosting loop: rounds of tree steps (Algorithm 3 of the GT-GBM paper, Algorithm 1 of GBFS
and, with one step per task, the paper's multitask Algorithm 1).

A round is a list of :class:`Slot` s -- a :class:`~gbfs.booster.tree_step.TreeStep` with the Omega
view it grows against and what to do with its tree -- grown in order, so a feature the first tree of
a round pays for is already free for the next.  Single-task boosting has one slot
(:func:`gbfs.booster.boosting.boost`), multiclass boosting one per class
(:func:`gbfs.booster.multiclass_boosting.boost_softmax`), multitask boosting one per task
(:func:`gbfs.criteria.multitask_boosting.boost_multitask`); a :class:`Rounds` plan says what they
share.  :func:`run_rounds` runs any plan; every round ends the same way (:func:`close_round`):
metrics, the ``history_`` record, the callbacks, and whether the selection has settled.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from .callbacks import CallbackEnv, EarlyStopException, close_all, reset_all
from .growing.grower import GrowthParams
from .losses.loss import LogisticLoss
from .losses.metrics import rmse, roc_auc
from .tree import PackedEnsemble, Tree
from .usage import GainScale, Usage


@dataclass(frozen=True)
class Criterion:
    """How a split's gain weighs the rows: ``sse`` is the papers' first-order gain (GT-GBM paper,
    Eq. 1: every row weighs 1), ``newton`` the hessian-weighted gain LightGBM uses."""

    name: str
    hessian_weighted: bool


@dataclass(frozen=True)
class LeafEstimate:
    """A leaf's value: ``mean`` the mean residual (the papers' least-squares fit), ``newton``
    ``sum r / (sum h + lambda)``."""

    name: str
    newton: bool


#: what the training set's evaluator records after every round, cheapest first: nothing, the loss,
#: or every metric of the validation sets too (AUC, RMSE, ...: on 100 000 rows these cost as much
#: as a small tree)
TRAIN_METRICS = ("none", "loss", "all")


def records(train_metrics: str, what: str) -> bool:
    """Whether an evaluator set to ``train_metrics`` records ``what`` (``"loss"`` or ``"all"``)."""
    return TRAIN_METRICS.index(train_metrics) >= TRAIN_METRICS.index(what)


#: the criteria and leaf estimates by name (the estimators' ``criterion`` and ``leaf_estimate``)
CRITERIA = {c.name: c for c in (Criterion("sse", False), Criterion("newton", True))}
LEAF_ESTIMATES = {e.name: e for e in (LeafEstimate("mean", False), LeafEstimate("newton", True))}


@dataclass
class BoostingParams:
    loss: object = LogisticLoss  # the loss object (gbfs.booster.losses): a class or an instance
    # the selection method (gbfs.criteria.methods.Method), resolved: the loop asks it only what the
    # split gains are divided by (GainScale); None compares raw gains with the penalty
    method: GainScale | None = None
    n_estimators: int = 100
    learning_rate: float = 0.1
    criterion: Criterion = CRITERIA["sse"]
    leaf_estimate: LeafEstimate = LEAF_ESTIMATES["mean"]
    growth: GrowthParams = field(default_factory=GrowthParams)
    group_test_scope: str = "tree"  # GT-GBM only: "tree" (once per tree) or "node" (Algorithm 2)
    group_test_rows: int | None = None  # GT-GBM only: row sample size of a group test
    sampler: object | None = None  # gbfs.sampling.samplers.RowSampler: rows and weights of each tree
    # a selection fit (refit mode) ends once Omega can no longer change (its budget is full) or has
    # not grown for ``selection_patience`` trees: its trees are discarded, only the selection is kept
    stop_when_full: bool = False
    selection_patience: int | None = None
    train_metrics: str = "all"  # what the training set records after every round (TRAIN_METRICS)


@dataclass
class BoostingResult:
    trees: list
    init_score: float
    history: list
    best_iteration: int | None


class Evaluator:
    """Running raw scores of one data set and its metrics (``{name}_loss``, ``_auc``, ``_rmse``;
    a ranking loss's ``_ndcg@k`` and ``_mrr``); ``metrics`` (:data:`TRAIN_METRICS`) leaves out
    the costlier ones or all."""

    def __init__(self, name: str, X_binned: np.ndarray, y: np.ndarray, init_score: float, loss,
                 metrics: str = "all", raw_values: bool = False):
        self.name, self.X_binned, self.y = name, X_binned, y
        self.loss, self.metrics = loss, metrics
        self.raw = np.full(y.shape[0], init_score, dtype=np.float64)
        # the exact split search's trees have raw thresholds only: its data sets stay raw values
        self._raw_values = raw_values

    def add_tree(self, tree: Tree) -> None:
        if self._raw_values:
            PackedEnsemble.of_tree(tree).predict_raw(self.X_binned, self.raw)
        else:
            PackedEnsemble.of_tree(tree).predict_binned(self.X_binned, self.raw)

    def record(self, rec: dict) -> None:
        if not records(self.metrics, "loss"):
            return
        rec[f"{self.name}_loss"] = self.loss.loss(self.y, self.raw)
        if not records(self.metrics, "all"):
            return
        if self.loss.scores_auc:
            rec[f"{self.name}_auc"] = roc_auc(self.y, self.raw)
        if hasattr(self.loss, "metrics"):
            rec.update({f"{self.name}_{k}": v for k, v in self.loss.metrics(self.y, self.raw).items()})
            return
        # for classifiers the RMSE of the predicted probabilities: the GT-GBM paper's Table 3 /
        # Figure 2 metric
        rec[f"{self.name}_rmse"] = rmse(self.y, self.loss.inverse_link(self.raw))


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


@dataclass
class Slot:
    """One tree of a round: its step, the Omega view it grows against, and what its tree updates
    (evaluators' scores) once grown."""

    step: object  # TreeStep
    usage: Usage
    on_tree: Callable[[Tree], None] = lambda tree: None


class Rounds(Protocol):
    """A boosting plan: the slots of every round and what the rounds share."""

    slots: list[Slot]
    evaluators: list  # scored at the end of every round (close_round)
    usage: Usage  # the Omega whose settling may end a selection fit

    def start_round(self) -> None:
        """Before a round's first tree (multiclass boosting fixes the softmax normalisers here)."""

    def record(self, it: int, seconds: float, stats: list[dict]) -> dict:
        """The round's ``history_`` record before the evaluators' metrics, from its trees' statistics."""

    def release(self) -> None:
        """Free the steps' buffers (the fit ends, normally or not)."""


def run_rounds(plan: Rounds, params: BoostingParams, callbacks=(), model=None
               ) -> tuple[list[list[Tree]], list[dict], int | None]:
    """Run ``params.n_estimators`` rounds of ``plan``: the trees of each slot (in round order), the
    ``history`` (one record per round) and the best iteration early stopping chose (None if it did
    not stop the fit)."""
    trees: list[list[Tree]] = [[] for _ in plan.slots]
    history: list[dict] = []
    best_iteration = None
    reset_all(callbacks)
    start = time.perf_counter()
    try:
        for it in range(params.n_estimators):
            plan.usage.begin_round(it)
            plan.start_round()
            stats = []
            for i, slot in enumerate(plan.slots):
                tree, st = slot.step.grow(it, slot.usage)
                trees[i].append(tree)
                slot.on_tree(tree)
                stats.append(st)
            rec = plan.record(it, time.perf_counter() - start, stats)
            if close_round(it, rec, plan.evaluators, history, callbacks, model, params, plan.usage):
                break
    except EarlyStopException as stop:
        best_iteration = stop.best_iteration
    finally:
        plan.release()
        close_all(callbacks)
    return trees, history, best_iteration
