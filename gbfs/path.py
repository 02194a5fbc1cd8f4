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
   bracket's lower end), of the unpenalised fit, GBDT-topK (the unpenalised fit's top K by gain and
   by split count), going down from the largest budget, the next larger budget's chosen model
   shrunk to its K features of most gain, and the K features recursive elimination keeps
   (``rfe_step``, :mod:`gbfs.elimination`) -- each refitted without penalty on its features
   (:mod:`gbfs.refit`).  Among the candidates of the largest size, the best validation score is
   the budget's own model.  A budget that none can fill (the data supports fewer features) gets
   the largest selections found and a ``note`` saying why.
4. **At most K** (the default): a smaller budget's model that validates at least as well answers
   the larger budget too (ties go to fewer features), with a ``note``; ``exact=True`` keeps every
   budget's own model.

Every chosen model is reproducible alone: ``clone(estimator).set_params(mu=r.mu, max_features=K,
refit=True, selection_patience=patience).fit(X, y, eval_set=eval_set)`` gives the same model
(``method="topk"`` with its ``importance_type`` for GBDT-topK); whatever its source, it equals an
unpenalised Newton fit on its features (:func:`gbfs.refit.refit`).
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.base import clone, is_classifier
from tqdm.auto import tqdm

from . import validation as V
from .elimination import eliminate
from .methods import METHODS
from .metrics import rmse, roc_auc
from .path_results import BudgetResult, SelectionPath
from .penalty import FeatureUsage
from .softmax import macro_auc

#: ``rfe_step="auto"``: the share of the features each elimination step drops
DEFAULT_RFE_STEP = 0.2


def _score(model, X, y, classifier: bool) -> float:
    """Higher is better: AUC (two classes), macro one-vs-rest AUC of the probabilities (more
    classes, as a multiclass fit's ``val_auc``), minus RMSE (regressor)."""
    if not classifier:
        return -rmse(y, model.predict(X))
    classes = model.classes_
    if classes.shape[0] == 2:
        return roc_auc((y == classes[1]).astype(np.float64), model.decision_function(X))
    y = np.asarray(y)
    codes = np.full(y.shape[0], -1)  # a label the model was not fitted on is a negative of every class
    for k, c in enumerate(classes):
        codes[y == c] = k
    return macro_auc(codes, model.predict_proba(X))


def _metric(estimator, prep) -> str:
    """The name of :func:`_score`'s metric for ``estimator`` fitted on ``prep``."""
    if not is_classifier(estimator):
        return "neg_rmse"
    return "macro_auc" if len(prep.inputs["classes_"]) > 2 else "auc"


def _prefix(order: list[int], k: int, bag_of: np.ndarray) -> np.ndarray:
    """The first features of ``order`` that use at most ``k`` bags (features, without bags)."""
    out, bags = [], set()
    for f in order:
        b = int(bag_of[f])
        if b not in bags and len(bags) == k:
            break
        bags.add(b)
        out.append(f)
    return np.asarray(out, dtype=np.int64)


