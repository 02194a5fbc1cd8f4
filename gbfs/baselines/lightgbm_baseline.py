"""LightGBM baselines behind :class:`~gbfs.GBFSClassifier`'s interface (DESIGN.md, GBDT-topK/Full).

:class:`LightGBMBaseline` wraps ``lightgbm.train`` so the harness fits, tunes, logs and saves it like a
GBFS estimator: the same ``fit(X, y, eval_set, callbacks)``, ``history_`` keys, ``gbfs.booster.callbacks``
protocol and fitted selection attributes.  GBDT-Full (``kind="full"``) is plain LightGBM; GBDT-topK
(``"topk"``) refits on the ``k`` features with the most splits (or the most gain, ``importance_type``)
in a fit on all features; ``"cegb"`` is LightGBM's coupled (first-use) feature penalty, the production
peer of GBFS, set to ``mu * n_train_rows`` per feature with ``cegb_tradeoff = 1``.  Why times n: A-GBM
keeps a split on a new feature when ``gain_sse / SSE_root > mu``; at the first tree
``SSE_root = n p (1 - p) ~ n / 4`` and LightGBM's Newton gain is ~4x the SSE gain (hessians ~ 1/4), so
``mu * n`` in LightGBM's gain units matches A-GBM's ``mu`` (as in ``runners/bench/gtgbm.py``); later
trees are not rescaled.

Its ``history_`` records are built from LightGBM's training loop (:mod:`gbfs.baselines.lightgbm_history`).
"""

from __future__ import annotations

import time

import lightgbm as lgb
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.feature_selection import SelectorMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import validation as V
from ..booster.callbacks import early_stopping
from ..estimators import categorical_input
from ..io import envelope
from .lightgbm_files import LightGBMModelFile
from .lightgbm_history import Recorder, binary_root_stats, first_use_order, history_feval

KINDS = ("full", "topk", "cegb")
IMPORTANCE_TYPES = ("split", "gain")  # LightGBM's names for Booster.feature_importance

# LightGBM parameters the estimator sets itself (canonical name -> what to use instead); any alias
# of them in lgb_params is refused, since LightGBM would silently pick one of the two values
_OWNED = {"num_iterations": "n_estimators", "learning_rate": "learning_rate", "num_leaves": "num_leaves",
          "max_depth": "max_depth", "min_data_in_leaf": "min_child_samples", "lambda_l2": "reg_lambda",
          "max_bin": "max_bin", "seed": "random_state", "num_threads": "n_threads",
          "early_stopping_round": "early_stopping_rounds", "cegb_tradeoff": "kind='cegb'",
          "cegb_penalty_feature_coupled": "kind='cegb' with mu", "objective": "nothing (binary only)",
          "metric": "nothing (history_ records its own metrics)", "verbosity": "nothing",
          "deterministic": "nothing (always on)"}


def _owned_aliases() -> dict:
    try:  # LightGBM's own alias table (read from the C library), so new aliases are covered too
        from lightgbm.basic import _ConfigAliases

        return {a: c for c in _OWNED for a in _ConfigAliases.get(c)}
    except (ImportError, AttributeError):  # private API moved: fall back to the canonical names
        return {c: c for c in _OWNED}


