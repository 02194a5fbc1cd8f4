"""The LightGBM baselines of the other tasks: multiclass, regression and LambdaRank.

Each is :class:`gbfs.baselines.lightgbm_baseline.LightGBMBaseline` (GBDT-Full, GBDT-topK or CEGB by
``kind``, the same parameters, callbacks, timings and model file) with LightGBM's objective of its
task and the ``history_`` metrics of the matching library estimator, under the same names, so
early stopping, pruning and the curves read them alike (``root_variance`` where the task has
residuals, ``gain_normaliser`` where its hessians are the library's):

* :class:`LightGBMMulticlassBaseline`: ``objective="multiclass"``; ``val_loss`` (multiclass
  log-loss), ``val_auc`` (macro one-vs-rest, :func:`gbfs.booster.losses.softmax.macro_auc`) and
  ``val_accuracy``, as :class:`gbfs.GBFSClassifier` on more than two classes;
* :class:`LightGBMRegressionBaseline`: ``objective="regression"``; ``val_loss`` (half the mean
  squared error) and ``val_rmse``, as :class:`gbfs.GBFSRegressor`;
* :class:`LightGBMRankerBaseline`: ``objective="lambdarank"`` on query groups,
  ``fit(X, y, group, eval_set=(X_val, y_val, group_val))``; ``val_ndcg@10`` and ``val_mrr``
  (:mod:`gbfs.booster.losses.ranking`), ``val_loss`` their negated NDCG, as :class:`gbfs.GBFSRanker`.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import RegressorMixin

from .. import validation as V
from ..booster.losses.metrics import rmse
from ..booster.losses.ranking import group_offsets, mrr, ndcg_at
from ..booster.losses.softmax import proba_scores
from ..booster.normaliser import gain_normaliser
from ..io import envelope
from .lightgbm_baseline import LightGBMBaseline
from .lightgbm_history import root_metrics

#: the k of the rankers' NDCG@k in ``history_`` (``val_ndcg@10``, as GBFSRanker's default ``eval_at``)
EVAL_AT = 10


def _labels(sets: list, data):
    return next(yv for ds, yv in sets if ds is data)


@envelope.register_model
class LightGBMMulticlassBaseline(LightGBMBaseline):
    """LightGBM's ``multiclass`` objective (softmax, one tree per class and round) as a baseline of
    :class:`gbfs.GBFSClassifier` on more than two classes; parameters as :class:`LightGBMBaseline`'s."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags

    def _objective(self) -> dict:
        # fit sets classes_ before the parameters are checked: num_class is theirs
        return {"objective": "multiclass", "num_class": int(getattr(self, "classes_", np.arange(3)).shape[0])}

    def _check_y(self, y, n_rows: int, name: str = "y") -> np.ndarray:
        """Labels as the float codes ``0 .. K-1`` of ``classes_`` (set from ``y``, K >= 3)."""
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] != n_rows:
            raise ValueError(f"{name} must be 1-D with one label per row ({n_rows}), got shape {y.shape}")
        if name == "y":
            self.classes_ = V.class_labels(y, name)
            if self.classes_.shape[0] < 3:
                raise ValueError(f"y must hold at least three classes (two: LightGBMBaseline), got "
                                 f"{self.classes_.tolist()}")
        unknown = np.setdiff1d(np.unique(y), self.classes_)
        if unknown.size:
            raise ValueError(f"{name} has labels {unknown[:10].tolist()} not seen in y "
                             f"(classes: {self.classes_.tolist()})")
        return np.searchsorted(self.classes_, y).astype(np.float64)

    def fit(self, X, y, eval_set=None, callbacks=None) -> LightGBMMulticlassBaseline:
        """As :meth:`LightGBMBaseline.fit`, on ``K >= 3`` classes."""
        self.classes_ = V.class_labels(np.asarray(y))   # the objective's num_class
        return super().fit(X, y, eval_set, callbacks)

    def _feval(self, sets: list, reg_lambda: float):
        def feval(preds, data):
            codes = _labels(sets, data).astype(np.int64)
            p = np.asarray(preds).reshape(len(codes), -1)
            s = proba_scores(codes, p)
            return [("loss", s["loss"], False), ("auc", s["auc"], True), ("accuracy", s["accuracy"], True),
                    *root_metrics(_softmax_root(codes, p))]
        return feval

    def _initial_root(self, y: np.ndarray, reg_lambda: float) -> dict:
        # LightGBM's softmax starts every row at the class frequencies (boost_from_average)
        codes = y.astype(np.int64)
        prior = np.bincount(codes, minlength=self.classes_.shape[0]) / codes.shape[0]
        return _softmax_root(codes, np.broadcast_to(prior, (codes.shape[0], prior.shape[0])))

    def predict_proba(self, X) -> np.ndarray:
        """Probabilities of every class of ``classes_``, shape (n_samples, n_classes)."""
        return self._predict(X, raw_score=False)

    def decision_function(self, X) -> np.ndarray:
        """Every class's raw score, shape (n_samples, n_classes)."""
        return self._predict(X, raw_score=True)

    def predict(self, X) -> np.ndarray:
        """The class of the largest probability."""
        return self.classes_[np.argmax(self._predict(X, raw_score=True), axis=1)]

    def _restore_classes(self, classes) -> None:
        self.classes_ = np.asarray(classes)
        if self.classes_.ndim != 1 or self.classes_.shape[0] < 3:
            raise ValueError("classes must hold at least three labels")


