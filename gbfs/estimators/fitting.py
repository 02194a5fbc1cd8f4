"""Fitting a :class:`gbfs.estimators.single_task.BaseGBFS` estimator: validate and bin once, then select
and refit.

:func:`prepare` does everything that does not depend on ``mu``, ``max_features`` or ``refit``
(checks, binning, GT-GBM's precompute), so a selection path bins once for many fits;
:func:`select` is the selection fit (the papers' Algorithm 1 / 3 against Omega);
:func:`fit_prepared` adds the relaxed refit or GBDT-topK (:mod:`gbfs.criteria.refit`); the
estimator installs what it returns.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
from sklearn.utils import check_random_state

from .. import validation as V
from ..booster.binning import BinMapper
from ..booster.boosting import boost
from ..booster.callbacks import early_stopping, progress_bar
from ..booster.kernels.sparse_binned import to_dense
from ..criteria import group_testing
from ..criteria.methods import METHODS
from ..criteria.penalty import FeatureUsage, anneal_of
from ..criteria.refit import refit, top_k
from ._params import EXACT_ONE_TREE, numba_threads


@dataclasses.dataclass
class Prepared:
    """Validated, binned training data and everything else a fit shares with its variants."""

    X_binned: np.ndarray
    y: np.ndarray
    evals: list  # (name, X_binned, y) or, ranking, (name, X_binned, y, query offsets)
    bin_mapper: BinMapper
    costs: np.ndarray | None
    bags: np.ndarray | None
    tester: object | None  # GT-GBM's precompute
    plan: object | None
    seed: int
    callbacks: list
    inputs: dict  # n_features_in_, feature_names_in_, classes_
    timings: dict
    query: np.ndarray | None = None  # ranking: the training rows' query offsets
    target: dict = dataclasses.field(default_factory=dict)  # the loss's fields (multiclass: softmax)
    # the raw training values, kept for the exact split search (its evals are raw values too)
    X: np.ndarray | None = None


def check_data(est, X, y, callbacks):
    """The first checks of every fit: the parameters, the callbacks, ``X`` and ``y``; returns them
    checked (``params`` the :class:`~gbfs.booster.rounds.BoostingParams`).  Past this point a refused
    fit leaves the estimator unfitted, never an old model behind a new input width."""
    params = est._validate_params()
    callbacks = V.check_callbacks(callbacks)
    if getattr(est, "verbose", False):  # checked by _validate_params
        callbacks = callbacks + [progress_bar(type(est).__name__)]
    est._reset_fitted()
    try:
        X = est._check_X(X, reset=True)
    except ValueError as e:
        raise ValueError(f"X: {e}") from e
    y = est._fit_target(V.target_array(y, type(est).__name__, X.shape[0]))
    return params, callbacks, X, y


def check_selection(est, d: int, evals: list, callbacks: list):
    """The checks of what selects, on ``d`` features: costs, bags and budgets; and early stopping
    (which needs ``evals``) added to ``callbacks``.  Returns ``(costs, bags, callbacks)``."""
    costs = V.check_feature_vector("feature_costs", est.feature_costs, d, "cost")
    bags = V.check_feature_vector("feature_bags", est.feature_bags, d, "bag")
    if est.early_stopping_rounds is not None:
        if not evals:
            raise ValueError("early_stopping_rounds needs eval_set")
        callbacks = callbacks + [early_stopping(est.early_stopping_rounds, "val_loss")]
    n_units = d if bags is None else np.unique(bags).size
    if est.max_features is not None and est.max_features >= n_units:
        V.warn_user(f"max_features={est.max_features} is at least the number of "
                    f"{'bags' if bags is not None else 'features'} of X: the budget never binds")
    V.check_max_cost(est.max_cost, costs, bags, d)
    return costs, bags, callbacks


def fit_seed(est) -> int:
    """The fit's seed, drawn from ``random_state``: every random stream of a fit derives from it."""
    return check_random_state(est.random_state).randint(np.iinfo(np.int32).max)


def bin_train(est, X, seed: int) -> tuple[BinMapper, np.ndarray]:
    """The bin mapper fitted on the training rows ``X`` (with the estimator's binning parameters) and
    ``X`` binned."""
    bin_mapper = BinMapper(est.max_bins, est.bin_subsample, np.random.default_rng(seed),
                           est._categorical_mask(X.shape[1]), est.min_data_in_bin)
    return bin_mapper, bin_mapper.fit_transform(X)


