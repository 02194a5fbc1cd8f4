"""The hard feature budget ``max_features``: never exceeded, exact when it fills, cheap afterwards."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from budget_cases import random_case

from gbfs import GBFSClassifier, GBFSRegressor
from gbfs.criteria.penalty import FeatureUsage


def _used(est) -> set[int]:
    return {int(f) for t in est.trees_ for f in t.feature if f >= 0}


def _random_case(seed: int):
    rng, X, y, kw = random_case(seed)
    kw["max_features"] = int(rng.integers(1, 6))
    if rng.random() < 0.4:
        kw["feature_bags"] = rng.integers(0, max(2, X.shape[1] // 3), X.shape[1])
    return X, y, kw


@pytest.mark.parametrize("seed", range(24))
def test_budget_is_never_exceeded(seed):
    """Random data, methods, criteria, samplers and bags: at most K bags (features without bags) are
    ever used; with bags, the used features lie in at most K bags."""
    X, y, kw = _random_case(seed)
    Est = GBFSClassifier if seed % 3 else GBFSRegressor
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # sampler arguments, budgets that cannot bind
        est = Est(**kw).fit(X, y)
    used = _used(est)
    assert set(est.selected_features_.tolist()) == used
    k = kw["max_features"]
    if "feature_bags" in kw:
        bags = np.unique(kw["feature_bags"], return_inverse=True)[1]
        assert len({int(bags[f]) for f in used}) <= k
        assert est.n_bags_selected_ == len({int(bags[f]) for f in used})
    else:
        assert len(used) <= k


def test_budget_fills_exactly_and_pending_leaves_are_refreshed(clf_data):
    """mu = 0 with K = 2: the first tree's root and a pending leaf want different new features; once
    the second feature is used, every pending leaf's cached best split on a third one is dropped."""
    X, y = clf_data
    free = GBFSClassifier(method="gbfs", mu=0.0, n_estimators=1, max_leaves=12, min_samples_leaf=5,
                          random_state=0).fit(X, y)
    assert len(_used(free)) > 2  # without a budget one tree already uses more than two features
    est = GBFSClassifier(method="gbfs", mu=0.0, max_features=2, n_estimators=10, max_leaves=12,
                         min_samples_leaf=5, random_state=0).fit(X, y)
    assert est.n_features_selected_ == 2
    # the budget binds in order of first use: the same two features the free tree used first
    assert est.selected_features_.tolist() == free.selected_features_[:2].tolist()
    assert _used(est) == set(est.selected_features_.tolist())


def test_search_restricted_to_omega_once_full_equals_full_search(clf_data, monkeypatch):
    """After the budget fills the split search scans only Omega; scanning every feature with
    infinite penalties must grow the very same trees."""
    X, y = clf_data
    kw = dict(method="agbm", mu=0.001, max_features=3, n_estimators=20, max_leaves=8, min_samples_leaf=5,
              random_state=0, criterion="newton", leaf_estimate="newton")
    fast = GBFSClassifier(**kw).fit(X, y)
    monkeypatch.setattr(FeatureUsage, "allowed_features", lambda self: None)
    slow = GBFSClassifier(**kw).fit(X, y)
    np.testing.assert_array_equal(fast.decision_function(X), slow.decision_function(X))
    assert fast.n_features_selected_ == 3


def test_usage_prices_unused_features_at_infinity_once_full():
    usage = FeatureUsage(5, 0.1, bags=np.array([0, 0, 1, 2, 2]), max_features=2)
    assert usage.allowed_features() is None
    usage.mark_used(0)
    assert not usage.full and usage.penalty().tolist() == [0.0, 0.0, 0.1, 0.1, 0.1]
    v = usage.version
    usage.mark_used(3)
    assert usage.full and usage.version == v + 1  # the grower re-scores pending leaves
    assert usage.penalty().tolist() == [0.0, 0.0, np.inf, 0.0, 0.0]
    assert usage.allowed_features().tolist() == [0, 1, 3, 4]
    usage.mark_used(4)  # a free feature of a used bag: allowed, no new bag
    assert usage.n_bags_used == 2


@pytest.mark.parametrize("bad,err", [(0, ValueError), (1.5, TypeError), ("3", TypeError)])
def test_bad_max_features(clf_data, bad, err):
    X, y = clf_data
    with pytest.raises(err, match="max_features"):
        GBFSClassifier(max_features=bad).fit(X, y)


def test_budget_that_cannot_bind_warns(clf_data):
    X, y = clf_data
    with pytest.warns(UserWarning, match="max_features=12 is at least"):
        GBFSClassifier(max_features=12, n_estimators=2).fit(X, y)
