"""The multitask baselines of the GT-GBM paper's Figures 4-5, for any single-task estimator.

- :class:`PooledTasks` -- "SingleTask": one model on the rows of every task, the task id a
  categorical feature (one-hot columns appended to ``X``; they carry no feature cost and are not
  counted as selected features: every model knows the task of a row);
- :class:`IndependentTasks` -- one model per task on its own rows, nothing shared.

(GroupSparse is :class:`~gbfs.GBFSMultitaskClassifier` with ``mu_task=0``.)  Both are
meta-estimators in scikit-learn's idiom (as ``MultiOutputClassifier(estimator)``) with the
multitask interface ``fit(X, y, task, eval_set=(X_val, y_val, task_val))``, ``predict(X, task)``,
``selected_features_`` and ``selected_features_per_task_``.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, clone, is_classifier
from sklearn.utils.validation import check_is_fitted


def _tasks(task) -> np.ndarray:
    t = np.asarray(task)
    if t.ndim != 1:
        raise ValueError(f"task must be 1-D, got shape {t.shape}")
    return t


def _index(tasks: np.ndarray, task, n_rows: int, name: str = "task") -> np.ndarray:
    t = _tasks(task)
    if t.shape[0] != n_rows:
        raise ValueError(f"{name} has {t.shape[0]} entries but X has {n_rows} rows")
    idx = np.minimum(np.searchsorted(tasks, t), tasks.shape[0] - 1)
    unknown = t[tasks[idx] != t]
    if unknown.size:
        raise ValueError(f"{name} has labels {np.unique(unknown)[:10].tolist()} not seen in fit "
                         f"(tasks: {tasks.tolist()[:20]})")
    return idx


def _first_use(arrays) -> np.ndarray:
    seen, order = set(), []
    for a in arrays:
        for f in np.asarray(a).tolist():
            if f not in seen:
                seen.add(f)
                order.append(f)
    return np.asarray(order, dtype=np.int64)


#: the Parameters section of every multitask baseline's docstring
_PARAMS_DOC = """
    Parameters
    ----------
    estimator : a single-task estimator (GBFSClassifier, GBFSRegressor, LightGBMBaseline, ...)
    """


def _eval_triples(eval_set) -> list:
    """``eval_set`` as a list of ``(X_val, y_val, task_val)`` (a single tuple, a list, or None)."""
    if eval_set is None:
        return []
    return [eval_set] if isinstance(eval_set, tuple) else eval_set


class _TaskMeta(BaseEstimator):
    def __init__(self, estimator):
        self.estimator = estimator

    def _start_fit(self, X, task) -> tuple[np.ndarray, np.ndarray]:
        """``X`` as float64 and ``task`` as labels; sets ``tasks_`` (sorted) and ``n_features_in_``."""
        X = np.asarray(X, dtype=np.float64)
        t = _tasks(task)
        self.tasks_ = np.unique(t)
        self.n_features_in_ = X.shape[1]
        return X, t

    def predict_proba(self, X, task):
        """Probabilities of ``classes_[0]`` and ``classes_[1]`` of each row under its task's model."""
        return self._per_row(X, task, "predict_proba")

    def decision_function(self, X, task):
        return self._per_row(X, task, "decision_function")

    def predict(self, X, task):
        return self._per_row(X, task, "predict")

    def _get_support_mask(self) -> np.ndarray:
        check_is_fitted(self, "selected_features_")
        mask = np.zeros(self.n_features_in_, dtype=bool)
        mask[self.selected_features_] = True
        return mask

    def get_support(self, indices: bool = False) -> np.ndarray:
        mask = self._get_support_mask()
        return np.flatnonzero(mask) if indices else mask


class PooledTasks(_TaskMeta):
    __doc__ = ("SingleTask: ``estimator`` fitted on the pooled rows with the task id one-hot encoded.\n"
               + _PARAMS_DOC)

    def fit(self, X, y, task, eval_set=None, **fit_params):
        X, t = self._start_fit(X, task)
        est = clone(self.estimator)
        extra = self.tasks_.shape[0]
        params = est.get_params()
        # the indicator columns are free and in their own bags: the task of a row is always known
        if params.get("feature_costs") is not None:
            est.set_params(feature_costs=np.concatenate([np.asarray(params["feature_costs"], float),
                                                         np.zeros(extra)]))
        elif "feature_costs" in params:
            est.set_params(feature_costs=np.concatenate([np.ones(X.shape[1]), np.zeros(extra)]))
        if params.get("feature_bags") is not None:
            bags = np.asarray(params["feature_bags"], dtype=np.int64)
            est.set_params(feature_bags=np.concatenate([bags, bags.max() + 1 + np.arange(extra)]))
        if eval_set is not None:
            fit_params["eval_set"] = [(self._pooled(Xv, tv), yv) for Xv, yv, tv in _eval_triples(eval_set)]
        self.estimator_ = est.fit(self._pooled(X, t), y, **fit_params)
        if is_classifier(est):
            self.classes_ = self.estimator_.classes_
        sel = np.asarray(self.estimator_.selected_features_, dtype=np.int64)
        self.selected_features_ = sel[sel < X.shape[1]]
        self.selected_features_per_task_ = [self.selected_features_] * extra
        self.n_features_selected_ = int(self.selected_features_.shape[0])
        return self

    def _pooled(self, X, task) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        idx = _index(self.tasks_, task, X.shape[0])
        onehot = np.zeros((X.shape[0], self.tasks_.shape[0]))
        onehot[np.arange(X.shape[0]), idx] = 1.0
        return np.hstack([X, onehot])

    def _per_row(self, X, task, method):
        check_is_fitted(self, "estimator_")
        return getattr(self.estimator_, method)(self._pooled(X, task))


class IndependentTasks(_TaskMeta):
    __doc__ = "One clone of ``estimator`` per task, fitted on that task's rows only.\n" + _PARAMS_DOC

    def fit(self, X, y, task, eval_set=None, **fit_params):
        X, t = self._start_fit(X, task)
        y = np.asarray(y)
        idx = _index(self.tasks_, t, X.shape[0])
        val = [(np.asarray(Xv, dtype=np.float64), np.asarray(yv),
                _index(self.tasks_, tv, len(yv), "eval_set task")) for Xv, yv, tv in _eval_triples(eval_set)]
        self.estimators_ = []
        for k in range(self.tasks_.shape[0]):
            kw = dict(fit_params)
            if val:
                kw["eval_set"] = [(Xv[iv == k], yv[iv == k]) for Xv, yv, iv in val]
            self.estimators_.append(clone(self.estimator).fit(X[idx == k], y[idx == k], **kw))
        if is_classifier(self.estimator):
            self.classes_ = np.unique(y)
        self.selected_features_per_task_ = [np.asarray(e.selected_features_, dtype=np.int64)
                                            for e in self.estimators_]
        self.selected_features_ = _first_use(self.selected_features_per_task_)
        self.n_features_selected_ = int(self.selected_features_.shape[0])
        return self

    def _per_row(self, X, task, method):
        check_is_fitted(self, "estimators_")
        X = np.asarray(X, dtype=np.float64)
        idx = _index(self.tasks_, task, X.shape[0])
        out = None
        for k, est in enumerate(self.estimators_):
            rows = np.flatnonzero(idx == k)
            if not rows.size:
                continue
            part = getattr(est, method)(X[rows])
            if out is None:
                out = np.empty((X.shape[0],) + part.shape[1:], dtype=part.dtype)
            out[rows] = part
        return out
