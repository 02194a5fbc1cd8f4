"""scikit-learn estimators of multitask feature selection: :class:`GBFSMultitaskClassifier` and
:class:`GBFSMultitaskRegressor` (GT-GBM paper, Section 3, Algorithm 1, Eq. 2).

Rows belong to tasks, given as a ``task`` array next to ``X`` and ``y`` (like ``groups`` in
scikit-learn's splitters): ``fit(X, y, task)``, ``predict(X, task)``.  Each task gets its own
trees; the tasks share the features they select through Omega_G.  ``mu`` is Eq. 2's group penalty
``mu_G``, ``mu_task`` the task penalty ``mu_t``: ``mu_task=0`` is GroupSparse (one feature set for
all tasks), ``mu=0`` selects every task's features independently, and a single task gives exactly
the single-task estimator with ``mu + mu_task``.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils.validation import check_is_fitted

from .. import validation as V
from ..booster.kernels.sparse_binned import take_rows, to_dense
from ..booster.losses.loss import LOSSES
from ..booster.rounds import BoostingResult
from ..booster.tree import PackedEnsemble
from ..criteria import group_testing
from ..criteria.methods import METHODS
from ..criteria.multitask_boosting import TaskData, boost_multitask
from ..criteria.multitask_usage import MultitaskUsage
from ..criteria.refit import importances
from ..io import envelope
from . import fitting, model_io
from ._docs import MULTITASK_PARAM_DOC
from ._params import numba_threads, prediction_threads
from .single_task import BaseGBFS, GBFSClassifier, GBFSRegressor

#: the keys of a multitask model file: a single-task file's without init_score, trees and
#: selected_features, with the tasks and their trees (see ``save_model``)
MULTITASK_KEYS = model_io.COMMON_KEYS | {"tasks", "task_sizes", "init_scores", "best_iteration", "task_trees"}


def _seeds(seed: int, stream: int, t: int) -> list[int]:
    # task 0 draws from the single-task estimator's streams: one task gives exactly its model
    return [seed, stream] + ([t] if t else [])


def _first_use(trees) -> list[int]:
    order, seen = [], set()
    for tree in trees:
        for f in tree.used_features():
            if int(f) not in seen:
                seen.add(int(f))
                order.append(int(f))
    return order


class _MultitaskBase(BaseGBFS):
    def __init__(self, *, mu_task=0.01, **params):
        super().__init__(**params)
        self.mu_task = mu_task

    def _reset_fitted(self) -> None:
        super()._reset_fitted()
        self.__dict__.pop("_task_trees", None)

    # -- validation ----------------------------------------------------------------------------
    def _validate_params(self):
        params = super()._validate_params()
        method = params.method
        mu_task = V.check_real("mu_task", self.mu_task, low=0.0)
        if method.max_mu is not None and float(self.mu) + mu_task > method.max_mu:
            raise ValueError(f"mu + mu_task must be at most {method.max_mu:g} for method={method.name!r} "
                             f"(normalised gains are at most 1), got {self.mu!r} + {self.mu_task!r}")
        if params.growth.split_search != "histogram":
            raise ValueError("split_search='exact' does not apply to multitask boosting: use 'histogram'")
        if method.ranks:
            raise ValueError(f"method={method.name!r} does not apply to multitask boosting; use "
                             f"one of {[m for m, k in METHODS.items() if not k.ranks]}")
        if self.refit:
            raise ValueError("refit=True does not apply to multitask boosting (each task's trees are "
                             "the model); use refit=False")
        return params

    def _task_labels(self, task, n_rows: int, name: str = "task") -> np.ndarray:
        """``task`` as a 1-D array of labels: integers (or integral floats) or strings."""
        t = V.target_array(task, type(self).__name__, n_rows, name)
        if t.dtype == object:
            V._check_object_labels(t, name)
        elif t.dtype.kind == "f":
            if not np.all(np.isfinite(t)) or not np.all(t == np.round(t)):
                raise ValueError(f"{name} must hold task labels (integers or strings); got non-integral "
                                 "floats")
        elif t.dtype.kind not in "iuUSb":
            raise TypeError(f"{name} must hold task labels (integers or strings), got dtype {t.dtype}")
        return t

    def _task_index(self, task, n_rows: int, name: str = "task") -> np.ndarray:
        """Positions in ``tasks_`` of the labels ``task``; unknown labels are refused."""
        t = self._task_labels(task, n_rows, name)
        try:
            idx = np.minimum(np.searchsorted(self.tasks_, t), self.tasks_.shape[0] - 1)
            unknown = t[self.tasks_[idx] != t]
        except TypeError as e:  # strings against numbers
            raise ValueError(f"{name}: labels of another type than the tasks of fit "
                             f"({self.tasks_.tolist()[:20]})") from e
        if unknown.size:
            raise ValueError(f"{name} has labels {np.unique(unknown)[:10].tolist()} not seen in fit "
                             f"(tasks: {self.tasks_.tolist()[:20]})")
        return idx

    _eval_fields = ("X_val", "y_val", "task_val")

    def _eval_extras(self, k: int, Xv, rest: list) -> tuple:
        return (self._task_index(rest[0], Xv.shape[0], f"eval_set[{k}] task"),)

    # -- fit -------------------------------------------------------------------------------------
    def fit(self, X, y, task, eval_set=None, callbacks=None):
        """Fit one boosted ensemble per task with shared feature selection (Algorithm 1).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        task : array-like of shape (n_samples,)
            The task of each row: any labels, all strings or all numbers (``tasks_`` holds them,
            sorted).
        eval_set : tuple (X_val, y_val, task_val) or list of such tuples, optional
            Scored after every round (``history_`` keys ``val_*``: the task-size-weighted Total,
            and ``val_*_task{t}`` per task); early stopping reads the Total ``val_loss``.
        callbacks : list of callables, optional
            Called once per round with a :class:`gbfs.booster.callbacks.CallbackEnv`.

        Returns
        -------
        self
        """
        params, callbacks, X, y = fitting.check_data(self, X, y, callbacks)
        task_labels = self._task_labels(task, X.shape[0])
        self.tasks_ = np.unique(task_labels)
        task_idx = self._task_index(task_labels, X.shape[0])
        evals = self._check_eval_set(eval_set)
        d = X.shape[1]
        costs, bags, callbacks = fitting.check_selection(self, d, evals, callbacks)
        rows = [np.flatnonzero(task_idx == t) for t in range(self.tasks_.shape[0])]
        method = params.method
        plans = [self._group_test_plan(r.shape[0], d) if method.group_tests else None for r in rows]
        seed = fitting.fit_seed(self)
        with numba_threads(self.n_threads):
            t0 = time.perf_counter()
            bin_mapper, X_binned = fitting.bin_train(self, X, seed)
            tasks = self._task_data(X_binned, y, rows, evals, bin_mapper, params, plans, seed)
            t1 = time.perf_counter()
            usage = MultitaskUsage(d, len(rows), float(self.mu), float(self.mu_task), costs, bags,
                                   self.max_features, self.max_cost)
            results = boost_multitask(tasks, bin_mapper, params, usage, callbacks, model=self)
            t2 = time.perf_counter()
        self._bin_mapper = bin_mapper
        self._set_fitted_tasks(results)
        self.task_sizes_ = np.array([r.shape[0] for r in rows], dtype=np.int64)
        self.timings_ = {"binning_seconds": t1 - t0, "boosting_seconds": t2 - t1,
                         "binned_bytes": int(X_binned.nbytes)}
        return self

    def _task_data(self, X_binned, y, rows, evals, bin_mapper, params, plans, seed) -> list[TaskData]:
        """Each task's compact binned rows, labels, eval rows, feature search and sampler stream."""
        binned_evals = [(bin_mapper.transform(Xv), yv, tv) for Xv, yv, tv in evals]
        method = params.method
        out = []
        for t, r in enumerate(rows):
            Xt = take_rows(X_binned, r)
            names = [("val" if k == 0 else f"val{k}", take_rows(Xb, np.flatnonzero(tv == t)), yv[tv == t])
                     for k, (Xb, yv, tv) in enumerate(binned_evals)]
            tester = None
            if plans[t] is not None:
                Xt = to_dense(Xt)  # group tests read every column of a row
                tester = group_testing.GroupTester.precompute(
                    Xt, bin_mapper.standardised_values_, plans[t], np.random.default_rng(_seeds(seed, 1, t)))
            search = method.feature_search(tester, params.group_test_scope, params.group_test_rows,
                                           np.random.default_rng(_seeds(seed, 2, t)))
            out.append(TaskData(Xt, y[r], names, search, np.random.default_rng(_seeds(seed, 3, t))))
        return out

    def _set_fitted_tasks(self, results) -> None:
        best = results[0].best_iteration
        task_trees = [r.trees if best is None else r.trees[:best + 1] for r in results]
        self._task_trees = task_trees
        self._packed = [PackedEnsemble(tr) for tr in task_trees]
        # round-major: the order in which Algorithm 1 grew them
        self._trees = [tr[k] for k in range(len(task_trees[0])) for tr in task_trees]
        self.init_scores_ = np.array([r.init_score for r in results], dtype=np.float64)
        self.history_ = results[0].history
        self.best_iteration_ = best
        self.n_iter_ = len(task_trees[0])
        self._set_selection()

    def _set_selection(self) -> None:
        order = _first_use(self._trees)
        self.selected_features_ = np.asarray(order, dtype=np.int64)
        self.selected_features_per_task_ = [np.asarray(_first_use(tr), dtype=np.int64)
                                            for tr in self._task_trees]
        self.n_features_selected_ = len(order)
        self.feature_importances_ = importances(self._trees, self.n_features_in_, self.importance_type)
        names = getattr(self, "feature_names_in_", None)
        self.selected_feature_names_ = [str(names[f]) if names is not None else f"x{f}" for f in order]

    # -- prediction ------------------------------------------------------------------------------
    def _raw_predict(self, X, task):
        check_is_fitted(self, "_task_trees")
        X = self._check_X(X, reset=False)
        idx = self._task_index(task, X.shape[0])
        raw = np.empty(X.shape[0], dtype=np.float64)
        bm = self._bin_mapper
        with numba_threads(prediction_threads(self)):
            for t, packed in enumerate(self._packed):
                rows = np.flatnonzero(idx == t)
                if rows.size:
                    out = np.full(rows.shape[0], self.init_scores_[t])
                    packed.predict_raw(X[rows], out, bm.categories_to_bins if bm.has_categorical else None)
                    raw[rows] = out
        return raw

    @property
    def trees_(self):
        """The fitted trees of each task (a list per task, in boosting order)."""
        check_is_fitted(self, "_task_trees")
        return [list(tr) for tr in self._task_trees]

    # -- model files -----------------------------------------------------------------------------
    def save_model(self, path) -> None:
        """Write the fitted model as versioned JSON, atomically (:mod:`gbfs.io.envelope`): the keys of
        a single-task file, with ``tasks`` (labels, as ``classes``), ``task_sizes``,
        ``init_scores`` and ``task_trees`` (a list of trees per task) instead of ``init_score``
        and ``trees``."""
        envelope.save(self, path)

    def _model_body(self) -> dict:
        check_is_fitted(self, "_task_trees")
        for t, trees in enumerate(self._task_trees):
            model_io.check_finite(float(self.init_scores_[t]), trees, f"task {t}'s ")
        return {**model_io.common_body(self),
                "tasks": {"dtype": self.tasks_.dtype.str, "values": self.tasks_.tolist()},
                "task_sizes": self.task_sizes_.tolist(),
                "init_scores": [float(v) for v in self.init_scores_],
                "best_iteration": self.best_iteration_,
                "task_trees": [model_io.trees_json(trees) for trees in self._task_trees]}

    @classmethod
    def _from_model_body(cls, body: dict):
        model_io.check_keys(body, MULTITASK_KEYS)
        est = cls()
        d, est._bin_mapper = model_io.restore_common(est, body)
        if hasattr(est, "classes_") and est.classes_.shape[0] != 2:
            raise ValueError(f"classes must hold exactly two labels, got {est.classes_.tolist()}")
        est.tasks_ = V.labels_from_json(body["tasks"], "tasks")
        T = est.tasks_.shape[0]
        if est.tasks_.ndim != 1 or T < 1 or np.unique(est.tasks_).shape[0] != T \
                or not np.array_equal(np.unique(est.tasks_), est.tasks_):
            raise ValueError("tasks must be distinct labels in sorted order")
        lists = body["task_trees"]
        if not isinstance(lists, list) or len(lists) != T:
            raise ValueError(f"task_trees must hold one list of trees per task ({T})")
        task_trees = [model_io.trees_from_json(v, d, f"task_trees[{t}]") for t, v in enumerate(lists)]
        for t, trees in enumerate(task_trees):
            model_io.check_categorical_trees(trees, est._bin_mapper, f"task_trees[{t}]")
        if len({len(tr) for tr in task_trees}) != 1:
            raise ValueError("task_trees must hold as many trees for every task")
        init = body["init_scores"]
        if not isinstance(init, list) or len(init) != T:
            raise ValueError(f"init_scores must hold one score per task ({T})")
        sizes = np.asarray(body["task_sizes"], dtype=np.int64)
        if sizes.shape != (T,) or np.any(sizes < 1):
            raise ValueError(f"task_sizes must hold one positive count per task ({T})")
        best = model_io.best_iteration_from_json(body["best_iteration"], len(task_trees[0]))
        results = [BoostingResult(tr, model_io.init_score_from_json(v, f"init_scores[{t}]"), [], None)
                   for t, (tr, v) in enumerate(zip(task_trees, init))]
        est._set_fitted_tasks(results)
        est.best_iteration_ = best
        est.task_sizes_ = sizes
        est._saved_n_threads = est.n_threads  # the file's thread count never limits prediction
        return est