class _Search:
    """Probes of the path: selection fits at given ``mu`` sharing the prepared data."""

    def __init__(self, template, prep, k_max: int, patience: int, bar):
        self.template, self.prep, self.k_max, self.patience, self.bar = template, prep, k_max, patience, bar
        self.probes: dict[float, dict] = {}
        self.bag_of = FeatureUsage(prep.X_binned.shape[1], 0.0, None, prep.bags).bag_of
        self.rfe: dict[int, np.ndarray] = {}  # budget -> the elimination's features
        self._refits: dict[tuple, tuple] = {}  # (features, mu, source) -> (model, seconds)

    def n_bags(self, order) -> int:
        return len({int(self.bag_of[f]) for f in order})

    def probe(self, mu: float) -> dict:
        if mu in self.probes:
            return self.probes[mu]
        est = clone(self.template).set_params(mu=mu, max_features=self.k_max, refit=True,
                                              selection_patience=self.patience)
        t0 = time.perf_counter()
        result, usage = est._select(self.prep)
        self.probes[mu] = rec = {"mu": mu, "order": list(usage.order), "n_bags": usage.n_bags_used,
                                 "n_features": len(usage.order), "trees": len(result.trees),
                                 "seconds": time.perf_counter() - t0, "history": result.history}
        self.bar.set_postfix_str(f"probe mu={mu:.3g}: {rec['n_features']} features", refresh=False)
        self.bar.update(1)
        return rec

    def refit(self, features: np.ndarray, mu: float | None = 0.0, source: str = "rfe"):
        """``(model, seconds)``: the unpenalised Newton refit on ``features`` that every candidate
        gets, from the shared binned data (``source`` ``topk-<importance>``: set up as GBDT-topK, the
        same model).  Fitted once: elimination's fit of a budget's set is that budget's candidate."""
        key = (tuple(int(f) for f in features), mu, source)
        if key not in self._refits:
            t0 = time.perf_counter()
            model = self._fit(features, mu, source)
            self._refits[key] = (model, time.perf_counter() - t0)
        return self._refits[key]

    def _fit(self, features: np.ndarray, mu: float | None, source: str):
        model = clone(self.template)
        k = int(features.size)
        if source.startswith("topk"):
            model.set_params(method="topk", max_features=k, refit=True, selection_patience=None,
                             importance_type=source.split("-")[1])
        else:  # mu = 0 on GT-GBM is plain boosting: A-GBM's unpenalised fit is the same model
            model.set_params(mu=mu or 0.0, max_features=k, refit=True, selection_patience=self.patience,
                             **({"method": "agbm"} if source in ("unpenalised", "rfe")
                                and METHODS[self.template.method].group_tests else {}))
        with warnings.catch_warnings():  # GT-GBM's settings are moot for the other methods
            warnings.simplefilter("ignore", UserWarning)
            model._fit_prepared(self.prep, selection=features)
        self.bar.set_postfix_str(f"{source} refit on {k} features", refresh=False)
        self.bar.update(1)
        return model

    def bracket(self, k: int, mu_max: float) -> tuple[float | None, float]:
        """(largest probed mu filling k bags, smallest probed mu above it that does not -- at worst
        ``mu_max``, where nothing is selected)."""
        fills = [m for m, p in self.probes.items() if p["n_bags"] >= k]
        lo = max(fills) if fills else None
        above = [m for m in self.probes if lo is None or m > lo]
        return lo, min(above + [mu_max])


def _check(estimator, budgets, eval_set, patience, n_probes, refine):
    from .estimators import _GBFSBase

    if not isinstance(estimator, _GBFSBase):
        raise TypeError(f"estimator must be a GBFSClassifier or GBFSRegressor, got "
                        f"{type(estimator).__name__}")
    if estimator.method not in ("gbfs", "agbm", "gtgbm"):
        raise ValueError(f"estimator.method must be 'gbfs', 'agbm' or 'gtgbm' for a selection path, got "
                         f"{estimator.method!r} (GBDT-topK is one of the path's candidates already)")
    if getattr(estimator, "max_cost", None) is not None:
        raise ValueError(f"estimator.max_cost={estimator.max_cost!r}: the path's budgets count features "
                         "(bags); give the estimator max_cost=None")
    if isinstance(budgets, (int, np.integer)) or not hasattr(budgets, "__iter__"):
        raise TypeError(f"budgets must be a sequence of ints, got {budgets!r}")
    budgets = sorted({V.check_int("budgets[]", b, 1) for b in budgets})
    if not budgets:
        raise ValueError("budgets must hold at least one budget")
    if eval_set is None:
        raise ValueError("eval_set is required: the path chooses each budget's model on it")
    V.check_int("patience", patience, 1)
    V.check_int("n_probes", n_probes, 2)
    V.check_int("refine", refine, 0)
    return budgets


