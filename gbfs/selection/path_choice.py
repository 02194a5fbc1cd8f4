"""Which candidates each budget of the selection path has, and which one answers it.

A budget's candidates (:func:`candidates`) are feature sets from every source the path has -- the
most selective probe filling it, the unpenalised fit's first K, GBDT-topK by gain and by split
count, the next larger budget's answer shrunk to K, recursive elimination's set -- each refitted
without penalty.  :func:`choose_budget` refits and scores them (validation score, or the k-fold
mean with ``cv``), :func:`at_most` lets a smaller budget's answer serve a larger one, and
:func:`score_test` scores everything on a test set after the choice, with each budget's regret.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .path_cv import one_standard_error, score
from .path_results import BudgetResult
from .path_units import Cost


def _shrunk(larger: BudgetResult | None, k: float, unit) -> np.ndarray:
    """Backward elimination: the features of the larger budget's refitted model with the most gain
    that fit in budget ``k``, as recursive feature elimination does."""
    if larger is None or unit.size(larger.features) <= k:
        return np.empty(0, dtype=np.int64)
    gain = larger.model.feature_importance("gain")[larger.features]
    return unit.prefix(larger.features[np.argsort(-gain, kind="stable")], k)


def _reselected(k: float, search) -> list[tuple]:
    """Re-selection among a penalised selection twice the budget: the most selective probe that fills
    ``2k`` (or the largest probe), its first ``2k`` features refitted, and the ``k`` of most gain in
    that refit.  The penalty picks features greedily, one first use at a time; ranking a larger
    penalised set by what its own refit makes of them corrects the early greedy picks (on the
    selection benchmark's data it beat both the penalised selection of ``k`` and GBDT-topK)."""
    unit = search.unit
    fills = [m for m, p in search.probes.items() if unit.fills(p["order"], 2 * k)]
    mu = max(fills) if fills else max(search.probes, key=lambda m: search.probes[m]["size"], default=None)
    if mu is None:
        return []
    wide = unit.prefix(search.probes[mu]["order"], 2 * k)
    if unit.size(wide) <= k:
        return []
    model, _ = search.refit(wide, mu, "penalised")
    gain = model.feature_importance("gain")[wide]
    return [(mu, "reselect", unit.prefix(wide[np.argsort(-gain, kind="stable")], k))]


def _key(r) -> float:
    """What the choice compares: the cross-validated mean, else the validation score."""
    return r.cv_mean if r.cv_mean is not None else r.val_score


def at_most(results: list[BudgetResult]) -> list[BudgetResult]:
    """Budgets in increasing order, each answered by its own or a smaller budget's model: the best
    validated (ties: the smaller, so fewer features) or, cross-validated, the fewest features
    within one standard error of the best mean (:func:`gbfs.selection.path_cv.one_standard_error`)."""
    out = []
    for i, r in enumerate(results):
        best = one_standard_error(results[:i + 1], _key, lambda o: o.cv_se or 0.0, lambda o: o.size)
        if best is r:
            out.append(r)
            continue
        what = "cross-validate within one standard error of" if r.cv_mean is not None else \
            "validate at least as well as"
        note = (f"{best.n_features} features (budget {best.budget:g}'s answer) {what} this budget's best "
                f"with {r.n_features} ({_key(best):.6g} vs {_key(r):.6g})")
        out.append(dataclasses.replace(best, budget=r.budget, note=note, regret=None))
    return out


def score_test(results, records, models, test_set, classifier: bool, exact: bool) -> None:
    """Test scores of the chosen models and of every candidate, and each budget's regret: the best
    candidate it could have answered with (its own budget's, or with at most K any budget's up to
    it) in hindsight, minus its answer."""
    X_test, y_test = test_set
    for c, model in zip(records, models):
        c["test_score"] = score(model, X_test, y_test, classifier)
    for r in results:
        r.test_score = score(r.model, X_test, y_test, classifier)
        pool = [c["test_score"] for c in records
                if (c["budget"] == r.budget if exact else c["budget"] <= r.budget)]
        r.regret = max(pool) - r.test_score


def candidates(k: float, base, search, larger: BudgetResult | None) -> list[tuple]:
    """(mu, source, features) of budget ``k``: the bracket's probe and its re-selection, the
    unpenalised fit, GBDT-topK (in cost units: its ranking within the budget, and greedy gain per
    cost), the larger budget's model shrunk to the budget, and recursive elimination's set."""
    unit = search.unit
    fills = sorted((m for m, p in search.probes.items() if unit.fills(p["order"], k)), reverse=True)
    picks = fills[:1] if fills else ([max(search.probes, key=lambda m: search.probes[m]["size"])]
                                     if search.probes else [])
    out = [(m, "penalised", unit.prefix(search.probes[m]["order"], k)) for m in picks]
    out += _reselected(k, search)
    out.append((0.0, "unpenalised", unit.prefix(base.order, k)))
    if search.prep.bags is None:  # GBDT-topK ranks features, not bags
        out += [(None, f"topk-{kind}", unit.prefix(base.ranking(kind), k)) for kind in ("gain", "split")]
    if isinstance(unit, Cost):
        out.append((None, "gain-per-cost", unit.prefix(base.ranking("gain", unit.costs), k)))
    if larger is not None:
        out.append((larger.mu, "shrunk", _shrunk(larger, k, unit)))
    if k in search.rfe:
        out.append((0.0, "rfe", search.rfe[k]))
    return [c for c in out if c[2].size]


def choose_budget(k, base, prep, search, eval_set, classifier, records, models, larger) -> BudgetResult:
    best, seen = None, {}
    cands = candidates(k, base, search, larger)
    unit = search.unit
    size = max((unit.size(c[2]) for c in cands), default=0)
    # counting features, the budget is hit exactly whenever some candidate can: smaller selections
    # serve smaller budgets; in cost units every candidate within the budget competes
    for mu, source, feats in (c for c in cands if not unit.exact or unit.size(c[2]) == size):
        key = tuple(sorted(feats.tolist()))
        if key in seen:  # the same set from another source: one refit, every source recorded
            seen[key]["also"].append(source)
            continue
        cv = search.cross_validate(feats, mu, source) if search.folds is not None else {}
        model, seconds = search.refit(feats, mu, source, cv.get("cv_trees") if eval_set is None else None)
        val = score(model, *eval_set, classifier) if eval_set is not None else None
        seen[key] = {"budget": k, "mu": mu, "source": source, "n_features": int(feats.size),
                     "size": unit.size(feats),
                     "features": feats.tolist(), "val_score": val, "seconds": seconds, "also": [],
                     "cv_mean": cv.get("cv_mean"), "cv_se": cv.get("cv_se")}
        records.append(seen[key])
        models.append(model)
        r = BudgetResult(k, mu, source, feats, val, None, seconds, model, cv_mean=cv.get("cv_mean"),
                         cv_se=cv.get("cv_se"), size=unit.size(feats))
        if best is None or _key(r) > _key(best):
            best = r
    if best is None:
        raise ValueError(f"budget {k}: no feature was ever selected (the unpenalised fit makes no split)")
    if unit.exact and size < k:
        reach = max([unit.size(base.full_order)] + [p["size"] for p in search.probes.values()])
        best.note = (f"{size:g} {unit.name}: the unpenalised fit and every probe use at most {reach:g} "
                     f"{unit.name}")
    return best
