"""The selection path: the best model within each of several feature budgets, mu found automatically.

``selection_path(estimator, X, y, eval_set=..., budgets=(5, 10, 20, 50))`` answers "give me the best
K features and a good model on them" for every K at once.  It never looks at a test set to choose.

How it searches (everything shares one binning of the data and one GT-GBM precompute):

1. **The unpenalised fit** (``mu = 0``, early stopping on the eval set) gives the scale of ``mu``:
   ``mu_max``, the normalised gain of the first tree's root split, is the smallest ``mu`` at
   which nothing is ever selected.  It also ranks the features by gain (GBDT-topK's ranking).
2. **Probes.**  A selection fit at ``mu`` with the largest budget (``max_features = max(budgets)``)
   ends as soon as its budget is full or Omega has stopped growing for ``patience`` trees.  Its
   features in order of first use serve every budget at once: the selection of
   ``max_features = K`` at that ``mu`` is exactly the first K of them (the two fits are identical
   until the K-th feature is used).  Probes start at ``mu_max`` and go down geometrically until
   the largest budget is filled; then each budget's bracket -- the largest ``mu`` that still fills
   it and the smallest that does not -- is bisected in ``log mu`` (``refine`` times), because the
   most selective ``mu`` that fills a budget is the one that adds a feature only when it pays.
3. **Candidates** of budget K: the first K features of the most selective probe that fills it (the
   bracket's lower end) and their re-selection (the K of most gain in a refit of the probe's first
   2K), the first K of the unpenalised fit, GBDT-topK (the unpenalised fit's top K by gain and
   by split count), going down from the largest budget, the next larger budget's chosen model
   shrunk to its K features of most gain, and the K features recursive elimination keeps
   (``rfe_step``, :mod:`gbfs.selection.elimination`; from at most ``RFE_START`` times the largest
   budget of the unpenalised fit's features of most gain) -- each refitted without penalty on its
   features (:mod:`gbfs.criteria.refit`).  Among the candidates of the largest size, the best
   validation score is the budget's own model.  A budget that none can fill (the data supports
   fewer features) gets the largest selections found and a ``note`` saying why.
4. **At most K** (the default): a smaller budget's model that validates at least as well answers
   the larger budget too (ties go to fewer features), with a ``note``; ``exact=True`` keeps every
   budget's own model.

Every chosen model is reproducible alone: ``clone(estimator).set_params(mu=r.mu, max_features=K,
refit=True, selection_patience=patience).fit(X, y, eval_set=eval_set)`` gives the same model
(``method="topk"`` with its ``importance_type`` for GBDT-topK); whatever its source, it equals an
unpenalised Newton fit on its features (:func:`gbfs.criteria.refit.refit`).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.base import clone, is_classifier
from tqdm.auto import tqdm

from .. import validation as V
from ..criteria.methods import METHODS
from ..criteria.penalty import FeatureUsage
from ..criteria.refit import importances, top_k
from .elimination import eliminate
from .path_choice import at_most, choose_budget, score_test
from .path_cv import Folds, check_folds, cross_validate, make_folds
from .path_results import SelectionPath
from .path_units import Cost, Count

#: ``rfe_step="auto"``: the share of the features each elimination step drops
DEFAULT_RFE_STEP = 0.2
#: elimination starts from at most this many times the largest budget of the unpenalised fit's
#: features of most gain: its refits on hundreds of features cost most of its time (70 % on Isolet)
#: and only decide which of the weakest features go first; on breast_cancer, digits, Isolet and
#: Madelon (3 seeds) the answers tested no worse
RFE_START = 4


def _metric(estimator, prep) -> str:
    """The name of :func:`gbfs.selection.path_cv.score`'s metric for ``estimator`` fitted on ``prep``."""
    if not is_classifier(estimator):
        return "neg_rmse"
    return "macro_auc" if len(prep.inputs["classes_"]) > 2 else "auc"


