""":class:`GBFSRanker`: feature-selecting gradient boosting for learning to rank (LambdaRank).

Every selection method, budget, refit mode and row sampler of the classifier applies: the trees
are fitted to LambdaRank's residuals and hessians (:mod:`gbfs.booster.losses.ranking`) instead of log-loss's,
with Newton gain and leaves by default (as LightGBM's ``lambdarank``).
"""

from __future__ import annotations

import inspect

import numpy as np

from ..booster.losses.ranking import check_relevance, group_offsets, mrr, ndcg_at
from ..io import envelope
from ._docs import PARAM_DOC
from .single_task import BaseGBFS


@envelope.register_model
class GBFSRanker(BaseGBFS):
    __doc__ = ("Gradient boosted feature selection for learning to rank (LambdaRank).\n"
               "\n    Rows come in query groups (``group``: the sizes of consecutive groups, as in\n"
               "    LightGBM); labels are graded relevances, integers in [0, 31].  ``eval_at`` is the\n"
               "    k of the NDCG@k recorded in ``history_`` (``*_ndcg@k``, ``*_mrr``); ``*_loss`` is\n"
               "    ``1 - NDCG@k``, which early stopping reads.  ``criterion`` and ``leaf_estimate``\n"
               "    default to ``\"newton\"``.\n"
               + PARAM_DOC)
    _loss = "lambdarank"
    _eval_fields = ("X_val", "y_val", "group_val")

    def __init__(self, *, eval_at=10, criterion="newton", leaf_estimate="newton", **params):
        super().__init__(criterion=criterion, leaf_estimate=leaf_estimate, **params)
        self.eval_at = eval_at

    def fit(self, X, y, group, eval_set=None, callbacks=None):
        """Fit the ranker.

        Parameters
        ----------
        X : array-like, DataFrame or scipy.sparse matrix of shape (n_samples, n_features)
            As for :meth:`GBFSClassifier.fit`; rows of a query are consecutive.
        y : array-like of shape (n_samples,)
            Relevance grades, integers in [0, 31] (gain ``2^y - 1``).
        group : array-like of int
            Sizes of the consecutive query groups, summing to ``n_samples``.
        eval_set : tuple (X_val, y_val, group_val) or list of such tuples, optional
        callbacks : list of callables, optional

        Returns
        -------
        self
        """
        self._group = group   # checked against the rows with y (before any binning)
        return self._fit_prepared(self._prepare(X, y, eval_set, callbacks))

    def _fit_target(self, y):
        y = check_relevance(y)
        self._offsets = group_offsets(self._group, y.shape[0])
        return y

    def _encode_y(self, y, name):
        return check_relevance(y, name)

    def _eval_extras(self, k: int, Xv, rest: list) -> tuple:
        return (group_offsets(rest[0], Xv.shape[0], f"eval_set[{k}] group"),)

    def _query(self, n_rows: int) -> np.ndarray:
        return self._offsets

    def predict(self, X) -> np.ndarray:
        """Ranking scores (higher ranks first within a query)."""
        return self._raw_predict(X)

    def score(self, X, y, group) -> float:
        """Mean NDCG@``eval_at`` of ``predict(X)`` over the query groups."""
        offsets = group_offsets(group, len(y))
        return ndcg_at(check_relevance(y), self.predict(X), offsets, int(self.eval_at))

    def mrr(self, X, y, group) -> float:
        """Mean reciprocal rank of the first relevant row (label > 0) of each query."""
        return mrr(check_relevance(y), self.predict(X), group_offsets(group, len(y)))


_base = inspect.signature(BaseGBFS.__init__)
_params = [p.replace(default="newton") if p.name in ("criterion", "leaf_estimate") else p
           for p in _base.parameters.values()]
_params.insert(len(_params) - 2, inspect.Parameter("eval_at", inspect.Parameter.KEYWORD_ONLY, default=10))
# scikit-learn's get_params/clone read the parameters from the signature of __init__
GBFSRanker.__init__.__signature__ = _base.replace(parameters=_params)
