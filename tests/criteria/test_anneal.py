"""The annealed price (``anneal_factor``, ``anneal_rounds``): ``mu * factor ** max(0, 1 - r / rounds)``
at round ``r``, ``version`` bumped when it changes, the papers' constant price by default, and the
estimator's fit under it equal to a fit whose rounds are priced by hand."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer

from gbfs import GBFSClassifier
from gbfs.criteria.penalty import FeatureUsage


def test_price_falls_geometrically_to_mu_and_bumps_the_version():
    costs = np.array([1.0, 2.0, 0.5])
    u = FeatureUsage(3, 0.01, costs, anneal=(4.0, 10))
    seen = []
    for r in range(14):
        v = u.version
        u.begin_round(r)
        factor = 4.0 ** max(0.0, 1.0 - r / 10)
        np.testing.assert_array_equal(u.penalty(), np.where(u.used, 0.0, 0.01 * factor * costs))
        seen.append(u.version > v)
        if r == 3:
            u.mark_used(1)  # a used feature stays free whatever the round's price
            assert u.penalty()[1] == 0.0 and u.penalty()[0] == 0.01 * factor
    assert seen[1:10] == [True] * 9 and seen[11:] == [False] * 3  # constant mu from round 10 on
    assert u.penalty()[0] == 0.01 and u.mu == 0.01


def test_default_is_the_constant_price_and_a_full_budget_stays_closed():
    u = FeatureUsage(4, 0.02, max_features=1)
    for r in range(5):
        u.begin_round(r)
        assert u.version == 0 and np.all(u.penalty() == 0.02)
    a = FeatureUsage(4, 0.02, max_features=1, anneal=(8.0, 5))
    a.mark_used(2)
    a.begin_round(0)
    assert a.full and list(a.penalty()) == [np.inf, np.inf, 0.0, np.inf]


@pytest.mark.parametrize("method", ["gbfs", "agbm", "gtgbm"])
def test_no_annealing_is_the_papers_model_bit_for_bit(method):
    X, y = load_breast_cancer(return_X_y=True)
    kw = dict(method=method, mu=0.02 if method != "gbfs" else 2.0, n_estimators=30, random_state=0,
              n_target_features=5 if method == "gtgbm" else None)
    plain = GBFSClassifier(**kw).fit(X, y)
    same = GBFSClassifier(**kw, anneal_factor=1.0, anneal_rounds=7).fit(X, y)
    np.testing.assert_array_equal(plain.decision_function(X), same.decision_function(X))


def test_a_price_above_every_normalised_gain_grows_no_split_until_it_falls():
    """A-GBM's normalised gains are at most 1 (an SSE reduction over the root's SSE): rounds priced
    above 1 cannot open a first feature, and with nothing used no split at all."""
    X, y = load_breast_cancer(return_X_y=True)
    est = GBFSClassifier(method="agbm", mu=0.02, n_estimators=30, random_state=0, anneal_factor=1e6,
                         anneal_rounds=10).fit(X, y)
    dear = [r for r in range(30) if 0.02 * 1e6 ** max(0.0, 1 - r / 10) > 1.0]
    assert dear == list(range(8))
    assert all(est.trees_[r].feature[0] < 0 for r in dear)
    assert any(t.feature[0] >= 0 for t in est.trees_[8:])
    plain = GBFSClassifier(method="agbm", mu=0.02, n_estimators=30, random_state=0).fit(X, y)
    assert plain.trees_[0].feature[0] >= 0


@pytest.mark.parametrize("bad, match", [({"anneal_factor": 0.5}, "anneal_factor"),
                                        ({"anneal_factor": "4"}, "anneal_factor"),
                                        ({"anneal_rounds": 0}, "anneal_rounds"),
                                        ({"anneal_rounds": 2.5}, "anneal_rounds")])
def test_bad_annealing_is_refused_naming_the_argument(bad, match):
    X, y = load_breast_cancer(return_X_y=True)
    with pytest.raises((ValueError, TypeError), match=match):
        GBFSClassifier(n_estimators=2, **bad).fit(X, y)


def test_annealing_a_ranking_without_a_price_is_refused():
    X, y = load_breast_cancer(return_X_y=True)
    with pytest.raises(ValueError, match="anneal_factor does not apply to method='topk'"):
        GBFSClassifier(method="topk", max_features=3, n_estimators=2, anneal_factor=4.0).fit(X, y)


def test_a_path_from_an_annealed_template_anneals_its_probes_and_ranks_without_a_price():
    from gbfs import selection_path

    X, y = load_breast_cancer(return_X_y=True)
    template = GBFSClassifier(method="agbm", n_estimators=30, early_stopping_rounds=5, random_state=0,
                              anneal_factor=4.0)
    path = selection_path(template, X[:300], y[:300], eval_set=(X[300:450], y[300:450]), budgets=(2, 4))
    assert [r.budget for r in path.results] == [2, 4] and all(r.n_features <= r.budget for r in path.results)
    topk = [c for c in path.candidates if c["source"].startswith("topk")]
    assert topk  # GBDT-topK candidates were refitted (a ranking has no price to anneal)
