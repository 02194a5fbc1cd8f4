"""Parameter validation of the GBFS estimators, in Python before any numba kernel runs.

Every error names the parameter.  :func:`check_params` turns an estimator's parameters into the
booster's :class:`~gbfs.booster.rounds.BoostingParams` (``fit`` and ``load_model`` share it);
:func:`boosting_params` adds what only a fit on this machine checks.
"""

from __future__ import annotations

import inspect
from contextlib import contextmanager
from dataclasses import dataclass

import numba
import numpy as np
from sklearn.utils import check_random_state

from .. import validation as V
from ..booster.growing import GROWERS
from ..booster.growing.grower import GrowthParams
from ..booster.kernels._types import MAX_BINS
from ..booster.losses.loss import LOSSES
from ..booster.losses.ranking import LambdaRankLoss
from ..booster.rounds import CRITERIA, LEAF_ESTIMATES, TRAIN_METRICS, BoostingParams
from ..criteria import group_testing
from ..criteria.methods import METHODS
from ..criteria.refit import IMPORTANCE_TYPES
from ..sampling import samplers as sampling

#: how min_samples_leaf counts a child's rows (GrowthParams.leaf_count)
LEAF_COUNTS = ("auto", "rows", "hessian")
_GROUP_TEST_PARAMS = ("n_target_features", "delta", "n_subsets", "subset_size", "group_test_scope",
                      "group_test_rows", "max_precompute_bytes")

#: largest learning_rate.  Above 2 a mean leaf already overshoots the residuals it fits (they
#: grow by |1 - lr| per tree); far above, the scores overflow float64 within a few trees, so such
#: a value is refused before any work rather than reported as a diverged fit
MAX_LEARNING_RATE = 100.0


@dataclass(frozen=True)
class Int:
    """An integer parameter in ``low .. high`` (``none``: None allowed)."""

    low: int
    none: bool = False
    high: int | None = None

    def check(self, name: str, value):
        value = V.check_int(name, value, self.low, allow_none=self.none)
        if self.high is not None and value is not None and value > self.high:
            raise ValueError(f"{name} must be <= {self.high}, got {value!r}")
        return value


@dataclass(frozen=True)
class Real:
    """A real parameter in the interval ``low .. high`` (open ends as flagged)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    none: bool = False

    def check(self, name: str, value):
        return V.check_real(name, value, self.low, self.high, self.low_open, self.high_open,
                            allow_none=self.none)


@dataclass(frozen=True)
class Choice:
    """One of ``options`` (names)."""

    options: tuple

    def check(self, name: str, value):
        return V.check_choice(name, value, self.options)


#: the constraint of every parameter that is checked on its own (scikit-learn's
#: ``_parameter_constraints``, as data), in the order the errors come; the checks that tie several
#: parameters together follow in :func:`check_params`
CONSTRAINTS = {
    "max_depth": Int(1, none=True), "max_leaves": Int(2, none=True), "min_samples_leaf": Int(1),
    "leaf_count": Choice(LEAF_COUNTS),
    "min_node_fraction": Real(0.0, 1.0, low_open=True, high_open=True, none=True),
    "min_child_weight": Real(0.0), "min_split_gain": Real(0.0), "reg_lambda": Real(0.0),
    "cat_smooth": Real(0.0), "cat_l2": Real(0.0), "max_cat_threshold": Int(1), "min_data_per_group": Int(1),
    "max_cat_to_onehot": Int(1),
    "max_bins": Int(2, high=MAX_BINS), "bin_subsample": Int(1000, none=True), "min_data_in_bin": Int(1),
    "early_stopping_rounds": Int(1, none=True), "n_threads": Int(1, none=True),
    "train_metrics": Choice(TRAIN_METRICS), "split_search": Choice(tuple(GROWERS)),
}
#: parameters a subclass may lack, with the value that stands for them
ABSENT = {"leaf_count": "auto", "min_split_gain": 0.0, "min_data_in_bin": 1, "train_metrics": "all",
          "split_search": "histogram"}


def _checked(est) -> dict:
    """Every parameter of :data:`CONSTRAINTS` of ``est``, checked."""
    return {name: c.check(name, getattr(est, name, ABSENT.get(name))) for name, c in CONSTRAINTS.items()}


def loss_of(name: str, eval_at: int = 10):
    """The loss object of an estimator's ``_loss`` name (LambdaRank's scores NDCG@``eval_at``; its
    query groups are the training rows', set when they are known)."""
    if name == LambdaRankLoss.name:
        return LambdaRankLoss(np.zeros(1, dtype=np.int64), eval_at)
    return LOSSES[name]