_base_signature = inspect.signature(BaseGBFS.__init__)
_names = list(_base_signature.parameters)
_params = list(_base_signature.parameters.values())
_params.insert(_names.index("mu") + 1,
               inspect.Parameter("mu_task", inspect.Parameter.KEYWORD_ONLY, default=0.01))
# scikit-learn's get_params/clone read the parameters from the signature of __init__
_MultitaskBase.__init__.__signature__ = _base_signature.replace(parameters=_params)


def _multitask_of(single_task: type[BaseGBFS], target: str, fit_target: Callable) -> Callable[[type], type]:
    """Class decorator of the multitask estimator of ``single_task``, whose ``target`` it names in its
    docstring: the loss and the labels' encoding of ``single_task``, the target check ``fit_target``,
    and model files of its own (:func:`gbfs.io.envelope.register_model`)."""
    def make(cls: type) -> type:
        cls.__doc__ = (f"Multitask gradient boosted feature selection for {target}: one\n    ensemble "
                       "per task, features selected jointly (GT-GBM paper, Algorithm 1, Eq. 2).\n"
                       + MULTITASK_PARAM_DOC)
        cls._loss = single_task._loss
        cls._fit_target = fit_target
        cls._encode_y = single_task._encode_y
        return envelope.register_model(cls)
    return make


