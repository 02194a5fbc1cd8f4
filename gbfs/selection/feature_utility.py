"""New-feature utility test of Koepke & Bilenko (ICML 2012): would a candidate feature help a
fitted model, without re-training it?

The paper shows (Theorems 4.1-4.4) that a feature ``X'`` can lower the expected loss of the
current predictor ``f_0`` exactly when some function ``g(X')`` correlates positively with the
standardised negative loss gradient ``Lambda = -dL/df(f_0(X), Y) / sigma`` (Eq. 2), and that the
best such ``g`` is the least-squares regression of ``Lambda`` on ``X'`` (Theorem 4.4).  The test
statistic is Eq. 7,

    g* = argmin_g  mean_i (g(X'_i) - Lambda_i)^2
    K(X', Lambda) = sqrt(n) [mean(g*(X') Lambda) - mean(g*(X')) mean(Lambda)],

and its null distribution is the bootstrap of Section 4.2 / Algorithm 1: ``X'`` and ``Lambda``
resampled independently of each other, each i.i.d. with replacement, ``Lambda`` re-standardised,
``K`` recomputed.  The utility score ``z`` is the number of null standard deviations by which the
observed ``K`` exceeds the null mean; the p-value is the share of null statistics at or above it,
counting the observed one among them (``(1 + #{t_i >= v}) / (B + 1)``; Algorithm 1's bare share
``#{t_i > v} / B`` can be 0 and, with B = 100, rejects a true null at alpha = 0.05 with
probability 6/101: the one departure from the paper, see :class:`FeatureUtility`).

The regressor ``g`` is, as in the paper's experiments (Section 5.2), boosted regression trees
fitted for squared error: by default this library's own booster without a feature penalty
(:data:`DEFAULT_REGRESSOR_PARAMS`).

>>> from gbfs import GBFSClassifier, feature_utility
>>> model = GBFSClassifier().fit(X_train, y_train)                # doctest: +SKIP
>>> res = feature_utility(model, X_val, y_val, candidates_val, random_state=0)   # doctest: +SKIP
>>> res.to_frame()                                                # doctest: +SKIP
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Integral

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted
from tqdm.auto import tqdm

from .. import validation as V
from ..booster.kernels import portable as P
from ..booster.losses.loss import LOSSES
from ..estimators.single_task import GBFSClassifier, GBFSRegressor

__all__ = ["DEFAULT_REGRESSOR_PARAMS", "FeatureUtility", "bootstrap_null", "feature_utility",
           "gradient_signal", "utility_statistic"]

#: the regressor ``g`` of Eq. 7 when none is given: plain boosted regression trees for squared
#: error (the paper's Section 5.2) in this library's booster -- ``mu = 0``, so no feature penalty.
#: Shallow, shrunk and few trees: Algorithm 1 fits it ``n_bootstrap + 1`` times per feature; one
#: thread, since a fit on a few thousand rows costs less than waking a thread pool.  32 quantile
#: bins: a bootstrap resample holds only ~63 % distinct values, and with one bin per value (255
#: bins on a few hundred rows) the null fits had fewer split points than the observed fit, so the
#: null came out too small and the test anticonservative (measured on 500 rows of pure noise over
#: 400 seeds: a false-positive rate of 0.068 at alpha = 0.05 and a mean p-value of 0.47 with 255
#: bins; 0.055 and 0.50 with 32).
DEFAULT_REGRESSOR_PARAMS = dict(method="gbfs", mu=0.0, n_estimators=20, learning_rate=0.1, max_depth=2,
                                max_leaves=4, min_samples_leaf=20, max_bins=32, n_threads=1)


@dataclass(frozen=True)
class FeatureUtility:
    """What Algorithm 1 returns for each candidate feature (one entry per feature, in order).

    Attributes
    ----------
    features : list of str
        The candidates' names (a DataFrame's columns, else ``x0``, ``x1``, ...; one joined name
        ``"a+b"`` for a block tested jointly).
    statistic : ndarray of shape (n_features,)
        ``v = K(X', Lambda)`` of Eq. 7 on the given rows.
    p_value : ndarray of shape (n_features,)
        ``(1 + n_exceed) / (n_bootstrap + 1)``.  Algorithm 1 returns the bare share
        ``n_exceed / n_bootstrap``; counting the observed statistic among the draws (the usual
        Monte Carlo p-value) keeps it above 0 and its level at most ``alpha`` for any number of
        rounds, where the bare share rejects at ``alpha = 0.05`` with probability 6/101 = 0.059
        under the null when ``n_bootstrap = 100``.
    n_exceed : ndarray of int of shape (n_features,)
        How many null statistics are at or above ``v`` (Algorithm 1's share is
        ``n_exceed / n_bootstrap``; ">=" so that a constant candidate, whose statistics all tie
        at 0, is never significant).
    z : ndarray of shape (n_features,)
        The utility score ``(v - mean(t)) / std(t)`` (Algorithm 1), which also ranks features
        whose p-value is 0; 0 when every null statistic is equal.
    null_mean, null_std : ndarray of shape (n_features,)
        Mean and standard deviation of the null statistics.
    null : ndarray of shape (n_features, n_bootstrap)
        The null statistics ``t_1 .. t_B`` themselves.
    n_samples : int
        Rows ``n`` the test used.
    n_bootstrap : int
        ``B``, the number of bootstrap rounds.
    """

    features: list[str]
    statistic: np.ndarray
    p_value: np.ndarray
    n_exceed: np.ndarray
    z: np.ndarray
    null_mean: np.ndarray
    null_std: np.ndarray
    null: np.ndarray = field(repr=False)
    n_samples: int
    n_bootstrap: int

    def to_frame(self):
        """One row per feature: ``feature``, ``z``, ``p_value``, ``n_exceed``, ``statistic``,
        ``null_mean``, ``null_std`` (a pandas DataFrame, in the order of the candidates)."""
        import pandas as pd

        return pd.DataFrame({"feature": self.features, "z": self.z, "p_value": self.p_value,
                             "n_exceed": self.n_exceed, "statistic": self.statistic,
                             "null_mean": self.null_mean, "null_std": self.null_std})


# ------------------------------------------------------------------------------------ pieces

def gradient_signal(model: GBFSClassifier | GBFSRegressor, X, y) -> np.ndarray:
    """The standardised negative loss gradient ``Lambda_hat`` of a fitted model on ``(X, y)``.

    ``-dL/dF`` at the model's raw score ``F`` (log-odds from ``decision_function`` for the
    classifier, the prediction for the regressor) is the residual of the model's own loss in
    :mod:`gbfs.booster.losses.loss` (``y - p`` for log-loss, ``y - F`` for squared error), then centred and
    scaled to unit standard deviation: ``Lambda = -lambda / sigma`` of Eq. 2, with the centring
    of Theorem 4.4 (``Lambda - E Lambda``).  The paper's Table 1 writes the cross-entropy gradient
    in terms of a probability ``f``; here it is taken in the log-odds the trees are fitted in.

    Raises
    ------
    TypeError, ValueError, sklearn.exceptions.NotFittedError
        If ``model`` is not a fitted :class:`GBFSClassifier` / :class:`GBFSRegressor`, on bad
        ``X`` or ``y``, or if the gradient is constant on these rows (nothing to correlate with).
    """
    _check_model(model)
    raw = _raw_scores(model, X)
    y = _encode_target(model, y, raw.shape[0])
    return _standardise_gradient(model, y, raw)


def utility_statistic(x_new: np.ndarray, signal: np.ndarray, regressor) -> float:
    """``K(X', Lambda)`` of Eq. 7: fit ``regressor`` (unfitted; cloned here) by least squares to
    ``signal`` on ``x_new`` (shape (n,) or (n, k)) and return ``sqrt(n)`` times the empirical
    covariance of its in-sample prediction ``g*(X')`` with ``signal``."""
    return _statistic(np.asarray(x_new, dtype=np.float64), signal, clone(regressor))


def _statistic(x_new: np.ndarray, signal: np.ndarray, regressor) -> float:
    """:func:`utility_statistic` refitting ``regressor`` itself (a clone costs as much as a fit of
    a few hundred rows: the bootstrap clones once)."""
    X2 = x_new.reshape(-1, 1) if x_new.ndim == 1 else x_new
    g = regressor.fit(X2, signal).predict(X2)
    if np.ptp(g) == 0:
        # a constant fit has no covariance; the float sums below would leave a +-1e-33 that makes
        # the ties of a constant candidate's statistics (all of them 0) compare at random
        return 0.0
    n = signal.shape[0]
    return math.sqrt(n) * (P.mean(g * signal) - P.mean(g) * P.mean(signal))


# ------------------------------------------------------------------------------------ the test

def feature_utility(model: GBFSClassifier | GBFSRegressor, X, y, X_new, *, n_bootstrap: int = 100,
                    random_state: int | np.random.Generator | None = None, regressor=None,
                    joint: bool = False, feature_names=None, verbose: bool = False) -> FeatureUtility:
    """Test whether each candidate feature could lower the loss of a fitted model (Algorithm 1).

    For each candidate ``X'`` (a column of ``X_new``): ``v = K(X', Lambda_hat)`` (Eq. 7) with
    ``Lambda_hat`` the model's standardised negative loss gradient on ``(X, y)``
    (:func:`gradient_signal`, Eq. 2); then ``n_bootstrap`` times, ``X~'`` = ``n`` values drawn
    with replacement from ``X'``, ``Lambda~`` = ``n`` values drawn with replacement from
    ``Lambda_hat``, independently (the null of independence, Theorem 4.3), re-standardised, and
    ``t_i = K(X~', Lambda~)``.  The p-value is ``(1 + #{t_i >= v}) / (B + 1)``, the utility score
    ``z = (v - mean(t)) / std(t)``.

    Parameters
    ----------
    model : GBFSClassifier or GBFSRegressor
        Fitted; it is only evaluated, never refitted.
    X : array-like or DataFrame of shape (n_samples, n_features)
        Rows to evaluate the model on.  Use rows it was **not** trained on (a validation split,
        as the paper's cross-validation folds): on training rows the gradient is shrunk along
        every function of the used features, which makes the test conservative.  On fresh rows
        the gradient also holds the model's own estimation error, so a copy of a used feature is
        flagged as often as that error along it is large next to ``1 / n_samples``: the test
        asks whether the feature can lower the loss of *this* model (Theorem 4.3 bounds the
        bias by how far ``Lambda_hat`` is from the best model's gradient; Section 4.2 suggests a
        model trained on many more rows than are tested).
    y : array-like of shape (n_samples,)
        Targets of those rows (the classifier: labels among ``model.classes_``).
    X_new : array-like of shape (n_samples,) or (n_samples, n_candidates), or DataFrame / Series
        The candidate features on the same rows; numeric, NaN allowed (the default regressor
        gives missing values their own bin), no infinities.
    n_bootstrap : int, default 100
        Bootstrap rounds ``B`` (the paper uses 100).  The smallest p-value is ``1 / (B + 1)``.
    random_state : int, numpy Generator or None
        Seed of the bootstrap draws (and of the regressor's ``random_state`` if it has one left
        None).  Candidate ``j`` draws from its own stream derived from the seed and ``j``, so its
        result does not depend on the other candidates.
    regressor : scikit-learn regressor, optional
        The least-squares regressor ``g`` of Eq. 7 (unfitted; cloned before fitting).  Default:
        ``GBFSRegressor(**DEFAULT_REGRESSOR_PARAMS)``, boosted regression trees as in Section 5.2.
    joint : bool, default False
        Test all columns of ``X_new`` as one multi-dimensional feature (the paper's "information
        sources" and its answer to the XOR problem, Section 4): rows of ``X_new`` are resampled
        whole.
    feature_names : sequence of str, optional
        Names of the candidates (default: a DataFrame's columns or a Series' name, else ``x0``...).
    verbose : bool, default False
        A progress bar (tqdm, stderr) over the candidates, each ``n_bootstrap + 1`` regressor fits.

    Returns
    -------
    FeatureUtility
        Per candidate (or one entry with ``joint``): statistic, p-value, the count behind it,
        utility score z, the null's mean, standard deviation and values.

    Raises
    ------
    TypeError, ValueError, sklearn.exceptions.NotFittedError
        Naming the argument, before any regressor is fitted: a foreign (TypeError) or unfitted
        (NotFittedError) ``model``, ``X``/``y``/``X_new`` of the wrong shape, type or values, a
        bad ``n_bootstrap``, ``random_state``, ``regressor``, ``joint``, ``feature_names`` or
        ``verbose``, or a constant gradient.
    """
    _check_model(model)
    V.check_bool("verbose", verbose)
    B = V.check_int("n_bootstrap", n_bootstrap, 1)
    seed_seq = _seed_sequence(random_state)
    if not isinstance(joint, (bool, np.bool_)):
        raise TypeError(f"joint must be True or False, got {joint!r}")
    regressor = _check_regressor(regressor)
    raw = _raw_scores(model, X)
    n = raw.shape[0]
    if n < 2:
        raise ValueError(f"X must have at least 2 rows to standardise the gradient, got {n}")
    y = _encode_target(model, y, n)
    cand, names = _candidates(X_new, n, feature_names)
    signal = _standardise_gradient(model, y, raw)
    regressor = _seeded(regressor, _child(seed_seq, 0))

    blocks = [(cand, "+".join(names))] if joint else [(cand[:, j], names[j]) for j in range(cand.shape[1])]
    stats, null = np.empty(len(blocks)), np.empty((len(blocks), B))
    for j, (x_new, _) in enumerate(tqdm(blocks, desc="utility test", unit="feature", disable=not verbose)):
        stats[j] = utility_statistic(x_new, signal, regressor)
        rng = np.random.default_rng(_child(seed_seq, 1, j))
        null[j] = bootstrap_null(x_new, signal, regressor, B, rng)
    mean = null.mean(axis=1)
    std = null.std(axis=1, ddof=1) if B > 1 else np.zeros(len(blocks))
    z = np.where(std > 0, (stats - mean) / np.where(std > 0, std, 1.0), 0.0)
    exceed = (null >= stats[:, None]).sum(axis=1)
    p = (1.0 + exceed) / (B + 1.0)
    return FeatureUtility([name for _, name in blocks], stats, p, exceed, z, mean, std, null, n, B)


def bootstrap_null(x_new: np.ndarray, signal: np.ndarray, regressor, n_bootstrap: int,
                   rng: np.random.Generator) -> np.ndarray:
    """The null statistics ``t_1, ..., t_B`` of Algorithm 1: ``K`` of independent i.i.d. resamples of
    the feature (whole rows for a block) and of the gradient, the latter re-standardised."""
    n = signal.shape[0]
    x_new, regressor = np.asarray(x_new, dtype=np.float64), clone(regressor)
    out = np.empty(n_bootstrap)
    for b in range(n_bootstrap):
        xb = x_new[rng.integers(0, n, n)]
        lb = signal[rng.integers(0, n, n)]
        sd = P.std(lb)
        # every draw the same value (tiny n): no direction to correlate with
        out[b] = 0.0 if sd == 0 else _statistic(xb, (lb - P.mean(lb)) / sd, regressor)
    return out


# ------------------------------------------------------------------------------------ checks

def _check_model(model) -> None:
    if not isinstance(model, (GBFSClassifier, GBFSRegressor)):
        raise TypeError(f"model must be a fitted GBFSClassifier or GBFSRegressor, got "
                        f"{type(model).__name__}")
    try:
        check_is_fitted(model, "_trees")
    except NotFittedError as e:      # say which argument
        raise NotFittedError(f"model is not fitted: {e}") from e
    if getattr(model, "classes_", np.empty(2)).shape[0] > 2:
        raise ValueError(f"model is a classifier of {model.classes_.shape[0]} classes; the utility test "
                         "regresses one loss gradient per row (a regressor or a binary classifier)")


def _raw_scores(model, X) -> np.ndarray:
    """The model's raw score on ``X`` (its own input checks, re-raised naming ``X``)."""
    try:
        raw = model.decision_function(X) if isinstance(model, GBFSClassifier) else model.predict(X)
    except (ValueError, TypeError) as e:
        raise ValueError(f"X: {e}") from e
    return np.asarray(raw, dtype=np.float64)


def _encode_target(model, y, n: int) -> np.ndarray:
    owner = f"feature_utility ({type(model).__name__})"
    return model._encode_y(V.target_array(y, owner, n), "y")


def _standardise_gradient(model, y: np.ndarray, raw: np.ndarray) -> np.ndarray:
    r, h = np.empty_like(raw), np.empty_like(raw)
    LOSSES[model._loss].residuals(y, raw, r, h)   # r = -dL/dF, the library's own loss
    sd = P.std(r)
    if not sd > 0:
        raise ValueError("the model's loss gradient is constant on these rows (y, X): there is "
                         "nothing a new feature could correlate with")
    return (r - P.mean(r)) / sd


def _candidates(X_new, n: int, feature_names) -> tuple[np.ndarray, list[str]]:
    """``X_new`` as a float64 (n, k) array and its k names."""
    if X_new is None:
        raise ValueError("X_new must hold the candidate feature(s), got None")
    names = None
    if hasattr(X_new, "columns"):                       # DataFrame
        names = [str(c) for c in X_new.columns]
    elif hasattr(X_new, "name") and hasattr(X_new, "to_numpy"):   # Series
        names = [str(X_new.name)] if X_new.name is not None else None
    V.reject_non_numeric(X_new, "X_new", categorical=False)  # the test regresses on numbers
    try:
        arr = np.asarray(X_new, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"X_new must be numeric: {e}") from e
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2:
        raise ValueError(f"X_new must be 1-D or 2-D, got shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(f"X_new has {arr.shape[0]} rows but X has {n}")
    if arr.shape[1] == 0:
        raise ValueError("X_new has no columns: give at least one candidate feature")
    if np.isinf(arr).any():
        raise ValueError("X_new contains infinity (NaN, a missing value, is allowed)")
    if feature_names is not None:
        if isinstance(feature_names, str) or len(feature_names) != arr.shape[1]:
            raise ValueError(f"feature_names must be a sequence of {arr.shape[1]} names (one per column "
                             f"of X_new), got {feature_names!r}")
        names = [str(s) for s in feature_names]
    return arr, names or [f"x{j}" for j in range(arr.shape[1])]


def _seed_sequence(random_state) -> np.random.SeedSequence:
    if isinstance(random_state, Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative int, got {random_state}")
        return np.random.SeedSequence(int(random_state))
    if random_state is None:
        return np.random.SeedSequence()
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(int(random_state.integers(2**63)))
    raise TypeError(f"random_state must be None, a non-negative int or a numpy Generator, got "
                    f"{random_state!r}")


def _child(seed_seq: np.random.SeedSequence, *key: int) -> np.random.SeedSequence:
    """A stream of its own for each use of the seed, named by ``key`` (not by the order of use)."""
    return np.random.SeedSequence(seed_seq.entropy, spawn_key=(*seed_seq.spawn_key, *key))


def _check_regressor(regressor):
    if regressor is None:
        return GBFSRegressor(**DEFAULT_REGRESSOR_PARAMS)
    if not (hasattr(regressor, "fit") and hasattr(regressor, "predict") and hasattr(regressor, "get_params")):
        raise TypeError(f"regressor must be a scikit-learn regressor (fit, predict, get_params), got "
                        f"{type(regressor).__name__}")
    return regressor


def _seeded(regressor, seed_seq: np.random.SeedSequence):
    """The regressor with ``random_state`` set from the seed when it has one left None, so the
    same seed gives the same result for randomised regressors too."""
    params = regressor.get_params(deep=False)
    if "random_state" in params and params["random_state"] is None:
        seed = int(np.random.default_rng(seed_seq).integers(2**31 - 1))
        return clone(regressor).set_params(random_state=seed)
    return regressor