def _softmax_root(codes: np.ndarray, p: np.ndarray) -> dict:
    """``root_variance`` of a softmax round: the residuals' (one-hot minus probability) variance,
    averaged over the classes, as :class:`gbfs.GBFSClassifier` records it on more than two classes.
    No ``gain_normaliser``: LightGBM's softmax hessians are not the library's."""
    onehot = np.eye(p.shape[1])[codes]
    return {"root_variance": float(np.mean(np.var(onehot - p, axis=0)))}


class _RealTarget(LightGBMBaseline):
    """A baseline whose target is a number per row (no classes)."""

    def _check_y(self, y, n_rows: int, name: str = "y") -> np.ndarray:
        y = V.regression_target(np.asarray(y), name)
        if y.shape[0] != n_rows:
            raise ValueError(f"{name} must have one value per row ({n_rows}), got {y.shape[0]}")
        return y

    def _classes_body(self):
        return None

    def _restore_classes(self, classes) -> None:
        if classes is not None:
            raise ValueError("classes must be null for a model of a real-valued target")

    def predict(self, X) -> np.ndarray:
        """The predicted value (a ranker: the ranking score) of every row."""
        return self._predict(X, raw_score=False)


def _squared_root(y: np.ndarray, pred: np.ndarray, reg_lambda: float) -> dict:
    """The residuals' variance and the Newton normaliser of squared error (unit hessians)."""
    g = y - pred
    return {"root_variance": float(np.var(g)),
            "gain_normaliser": gain_normaliser(float(g.sum()), float(g.shape[0]), float(g @ g), reg_lambda)}


@envelope.register_model
class LightGBMRegressionBaseline(RegressorMixin, _RealTarget):
    """LightGBM's ``regression`` objective (squared error) as a baseline of :class:`gbfs.GBFSRegressor`;
    parameters as :class:`LightGBMBaseline`'s."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.estimator_type = "regressor"
        return tags

    def _objective(self) -> dict:
        return {"objective": "regression"}

    def _feval(self, sets: list, reg_lambda: float):
        def feval(preds, data):
            y = _labels(sets, data)
            error = rmse(y, np.asarray(preds))
            return [("loss", 0.5 * error ** 2, False), ("rmse", error, False),
                    *root_metrics(_squared_root(y, np.asarray(preds), reg_lambda))]
        return feval

    def _initial_root(self, y: np.ndarray, reg_lambda: float) -> dict:
        return _squared_root(y, np.full(y.shape, float(np.mean(y))), reg_lambda)


@envelope.register_model
class LightGBMRankerBaseline(_RealTarget):
    """LightGBM's ``lambdarank`` objective as a baseline of :class:`gbfs.GBFSRanker`; parameters as
    :class:`LightGBMBaseline`'s, ``fit`` with the query sizes (``group``, rows of a query consecutive)."""

    def _objective(self) -> dict:
        return {"objective": "lambdarank", "lambdarank_truncation_level": EVAL_AT}

    def fit(self, X, y, group=None, eval_set=None, callbacks=None) -> LightGBMRankerBaseline:
        """Fit on the queries ``group`` (sizes summing to the rows), ``eval_set=(X_val, y_val, group_val)``
        scored after every tree (``val_ndcg@10``, ``val_mrr``; ``val_loss`` is minus the NDCG)."""
        if group is None:
            raise ValueError("group is required: the size of every query, in row order")
        evals = None
        self._groups = {"train": group_offsets(group, len(np.asarray(y)), "group")}
        if eval_set is not None:
            if not isinstance(eval_set, tuple) or len(eval_set) != 3:
                raise TypeError("eval_set must be a tuple (X_val, y_val, group_val)")
            evals = eval_set[:2]
            self._groups["val"] = group_offsets(eval_set[2], len(np.asarray(eval_set[1])), "eval_set group")
        try:
            return super().fit(X, y, evals, callbacks)
        finally:
            del self._groups    # the groups of one fit only

    def _dataset(self, X, y, params: dict, columns, split: str = "train", reference=None):
        data = super()._dataset(X, y, params, columns, split, reference)
        data.set_group(np.diff(self._groups[split]))
        return data

    def _feval(self, sets: list, reg_lambda: float):
        offsets = {id(ds): self._groups[split] for (ds, _), split in zip(sets, ("train", "val"))}

        def feval(preds, data):
            y, at = _labels(sets, data), offsets[id(data)]
            ndcg = ndcg_at(y, np.asarray(preds), at, EVAL_AT)
            return [("loss", -ndcg, False), (f"ndcg@{EVAL_AT}", ndcg, True), ("mrr", mrr(y, preds, at), True)]
        return feval

    def _initial_root(self, y: np.ndarray, reg_lambda: float) -> dict:
        return {}  # LambdaRank's gradients are pairwise: no residuals whose variance means anything
