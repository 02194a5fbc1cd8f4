"""Feature bags from the data or the column names (gbfs.criteria.bags), and a fit on them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.cluster import FeatureAgglomeration
from sklearn.preprocessing import StandardScaler

from gbfs import GBFSClassifier
from gbfs.criteria.bags import feature_bags


def _correlated(seed: int = 0, n: int = 300):
    """Three groups of four near-copies of one latent column each, and two noise columns."""
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(n, 3))
    X = np.column_stack([latent[:, g] + 0.05 * rng.normal(size=n) for g in range(3) for _ in range(4)]
                        + [rng.normal(size=n) for _ in range(2)])
    return X, latent


def test_correlation_rule_puts_near_copies_together_and_is_ward_on_standardised_columns():
    X, _ = _correlated()
    bags = feature_bags(X, "correlation", n_bags=5)
    assert bags.shape == (14,) and bags.dtype == np.int64 and set(bags) == set(range(5))
    for g in range(3):   # each latent column's four copies share one bag, and no other group's
        assert len(set(bags[4 * g:4 * g + 4])) == 1
    assert len({bags[0], bags[4], bags[8]}) == 3
    ward = FeatureAgglomeration(n_clusters=5).fit(StandardScaler().fit_transform(X)).labels_
    np.testing.assert_array_equal(bags, ward)
    X[::7, 1] = np.nan   # a missing value counts as its column's mean: the same bags (ids may differ)
    again = feature_bags(X, "correlation", n_bags=5)
    assert len(set(zip(again, bags))) == len(set(again)) == 5   # a one-to-one map of the ids


def test_prefix_and_groups_rules_follow_the_names():
    df = pd.DataFrame(np.zeros((2, 5)), columns=["colour=red", "colour=blue", "size", "shape=round", "age"])
    np.testing.assert_array_equal(feature_bags(df, "prefix"), [0, 0, 1, 2, 3])
    np.testing.assert_array_equal(feature_bags(df, "prefix", separator="_"), [0, 1, 2, 3, 4])
    groups = {"look": ["colour=red", "colour=blue", 3], "body": ["age"]}
    np.testing.assert_array_equal(feature_bags(df, "groups", groups=groups), [0, 0, 1, 0, 2])
    np.testing.assert_array_equal(feature_bags(np.zeros((2, 3)), "groups", groups={"a": [2, 0]}), [0, 1, 0])


@pytest.mark.parametrize("rule, args, match", [
    ("clusters", {}, "rule"),
    ("correlation", {"n_bags": 0}, "n_bags"),
    ("correlation", {"n_bags": 20}, "n_bags=20 exceeds the 14 columns"),
    ("correlation", {}, "n_bags"),
    ("prefix", {"separator": ""}, "separator"),
    ("prefix", {"sep": "_"}, "sep"),
    ("groups", {"groups": {"a": ["x0"], "b": ["x0"]}}, "'x0' is in two groups"),
    ("groups", {"groups": {"a": ["nope"]}}, "no column 'nope'"),
    ("groups", {"groups": {"a": [99]}}, "outside 0 .. 13"),
    ("groups", {"groups": {"a": "x0"}}, "non-empty list"),
])
def test_bad_rules_and_arguments_are_refused_naming_them(rule, args, match):
    X, _ = _correlated()
    with pytest.raises((TypeError, ValueError), match=match):
        feature_bags(X, rule, **args)


def test_a_budget_counts_bags_of_the_correlation_rule():
    X, latent = _correlated(1, 600)
    y = (latent[:, 0] + latent[:, 1] > 0).astype(int)
    bags = feature_bags(X, "correlation", n_bags=5)
    est = GBFSClassifier(method="gbfs", mu=0.0, max_features=2, feature_bags=bags, n_estimators=30,
                         random_state=0).fit(X, y)
    used = est.selected_features_
    assert len(set(bags[used])) <= 2 and len(used) > 2   # a bag's copies are free once it is paid