def selection_path(estimator, X, y, *, eval_set, budgets=(5, 10, 20, 50), test_set=None, patience: int = 5,
                   n_probes: int = 8, refine: int = 1, ratio: float = 4.0,
                   rfe_step: float | str | None = "auto", exact: bool = False,
                   verbose: bool = False) -> SelectionPath:
    """Find, for each feature budget, the best validated model using at most that many features.

    Parameters
    ----------
    estimator : GBFSClassifier or GBFSRegressor
        The template: method (``"gbfs"``, ``"agbm"``, ``"gtgbm"``), criterion, tree settings,
        sampler, seed.  Its ``mu``, ``max_features`` and ``refit`` are set by the path.  Give it
        ``early_stopping_rounds`` so that every fit stops on the eval set.  A classifier may
        have more than two classes (its models are then chosen by macro AUC).
    X, y : training data
    eval_set : tuple (X_val, y_val)
        The validation data every choice is made on.
    budgets : sequence of int, default=(5, 10, 20, 50)
        Numbers of features (bags, with ``feature_bags``).
    test_set : tuple (X_test, y_test), optional
        Scored once per chosen model, after the choice.
    patience : int, default=5
        A probe ends when Omega has not grown for this many trees (``selection_patience``).
    n_probes : int, default=8
        At most this many selection fits.
    refine : int, default=1
        Bisections of each budget's ``mu`` bracket after the geometric descent.
    ratio : float, default=4.0
        Step of the geometric descent of ``mu`` from ``mu_max``.
    rfe_step : float in (0, 1), "auto" or None, default="auto"
        Adds recursive feature elimination as a source of candidates (:mod:`gbfs.elimination`):
        from the features the unpenalised fit used, refit and drop this share with the least gain
        until the smallest budget, stopping at each budget (``"rfe"`` candidates).  ``"auto"``:
        0.2 (the step users of LightGBM's elimination take), or none with ``feature_bags``, whose
        budgets count bags.  None: no elimination.  A number is refused with ``feature_bags``.
    exact : bool, default=False
        False: at most K -- a smaller budget's answer that validates better is also the larger
        budget's (ties: fewer features), and its ``note`` says so with both scores.  True: each
        budget's answer uses exactly K features whenever a candidate can (smaller selections
        serve smaller budgets).
    verbose : bool, default=False
        A progress bar (tqdm, stderr) over the path's fits: the unpenalised fit, the probes, the
        elimination's fits and the candidates' refits, each named as it ends.

    Returns
    -------
    SelectionPath
    """
    budgets = _check(estimator, budgets, eval_set, patience, n_probes, refine)
    V.check_real("ratio", ratio, low=1.0, low_open=True)
    if isinstance(rfe_step, str):
        if rfe_step != "auto":
            raise ValueError(f"rfe_step must be a float in (0, 1), 'auto' or None, got {rfe_step!r}")
        rfe_step = None if estimator.feature_bags is not None else DEFAULT_RFE_STEP
    V.check_real("rfe_step", rfe_step, 0.0, 1.0, low_open=True, high_open=True, allow_none=True)
    if rfe_step is not None and estimator.feature_bags is not None:
        raise ValueError("rfe_step does not apply with feature_bags (elimination drops features, the "
                         "budgets count bags)")
    V.check_bool("exact", exact)
    V.check_bool("verbose", verbose)
    settings = _Settings(patience, n_probes, refine, ratio, rfe_step, exact)
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


def _path(estimator, X, y, eval_set, budgets, test_set, settings: _Settings, bar) -> SelectionPath:
    patience, n_probes, refine, ratio = settings.patience, settings.n_probes, settings.refine, settings.ratio
    t_start = time.perf_counter()
    prep = clone(estimator).set_params(max_features=None, refit=False, selection_patience=None)._prepare(
        X, y, eval_set)
    base = _Unpenalised(estimator, prep, patience)
    t_base = time.perf_counter() - t_start
    bar.set_postfix_str(f"unpenalised fit: {len(base.full_order)} features", refresh=False)
    bar.update(1)
    mu_max = base.mu_max
    search = _Search(estimator, prep, budgets[-1], patience, bar)
    # the data may support fewer features than the largest budget: the descent also ends when two
    # more steps of smaller mu have not added a feature
    k_fill = min(budgets[-1], search.n_bags(base.full_order))
    mu, counts = mu_max / ratio, []
    while mu_max > 0 and len(search.probes) < n_probes:  # geometric descent until the largest budget fills
        counts.append(search.probe(mu)["n_bags"])
        if counts[-1] >= k_fill or (len(counts) > 2 and counts[-1] <= max(counts[:-2])):
            break
        mu /= ratio
    for _ in range(refine):
        for k in budgets:
            lo, hi = search.bracket(min(k, k_fill), mu_max)
            if lo is not None and hi / lo > 1.5 and len(search.probes) < n_probes:
                search.probe(math.sqrt(lo * hi))
    if settings.rfe_step is not None:
        search.rfe = eliminate(lambda f: search.refit(f)[0].feature_importance("gain")[f],
                               base.top_k(base.n_features, "gain"), budgets, settings.rfe_step)
    classifier = is_classifier(estimator)
    X_val, y_val = eval_set
    results, candidates = [], []
    larger = None
    for k in reversed(budgets):  # from the largest budget down: each may shrink the one above
        larger = _choose(k, estimator, base, prep, search, X_val, y_val, classifier, candidates, larger)
        results.insert(0, larger)
    if not settings.exact:
        results = _at_most(results)
    if test_set is not None:
        for r in results:
            r.test_score = _score(r.model, test_set[0], test_set[1], classifier)
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

    def top_k(self, k: int, importance_type: str) -> np.ndarray:
        from .refit import top_k

        return top_k(self.trees, self.n_features, k, importance_type)


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


