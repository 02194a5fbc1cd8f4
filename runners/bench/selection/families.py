"""Method families of the feature-selection benchmark (:mod:`runners.bench.selection.suite`).

A family is a list of settings fitted on one seeded split; :data:`FAMILIES` maps each family's name
to its group and to the plain function that fits its settings and returns one record per fit
(``setting``, ``budget``, ``mu``, ``n_features``, ``val_auc``, ``test_auc``, ``fit_seconds``, ...).

``mu`` is recorded in A-GBM's normalised units for every method.  GBFS prices a new feature in
gain units, so its ``mu`` is the normalised value times the gain of the finest partition of the
first tree's root: ``n_fit * var(y_fit)`` (the root SSE) with ``criterion="sse"`` and ``n_fit``
with ``criterion="newton"`` (``sum g^2/h`` at the constant initial score ``p``, where
``g^2 / h = (y - p)^2 / (p (1 - p))`` sums to ``n``); ``mu_raw`` is what the estimator got.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from itertools import product

import numpy as np
import sklearn
from sklearn.feature_selection import f_classif
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.fixes import parse_version

from gbfs import GBFSClassifier
from gbfs.baselines.lightgbm_baseline import LightGBMBaseline
from gbfs.booster.losses.metrics import roc_auc
from gbfs.selection.elimination import eliminate
from runners.bench.matched import TreeSettings

try:
    from gbfs import selection_path
except ImportError:  # the path may not have landed in this checkout yet: its families skip themselves
    selection_path = None

METHODS = ("gbfs", "agbm", "gtgbm")
CRITERIA = {"sse": "mean", "newton": "newton"}  # criterion -> its leaf estimate
IMPORTANCES = ("gain", "split")
NORMALISED = ("agbm", "gtgbm")  # methods whose mu is in [0, 1]
GAIN_SCALE = {"sse": lambda y: len(y) * float(np.var(y)), "newton": lambda y: float(len(y))}
ANNEAL_FACTOR = 4.0  # the +anneal families: the first round's price is 4 mu (anneal_factor)
PATIENCE = 5  # refit family: selection ends after this many trees without a new feature (the path's)
# sklearn 1.8 deprecated ``penalty``; before it ``l1_ratio`` alone would silently mean L2
L1 = {"l1_ratio": 1.0} if parse_version(sklearn.__version__) >= parse_version("1.8") else {"penalty": "l1"}


def l1_logistic(C: float, seed: int):
    """L1-penalised logistic regression at strength ``C`` on standardised columns; liblinear shuffles
    the rows of its coordinate descent, so the seed makes the fit (and its features) repeatable."""
    return make_pipeline(StandardScaler(), LogisticRegression(C=float(C), solver="liblinear", max_iter=1000,
                                                              random_state=seed, **L1))


@dataclass(frozen=True)
class Booster(TreeSettings):
    """Tree settings shared by every boosted fit (ours and LightGBM's are matched), with early
    stopping; the seed is each fit's own."""

    n_estimators: int = 200
    max_leaves: int = 31
    early_stopping_rounds: int = 20

    def gbfs(self, seed: int, **kw) -> GBFSClassifier:
        return GBFSClassifier(n_estimators=self.n_estimators, learning_rate=self.learning_rate,
                              max_depth=self.max_depth, max_leaves=self.max_leaves,
                              min_samples_leaf=self.min_samples_leaf, min_child_weight=self.min_child_weight,
                              reg_lambda=self.reg_lambda, max_bins=self.max_bins,
                              early_stopping_rounds=self.early_stopping_rounds, random_state=seed,
                              n_threads=self.threads, **kw)

    def lightgbm(self, seed: int, kind: str, **kw) -> LightGBMBaseline:
        settings = self.seeded(seed).baseline(kind, early_stopping_rounds=self.early_stopping_rounds, **kw)
        return LightGBMBaseline(**settings)


def _geom(lo: float, hi: float, n: int) -> tuple[float, ...]:
    return tuple(float(v) for v in np.geomspace(lo, hi, n))


@dataclass(frozen=True)
class Grids:
    """The settings of each family (``mu`` in normalised units, see the module docstring)."""

    mu: tuple[float, ...] = _geom(1e-4, 0.3, 7)
    mu_budget: tuple[float, ...] = (0.0, 0.01)
    mu_refit: tuple[float, ...] = (0.003, 0.01, 0.03)
    mu_cegb: tuple[float, ...] = _geom(1e-4, 0.3, 7)
    l1_C: tuple[float, ...] = _geom(3e-3, 3.0, 7)


@dataclass
class Split:
    """One seeded fit / validation / test split of a data set and what every family fits on it."""

    dataset: str
    seed: int
    X_fit: np.ndarray
    y_fit: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    budgets: tuple[int, ...]  # the requested budgets, capped at the number of features
    booster: Booster = field(default_factory=Booster)
    grids: Grids = field(default_factory=Grids)

    @property
    def n_features(self) -> int:
        return self.X_fit.shape[1]


@dataclass(frozen=True)
class Family:
    group: str  # penalised, budget, refit, path, topk, lgbm-topk, lgbm-rfe, cegb, l1, reference
    run: Callable[[Split], list[dict]]
    default: bool = True  # False: run only when named (``--families``), not in the default set


def _scores(model, split: Split) -> dict:
    return {"val_auc": roc_auc(split.y_val, model.decision_function(split.X_val)),
            "test_auc": roc_auc(split.y_test, model.decision_function(split.X_test))}


def _fit(est, split: Split, **record) -> dict:
    """Fit a GBFS or LightGBM estimator with early stopping on validation; score it."""
    t0, c0 = time.perf_counter(), time.process_time()
    est.fit(split.X_fit, split.y_fit, eval_set=(split.X_val, split.y_val))
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {**record, "n_features": int(est.n_features_selected_), **_scores(est, split),
            "fit_seconds": seconds, "cpu_seconds": cpu, "n_trees": int(est.n_iter_)}


def _ours(split: Split, method: str, criterion: str, mu: float, **kw) -> GBFSClassifier:
    """Our estimator at normalised ``mu`` (rescaled to gain units for GBFS)."""
    extra = ({"group_test_scope": "tree", "n_target_features": min(10, split.n_features)}
             if method == "gtgbm" else {})  # GT-GBM only: the other methods warn about these
    return split.booster.gbfs(split.seed, method=method, mu=mu_raw(split, method, criterion, mu),
                              criterion=criterion, leaf_estimate=CRITERIA[criterion], **extra, **kw)


def mu_raw(split: Split, method: str, criterion: str, mu: float) -> float:
    """The estimator's ``mu`` for normalised ``mu``."""
    return mu if method in NORMALISED else mu * GAIN_SCALE[criterion](split.y_fit)


def run_penalised(method: str, criterion: str, split: Split) -> list[dict]:
    """The papers' model: penalised, no budget, no refit, over the ``mu`` grid."""
    return [_fit(_ours(split, method, criterion, mu), split, setting=f"mu={mu:.3g}", mu=mu,
                 mu_raw=mu_raw(split, method, criterion, mu)) for mu in split.grids.mu]


def run_budgeted(method: str, criterion: str, split: Split, *, refit: bool, anneal_factor: float = 1.0
                 ) -> list[dict]:
    """``max_features=K`` for every budget, with (``refit``) or without the unpenalised refit, at
    ``anneal_factor`` (above 1: an annealed price over the estimator's default ``anneal_rounds``)."""
    mus = split.grids.mu_refit if refit else split.grids.mu_budget
    kw = {"refit": True, "selection_patience": PATIENCE} if refit else {}
    kw["anneal_factor"] = anneal_factor
    return [_fit(_ours(split, method, criterion, mu, max_features=k, **kw), split,
                 setting=f"K={k} mu={mu:.3g}", budget=k, mu=mu, mu_raw=mu_raw(split, method, criterion, mu))
            for k, mu in product(split.budgets, mus)]


def run_path(method: str, criterion: str, split: Split, anneal_factor: float = 1.0, **options) -> list[dict]:
    """One selection path for every budget; ``fit_seconds`` is the whole path's time on every row.
    ``options`` go to :func:`gbfs.selection_path` (``rfe_step``, ``exact``); ``anneal_factor`` to
    the template (its probes anneal their price)."""
    if selection_path is None:
        print("  path families skipped: gbfs.selection_path is not importable in this checkout", flush=True)
        return []
    template = _ours(split, method, criterion, 0.0, anneal_factor=anneal_factor)
    c0 = time.process_time()
    path = selection_path(template, split.X_fit, split.y_fit, eval_set=(split.X_val, split.y_val),
                          budgets=split.budgets, test_set=(split.X_test, split.y_test), **options)
    cpu = time.process_time() - c0  # the path's fits and its test scoring, as its seconds count them
    scale = mu_raw(split, method, criterion, 1.0)
    return [{"setting": f"K={r.budget}", "budget": r.budget, "mu": None if r.mu is None else r.mu / scale,
             "mu_raw": r.mu, "n_features": r.n_features, "val_auc": r.val_score,
             "test_auc": r.test_score, "fit_seconds": path.seconds, "cpu_seconds": cpu,
             "n_trees": int(r.model.n_iter_), "source": r.source, "note": r.note, "regret": r.regret,
             **_penalised(path, r.budget)} for r in path.results]


def _penalised(path, budget: int) -> dict:
    """The papers' selection alone: of the budget's penalised candidates (a probe's selection and its
    re-selection, refitted; no ranking), the best validated (cross-validated with ``cv``)."""
    own = [c for c in path.candidates if c["budget"] == budget
           and {"penalised", "reselect"} & {c["source"], *c["also"]}]
    if not own:
        return {"penalised_test_auc": np.nan, "penalised_n_features": np.nan}
    best = max(own, key=lambda c: c["cv_mean"] if c["cv_mean"] is not None else c["val_score"])
    return {"penalised_test_auc": best["test_score"], "penalised_n_features": best["n_features"]}


def lightgbm_on(split: Split, features: np.ndarray):
    """LightGBM (GBDT-Full) fitted on ``features`` of the fit rows, early-stopped on validation."""
    model = split.booster.lightgbm(split.seed, "full")
    return model.fit(split.X_fit[:, features], split.y_fit, eval_set=(split.X_val[:, features], split.y_val))


def _refitted(split: Split, sets: dict[int, np.ndarray], t0: float) -> list[dict]:
    """One record per budget: LightGBM refitted on the budget's set; ``fit_seconds`` is everything
    since ``t0`` (the selection and every refit)."""
    rows = []
    for k, features in sets.items():
        model = lightgbm_on(split, features)
        rows.append({"setting": f"K={k}", "budget": k, "n_features": int(len(features)),
                     "val_auc": roc_auc(split.y_val, model.decision_function(split.X_val[:, features])),
                     "test_auc": roc_auc(split.y_test, model.decision_function(split.X_test[:, features])),
                     "n_trees": int(model.n_iter_)})
    seconds = time.perf_counter() - t0
    return [{**r, "fit_seconds": seconds} for r in rows]


def run_lgbm_rfe(split: Split, step: float = 0.2) -> list[dict]:
    """LightGBM's recursive elimination as users run it: refit on the remaining features, drop the
    ``step`` share with the least gain, down to each budget (:func:`gbfs.selection.elimination.eliminate`),
    LightGBM refitted on each budget's set."""
    def gain_of(features):
        return lightgbm_on(split, features).feature_importance("gain")

    t0 = time.perf_counter()
    return _refitted(split, eliminate(gain_of, np.arange(split.n_features), split.budgets, step), t0)


def run_lgbm_shap(split: Split) -> list[dict]:
    """Top K by mean |SHAP value| on the fit rows of LightGBM on every feature (its TreeSHAP,
    ``pred_contrib``), LightGBM refitted on them."""
    t0 = time.perf_counter()
    model = lightgbm_on(split, np.arange(split.n_features))
    contrib = model.booster_.predict(split.X_fit[:, model.columns_], pred_contrib=True)[:, :-1]  # no bias
    score = np.zeros(split.n_features)
    score[model.columns_] = np.abs(contrib).mean(axis=0)
    order = np.argsort(-score, kind="stable")
    order = order[score[order] > 0]
    return _refitted(split, {k: order[:k] for k in split.budgets}, t0)


def mrmr_order(X: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    """mRMR's greedy order (the F-test / correlation quotient variant, "FCQ", of Ding and Peng):
    each step takes the feature of the largest relevance (ANOVA F against ``y``) divided by its
    mean absolute Pearson correlation with the features taken so far (near-ties: the earlier
    feature, :func:`_first_best`)."""
    with warnings.catch_warnings():  # constant columns: F is undefined, taken as 0
        warnings.simplefilter("ignore", RuntimeWarning)
        relevance = np.nan_to_num(f_classif(X, y)[0])
    Z = X - X.mean(axis=0)
    norm = np.sqrt((Z * Z).sum(axis=0))
    norm[norm == 0] = np.inf  # a constant column correlates with nothing
    Z = Z / norm
    taken = [_first_best(relevance)]
    redundancy = np.zeros(X.shape[1])
    while len(taken) < min(k, X.shape[1]):
        redundancy += np.abs(Z.T @ Z[:, taken[-1]])
        score = relevance / np.maximum(redundancy / len(taken), 1e-12)
        score[taken] = -np.inf
        taken.append(_first_best(score))
    return np.asarray(taken, dtype=np.int64)


#: scores within this relative distance of the best are a tie
TIE = 1e-9


def _first_best(score: np.ndarray) -> int:
    """The first index whose (non-negative) score is within :data:`TIE` of the best: copies of a
    feature score alike up to rounding, and the rounding of sums and products differs between
    CPUs, so near-ties go to the earlier feature on every machine."""
    return int(np.flatnonzero(score >= score.max() * (1.0 - TIE))[0])


def run_mrmr(split: Split) -> list[dict]:
    """mRMR's order on the fit rows (:func:`mrmr_order`), LightGBM refitted on each budget's prefix."""
    t0 = time.perf_counter()
    order = mrmr_order(split.X_fit, split.y_fit, max(split.budgets))
    return _refitted(split, {k: order[:k] for k in split.budgets}, t0)


def run_topk(importance: str, split: Split) -> list[dict]:
    """GBDT-topK in our booster (Newton gain and leaves)."""
    return [_fit(split.booster.gbfs(split.seed, method="topk", max_features=k, importance_type=importance,
                                    criterion="newton", leaf_estimate="newton"), split, setting=f"K={k}",
                 budget=k) for k in split.budgets]


def run_lgbm_topk(importance: str, split: Split) -> list[dict]:
    """LightGBM's top K for every budget; each fit ranks on its own (the same ranking fit every
    time), so ``ranking_seconds`` (``ranking_cpu_seconds``: its CPU time) lets the report count one
    ranking for all budgets."""
    rows = []
    for k in split.budgets:
        est = split.booster.lightgbm(split.seed, "topk", k=k, importance_type=importance)
        rows.append({**_fit(est, split, setting=f"K={k}", budget=k),
                     "ranking_seconds": est.timings_["ranking_seconds"],
                     "ranking_cpu_seconds": est.timings_["ranking_cpu_seconds"]})
    return rows


def run_cegb(split: Split) -> list[dict]:
    """LightGBM's coupled feature penalty at ``mu * n_fit`` (its normalised-units scaling)."""
    return [_fit(split.booster.lightgbm(split.seed, "cegb", mu=mu), split, setting=f"mu={mu:.3g}", mu=mu)
            for mu in split.grids.mu_cegb]


def run_l1(split: Split) -> list[dict]:
    """L1-penalised logistic regression on standardised features; features = non-zero coefficients."""
    rows = []
    for C in split.grids.l1_C:
        model = l1_logistic(C, split.seed)
        t0 = time.perf_counter()
        with warnings.catch_warnings():  # a small C may stop liblinear early; the fit is still usable
            warnings.simplefilter("ignore")
            model.fit(split.X_fit, split.y_fit)
        seconds = time.perf_counter() - t0
        rows.append({"setting": f"C={C:.3g}", "C": C, "fit_seconds": seconds, **_scores(model, split),
                     "n_features": int(np.count_nonzero(model[-1].coef_))})
    return rows


def run_reference(criterion: str, split: Split) -> list[dict]:
    """One unpenalised fit on every feature: the time unit of the path's target, and the AUC of all
    features."""
    return [_fit(_ours(split, "agbm", criterion, 0.0), split, setting="mu=0", mu=0.0, mu_raw=0.0)]


def _registry() -> dict[str, Family]:
    variants = {"gbfs:{}": ("penalised", run_penalised),
                "gbfs:{}+budget": ("budget", partial(run_budgeted, refit=False)),
                "gbfs:{}+refit": ("refit", partial(run_budgeted, refit=True)),
                "gbfs:path-{}": ("path", run_path)}
    reg = {}
    for pattern, (group, fn) in variants.items():
        for method, criterion in product(METHODS, CRITERIA):
            reg[pattern.format(f"{method}-{criterion}")] = Family(group, partial(fn, method, criterion))
    for importance in IMPORTANCES:
        reg[f"gbfs:topk-{importance}"] = Family("topk", partial(run_topk, importance))
        reg[f"lgbm:topk-{importance}"] = Family("lgbm-topk", partial(run_lgbm_topk, importance))
    # the path without its defaults, opt-in: exactly K features, no recursive elimination among its
    # sources, or neither (the papers' path alone); or choosing by 5-fold cross-validation
    options = {"+exact": {"exact": True}, "+norfe": {"rfe_step": None},
               "+exact+norfe": {"exact": True, "rfe_step": None}, "+cv": {"cv": 5},
               "+anneal": {"anneal_factor": ANNEAL_FACTOR}}
    for (suffix, kw), (method, criterion) in product(options.items(), product(METHODS, CRITERIA)):
        reg[f"gbfs:path{suffix}-{method}-{criterion}"] = Family(
            "path", partial(run_path, method, criterion, **kw), default=False)
    for method, criterion in product(METHODS, CRITERIA):  # the price annealed from 4 mu, opt-in
        reg[f"gbfs:{method}-{criterion}+refit+anneal"] = Family(
            "refit", partial(run_budgeted, method, criterion, refit=True, anneal_factor=ANNEAL_FACTOR),
            default=False)
    reg["lgbm:rfe"] = Family("lgbm-rfe", run_lgbm_rfe, default=False)
    reg["lgbm:shap-topk"] = Family("lgbm-shap", run_lgbm_shap, default=False)
    reg["mrmr"] = Family("mrmr", run_mrmr, default=False)
    reg["lgbm:cegb"] = Family("cegb", run_cegb)
    reg["l1-logistic"] = Family("l1", run_l1)
    for criterion in CRITERIA:
        reg[f"ref:unpenalised-{criterion}"] = Family("reference", partial(run_reference, criterion))
    return reg


#: family name -> Family; ``gbfs:*`` are ours, ``lgbm:*`` and ``l1-logistic`` the peers, ``ref:*`` timing
#: references (never chosen)
FAMILIES: dict[str, Family] = _registry()
#: the groups of our feature-selecting configurations (target a): GBDT-topK in our booster is not one
SELECTING_GROUPS = ("penalised", "budget", "refit", "path")