def boosting_params(est) -> BoostingParams:
    """:func:`check_params`, and that ``n_threads`` fits numba's thread pool: a fit with more threads
    than numba was started with is refused (prediction caps them, see :func:`prediction_threads`)."""
    params = check_params(est)
    pool = numba.config.NUMBA_NUM_THREADS
    if est.n_threads is not None and est.n_threads > pool:
        raise ValueError(f"n_threads={est.n_threads} exceeds the {pool} threads numba was started "
                         "with (set NUMBA_NUM_THREADS to allow more)")
    return params


def check_params(est, warn: bool = True) -> BoostingParams:
    """Validate every parameter of ``est`` (a GBFS estimator) into the booster's settings.

    Errors name the parameter.  ``warn=False`` leaves out the warnings about arguments the chosen
    method or sampler ignores (a loaded model file was warned about when it was fitted).
    """
    method = V.check_choice("method", est.method, tuple(METHODS))
    mu = V.check_real("mu", est.mu, low=0.0)
    max_mu = METHODS[method].max_mu
    if max_mu is not None and mu > max_mu:
        raise ValueError(f"mu must be in [0, {max_mu:g}] for method={method!r} (normalised gains are "
                         f"at most 1), got {est.mu!r}")
    scope = _group_test_params(est, method, warn)
    _selection_params(est, method)
    V.check_bool("verbose", getattr(est, "verbose", False))
    v = _checked(est)
    growth = GrowthParams(
        max_depth=v["max_depth"], max_leaves=v["max_leaves"], min_samples_leaf=v["min_samples_leaf"],
        leaf_count=v["leaf_count"], min_node_fraction=v["min_node_fraction"],
        min_child_weight=v["min_child_weight"], min_split_gain=v["min_split_gain"],
        reg_lambda=v["reg_lambda"], split_search=v["split_search"],
        cat_settings=tuple(v[k] for k in ("cat_smooth", "cat_l2", "max_cat_threshold", "min_data_per_group",
                                          "max_cat_to_onehot")),
    )
    loss = loss_of(est._loss, V.check_int("eval_at", getattr(est, "eval_at", 10), 1))
    _exact_params(v, loss)
    try:
        check_random_state(est.random_state)
    except ValueError as e:
        raise ValueError(f"random_state: {e}") from e
    learning_rate = V.check_real("learning_rate", est.learning_rate, low=0.0, high=MAX_LEARNING_RATE,
                                 low_open=True)
    sampler = sampling.from_params(est.sampler, est.subsample, est.top_rate, est.other_rate,
                                   est.mvs_lambda, est.goss_style, learning_rate, warn=warn)
    return BoostingParams(
        loss=loss,
        method=METHODS[method], sampler=sampler,
        n_estimators=V.check_int("n_estimators", est.n_estimators, 1),
        learning_rate=learning_rate,
        criterion=CRITERIA[V.check_choice("criterion", est.criterion, CRITERIA)],
        leaf_estimate=LEAF_ESTIMATES[V.check_choice("leaf_estimate", est.leaf_estimate, LEAF_ESTIMATES)],
        growth=growth, group_test_scope=scope, group_test_rows=est.group_test_rows,
        stop_when_full=bool(est.refit) and not METHODS[method].ranks,
        selection_patience=None if METHODS[method].ranks else est.selection_patience,
        train_metrics=v["train_metrics"])

#: the exact split search's refusal of multiclass fits (here and once the classes are known)
EXACT_ONE_TREE = ("split_search='exact' grows one tree per round: multiclass (softmax) boosting needs "
                  "split_search='histogram'")


def _exact_params(v: dict, loss) -> None:
    """What the exact split search does not do: it counts rows exactly and grows one tree per round."""
    if v["split_search"] != "exact":
        return
    if v["leaf_count"] == "hessian":
        raise ValueError("leaf_count='hessian' does not apply to split_search='exact' (it counts a "
                         "child's rows exactly): use 'auto' or 'rows'")
    if getattr(loss, "trees_per_round", 1) > 1:
        raise ValueError(EXACT_ONE_TREE)