def _shrunk(larger: BudgetResult | None, k: int, bag_of: np.ndarray) -> np.ndarray:
    """Backward elimination: the ``k`` features of the larger budget's refitted model with the most
    gain (then the rest of its selection, in order), as recursive feature elimination does."""
    if larger is None or larger.n_features <= k:
        return np.empty(0, dtype=np.int64)
    gain = larger.model.feature_importance("gain")[larger.features]
    order = larger.features[np.argsort(-gain, kind="stable")]
    return _prefix(order.tolist(), k, bag_of)


def _at_most(results: list[BudgetResult]) -> list[BudgetResult]:
    """Budgets in increasing order, each answered by the best validated of its own and every smaller
    budget's model (ties: the smaller, so fewer features)."""
    out, best = [], None
    for r in results:
        if best is None or r.val_score > best.val_score:
            best = r
            out.append(r)
            continue
        note = (f"{best.n_features} features (budget {best.budget}'s answer) validate at least as well as "
                f"this budget's best with {r.n_features} ({best.val_score:.6g} >= {r.val_score:.6g})")
        out.append(dataclasses.replace(best, budget=r.budget, note=note))
    return out


def _candidates(k: int, base: _Unpenalised, search: _Search, larger: BudgetResult | None) -> list[tuple]:
    """(mu, source, features) of budget ``k``: the bracket's probe, the unpenalised fit, GBDT-topK and
    the larger budget's model shrunk to ``k`` features."""
    fills = sorted((m for m, p in search.probes.items() if p["n_bags"] >= k), reverse=True)
    picks = fills[:1] if fills else ([max(search.probes, key=lambda m: search.probes[m]["n_bags"])]
                                     if search.probes else [])
    out = [(m, "penalised", _prefix(search.probes[m]["order"], k, search.bag_of)) for m in picks]
    out.append((0.0, "unpenalised", _prefix(base.order, k, search.bag_of)))
    if search.prep.bags is None:  # GBDT-topK ranks features, not bags
        out += [(None, f"topk-{kind}", base.top_k(k, kind)) for kind in ("gain", "split")]
    if larger is not None:
        out.append((larger.mu, "shrunk", _shrunk(larger, k, search.bag_of)))
    if k in search.rfe:
        out.append((0.0, "rfe", search.rfe[k]))
    return [c for c in out if c[2].size]


def _choose(k, estimator, base, prep, search, X_val, y_val, classifier, candidates, larger) -> BudgetResult:
    best, seen = None, {}
    cands = _candidates(k, base, search, larger)
    size = max((search.n_bags(c[2]) for c in cands), default=0)
    # the budget is hit exactly whenever some candidate can: smaller selections serve smaller budgets
    for mu, source, feats in (c for c in cands if search.n_bags(c[2]) == size):
        key = tuple(sorted(feats.tolist()))
        if key in seen:  # the same set from another source: one refit, every source recorded
            seen[key]["also"].append(source)
            continue
        model, seconds = search.refit(feats, mu, source)
        val = _score(model, X_val, y_val, classifier)
        seen[key] = {"budget": k, "mu": mu, "source": source, "n_features": int(feats.size),
                     "features": feats.tolist(), "val_score": val, "seconds": seconds, "also": []}
        candidates.append(seen[key])
        if best is None or val > best.val_score:
            best = BudgetResult(k, mu, source, feats, val, None, seconds, model)
    if best is None:
        raise ValueError(f"budget {k}: no feature was ever selected (the unpenalised fit makes no split)")
    if size < k:
        unit = "bags" if prep.bags is not None else "features"
        reach = max([search.n_bags(base.full_order)] + [p["n_bags"] for p in search.probes.values()])
        best.note = f"{size} {unit}: the unpenalised fit and every probe use at most {reach} {unit}"
    return best