def prepare(est, X, y, eval_set=None, callbacks=None) -> Prepared:
    """Validate the inputs, bin them and run GT-GBM's precompute: everything a fit needs that
    does not depend on ``mu``, ``max_features`` or ``refit`` (a selection path shares it)."""
    params, callbacks, X, y = check_data(est, X, y, callbacks)
    evals = est._check_eval_set(eval_set)
    d = X.shape[1]
    costs, bags, callbacks = check_selection(est, d, evals, callbacks)
    pl = est._group_test_plan(*X.shape) if params.method.group_tests else None
    seed = fit_seed(est)
    exact = params.growth.split_search == "exact"
    if exact:
        check_exact_input(est, X, evals)
    with numba_threads(est.n_threads):
        t0 = time.perf_counter()
        bin_mapper, X_binned = bin_train(est, X, seed)
        named = [("val" if k == 0 else f"val{k}", Xv if exact else bin_mapper.transform(Xv), yv, *extra)
                 for k, (Xv, yv, *extra) in enumerate(evals)]
        t1 = time.perf_counter()
        tester = None
        if pl is not None:  # a separate stream: the subsets do not depend on bin_subsample
            X_binned = to_dense(X_binned)  # group tests read every column of a row
            tester = group_testing.GroupTester.precompute(
                X_binned, bin_mapper.standardised_values_, pl, np.random.default_rng([seed, 1]))
        t2 = time.perf_counter()
    inputs = {k: getattr(est, k) for k in ("n_features_in_", "feature_names_in_", "classes_",
                                            "categorical_features_", "categories_") if hasattr(est, k)}
    return Prepared(X_binned, y, named, bin_mapper, costs, bags, tester, pl, seed, callbacks, inputs,
                     {"binning_seconds": t1 - t0, "precompute_seconds": t2 - t1},
                     est._query(X.shape[0]), est._target_params(), np.asfortranarray(X) if exact else None)


def check_exact_input(est, X, evals) -> None:
    """``split_search="exact"`` searches dense numeric values: no sparse matrix, no categorical
    column (refused, naming the argument, before any work)."""
    for name, M in [("X", X)] + [(f"eval_set[{k}]", e[0]) for k, e in enumerate(evals)]:
        if not isinstance(M, np.ndarray):
            raise ValueError(f"{name}: split_search='exact' needs a dense array (got "
                             f"{type(M).__name__}); use split_search='histogram' for sparse input")
    if getattr(est._target_params().get("loss"), "trees_per_round", 1) > 1:
        raise ValueError(EXACT_ONE_TREE)
    if len(getattr(est, "categorical_features_", ())):
        raise ValueError("split_search='exact' does not search categorical features; encode them or use "
                         "split_search='histogram'")


@dataclasses.dataclass
class Fitted:
    """What a fit found, for the estimator to install: the ensemble, its records and the selection."""

    result: object  # BoostingResult: trees, init_score, history, best_iteration
    selection: np.ndarray | None  # the features a refit was restricted to (None: no refit)
    selection_history: list | None  # the selection fit's history_ (with a selection)
    timings: dict


def fit_prepared(est, prep: Prepared, selection=None, selection_history=None) -> Fitted:
    """Fit on prepared data: the selection fit, then the relaxed refit or GBDT-topK's refit.  With
    ``selection`` (refit mode or ``"topk"``), skip the selection fit and refit on those features: a
    selection path computes selections once for many budgets and hands each model its own."""
    params = est._fit_params(prep)
    d, seed, topk = prep.X_binned.shape[1], prep.seed, params.method.ranks
    with numba_threads(est.n_threads):
        t2 = time.perf_counter()
        result = None
        if selection is None:
            result, usage = select(est, prep, params)
            if topk:
                # every tree the ranking fit grew, also those early stopping drops: more splits
                # rank more steadily (LightGBM's GBDT-topK ranks all n_estimators trees)
                selection = top_k(result.trees, d, est.max_features, est.importance_type, prep.costs,
                                  est.max_cost)
            elif est.refit:
                selection = np.asarray(usage.order, dtype=np.int64)
            selection_history = result.history
        t3 = time.perf_counter()
        if selection is not None:
            selection = np.asarray(selection, dtype=np.int64)
            if result is None and not selection.size:
                raise ValueError("selection must hold at least one feature")
            if selection.size:  # nothing selected: the selection fit's constant model stays
                result = refit(prep.X_binned, prep.y, prep.bin_mapper, selection, params, prep.evals,
                               prep.callbacks, model=est, sample_rng=np.random.default_rng([seed, 4]),
                               X=prep.X)
        t4 = time.perf_counter()
    timings = {**prep.timings, "boosting_seconds": t3 - t2, "refit_seconds": t4 - t3,
               "binned_bytes": int(prep.X_binned.nbytes),
               "precompute_bytes": 0 if prep.plan is None else int(prep.plan.nbytes),
               "group_test_bins_bytes": 0 if prep.tester is None else prep.tester.kept_bytes}
    return Fitted(result, selection, selection_history if selection is not None else None, timings)


def select(est, prep: Prepared, params=None, plain: bool = False):
    """The selection fit (the whole fit without refit): ``(BoostingResult, FeatureUsage)``.

    ``plain``: an unpenalised fit on every feature whatever the method (GBDT-topK's ranking
    fit), with no budget and no early end of the selection.
    """
    if params is None:
        params = est._fit_params(prep)
    plain = plain or params.method.ranks
    usage = FeatureUsage(prep.X_binned.shape[1], 0.0 if plain else float(est.mu), prep.costs, prep.bags,
                         None if plain else est.max_features, None if plain else est.max_cost, anneal_of(est))
    if plain:
        params = dataclasses.replace(params, method=METHODS["gbfs"], stop_when_full=False,
                                     selection_patience=None)
    rng = np.random.default_rng([prep.seed, 2])  # the group tests' row samples
    search = None if plain else params.method.feature_search(
        prep.tester, params.group_test_scope, params.group_test_rows, rng)
    with numba_threads(est.n_threads):
        result = boost(prep.X_binned, prep.y, prep.bin_mapper, params, usage, prep.evals, prep.callbacks,
                       model=est, search=search, sample_rng=np.random.default_rng([prep.seed, 3]), X=prep.X)
    return result, usage