class _Search:
    """Probes of the path: selection fits at given ``mu`` sharing the prepared data."""

    def __init__(self, template, prep, k_max: float, patience: int, bar, unit, folds: Folds | None = None):
        self.template, self.prep, self.k_max, self.patience, self.bar = template, prep, k_max, patience, bar
        self.unit, self.folds = unit, folds
        self.probes: dict[float, dict] = {}
        self.rfe: dict[int, np.ndarray] = {}  # budget -> the elimination's features
        self._refits: dict[tuple, tuple] = {}  # (features, mu, source, n_estimators) -> (model, seconds)
        self._cv: dict[tuple, dict] = {}  # (features, mu, source) -> cross_validate's record

    def probe(self, mu: float) -> dict:
        if mu in self.probes:
            return self.probes[mu]
        est = clone(self.template).set_params(mu=mu, refit=True, selection_patience=self.patience,
                                              **self.unit.probe_params(self.k_max))
        t0 = time.perf_counter()
        result, usage = est._select(self.prep)
        self.probes[mu] = rec = {"mu": mu, "order": list(usage.order), "n_bags": usage.n_bags_used,
                                 "size": self.unit.size(usage.order),
                                 "n_features": len(usage.order), "trees": len(result.trees),
                                 "seconds": time.perf_counter() - t0, "history": result.history}
        self.bar.set_postfix_str(f"probe mu={mu:.3g}: {rec['n_features']} features", refresh=False)
        self.bar.update(1)
        return rec

    def refit(self, features: np.ndarray, mu: float | None = 0.0, source: str = "rfe",
              n_estimators: int | None = None):
        """``(model, seconds)``: the unpenalised Newton refit on ``features`` that every candidate
        gets, from the shared binned data (``source`` ``topk-<importance>``: set up as GBDT-topK, the
        same model; ``n_estimators``: that many trees instead of the template's).  Fitted once:
        elimination's fit of a budget's set is that budget's candidate."""
        key = (tuple(int(f) for f in features), mu, source, n_estimators)
        if key not in self._refits:
            t0 = time.perf_counter()
            model = self._fit(features, mu, source, self.prep, n_estimators)
            self._refits[key] = (model, time.perf_counter() - t0)
        return self._refits[key]

    def cross_validate(self, features: np.ndarray, mu: float | None, source: str) -> dict:
        """The candidate's k-fold record (:func:`gbfs.selection.path_cv.cross_validate`), computed once."""
        key = (tuple(int(f) for f in features), mu, source)
        if key not in self._cv:
            self._cv[key] = cross_validate(lambda prep: self._fit(features, mu, source, prep), self.folds)
        return self._cv[key]

    def _fit(self, features: np.ndarray, mu: float | None, source: str, prep, n_estimators=None):
        model = clone(self.template)
        if n_estimators is not None:
            model.set_params(n_estimators=n_estimators)
        k = int(features.size)
        if source.startswith("topk") and self.template.feature_costs is None:
            model.set_params(method="topk", max_features=k, refit=True, selection_patience=None,
                             importance_type=source.split("-")[1], anneal_factor=1.0)  # no price
        else:  # mu = 0 on GT-GBM is plain boosting: A-GBM's unpenalised fit is the same model (and,
            # with feature costs, GBDT-topK's refit, which method="topk" takes only under a max_cost)
            model.set_params(mu=mu or 0.0, max_features=k, refit=True, selection_patience=self.patience,
                             **({"method": "agbm"} if not mu and METHODS[self.template.method].group_tests
                                else {}))
        with warnings.catch_warnings():  # GT-GBM's settings are moot for the other methods
            warnings.simplefilter("ignore", UserWarning)
            model._fit_prepared(prep, selection=features)
        self.bar.set_postfix_str(f"{source} refit on {k} features", refresh=False)
        self.bar.update(1)
        return model

    def bracket(self, k: float, mu_max: float) -> tuple[float | None, float]:
        """(largest probed mu filling budget k, smallest probed mu above it that does not -- at worst
        ``mu_max``, where nothing is selected)."""
        fills = [m for m, p in self.probes.items() if self.unit.fills(p["order"], k)]
        lo = max(fills) if fills else None
        above = [m for m in self.probes if lo is None or m > lo]
        return lo, min(above + [mu_max])