@_multitask_of(GBFSClassifier, "binary classification (log-loss)", GBFSClassifier._binary_fit_target)
class GBFSMultitaskClassifier(ClassifierMixin, _MultitaskBase):
    def decision_function(self, X, task):
        """Raw log-odds of ``classes_[1]`` of each row under its task's model."""
        return self._raw_predict(X, task)

    def predict_proba(self, X, task):
        """Probabilities of ``classes_[0]`` and ``classes_[1]``, shape (n_samples, 2)."""
        p = LOSSES[self._loss].inverse_link(self._raw_predict(X, task))
        return np.column_stack([1.0 - p, p])

    def predict(self, X, task):
        raw = self._raw_predict(X, task)
        return self.classes_[(raw > 0).astype(int)]

    def score(self, X, y, task, sample_weight=None) -> float:
        """Accuracy of ``predict(X, task)``."""
        return float(accuracy_score(y, self.predict(X, task), sample_weight=sample_weight))


@_multitask_of(GBFSRegressor, "regression (squared error)", GBFSRegressor._fit_target)
class GBFSMultitaskRegressor(RegressorMixin, _MultitaskBase):
    def predict(self, X, task):
        return self._raw_predict(X, task)

    def score(self, X, y, task, sample_weight=None) -> float:
        """R^2 of ``predict(X, task)``."""
        return float(r2_score(y, self.predict(X, task), sample_weight=sample_weight))
