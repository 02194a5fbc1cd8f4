"""The budget in cost units ``max_cost``: never exceeded, ``max_features`` under unit costs, GBDT-topK
under a cost cap, refused where it cannot mean anything."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from budget_cases import random_case
from reference_models import digest

from gbfs import GBFSClassifier, GBFSRegressor, load_model, selection_path
from gbfs.booster.tree import Tree
from gbfs.criteria.penalty import FeatureUsage
from gbfs.criteria.refit import top_k
from gbfs.estimators.multitask import GBFSMultitaskClassifier


def _spent(est, costs, bags=None) -> float:
    """What the fitted model's features cost: each used bag is paid for by the feature that opened
    it, the first of the bag in ``selected_features_`` (the order of first use)."""
    bag_of = np.arange(costs.shape[0]) if bags is None else np.unique(bags, return_inverse=True)[1]
    paid, total = set(), 0.0
    for f in est.selected_features_:
        if bag_of[f] not in paid:
            paid.add(bag_of[f])
            total += costs[f]
    return total


def _random_case(seed: int):
    rng, X, y, kw = random_case(seed, signal_share=0.6)
    d = X.shape[1]
    costs = np.exp(rng.uniform(np.log(0.1), np.log(10.0), d))  # log-uniform over two decades
    kw.update(feature_costs=costs, max_cost=float(rng.uniform(costs.min(), 0.5 * costs.sum())),
              refit=bool(rng.random() < 0.5))
    if rng.random() < 0.3:
        kw["max_features"] = int(rng.integers(1, 6))
    if rng.random() < 0.4:
        # with bags the opener of a bag is known exactly only in the selection's order of use
        kw.update(feature_bags=rng.integers(0, max(2, d // 3), d), refit=True)
    return X, y, kw


@pytest.mark.parametrize("seed", range(30))
def test_cost_budget_is_never_exceeded(seed):
    """Random data, costs, budgets, methods, criteria, samplers, bags and refits."""
    X, y, kw = _random_case(seed)
    Est = GBFSClassifier if seed % 3 else GBFSRegressor
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # sampler arguments, budgets that cannot bind
        est = Est(**kw).fit(X, y)
    used = {int(f) for t in est.trees_ for f in t.feature if f >= 0}
    assert used <= set(est.selected_features_.tolist())
    assert _spent(est, kw["feature_costs"], kw.get("feature_bags")) <= kw["max_cost"]
    if "max_features" in kw:
        assert len(est.selected_features_) <= kw["max_features"] or "feature_bags" in kw


@pytest.mark.parametrize("method", ["gbfs", "agbm", "gtgbm"])
def test_unit_costs_make_max_cost_the_feature_budget(clf_data, method):
    X, y = clf_data
    kw = dict(method=method, mu=0.0, n_estimators=12, max_leaves=8, min_samples_leaf=5, random_state=0,
              n_target_features=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # GT-GBM's settings on the other methods
        by_count = GBFSClassifier(max_features=2, **kw).fit(X, y)
        by_cost = GBFSClassifier(max_cost=2.0, **kw).fit(X, y)
    assert by_count.n_features_selected_ == 2
    assert digest(by_cost) == digest(by_count)


def test_an_expensive_informative_feature_is_passed_over_for_cheap_ones(clf_data):
    X, y = clf_data
    costs = np.ones(X.shape[1])
    costs[0] = 5.0  # the strongest signal costs more than the whole budget
    est = GBFSClassifier(mu=0.0, feature_costs=costs, max_cost=3.0, n_estimators=15, max_leaves=8,
                         min_samples_leaf=5, random_state=0).fit(X, y)
    assert 0 not in est.selected_features_
    assert est.n_features_selected_ == 3  # the cheap ones fill the budget


def test_usage_prices_what_no_longer_fits_at_infinity():
    usage = FeatureUsage(4, 0.5, costs=np.array([1.0, 2.0, 3.0, 0.5]), max_cost=3.0)
    np.testing.assert_array_equal(usage.penalty(), [0.5, 1.0, 1.5, 0.25])
    assert not usage.full
    v = usage.version
    usage.mark_used(1)  # spent 2: feature 2 (3) no longer fits, 0 (1) and 3 (0.5) still do
    assert usage.version > v and usage.spent == 2.0
    np.testing.assert_array_equal(usage.penalty(), [0.5, 0.0, np.inf, 0.25])
    assert not usage.full and usage.allowed_features() is None
    usage.mark_used(0)  # spent 3: nothing else fits
    np.testing.assert_array_equal(usage.penalty(), [0.0, 0.0, np.inf, np.inf])
    assert usage.full
    np.testing.assert_array_equal(usage.allowed_features(), [0, 1])


def test_usage_with_bags_pays_for_a_bag_once():
    usage = FeatureUsage(4, 1.0, costs=np.array([2.0, 9.0, 1.0, 1.0]), bags=np.array([0, 0, 1, 1]),
                         max_cost=3.0)
    assert np.isinf(usage.penalty()[1])  # 9 does not fit: not by itself
    usage.mark_used(0)  # opens bag 0 for 2: feature 1 is now free, whatever its cost
    np.testing.assert_array_equal(usage.penalty(), [0.0, 0.0, 1.0, 1.0])
    usage.mark_used(1)
    assert usage.spent == 2.0
    usage.mark_used(3)
    assert usage.spent == 3.0 and usage.full


def _stump(feature: int, gain: float) -> Tree:
    values = dict(feature=[feature, -1, -1], threshold=[0.5, np.inf, np.inf], bin_threshold=[3, -1, -1],
                  missing_left=[False] * 3, left=[1, -1, -1], right=[2, -1, -1], value=[0.0, -1.0, 1.0],
                  gain=[gain, 0.0, 0.0], count=[10, 5, 5])
    return Tree(**{k: np.asarray(values[k], dtype=dt) for k, dt in zip(Tree.FIELDS, Tree.DTYPES)})


def test_topk_under_a_cost_cap_takes_features_by_importance_while_they_fit():
    # importances by gain: 2 > 0 > 3 > 1; feature 4 never used
    trees = [_stump(2, 10.0), _stump(0, 6.0), _stump(3, 3.0), _stump(1, 1.0)]
    costs = np.array([4.0, 1.0, 3.0, 1.0, 0.5])
    # 2 (3) fits, 0 (4) does not (7 > 5), 3 (1) fits, 1 (1) fits: 5; feature 4 has no importance
    np.testing.assert_array_equal(top_k(trees, 5, None, "gain", costs, 5.0), [2, 3, 1])
    np.testing.assert_array_equal(top_k(trees, 5, 2, "gain", costs, 5.0), [2, 3])
    np.testing.assert_array_equal(top_k(trees, 5, 2, "gain"), [2, 0])


def test_topk_method_with_max_cost_only(clf_data):
    X, y = clf_data
    costs = np.linspace(0.5, 3.0, X.shape[1])
    est = GBFSClassifier(method="topk", feature_costs=costs, max_cost=2.0, n_estimators=10, max_leaves=8,
                         min_samples_leaf=5, random_state=0).fit(X, y)
    assert 0 < est.n_features_selected_ and costs[est.selected_features_].sum() <= 2.0


def test_max_cost_survives_a_model_file(tmp_path, clf_data):
    X, y = clf_data
    costs = np.arange(1.0, X.shape[1] + 1.0)
    est = GBFSClassifier(feature_costs=costs, max_cost=6.0, mu=0.0, n_estimators=8, max_leaves=8,
                         min_samples_leaf=5, random_state=0).fit(X, y)
    est.save_model(tmp_path / "m.json")
    back = load_model(tmp_path / "m.json")
    assert back.max_cost == 6.0
    np.testing.assert_array_equal(back.predict_proba(X), est.predict_proba(X))


def test_multitask_max_cost_bounds_the_features_of_the_whole_model():
    rng = np.random.default_rng(0)
    X = rng.random((600, 10))
    task = np.repeat([0, 1], 300)
    y = ((X[:, 0] + X[:, 1] + np.where(task == 0, X[:, 2], X[:, 3])) > 1.5).astype(int)
    costs = np.array([2.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5])
    est = GBFSMultitaskClassifier(mu=0.0, mu_task=0.0, feature_costs=costs, max_cost=3.0, n_estimators=10,
                                  max_leaves=8, min_samples_leaf=5, random_state=0).fit(X, y, task=task)
    assert costs[est.selected_features_].sum() <= 3.0


@pytest.mark.parametrize("kw, err, match", [
    (dict(max_cost=0.0), ValueError, "max_cost must be > 0"),
    (dict(max_cost=-1.0), ValueError, "max_cost must be > 0"),
    (dict(max_cost="3"), TypeError, "max_cost must be a real number"),
    (dict(max_cost=float("inf")), ValueError, "max_cost must be finite"),
    (dict(max_cost=0.5, feature_costs=np.ones(12)), ValueError, "max_cost=0.5 is below the cost of every"),
    (dict(method="topk"), ValueError, "needs max_features .* or max_cost"),
    (dict(method="topk", max_features=3, feature_costs=np.ones(12)), ValueError,
     "feature_costs only apply to method='topk' with max_cost"),
])
def test_bad_max_cost_is_refused_naming_it(clf_data, kw, err, match):
    X, y = clf_data
    with pytest.raises(err, match=match):
        GBFSClassifier(n_estimators=2, **kw).fit(X, y)


def test_max_cost_that_cannot_bind_warns(clf_data):
    X, y = clf_data
    with pytest.warns(UserWarning, match="max_cost=12 covers every feature"):
        GBFSClassifier(max_cost=12.0, n_estimators=2).fit(X, y)


def test_selection_path_refuses_a_cost_budget(clf_data):
    X, y = clf_data
    with pytest.raises(ValueError, match="estimator.max_cost=4"):
        selection_path(GBFSClassifier(max_cost=4), X, y, eval_set=(X, y), budgets=(2,))