def _check(estimator, budgets, eval_set, patience, n_probes, refine, cv, budget_unit):
    from ..estimators.single_task import BaseGBFS

    if not isinstance(estimator, BaseGBFS):
        raise TypeError(f"estimator must be a GBFSClassifier or GBFSRegressor, got "
                        f"{type(estimator).__name__}")
    if estimator.method not in ("gbfs", "agbm", "gtgbm"):
        raise ValueError(f"estimator.method must be 'gbfs', 'agbm' or 'gtgbm' for a selection path, got "
                         f"{estimator.method!r} (GBDT-topK is one of the path's candidates already)")
    if getattr(estimator, "max_cost", None) is not None:
        raise ValueError(f"estimator.max_cost={estimator.max_cost!r}: the path sets each probe's budget; "
                         "give the estimator max_cost=None (budget_unit='cost' for budgets in cost units)")
    if budget_unit not in ("features", "cost"):
        raise ValueError(f"budget_unit must be 'features' or 'cost', got {budget_unit!r}")
    cost = budget_unit == "cost"
    if cost and estimator.feature_costs is None:
        raise ValueError("budget_unit='cost' needs the estimator's feature_costs")
    if cost and estimator.feature_bags is not None:
        raise ValueError("budget_unit='cost' does not apply with feature_bags (a bag's features share "
                         "one cost); give costs per feature")
    if isinstance(budgets, (int, float, np.number)) or not hasattr(budgets, "__iter__"):
        raise TypeError(f"budgets must be a sequence of {'numbers' if cost else 'ints'}, got {budgets!r}")
    check = (lambda b: V.check_real("budgets[]", b, 0.0, low_open=True)) if cost else \
        (lambda b: V.check_int("budgets[]", b, 1))
    budgets = sorted({check(b) for b in budgets})
    if not budgets:
        raise ValueError("budgets must hold at least one budget")
    if cost:  # what a budget must at least afford, as max_cost refuses (the costs' own checks come later)
        costs = np.asarray(estimator.feature_costs, dtype=np.float64).ravel()
        cheapest = float(np.min(costs)) if costs.size and np.all(np.isfinite(costs)) else None
        if cheapest is not None and budgets[0] < cheapest:
            raise ValueError(f"budgets[]={budgets[0]:g} is below the cheapest feature's cost ({cheapest:g}): "
                             "no feature fits in it")
    V.check_int("cv", cv, 2, allow_none=True)
    if eval_set is None and cv is None:
        raise ValueError("eval_set is required without cv: the path chooses each budget's model on it")
    V.check_int("patience", patience, 1)
    V.check_int("n_probes", n_probes, 2)
    V.check_int("refine", refine, 0)
    return budgets


