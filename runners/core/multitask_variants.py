"""The estimators of the harness's multitask methods (``conf/method/mt_*.yaml``).

``method.estimator`` names one of :func:`multitask`, :func:`pooled` or :func:`independent` in
:data:`runners.core.experiment.ESTIMATORS`.  Each is built from the method's params like the single-task
methods, and ``max_features`` always bounds the features of the whole model, the union over tasks
(the GT-GBM paper's Omega_G), so that the variants compare at equal total feature counts:

* ``GBFSMultitaskClassifier`` (Multitask, GroupSparse) caps Omega_G itself;
* :class:`PooledWithinBudget` (SingleTask): the pooled model's own budget also counts the one-hot
  task columns (free, but each a feature of the model), so it is given ``K + T`` and refitted with
  less room while it uses more than ``K`` real features;
* :class:`IndependentWithinBudget`: each task's model gets the largest per-task budget, tried
  upwards from ``K // T``, whose union stays within ``K``.

Both wrappers also expose ``history_`` (the pooled model's rounds; none for independent models,
whose per-task fits stop at different rounds) and ``timings_`` (summed over the per-task fits), as
the multitask estimator does, so that the harness reads every variant alike.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
from sklearn.base import BaseEstimator, clone

from gbfs import GBFSClassifier, GBFSMultitaskClassifier
from gbfs.baselines.multitask import IndependentTasks, PooledTasks

#: the fitted attributes a wrapper copies from the model it kept
_FITTED = ("tasks_", "classes_", "n_features_in_", "selected_features_", "selected_features_per_task_",
           "n_features_selected_")
#: refits of the pooled model after the first, before it falls back to a budget of K bags
_POOLED_RETRIES = 4


def _check_budget(max_features) -> int | None:
    if max_features is None:
        return None
    if isinstance(max_features, bool) or not isinstance(max_features, (int, np.integer)) or max_features < 1:
        raise ValueError(f"max_features must be a positive integer or None, got {max_features!r}")
    return int(max_features)


class _WithinBudget(BaseEstimator):
    """A task meta-estimator of ``estimator`` held to ``max_features`` features over all tasks."""

    def __init__(self, estimator, max_features=None):
        self.estimator = estimator
        self.max_features = max_features

    def fit(self, X, y, task, eval_set=None, **fit_params):
        """Fit within the budget (:meth:`_fit_within`); ``fit_params`` go to every inner fit."""
        budget = _check_budget(self.max_features)
        n_tasks = len(np.unique(np.asarray(task)))
        self.model_, self.inner_max_features_ = self._fit_within(
            lambda cap: self._inner(cap).fit(X, y, task, eval_set=eval_set, **fit_params), budget, n_tasks)
        for name in _FITTED:
            if hasattr(self.model_, name):
                setattr(self, name, getattr(self.model_, name))
        return self

    def _inner(self, cap: int | None):
        est = clone(self.estimator)
        if cap is not None:
            est.set_params(max_features=int(cap))
        return self.meta(est)

    def predict_proba(self, X, task):
        """Probabilities of ``classes_`` of each row under its task's model."""
        return self.model_.predict_proba(X, task)

    def decision_function(self, X, task):
        return self.model_.decision_function(X, task)

    def predict(self, X, task):
        return self.model_.predict(X, task)


class PooledWithinBudget(_WithinBudget):
    """SingleTask (:class:`~gbfs.baselines.multitask.PooledTasks`) using at most ``max_features``
    real features; ``inner_max_features_`` is the pooled model's own budget that achieved it."""

    meta = PooledTasks

    @staticmethod
    def _fit_within(fit, budget: int | None, n_tasks: int):
        if budget is None:
            return fit(None), None
        # the T indicator columns count in the pooled model's budget but not as features: give them
        # room, and take back whatever real features that room let in beyond K
        cap = budget + n_tasks
        for _ in range(1 + _POOLED_RETRIES):
            model = fit(cap)
            excess = model.n_features_selected_ - budget
            if excess <= 0:
                return model, cap
            cap -= excess
        return fit(budget), budget   # K bags hold at most K real features

    @property
    def history_(self) -> list[dict]:
        return list(self.model_.estimator_.history_)

    @property
    def timings_(self) -> dict:
        return dict(self.model_.estimator_.timings_)


class IndependentWithinBudget(_WithinBudget):
    """Independent (:class:`~gbfs.baselines.multitask.IndependentTasks`) using at most
    ``max_features`` features over all tasks; ``inner_max_features_`` is the per-task budget."""

    meta = IndependentTasks

    @staticmethod
    def _fit_within(fit, budget: int | None, n_tasks: int):
        if budget is None:
            return fit(None), None
        if budget < n_tasks:
            raise ValueError(f"max_features={budget} is below the number of tasks ({n_tasks}): independent "
                             f"models need at least one feature each")
        best, cap = None, budget // n_tasks
        while cap <= budget:
            model = fit(cap)
            if model.n_features_selected_ > budget:
                break
            best = (model, cap)
            if max(len(s) for s in model.selected_features_per_task_) < cap:
                break   # no task's budget binds: a larger one fits the same models
            cap += 1
        return best

    @property
    def history_(self) -> list[dict]:
        return []   # the tasks' fits stop at different rounds: there is no round of the whole model

    @property
    def timings_(self) -> dict:
        total: Counter = Counter()
        for est in self.model_.estimators_:
            total.update({k: v for k, v in est.timings_.items() if isinstance(v, (int, float))})
        return dict(total)


# ------------------------------------------------------------ builders of runners.core.experiment.ESTIMATORS

def multitask(**params) -> GBFSMultitaskClassifier:
    """Multitask A-GBM / GT-GBM (also GroupSparse, ``mu_task=0``)."""
    return GBFSMultitaskClassifier(**params)


def pooled(max_features=None, **params) -> PooledWithinBudget:
    """SingleTask: a pooled ``GBFSClassifier(**params)`` within ``max_features`` real features."""
    return PooledWithinBudget(GBFSClassifier(**params), max_features=max_features)


def independent(max_features=None, **params) -> IndependentWithinBudget:
    """Independent: ``GBFSClassifier(**params)`` per task, within ``max_features`` features in all."""
    return IndependentWithinBudget(GBFSClassifier(**params), max_features=max_features)