def _selection_params(est, method) -> None:
    V.check_int("max_features", est.max_features, 1, allow_none=True)
    max_cost = V.check_real("max_cost", getattr(est, "max_cost", None), low=0.0, low_open=True,
                            allow_none=True)
    if not isinstance(est.refit, (bool, np.bool_)):
        raise TypeError(f"refit must be a bool, got {est.refit!r} ({type(est.refit).__name__})")
    V.check_int("selection_patience", est.selection_patience, 1, allow_none=True)
    V.check_real("anneal_factor", getattr(est, "anneal_factor", 1.0), low=1.0)
    V.check_int("anneal_rounds", getattr(est, "anneal_rounds", 20), 1)
    V.check_choice("importance_type", est.importance_type, IMPORTANCE_TYPES)
    ranks = METHODS[method].ranks
    if ranks and est.max_features is None and max_cost is None:
        raise ValueError(f"method={method!r} needs max_features (its K, the number of features kept) "
                         "or max_cost")
    if est.selection_patience is not None and not est.refit and not ranks:
        raise ValueError("selection_patience only applies with refit=True (it ends the selection "
                         "fit, whose trees a refit replaces)")
    if ranks and getattr(est, "anneal_factor", 1.0) != 1.0:
        raise ValueError(f"anneal_factor does not apply to method={method!r} (it ranks features by "
                         "importance, no price to anneal); use gbfs, agbm or gtgbm")
    if ranks and est.feature_bags is not None:
        raise ValueError(f"feature_bags do not apply to method={method!r} (it ranks features by "
                         "importance, no penalty); use gbfs, agbm or gtgbm")
    if ranks and est.feature_costs is not None and max_cost is None:
        raise ValueError(f"feature_costs only apply to method={method!r} with max_cost (it ranks "
                         "features by importance, no penalty); use gbfs, agbm or gtgbm")

def _group_test_params(est, method, warn) -> str:
    V.check_int("n_target_features", est.n_target_features, 1, allow_none=True)
    V.check_real("delta", est.delta, 0.0, 1.0, low_open=True, high_open=True)
    V.check_int("n_subsets", est.n_subsets, 1, allow_none=True)
    V.check_int("subset_size", est.subset_size, 1, allow_none=True)
    scope = V.check_choice("group_test_scope", est.group_test_scope, V.GROUP_TEST_SCOPES)
    V.check_int("group_test_rows", est.group_test_rows, 2, allow_none=True)
    V.check_int("max_precompute_bytes", est.max_precompute_bytes, 1)
    if not METHODS[method].group_tests:
        defaults = inspect.signature(type(est).__init__).parameters  # one source of the defaults
        changed = [k for k in _GROUP_TEST_PARAMS if getattr(est, k) != defaults[k].default]
        if changed and warn:
            V.warn_user(f"{', '.join(changed)} only apply to method='gtgbm' and are ignored "
                        f"for method={method!r}")
    return scope

def group_test_plan(est, n_rows, n_features):
    """GT-GBM's subset plan, checked against the data width and the memory budget.

    ``n_target_features=None`` (the default) seeks ``min(10, n_features)`` features, so GT-GBM's
    defaults fit narrow data; a value given explicitly must not exceed the width."""
    s = est.n_target_features
    if s is None:
        s = min(group_testing.DEFAULT_N_TARGET_FEATURES, n_features)
    elif s > n_features:
        raise ValueError(f"n_target_features={s} exceeds the {n_features} features of X")
    if est.subset_size is not None and est.subset_size > n_features:
        raise ValueError(f"subset_size={est.subset_size} exceeds the {n_features} features of X")
    pl = group_testing.plan(n_rows, n_features, s, float(est.delta),
                            est.n_subsets, est.subset_size)
    group_testing.check_memory(pl, int(est.max_precompute_bytes), est.n_subsets, est.subset_size)
    return pl


@contextmanager
def numba_threads(n: int | None):
    """Run the enclosed numba kernels on ``n`` threads (None: numba's current setting), restoring
    the setting afterwards."""
    if n is None:
        yield
        return
    old = numba.get_num_threads()
    numba.set_num_threads(n)
    try:
        yield
    finally:
        numba.set_num_threads(old)


def prediction_threads(est) -> int | None:
    """Threads to predict with: ``est.n_threads`` capped at the threads numba was started with.

    The thread count is a run-time choice, not part of the model, so a model fitted (or saved) on a
    larger machine predicts on any machine.  The cap warns, unless the value is the one the model
    file was saved with (``load_model`` records it): LightGBM too ignores a model file's thread count.
    """
    n = V.check_int("n_threads", est.n_threads, 1, allow_none=True)
    pool = numba.config.NUMBA_NUM_THREADS
    if n is None or n <= pool:
        return n
    if n != getattr(est, "_saved_n_threads", None):
        V.warn_user(f"n_threads={n} exceeds the {pool} threads numba was started with; predicting "
                    f"with {pool}")
    return pool