def selection_path(estimator, X, y, *, eval_set=None, budgets=(5, 10, 20, 50), test_set=None,
                   patience: int = 5, n_probes: int = 8, refine: int = 1, ratio: float = 4.0,
                   rfe_step: float | str | None = "auto", exact: bool = False, cv: int | None = None,
                   budget_unit: str = "features", verbose: bool = False) -> SelectionPath:
    """Find, for each feature budget, the best validated model using at most that many features.

    Parameters
    ----------
    estimator : GBFSClassifier or GBFSRegressor
        The template: method (``"gbfs"``, ``"agbm"``, ``"gtgbm"``), criterion, tree settings,
        sampler, seed.  Its ``mu``, ``max_features`` and ``refit`` are set by the path.  Give it
        ``early_stopping_rounds`` so that every fit stops on the eval set (with ``cv``: each
        fold's fits on its held-out rows).  A classifier may have more than two classes (its
        models are then chosen by macro AUC).
    X, y : training data
    eval_set : tuple (X_val, y_val), optional
        The validation data every choice is made on, and every fit's early stopping.  Optional
        with ``cv``: the choice is then cross-validated, the fits on all training rows run the
        template's ``n_estimators`` (the probes and the ranking fit) or the mean number of trees
        the candidate's folds kept (the candidates).
    budgets : sequence of int (or float), default=(5, 10, 20, 50)
        Numbers of features (bags, with ``feature_bags``), or totals of ``feature_costs`` with
        ``budget_unit="cost"``.
    test_set : tuple (X_test, y_test), optional
        Scored after the choice, never used for it: each budget's model (``test_score``), every
        candidate (``candidates[i]["test_score"]``) and each budget's ``regret``, the best test
        score among the candidates it could have answered with minus its own.
    patience : int, default=5
        A probe ends when Omega has not grown for this many trees (``selection_patience``).
    n_probes : int, default=8
        At most this many selection fits.
    refine : int, default=1
        Bisections of each budget's ``mu`` bracket after the geometric descent.
    ratio : float, default=4.0
        Step of the geometric descent of ``mu`` from ``mu_max``.
    rfe_step : float in (0, 1), "auto" or None, default="auto"
        Adds recursive feature elimination as a source of candidates (:mod:`gbfs.selection.elimination`):
        from the features the unpenalised fit used (at most :data:`RFE_START` times the largest
        budget, those of most gain), refit and drop this share with the least gain until the
        smallest budget, stopping at each budget (``"rfe"`` candidates).  ``"auto"``:
        0.2 (the step users of LightGBM's elimination take), or none with ``feature_bags``, whose
        budgets count bags.  None: no elimination.  A number is refused with ``feature_bags``.
    exact : bool, default=False
        False: at most K -- a smaller budget's answer that validates better is also the larger
        budget's (ties: fewer features), and its ``note`` says so with both scores.  True: each
        budget's answer uses exactly K features whenever a candidate can (smaller selections
        serve smaller budgets).
    cv : int or None, default=None
        Choose by ``cv``-fold cross-validation on the training rows (stratified for a
        classifier, folds from ``random_state``, cut from the shared binned matrix) instead of
        on ``eval_set``: each candidate gets the folds' mean score and its standard error
        (``cv_mean``, ``cv_se``), and among the candidates a budget may answer with, the one
        with the fewest features within one standard error of the best mean is chosen (ties:
        the higher mean) and refitted on all training rows.  Costs ``cv`` fits per candidate.
    budget_unit : {"features", "cost"}, default="features"
        What the budgets count.  ``"cost"``: the estimator's ``feature_costs`` of the features
        used (the papers' price per feature, where ranking by gain alone is the wrong tool): each
        probe stops when no further feature fits in the largest budget (``max_cost``), the
        rankings take their features while they fit, and greedy gain per cost joins the
        candidates.  Answers are at most the budget (``exact`` must be False; no elimination).
    verbose : bool, default=False
        A progress bar (tqdm, stderr) over the path's fits: the unpenalised fit, the probes, the
        elimination's fits and the candidates' refits, each named as it ends.

    Returns
    -------
    SelectionPath
    """
    budgets = _check(estimator, budgets, eval_set, patience, n_probes, refine, cv, budget_unit)
    V.check_real("ratio", ratio, low=1.0, low_open=True)
    if isinstance(rfe_step, str):
        if rfe_step != "auto":
            raise ValueError(f"rfe_step must be a float in (0, 1), 'auto' or None, got {rfe_step!r}")
        rfe_step = None if estimator.feature_bags is not None or budget_unit == "cost" else DEFAULT_RFE_STEP
    V.check_real("rfe_step", rfe_step, 0.0, 1.0, low_open=True, high_open=True, allow_none=True)
    if rfe_step is not None and estimator.feature_bags is not None:
        raise ValueError("rfe_step does not apply with feature_bags (elimination drops features, the "
                         "budgets count bags)")
    if rfe_step is not None and budget_unit == "cost":
        raise ValueError("rfe_step does not apply with budget_unit='cost' (elimination counts features)")
    V.check_bool("exact", exact)
    if exact and budget_unit == "cost":
        raise ValueError("exact=True does not apply with budget_unit='cost': costs rarely add up to a "
                         "budget, so every answer is at most the budget")
    V.check_bool("verbose", verbose)
    if cv is not None:
        check_folds(cv, y, is_classifier(estimator))
    settings = _Settings(patience, n_probes, refine, ratio, rfe_step, exact, cv, budget_unit)
    with tqdm(desc="selection path", unit="fit", disable=not verbose) as bar:
        return _path(estimator, X, y, eval_set, budgets, test_set, settings, bar)


@dataclass(frozen=True)
class _Settings:
    patience: int
    n_probes: int
    refine: int
    ratio: float
    rfe_step: float | None
    exact: bool
    cv: int | None
    budget_unit: str


