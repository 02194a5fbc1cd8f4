"""Methods are a registry: a new one is one class (plus a yaml for the harness); the split search's
feature restriction is the grower's input."""

from __future__ import annotations

import numpy as np
import pytest

from gbfs import GBFSClassifier
from gbfs.booster.growing.feature_search import FeatureSearch
from gbfs.criteria.methods import AGBM, METHODS, Method, register


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.random((400, 10))
    y = (X[:, 0] + X[:, 1] + 0.3 * rng.standard_normal(400) > 1).astype(int)
    return X, y


class _EvenFeatures(FeatureSearch):
    """A restriction of the split search: only even-numbered features."""

    restricted = True

    def node_features(self, grower, node, usage, rows, r_ord, h_ord):
        return grower.features[::2]

    def child_features(self, grower, usage):
        return grower.features[::2]


def test_a_new_method_is_one_registered_class(data):
    @register
    class EvenAGBM(AGBM):
        name = "even_agbm"

        def feature_search(self, tester=None, scope="node", rows_cap=None, rng=None):
            return _EvenFeatures()

    try:
        X, y = data
        est = GBFSClassifier(method="even_agbm", mu=0.001, n_estimators=10, random_state=0).fit(X, y)
        assert est.selected_features_.size and np.all(est.selected_features_ % 2 == 0)
        plain = GBFSClassifier(method="agbm", mu=0.001, n_estimators=10, random_state=0).fit(X, y)
        assert 1 in plain.selected_features_
    finally:
        METHODS.pop("even_agbm")


def test_unknown_method_lists_the_registered_ones(data):
    X, y = data
    with pytest.raises(ValueError, match=r"method must be one of \['gbfs', 'agbm', 'gtgbm', 'topk'\]"):
        GBFSClassifier(method="lasso").fit(X, y)


def test_registered_methods_declare_their_criterion():
    assert not METHODS["gbfs"].normalised and METHODS["gbfs"].divisor(7.0) == 1.0
    assert METHODS["agbm"].divisor(7.0) == 7.0 and METHODS["agbm"].max_mu == 1.0
    assert METHODS["gtgbm"].group_tests and METHODS["topk"].ranks
    assert all(isinstance(m, Method) for m in METHODS.values())