@envelope.register_model
class LightGBMBaseline(LightGBMModelFile, ClassifierMixin, SelectorMixin, BaseEstimator):
    """LightGBM binary classifier (GBDT-Full, GBDT-topK or CEGB) with GBFSClassifier's interface.

    Parameters
    ----------
    kind : {"full", "topk", "cegb"}, default="full"
        ``"full"``: LightGBM on all features.  ``"topk"``: rank features by ``importance_type`` in a
        fit on all features (ties: lower column index) and refit on the top ``k``.  ``"cegb"``: LightGBM
        with ``cegb_penalty_feature_coupled = [mu * n_train_rows] * n_features`` and
        ``cegb_tradeoff = 1`` (see the module docstring for the scaling by the row count).
    k : int or None, default=None
        Number of features kept by ``"topk"`` (required there, refused for the other kinds).
    mu : float, default=0.01
        Price of a feature's first use for ``"cegb"`` (in A-GBM's normalised units); ignored otherwise.
    importance_type : {"split", "gain"}, default="split"
        ``"topk"``'s ranking: LightGBM's ``feature_importance`` of the ranking fit, the number of
        splits on each feature or their total gain; ignored by the other kinds.
    n_estimators : int, default=100
    learning_rate : float, default=0.1
    num_leaves : int, default=31
    max_depth : int or None, default=-1
        -1 or None: no limit.
    min_child_samples : int, default=20
        LightGBM's ``min_data_in_leaf``.
    reg_lambda : float, default=0.0
        LightGBM's ``lambda_l2``.
    max_bin : int, default=255
    categorical_features : "auto", None, list of int or str, or array of bool, default="auto"
        As GBFSClassifier's (:mod:`gbfs.estimators.categorical_input`): these columns reach LightGBM as
        integer codes with ``categorical_feature``, so it splits them on category sets.
    early_stopping_rounds : int or None, default=None
        Stop when ``val_loss`` has not improved for this many trees and keep the trees up to the best
        iteration (as GBFSClassifier).  Needs ``eval_set``.
    random_state : int, RandomState instance or None, default=None
        Source of LightGBM's ``seed``; the same seed gives the same model (``deterministic=True`` and
        ``force_col_wise=True``, since LightGBM's timing-based col/row-wise choice changes sums).
    n_threads : int or None, default=None
        LightGBM's ``num_threads`` (None: OpenMP's default).
    lgb_params : dict or None, default=None
        Further LightGBM parameters, passed through; keys (or aliases) of parameters set above are
        refused.  ``force_row_wise=True`` here replaces the default ``force_col_wise``.

    Notes
    -----
    Unlike GBFSClassifier, boosting ends early when LightGBM finds no admissible split (it drops that
    tree); ``n_iter_`` counts the trees kept.  Fitted attributes match GBFSClassifier's, except that
    ``feature_importances_`` holds split counts and ``booster_``/``columns_`` are LightGBM-specific.
    """

    def __init__(self, kind="full", *, k=None, mu=0.01, importance_type="split", n_estimators=100,
                 learning_rate=0.1, num_leaves=31, max_depth=-1, min_child_samples=20, reg_lambda=0.0,
                 max_bin=255, categorical_features="auto", early_stopping_rounds=None, random_state=None,
                 n_threads=None, lgb_params=None):
        self.kind = kind
        self.k = k
        self.mu = mu
        self.importance_type = importance_type
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.max_depth = max_depth
        self.min_child_samples = min_child_samples
        self.reg_lambda = reg_lambda
        self.max_bin = max_bin
        self.categorical_features = categorical_features
        self.early_stopping_rounds = early_stopping_rounds
        self.random_state = random_state
        self.n_threads = n_threads
        self.lgb_params = lgb_params

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # LightGBM routes NaN itself
        tags.classifier_tags.multi_class = False
        return tags

    # -- the task (subclasses of gbfs.baselines.lightgbm_tasks override these) -----------------------
    def _objective(self) -> dict:
        """LightGBM's objective parameters."""
        return {"objective": "binary"}

    def _feval(self, sets: list, reg_lambda: float):
        """The ``feval`` whose metrics make the ``history_`` records."""
        return history_feval(sets, reg_lambda)

    def _initial_root(self, y: np.ndarray, reg_lambda: float) -> dict:
        """The task's :data:`~gbfs.baselines.lightgbm_history.ROOT_STATS` at LightGBM's initial
        score (the mean label: ``boost_from_average``), those of tree 0."""
        return binary_root_stats(y, np.full(y.shape, float(np.mean(y))), reg_lambda)

    def _dataset(self, X, y, params: dict, columns, split: str = "train", reference=None) -> lgb.Dataset:
        """The LightGBM ``Dataset`` of a split (a ranker adds its query groups)."""
        return lgb.Dataset(X, y, params=params, categorical_feature=self._cats(columns), reference=reference)

    def _classes_body(self):
        return self.classes_.tolist()

    def _restore_classes(self, classes) -> None:
        self.classes_ = np.asarray(classes)
        if self.classes_.shape != (2,):
            raise ValueError("classes must hold exactly two labels")

    # -- validation --------------------------------------------------------------------------------
    def _check_params(self) -> dict:
        """Validate every parameter (before any LightGBM call); return LightGBM's params without seed."""
        kind = V.check_choice("kind", self.kind, KINDS)
        if kind == "topk":
            if self.k is None:
                raise ValueError("k is required for kind='topk' (the number of features to keep)")
            V.check_int("k", self.k, 1)
        elif self.k is not None:
            raise ValueError(f"k only applies to kind='topk', got k={self.k!r} for kind={kind!r}")
        V.check_real("mu", self.mu, low=0.0)
        V.check_choice("importance_type", self.importance_type, IMPORTANCE_TYPES)
        max_depth = -1 if self.max_depth is None else V.check_int("max_depth", self.max_depth, -1)
        if max_depth == 0:
            raise ValueError("max_depth must be -1 (no limit), None or >= 1, got 0")
        params = {**self._objective(), "metric": "None", "verbosity": -1, "deterministic": True,
                  "force_col_wise": True,
                  "learning_rate": V.check_real("learning_rate", self.learning_rate, low=0.0, low_open=True),
                  "num_leaves": V.check_int("num_leaves", self.num_leaves, 2), "max_depth": max_depth,
                  "min_data_in_leaf": V.check_int("min_child_samples", self.min_child_samples, 0),
                  "lambda_l2": V.check_real("reg_lambda", self.reg_lambda, low=0.0),
                  "max_bin": V.check_int("max_bin", self.max_bin, 2)}
        V.check_int("n_estimators", self.n_estimators, 1)
        V.check_int("early_stopping_rounds", self.early_stopping_rounds, 1, allow_none=True)
        if V.check_int("n_threads", self.n_threads, 1, allow_none=True) is not None:
            params["num_threads"] = self.n_threads
        extra = {} if self.lgb_params is None else self.lgb_params
        if not isinstance(extra, dict) or not all(isinstance(key, str) for key in extra):
            raise TypeError(f"lgb_params must be a dict with str keys or None, got {self.lgb_params!r}")
        aliases = _owned_aliases()
        for key in extra:
            if key in aliases:
                raise ValueError(f"lgb_params key {key!r} clashes with LightGBM's {aliases[key]!r}, which "
                                 f"this estimator sets; use {_OWNED[aliases[key]]} instead")
        if extra.get("force_row_wise"):
            del params["force_col_wise"]
        params.update(extra)
        return params

    def _check_X(self, X, reset: bool, name: str = "X") -> np.ndarray:
        if reset:
            self.categorical_features_ = categorical_input.resolve(X, self.categorical_features, name)
            self.categories_ = categorical_input.fit_categories(X, self.categorical_features_)
        X = categorical_input.encode(X, getattr(self, "categorical_features_", ()),
                                     getattr(self, "categories_", []), name)
        V.reject_non_numeric(X, name)
        try:
            return validate_data(self, X, reset=reset, dtype=np.float64, ensure_all_finite="allow-nan",
                                 order="C")
        except ValueError as e:
            raise ValueError(f"{name}: {e}") from e

    def _check_y(self, y, n_rows: int, name: str = "y") -> np.ndarray:
        """Labels as float 0/1 (``classes_[1]`` -> 1); for ``name == "y"`` also sets ``classes_``."""
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] != n_rows:
            raise ValueError(f"{name} must be 1-D with one label per row ({n_rows}), got shape {y.shape}")
        if name == "y":
            classes = np.unique(y)
            if classes.shape[0] != 2:
                raise ValueError(f"y must hold exactly two classes (binary classification only), got "
                                 f"{classes.shape[0]}: {classes[:10].tolist()}")
            self.classes_ = classes
        else:
            unknown = np.setdiff1d(np.unique(y), self.classes_)
            if unknown.size:
                raise ValueError(f"{name} has labels {unknown[:10].tolist()} not seen in y "
                                 f"(classes: {self.classes_.tolist()})")
        return (y == self.classes_[1]).astype(np.float64)

    def _check_eval_set(self, eval_set):
        if eval_set is None:
            return None
        if isinstance(eval_set, list):
            if len(eval_set) != 1:
                raise ValueError(f"eval_set: takes one (X_val, y_val) tuple, got a list of {len(eval_set)}")
            eval_set = eval_set[0]
        if not isinstance(eval_set, tuple) or len(eval_set) != 2:
            raise TypeError("eval_set must be a tuple (X_val, y_val) or a list with one such tuple")
        Xv = self._check_X(eval_set[0], reset=False, name="eval_set X")
        return Xv, self._check_y(eval_set[1], Xv.shape[0], name="eval_set y")

    # -- fit ---------------------------------------------------------------------------------------
    def fit(self, X, y, eval_set=None, callbacks=None) -> LightGBMBaseline:
        """Fit the LightGBM model (for ``"topk"``: the ranking fit, then the refit on the top k).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Numeric features; NaN is allowed, +-inf is not.
        y : array-like of shape (n_samples,)
            Two class labels; ``classes_[1]`` is the positive class.
        eval_set : tuple (X_val, y_val) or list with one such tuple, optional
            Scored after every tree (``history_`` keys ``val_*``).
        callbacks : list of callables, optional
            Receive a :class:`gbfs.booster.callbacks.CallbackEnv` after every tree.  ``EarlyStopException``
            stops boosting and keeps the best iteration; any other exception propagates.

        Returns
        -------
        self
        """
        params = self._check_params()
        callbacks = V.check_callbacks(callbacks)
        for name in [a for a in vars(self) if a.endswith("_") and not a.startswith("__")]:
            delattr(self, name)  # a refused fit leaves no old model behind
        X = self._check_X(X, reset=True)
        y = self._check_y(y, X.shape[0])
        evals = self._check_eval_set(eval_set)
        n, d = X.shape
        if self.kind == "topk" and self.k > d:
            raise ValueError(f"k={self.k} exceeds the {d} features of X")
        if self.early_stopping_rounds is not None:
            if evals is None:
                raise ValueError("early_stopping_rounds needs eval_set")
            callbacks = callbacks + [early_stopping(self.early_stopping_rounds, "val_loss")]
        params["seed"] = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        timings = {"precompute_seconds": 0.0}
        columns = np.arange(d, dtype=np.int64)
        if self.kind == "topk":
            t0, c0 = time.perf_counter(), time.process_time()
            ranked = self._dataset(X, y, params, columns)
            ranker = lgb.train(params, ranked, num_boost_round=self.n_estimators)
            # stable sort of -importance: equal importances keep the lower column index first
            importance = ranker.feature_importance(self.importance_type)
            columns = np.argsort(-importance, kind="stable")[:self.k].astype(np.int64)
            X = np.ascontiguousarray(X[:, columns])
            if evals is not None:
                evals = (np.ascontiguousarray(evals[0][:, columns]), evals[1])
            timings["ranking_seconds"] = time.perf_counter() - t0
            # CPU time of every thread of the process: what a multi-threaded fit costs, load or not
            timings["ranking_cpu_seconds"] = time.process_time() - c0
        elif self.kind == "cegb":
            params.update(cegb_tradeoff=1.0, cegb_penalty_feature_coupled=[float(self.mu) * n] * d)
        t0 = time.perf_counter()  # binning, timed apart from boosting as GBFSClassifier does
        train = self._dataset(X, y, params, columns).construct()
        sets = [(train, y)] + ([] if evals is None else [
            (self._dataset(evals[0], evals[1], params, columns, "val", train).construct(), evals[1])])
        t1 = time.perf_counter()
        for cb in callbacks:
            if hasattr(cb, "reset"):
                cb.reset()
        recorder = Recorder(self, callbacks, self.n_estimators, self._initial_root(y, params["lambda_l2"]))
        booster = lgb.train(params, train, num_boost_round=self.n_estimators,
                            valid_sets=[s for s, _ in sets], valid_names=["train", "val"][:len(sets)],
                            feval=self._feval(sets, params["lambda_l2"]), callbacks=[recorder])
        timings.update(binning_seconds=t1 - t0, boosting_seconds=time.perf_counter() - t1)
        self._set_fitted(booster, columns, recorder.history, recorder.best_iteration)
        self.timings_ = timings
        return self

    def _cats(self, columns: np.ndarray) -> list[int] | str:
        """The booster's categorical columns (positions in ``columns``); LightGBM's default "auto"
        (none, for an array) when there are none."""
        cats = [j for j, c in enumerate(columns) if c in set(self.categorical_features_.tolist())]
        return cats or "auto"

    def _set_fitted(self, booster: lgb.Booster, columns: np.ndarray, history: list, best_iteration) -> None:
        self.booster_ = booster
        self.columns_ = np.asarray(columns, dtype=np.int64)
        self.history_ = history
        self.best_iteration_ = best_iteration
        self.n_iter_ = int(booster.current_iteration())
        self.selected_features_ = self.columns_[np.asarray(first_use_order(booster), dtype=np.int64)]
        self.n_features_selected_ = int(self.selected_features_.shape[0])
        names = getattr(self, "feature_names_in_", None)
        self.selected_feature_names_ = [str(names[f]) if names is not None else f"x{f}"
                                        for f in self.selected_features_]
        self.feature_importances_ = np.zeros(self.n_features_in_, dtype=np.int64)
        self.feature_importances_[self.columns_] = booster.feature_importance("split", iteration=-1)

    def feature_importance(self, importance_type: str = "gain") -> np.ndarray:
        """Per input feature, as GBFSClassifier's: LightGBM's total split gain (``"gain"``) or number
        of splits (``"split"``) of the fitted trees, 0 for a column the booster never saw."""
        check_is_fitted(self, "booster_")
        V.check_choice("importance_type", importance_type, IMPORTANCE_TYPES)
        out = np.zeros(self.n_features_in_, dtype=np.float64)
        out[self.columns_] = self.booster_.feature_importance(importance_type, iteration=-1)
        return out

    # -- prediction --------------------------------------------------------------------------------
    def _predict(self, X, raw_score: bool) -> np.ndarray:
        check_is_fitted(self, "booster_")
        X = self._check_X(X, reset=False)
        if self.kind == "topk":  # the booster sees the top k columns in rank order
            X = X[:, self.columns_]
        kw = {} if self.n_threads is None else {"num_threads": self.n_threads}
        return self.booster_.predict(X, raw_score=raw_score, num_iteration=-1, **kw)

    def decision_function(self, X) -> np.ndarray:
        """Raw log-odds of ``classes_[1]``, shape (n_samples,)."""
        return self._predict(X, raw_score=True)

    def predict_proba(self, X) -> np.ndarray:
        """Probabilities of ``classes_[0]`` and ``classes_[1]``, shape (n_samples, 2)."""
        p = self._predict(X, raw_score=False)
        return np.column_stack([1.0 - p, p])

    def predict(self, X) -> np.ndarray:
        """Predicted labels (``classes_[1]`` where the raw score is positive)."""
        return self.classes_[(self.decision_function(X) > 0).astype(int)]

    def _get_support_mask(self) -> np.ndarray:
        check_is_fitted(self, "booster_")
        return np.isin(np.arange(self.n_features_in_), self.selected_features_)
