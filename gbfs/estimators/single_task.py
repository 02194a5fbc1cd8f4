"""scikit-learn estimators: :class:`GBFSClassifier` and :class:`GBFSRegressor`.

Parameters are only stored in ``__init__`` and validated in ``fit``; fitted
attributes end in ``_``.  Both estimators are also feature selectors
(``get_support``, ``transform``): the selected features are those used by at
least one split of the fitted ensemble.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.feature_selection import SelectorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import validation as V
from ..booster.callbacks import evals_result
from ..booster.kernels._types import MAX_BINS
from ..booster.losses.loss import LOSSES
from ..booster.rounds import BoostingParams
from ..booster.tree import PackedEnsemble
from ..criteria.group_testing import DEFAULT_MAX_PRECOMPUTE_BYTES
from ..criteria.penalty import FeatureUsage
from ..criteria.refit import IMPORTANCE_TYPES, importances
from ..io import envelope
from . import categorical_input, fitting, model_io, multiclass
from ._docs import PARAM_DOC
from ._params import boosting_params, group_test_plan, numba_threads, prediction_threads


class BaseGBFS(SelectorMixin, BaseEstimator):
    _loss = ""

    def __init__(self, *, method="agbm", mu=0.01, feature_costs=None, feature_bags=None,
                 max_features=None, max_cost=None, refit=False, selection_patience=None,
                 anneal_factor=1.0, anneal_rounds=20, importance_type="gain",
                 n_estimators=100, learning_rate=0.1, max_depth=None, max_leaves=31,
                 min_samples_leaf=20, leaf_count="auto", min_node_fraction=None, criterion="sse",
                 leaf_estimate="mean", reg_lambda=0.0, min_child_weight=1e-3, max_bins=MAX_BINS,
                 min_data_in_bin=3, min_split_gain=0.0, split_search="histogram",
                 bin_subsample=200_000, early_stopping_rounds=None, n_target_features=None,
                 delta=0.1, n_subsets=None, subset_size=None, group_test_scope="tree",
                 group_test_rows=None, max_precompute_bytes=DEFAULT_MAX_PRECOMPUTE_BYTES, sampler=None,
                 subsample=None, top_rate=None, other_rate=None, mvs_lambda=None, goss_style="paper",
                 categorical_features="auto", cat_smooth=10.0, cat_l2=10.0, max_cat_threshold=32,
                 min_data_per_group=100, max_cat_to_onehot=4, train_metrics="loss", random_state=None,
                 n_threads=None, verbose=False):
        self.method = method
        self.mu = mu
        self.feature_costs = feature_costs
        self.feature_bags = feature_bags
        self.max_features = max_features
        self.max_cost = max_cost
        self.refit = refit
        self.selection_patience = selection_patience
        self.anneal_factor = anneal_factor
        self.anneal_rounds = anneal_rounds
        self.importance_type = importance_type
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.max_leaves = max_leaves
        self.min_samples_leaf = min_samples_leaf
        self.leaf_count = leaf_count
        self.min_node_fraction = min_node_fraction
        self.criterion = criterion
        self.leaf_estimate = leaf_estimate
        self.reg_lambda = reg_lambda
        self.min_child_weight = min_child_weight
        self.min_split_gain = min_split_gain
        self.split_search = split_search
        self.max_bins = max_bins
        self.min_data_in_bin = min_data_in_bin
        self.bin_subsample = bin_subsample
        self.early_stopping_rounds = early_stopping_rounds
        self.n_target_features = n_target_features
        self.delta = delta
        self.n_subsets = n_subsets
        self.subset_size = subset_size
        self.group_test_scope = group_test_scope
        self.group_test_rows = group_test_rows
        self.max_precompute_bytes = max_precompute_bytes
        self.random_state = random_state
        self.n_threads = n_threads
        self.sampler = sampler
        self.subsample = subsample
        self.top_rate = top_rate
        self.other_rate = other_rate
        self.mvs_lambda = mvs_lambda
        self.goss_style = goss_style
        self.categorical_features = categorical_features
        self.cat_smooth = cat_smooth
        self.cat_l2 = cat_l2
        self.max_cat_threshold = max_cat_threshold
        self.min_data_per_group = min_data_per_group
        self.max_cat_to_onehot = max_cat_to_onehot
        self.train_metrics = train_metrics
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = True
        return tags

    # -- validation ----------------------------------------------------------------------------
    def _validate_params(self) -> BoostingParams:
        return boosting_params(self)

    def _group_test_plan(self, n_rows, n_features):
        return group_test_plan(self, n_rows, n_features)

    def _check_X(self, X, reset: bool, name: str = "X"):
        if reset:  # the categorical columns and their categories (gbfs.estimators.categorical_input)
            self.categorical_features_ = categorical_input.resolve(X, self.categorical_features, name)
            self.categories_ = categorical_input.fit_categories(X, self.categorical_features_)
        X = categorical_input.encode(X, getattr(self, "categorical_features_", ()),
                                     getattr(self, "categories_", []), name)
        V.reject_non_numeric(X, name)
        V.warn_inexact_integers(X, name)
        # scipy.sparse stays sparse (CSR/CSC, others converted to CSR): binning reads its columns;
        # float32 stays float32 (binned and predicted exactly as its float64 copy, without the copy)
        return validate_data(self, X, reset=reset, dtype=(np.float64, np.float32),
                             ensure_all_finite="allow-nan", order="C", accept_sparse=("csr", "csc"))

    #: what an eval_set tuple holds (a multitask estimator adds the rows' tasks)
    _eval_fields = ("X_val", "y_val")

    def _check_eval_set(self, eval_set):
        if eval_set is None:
            return []
        fields = ", ".join(self._eval_fields)
        if isinstance(eval_set, tuple):
            eval_set = [eval_set]
        if not isinstance(eval_set, list):
            raise TypeError(f"eval_set must be a tuple ({fields}) or a list of such tuples, "
                            f"got {type(eval_set).__name__}")
        out = []
        for k, item in enumerate(eval_set):
            if not isinstance(item, tuple) or len(item) != len(self._eval_fields):
                raise TypeError(f"eval_set[{k}] must be a tuple ({fields})")
            Xv, yv, *rest = item
            try:
                Xv = self._check_X(Xv, reset=False, name=f"eval_set[{k}] X")
            except ValueError as e:
                raise ValueError(f"eval_set[{k}]: {e}") from e
            yv = V.target_array(yv, type(self).__name__, Xv.shape[0], f"eval_set[{k}] y")
            out.append((Xv, self._encode_y(yv, f"eval_set[{k}] y"), *self._eval_extras(k, Xv, rest)))
        return out

    def _eval_extras(self, k: int, Xv, rest: list) -> tuple:
        """The checked fields of eval_set[k] after ``y_val`` (none for a single-task estimator)."""
        return ()

    # -- fit -------------------------------------------------------------------------------------
    def fit(self, X, y, eval_set=None, callbacks=None):
        """Fit the boosted ensemble.

        Parameters
        ----------
        X : array-like, DataFrame or scipy.sparse matrix of shape (n_samples, n_features)
            Numeric features; NaN is allowed (it has its own bin), +-inf is not.  Categorical
            columns (``categorical_features``: a DataFrame's pandas ``category`` columns by
            default) are split on sets of categories (:mod:`gbfs.booster.kernels.categorical`).  A sparse
            matrix is binned column by column without densifying it (implicit entries are
            zeros); mostly-zero columns are then built row-wise (:mod:`gbfs.booster.kernels.sparse_rows`).
        y : array-like of shape (n_samples,)
            Classifier: two or more labels, all strings or all numbers (a mix is refused); more
            than two are fitted with the softmax (:mod:`gbfs.estimators.multiclass`).  Regressor:
            finite numbers with ``n_samples * max|y| <= 1e150``, so that sums of squared
            residuals fit in float64.  Integers beyond +-2**53 (in ``X`` too) are rounded to
            float64 with a warning.
        eval_set : tuple (X_val, y_val) or list of such tuples, optional
            Scored after every tree (``history_`` keys ``val_*``, ``val1_*``, ...).
        callbacks : list of callables, optional
            LightGBM-style callbacks receiving a :class:`gbfs.booster.callbacks.CallbackEnv`.

        Returns
        -------
        self
        """
        return self._fit_prepared(self._prepare(X, y, eval_set, callbacks))

    def _prepare(self, X, y, eval_set=None, callbacks=None) -> fitting.Prepared:
        """Validate, bin and precompute (:func:`gbfs.estimators.fitting.prepare`)."""
        return fitting.prepare(self, X, y, eval_set, callbacks)

    def _query(self, n_rows: int) -> np.ndarray | None:
        """The training rows' query offsets (a ranker's); None for pointwise losses."""
        return None

    def _target_params(self) -> dict:
        """The fit's loss fields of :class:`BoostingParams` set by its target (multiclass: the
        softmax and its number of classes); none by default."""
        return {}

    def _fit_params(self, prep: fitting.Prepared) -> BoostingParams:
        params = dataclasses.replace(self._validate_params(), **prep.target)
        if prep.query is not None:   # a ranking loss on the training rows' query groups
            params = dataclasses.replace(params, loss=params.loss.with_offsets(prep.query))
        if params.growth.leaf_count == "auto":   # the loss's own count (the softmax's: by hessian)
            params = dataclasses.replace(params, growth=dataclasses.replace(params.growth,
                                                                            leaf_count=params.loss.leaf_count))
        return params

    def _fit_prepared(self, prep: fitting.Prepared, selection=None, selection_history=None):
        """Fit on prepared data (:func:`gbfs.estimators.fitting.fit_prepared`) and install the model."""
        self._reset_fitted()
        for k, v in prep.inputs.items():  # n_features_in_, feature_names_in_, classes_: callbacks see them
            setattr(self, k, v)
        self._bin_mapper = prep.bin_mapper
        fitted = fitting.fit_prepared(self, prep, selection, selection_history)
        if fitted.selection is not None:
            self.selection_history_ = fitted.selection_history
        r = fitted.result
        self._set_fitted(r.trees, r.init_score, r.history, r.best_iteration, fitted.selection)
        self.timings_ = fitted.timings
        if prep.bags is not None:
            bag_of = FeatureUsage(prep.X_binned.shape[1], 0.0, None, prep.bags).bag_of
            self.n_bags_selected_ = int(np.unique(bag_of[self.selected_features_]).size)
        if prep.plan is not None:
            self.n_subsets_ = prep.plan.n_subsets
            self.subset_size_ = prep.plan.subset_size
        return self

    def _categorical_mask(self, d: int) -> np.ndarray:
        mask = np.zeros(d, dtype=bool)
        mask[self.categorical_features_] = True
        return mask

    def _select(self, prep: fitting.Prepared, params=None, plain: bool = False):
        """The selection fit (:func:`gbfs.estimators.fitting.select`): ``(BoostingResult, FeatureUsage)``."""
        return fitting.select(self, prep, params, plain)

    def _reset_fitted(self) -> None:
        for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("__")]:
            delattr(self, name)
        for name in ("_trees", "_packed", "_bin_mapper", "_selection", "_saved_n_threads"):
            self.__dict__.pop(name, None)

    def _set_fitted(self, trees, init_score, history, best_iteration, selection=None):
        """Install a fitted ensemble.  ``selection``: the features a refit was restricted to, in
        order of selection (None: the features the trees use, in order of first use)."""
        trees = self._install_trees(trees, init_score, best_iteration)
        self.history_ = history
        self.best_iteration_ = best_iteration
        order, seen = [], set()
        for t in trees:
            for f in t.used_features():
                if f not in seen:
                    seen.add(int(f))
                    order.append(int(f))
        self._selection = None if selection is None else np.asarray(selection, dtype=np.int64)
        if selection is not None:
            order = [int(f) for f in selection]
        self.selected_features_ = np.asarray(order, dtype=np.int64)
        self.n_features_selected_ = len(order)
        self.feature_importances_ = importances(trees, self.n_features_in_, self.importance_type)
        if hasattr(self, "feature_names_in_"):
            self.selected_feature_names_ = [str(self.feature_names_in_[f]) for f in order]
        else:
            self.selected_feature_names_ = [f"x{f}" for f in order]

    def _install_trees(self, trees, init_score, best_iteration) -> list:
        """Keep the ensemble (up to ``best_iteration``); returns its trees."""
        if best_iteration is not None:
            trees = trees[:best_iteration + 1]
        self._trees = trees
        self._packed = PackedEnsemble(trees)
        self.init_score_ = float(init_score)
        self.n_iter_ = len(trees)
        return trees

    # -- prediction ------------------------------------------------------------------------------
    def _raw_predict(self, X):
        check_is_fitted(self, "_trees")
        X = self._check_X(X, reset=False)
        raw = np.full(X.shape[0], self.init_score_, dtype=np.float64)
        bm = self._bin_mapper
        with numba_threads(prediction_threads(self)):
            self._packed.predict_raw(X, raw, bm.categories_to_bins if bm.has_categorical else None)
        return raw

    def _get_support_mask(self):
        check_is_fitted(self, "_trees")
        mask = np.zeros(self.n_features_in_, dtype=bool)
        mask[self.selected_features_] = True
        return mask

    def feature_importance(self, importance_type: str = "gain") -> np.ndarray:
        """Per-feature importance of the fitted model, as LightGBM's ``Booster.feature_importance``:
        ``"gain"`` the total unpenalised split gain, ``"split"`` the number of splits."""
        check_is_fitted(self, "_trees")
        V.check_choice("importance_type", importance_type, IMPORTANCE_TYPES)
        return importances(self._trees, self.n_features_in_, importance_type)

    @property
    def evals_result_(self) -> dict:
        """``history_`` by data set and metric, as LightGBM's ``evals_result_``
        (:func:`gbfs.booster.callbacks.evals_result`)."""
        check_is_fitted(self, "history_")
        return evals_result(self.history_)

    @property
    def trees_(self):
        """The fitted trees (:class:`gbfs.booster.tree.Tree`), in boosting order."""
        check_is_fitted(self, "_trees")
        return list(self._trees)

    @property
    def bin_edges_(self):
        """Per-feature bin edges fitted on the training data (list of arrays)."""
        check_is_fitted(self, "_trees")
        bm = self._bin_mapper
        return [bm.bin_edges_[f, :bm.n_edges_[f]].copy() for f in range(bm.n_edges_.shape[0])]

    def save_model(self, path) -> None:
        """Write the fitted model as versioned JSON, atomically (see :mod:`gbfs.io.envelope`)."""
        envelope.save(self, path)

    def _model_body(self) -> dict:
        return model_io.gbfs_body(self)

    @classmethod
    def _from_model_body(cls, body: dict):
        est = cls()
        r = model_io.restore_gbfs(est, body)
        est._bin_mapper = r.bin_mapper
        est._set_fitted(r.trees, r.init_score, [], None, r.selection)
        est.best_iteration_ = r.best_iteration
        est._saved_n_threads = est.n_threads  # the file's thread count never limits prediction
        return est


@envelope.register_model
class GBFSClassifier(ClassifierMixin, BaseGBFS):
    __doc__ = ("Gradient boosted feature selection for classification (log-loss).\n"
               "\n    Two labels: binary log-loss, ``classes_[1]`` is the positive class.  More than two:\n"
               "    the softmax, one tree per class per round, with one Omega for all classes (a feature\n"
               "    is paid for once for the whole model; :mod:`gbfs.estimators.multiclass`).\n"
               + PARAM_DOC)
    _loss = "logistic"

    def _fit_target(self, y):
        self.classes_ = V.class_labels(y)
        return self._encode_y(y, "y")

    def _binary_fit_target(self, y):
        """A binary target (estimators that take exactly two classes)."""
        self.classes_ = V.binary_classes(y)
        return self._encode_y(y, "y")

    def _target_params(self) -> dict:
        return multiclass.target_params(self.classes_.shape[0])

    def _encode_y(self, y, name):
        unknown = np.setdiff1d(V.check_labels(y, name), self.classes_)
        if unknown.size:
            raise ValueError(f"{name} has labels {unknown[:10].tolist()} not seen in y "
                             f"(classes: {self.classes_.tolist()})")
        if multiclass.is_multiclass(self):
            return multiclass.class_codes(y, self.classes_)
        return (y == self.classes_[1]).astype(np.float64)

    def _install_trees(self, trees, init_score, best_iteration) -> list:
        if not multiclass.is_multiclass(self):
            return super()._install_trees(trees, init_score, best_iteration)
        K = self.classes_.shape[0]
        self._trees, self._packed = multiclass.ensemble(trees, K, best_iteration)
        self.init_score_ = np.asarray(init_score, dtype=np.float64).copy()
        self.n_iter_ = len(self._trees) // K
        return self._trees

    def _raw_predict(self, X):
        check_is_fitted(self, "_trees")
        if multiclass.is_multiclass(self):
            return multiclass.raw_predict(self, self._check_X(X, reset=False))
        return super()._raw_predict(X)

    def decision_function(self, X):
        """Raw log-odds of ``classes_[1]``, shape (n_samples,); more than two classes: every
        class's raw score, shape (n_samples, n_classes)."""
        return self._raw_predict(X)

    def predict_proba(self, X):
        """Probabilities of every class of ``classes_``, shape (n_samples, n_classes)."""
        raw = self._raw_predict(X)
        if raw.ndim == 2:
            return multiclass.probabilities(raw)
        p = LOSSES[self._loss].inverse_link(raw)
        return np.column_stack([1.0 - p, p])

    def predict(self, X):
        raw = self._raw_predict(X)  # checks fitted-ness before classes_ is read
        if raw.ndim == 2:
            return self.classes_[np.argmax(raw, axis=1)]
        return self.classes_[(raw > 0).astype(int)]


@envelope.register_model
class GBFSRegressor(RegressorMixin, BaseGBFS):
    __doc__ = "Gradient boosted feature selection for regression (squared error).\n" + PARAM_DOC
    _loss = "squared_error"

    def _fit_target(self, y):
        return self._encode_y(y, "y")

    def _encode_y(self, y, name):
        return V.regression_target(y, name)

    def predict(self, X):
        return self._raw_predict(X)