def _path(estimator, X, y, eval_set, budgets, test_set, settings: _Settings, bar) -> SelectionPath:
    patience, n_probes, refine, ratio = settings.patience, settings.n_probes, settings.refine, settings.ratio
    t_start = time.perf_counter()
    # without an eval set nothing can stop early on it: the folds' fits stop on their held-out rows
    stops = {} if eval_set is not None else {"early_stopping_rounds": None}
    prep = clone(estimator).set_params(max_features=None, refit=False, selection_patience=None,
                                       **stops)._prepare(X, y, eval_set)
    base = _Unpenalised(estimator, prep, patience)
    t_base = time.perf_counter() - t_start
    bar.set_postfix_str(f"unpenalised fit: {len(base.full_order)} features", refresh=False)
    bar.update(1)
    mu_max = base.mu_max
    classifier = is_classifier(estimator)
    folds = None if settings.cv is None else make_folds(
        prep, X, y, settings.cv, classifier, estimator.early_stopping_rounds if stops else None)
    unit = (Cost(prep.costs) if settings.budget_unit == "cost" else
            Count(FeatureUsage(prep.X_binned.shape[1], 0.0, None, prep.bags).bag_of, prep.bags is not None))
    search = _Search(clone(estimator).set_params(**stops), prep, budgets[-1], patience, bar, unit, folds)
    # the data may support fewer features than the largest budget: the descent also ends when two
    # more steps of smaller mu have not added a feature
    k_fill = min(budgets[-1], unit.size(base.full_order))
    mu, counts = mu_max / ratio, []
    while mu_max > 0 and len(search.probes) < n_probes:  # geometric descent until the largest budget fills
        rec = search.probe(mu)
        counts.append(rec["size"])
        if unit.fills(rec["order"], k_fill) or (len(counts) > 2 and counts[-1] <= max(counts[:-2])):
            break
        mu /= ratio
    for _ in range(refine):
        for k in budgets:
            lo, hi = search.bracket(min(k, k_fill), mu_max)
            if lo is not None and hi / lo > 1.5 and len(search.probes) < n_probes:
                search.probe(math.sqrt(lo * hi))
    if settings.rfe_step is not None:
        start = base.ranking("gain")[:RFE_START * int(budgets[-1])]
        search.rfe = eliminate(lambda f: search.refit(f)[0].feature_importance("gain")[f], start, budgets,
                               settings.rfe_step)
    results, candidates, models = [], [], []
    larger = None
    for k in reversed(budgets):  # from the largest budget down: each may shrink the one above
        larger = choose_budget(k, base, prep, search, eval_set, classifier, candidates, models, larger)
        results.insert(0, larger)
    if not settings.exact:
        results = at_most(results)
    if test_set is not None:
        score_test(results, candidates, models, test_set, classifier, settings.exact)
    probes = [{k: v for k, v in p.items() if k != "history"} for _, p in sorted(search.probes.items())]
    timings = {"unpenalised_seconds": t_base, "probe_seconds": sum(p["seconds"] for p in probes),
               "metric": _metric(estimator, prep)}
    return SelectionPath(results, probes, candidates, mu_max, time.perf_counter() - t_start, timings)


class _Unpenalised:
    """The path's unpenalised fit on every feature: the scale of mu, the mu = 0 selection, the ranking."""

    def __init__(self, template, prep, patience: int):
        result, usage = clone(template).set_params(mu=0.0, max_features=None, refit=False,
                                                   selection_patience=None)._select(prep, plain=True)
        self.trees = result.trees  # every grown tree, as method="topk" ranks them
        self.n_features = prep.X_binned.shape[1]
        h = result.history
        n_classes = len(prep.inputs.get("classes_", ()))
        first = result.trees[:n_classes if n_classes > 2 else 1]  # a multiclass round: a tree per class
        self.mu_max = _mu_max(first, h[0] if h else {}, METHODS[template.method])
        # the mu = 0 selection fit with a patience would have ended where Omega first stalled
        n_used = len(usage.order)
        for i in range(patience, len(h)):
            if h[i]["n_features_used"] == h[i - patience]["n_features_used"]:
                n_used = h[i]["n_features_used"]
                break
        self.full_order = list(usage.order)
        self.order = usage.order[:n_used]

    def ranking(self, importance_type: str, costs: np.ndarray | None = None) -> np.ndarray:
        """The used features by importance (GBDT-topK's order; ties: the lower index), or by
        importance per unit of cost (greedy gain per cost)."""
        if costs is None:
            return top_k(self.trees, self.n_features, None, importance_type)
        imp = importances(self.trees, self.n_features, importance_type)
        used = np.flatnonzero(imp > 0)
        return used[np.argsort(-imp[used] / costs[used], kind="stable")].astype(np.int64)


def _mu_max(first: list, rec: dict, method) -> float:
    """The smallest mu at which no tree of the first round can split its root, and so no tree can:
    the largest normalised root gain among them (0 if none splits).  A multiclass round grows a
    tree per class, each with its own normaliser (``gain_normaliser_class{k}`` in ``rec``)."""
    best = 0.0
    for k, root in enumerate(first):
        if root.feature[0] >= 0:
            norm = rec["gain_normaliser" if len(first) == 1 else f"gain_normaliser_class{k}"]
            best = max(best, float(root.gain[0] / method.divisor(norm)))
    return best
