"""The selection path with budgets in cost units (``budget_unit="cost"``) and the units themselves."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification

from gbfs import GBFSClassifier, selection_path
from gbfs.selection.path_units import Cost, Count


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(n_samples=700, n_features=25, n_informative=5, n_redundant=5, random_state=3)
    return X[:400], y[:400], X[400:550], y[400:550], X[550:], y[550:]


def _template(costs, **kw):
    return GBFSClassifier(method="agbm", criterion="newton", leaf_estimate="newton", n_estimators=40,
                          max_leaves=8, min_samples_leaf=10, early_stopping_rounds=8, random_state=0,
                          feature_costs=costs, **kw)


def test_units_on_hand_made_orders():
    count = Count(np.array([0, 0, 1, 2]), bags=True)  # features 0 and 1 share a bag
    assert count.prefix([1, 2, 0, 3], 2).tolist() == [1, 2, 0] and count.size([1, 2, 0]) == 2
    assert count.fills([0, 1, 2], 2) and not count.fills([0, 1], 2)
    cost = Cost(np.array([4.0, 1.0, 3.0, 2.5]))
    assert cost.prefix([0, 2, 1, 3], 6.0).tolist() == [0, 1]  # 2 (3.0) does not fit after 0; 1 does
    assert cost.size([0, 1]) == 5.0
    assert cost.fills([0, 1], 6.0)  # 1.0 is left: no other feature (2.5, 3.0) fits
    assert not cost.fills([0, 1], 7.5)  # 2.5 fits in what is left
    assert cost.fills([0, 1, 2, 3], 100.0)  # nothing left to add


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_no_answer_and_no_candidate_exceeds_its_cost_budget(data, seed):
    X, y, Xv, yv, Xs, ys = data
    rng = np.random.default_rng(seed)
    costs = np.exp(rng.uniform(0, np.log(10), X.shape[1]))
    budgets = (6.0, 15.0, 40.0)
    path = selection_path(_template(costs), X, y, eval_set=(Xv, yv), budgets=budgets, test_set=(Xs, ys),
                          budget_unit="cost")
    assert [r.budget for r in path.results] == list(budgets)
    for r in path.results:
        assert r.size == pytest.approx(costs[r.features].sum()) and r.size <= r.budget
        assert set(r.model.selected_features_.tolist()) <= set(r.features.tolist())
    for c in path.candidates:
        assert costs[c["features"]].sum() <= c["budget"] + 1e-12
    assert any(c["source"] == "gain-per-cost" or "gain-per-cost" in c["also"] for c in path.candidates)
    assert all(p["size"] <= budgets[-1] + 1e-12 for p in path.probes)  # each probe capped by max_cost
    # at most the budget: a larger budget never validates worse than a smaller one's answer
    vals = [r.val_score for r in path.results]
    assert vals == sorted(vals)


@pytest.mark.parametrize("kw, match", [
    ({"budget_unit": "euros"}, "budget_unit must be 'features' or 'cost'"),
    ({"budget_unit": "cost", "exact": True}, "exact=True does not apply with budget_unit='cost'"),
    ({"budget_unit": "cost", "rfe_step": 0.2}, "rfe_step does not apply with budget_unit='cost'"),
    ({"budget_unit": "cost", "budgets": (5.0, -1.0)}, "budgets\\[\\] must be > 0"),
    ({"budget_unit": "cost", "budgets": (0.5, 5.0)}, "=0.5 is below the cheapest feature's cost"),
])
def test_bad_cost_settings_are_refused_naming_them(data, kw, match):
    X, y, Xv, yv = data[:4]
    kw = {"budgets": (5.0, 10.0), **kw}
    with pytest.raises((TypeError, ValueError), match=match):
        selection_path(_template(np.ones(X.shape[1])), X, y, eval_set=(Xv, yv), **kw)


def test_cost_budgets_need_costs_per_feature(data):
    X, y, Xv, yv = data[:4]
    with pytest.raises(ValueError, match="budget_unit='cost' needs the estimator's feature_costs"):
        selection_path(_template(None), X, y, eval_set=(Xv, yv), budgets=(5.0,), budget_unit="cost")
    bags = _template(np.ones(X.shape[1]), feature_bags=np.arange(X.shape[1]) // 2)
    with pytest.raises(ValueError, match="does not apply with feature_bags"):
        selection_path(bags, X, y, eval_set=(Xv, yv), budgets=(5.0,), budget_unit="cost")


def test_feature_costs_with_budgets_of_features(data):
    """Costs price the probes' features while the budgets count them: GBDT-topK's candidates are
    refitted as unpenalised fits (method="topk" would want a max_cost), every budget is kept."""
    X, y, Xv, yv = data[:4]
    costs = np.linspace(1.0, 5.0, X.shape[1])
    path = selection_path(_template(costs), X, y, eval_set=(Xv, yv), budgets=(3, 6))
    assert [r.n_features <= r.budget for r in path.results] == [True, True]
    assert any(c["source"].startswith("topk") for c in path.candidates)
