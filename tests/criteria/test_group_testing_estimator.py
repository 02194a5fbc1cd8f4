"""GT-GBM in the estimators: the defaults of Theorem 4.1, the memory guard, determinism, parameter
errors, group tests on a row sample, and the informative features found."""

from __future__ import annotations

import math
import re
import warnings

import naive
import naive_gt
import numpy as np
import pytest
from group_test_cases import (
    make_tester,
    messy_matrix,
    tree_problem,
)
from sklearn.exceptions import NotFittedError

from gbfs import GBFSClassifier, GBFSRegressor
from gbfs.booster.growing.feature_search import group_tests
from gbfs.booster.growing.grower import GrowthParams, TreeGrower
from gbfs.booster.tree import Tree
from gbfs.criteria import group_testing as gt
from gbfs.criteria.penalty import FeatureUsage
from gbfs.data.synthetic.generators import make_figure1_regression

# -- 6. Theorem 4.1 defaults -----------------------------------------------------------------------

@pytest.mark.parametrize("s, delta, expected", [(2, 0.1, 17), (3, 0.1, 28), (10, 0.1, 126), (5, 0.05, 63),
                                                (4, 0.5, 23), (20, 0.01, 414), (2, 0.9, 5), (1, 0.1, 1),
                                                (1, 0.001, 1)])
def test_default_n_subsets_follows_theorem_4_1(s, delta, expected):
    assert naive_gt.default_n_subsets(s, delta) == expected  # ceil(e s ln(s / delta)); 1 for s = 1
    assert gt.default_n_subsets(s, delta) == expected
    assert gt.plan(1000, 200, s, delta).n_subsets == expected


@pytest.mark.parametrize("d, s, expected", [(60, 7, 9), (100, 3, 34), (12, 10, 2), (10, 10, 1), (64, 1, 64),
                                            (61, 2, 31)])
def test_default_subset_size_is_d_over_s(d, s, expected):
    assert gt.plan(50, d, s).subset_size == expected == (d if s == 1 else math.ceil(d / s))
    # explicit values are used as given
    pl = gt.plan(50, d, s, 0.3, n_subsets=3, subset_size=max(1, d // 2))
    assert (pl.n_subsets, pl.subset_size, pl.delta) == (3, max(1, d // 2), 0.3)


@pytest.mark.parametrize("s, delta, n_subsets, subset_size, expected",
                         [(1, 0.1, None, None, (1, 30)), (3, 0.1, None, None, (28, 10)),
                          (7, 0.25, None, None, (64, 5)), (4, 0.1, 5, 7, (5, 7))])
def test_fitted_subset_attributes(reg_data, s, delta, n_subsets, subset_size, expected):
    X0, y = reg_data
    X = np.hstack([X0, np.random.default_rng(0).random((X0.shape[0], 18))])  # 30 features
    est = GBFSRegressor(method="gtgbm", n_target_features=s, delta=delta, n_subsets=n_subsets,
                        subset_size=subset_size, n_estimators=3, random_state=0).fit(X, y)
    assert (est.n_subsets_, est.subset_size_) == expected
    assert expected[0] == (n_subsets or naive_gt.default_n_subsets(s, delta))
    pl = gt.plan(X.shape[0], 30, s, delta, n_subsets, subset_size)
    assert est.timings_["precompute_bytes"] == pl.nbytes
    assert pl.n_stored == len(gt.halving_boundaries(expected[1])) - 1


def test_agbm_has_no_precompute(reg_data):
    X, y = reg_data
    est = GBFSRegressor(method="agbm", n_estimators=3, random_state=0).fit(X, y)
    assert est.timings_["precompute_bytes"] == 0
    assert not hasattr(est, "n_subsets_") and not hasattr(est, "subset_size_")


# -- 7. the memory guard ---------------------------------------------------------------------------

def test_memory_guard_names_the_budget_and_a_fitting_n_subsets():
    n, d = 1000, 50
    pl = gt.plan(n, d, 5, 0.1)  # 54 subsets of 10 features, one stored prefix column each
    per_subset = 4 * n * pl.n_stored  # float32 prefix sums of one subset
    assert pl.n_stored == 1
    fixed = pl.nbytes - pl.n_subsets * per_subset  # whatever the plan needs besides the prefix sums
    assert fixed >= 0
    gt.check_memory(pl, pl.nbytes)  # exactly at the budget: fine
    budget = fixed + 3 * per_subset + per_subset // 2
    with pytest.raises(ValueError) as err:
        gt.check_memory(pl, budget)
    msg = str(err.value)
    assert "max_precompute_bytes" in msg and str(pl.nbytes) in msg and str(budget) in msg
    k = int(re.search(r"n_subsets <= (\d+)", msg).group(1))
    assert k == 3  # the largest that fits
    gt.check_memory(gt.plan(n, d, 5, 0.1, n_subsets=k), budget)
    with pytest.raises(ValueError):
        gt.check_memory(gt.plan(n, d, 5, 0.1, n_subsets=k + 1), budget)
    # not even one subset fits: no n_subsets to suggest
    with pytest.raises(ValueError, match="max_precompute_bytes") as err:
        gt.check_memory(pl, fixed + per_subset - 1)
    assert "n_subsets <=" not in str(err.value)
    with pytest.raises(ValueError, match="max_precompute_bytes"):
        gt.root_candidates(np.random.default_rng(0).random((n, d)), np.zeros(n), 5,
                           max_precompute_bytes=budget)


def test_memory_guard_through_the_estimator(clf_data):
    X, y = clf_data
    n, d = X.shape
    pl = gt.plan(n, d, 3, 0.1)
    per_subset = 4 * n * pl.n_stored
    budget = pl.nbytes - (pl.n_subsets - 5) * per_subset
    est = GBFSClassifier(method="gtgbm", n_target_features=3, max_precompute_bytes=budget, n_estimators=5,
                         random_state=0)
    with pytest.raises(ValueError, match="max_precompute_bytes") as err:
        est.fit(X, y)
    msg = str(err.value)
    assert str(pl.nbytes) in msg
    k = int(re.search(r"n_subsets <= (\d+)", msg).group(1))
    assert k == 5
    with pytest.raises(NotFittedError):
        est.predict(X)
    est.set_params(n_subsets=k).fit(X, y)
    assert est.n_subsets_ == k
    assert est.timings_["precompute_bytes"] <= budget
    assert est.predict(X).shape == (n,)


def test_memory_guard_every_suggestion_fits():
    rng = np.random.default_rng(0)
    X = rng.random((1000, 50))
    y = X[:, 0] + 0.1 * rng.standard_normal(1000)
    base = dict(method="gtgbm", n_target_features=5, n_subsets=200, max_precompute_bytes=416_000,
                n_estimators=2, random_state=0)
    with pytest.raises(ValueError) as err:
        GBFSRegressor(**base).fit(X, y)
    hints = re.findall(r"(n_subsets) <= (\d+)|(n_target_features)=(\d+)|(delta) >= ([0-9.]+)", str(err.value))
    assert hints  # here only n_subsets helps: every subset size stores a single prefix column
    for a, b, c, e, f, g in hints:
        name, value = (a, int(b)) if a else (c, int(e)) if c else (f, float(g))
        GBFSRegressor(**{**base, name: value}).fit(X, y)


# -- 8. determinism --------------------------------------------------------------------------------

def test_precompute_is_determined_by_the_generator():
    X = messy_matrix(200, 30, seed=0)
    _, a = make_tester(X, 3, seed=11)
    _, b = make_tester(X, 3, seed=11)
    _, c = make_tester(X, 3, seed=12)
    for name in ("subsets", "prefix", "stored"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    np.testing.assert_array_equal(a.standardised(), b.standardised())
    assert not np.array_equal(a.subsets, c.subsets)
    np.testing.assert_array_equal(a.standardised(), c.standardised())  # the standardisation is not random


@pytest.mark.parametrize("scope", ["node", "tree"])
def test_same_seed_same_model(clf_data, monkeypatch, scope):
    X, y = clf_data
    seen = []
    precompute = gt.GroupTester.precompute

    def recording(*args, **kwargs):
        tester = precompute(*args, **kwargs)
        seen.append(tester.subsets.copy())
        return tester

    monkeypatch.setattr(gt.GroupTester, "precompute", staticmethod(recording))
    kw = dict(method="gtgbm", n_target_features=3, group_test_scope=scope, mu=0.02, n_estimators=12,
              max_leaves=8, min_samples_leaf=5)
    a = GBFSClassifier(random_state=3, **kw).fit(X, y)
    b = GBFSClassifier(random_state=3, **kw).fit(X, y)
    c = GBFSClassifier(random_state=4, **kw).fit(X, y)
    assert len(seen) == 3
    np.testing.assert_array_equal(seen[0], seen[1])
    assert not np.array_equal(seen[0], seen[2])
    assert len(a.trees_) == len(b.trees_)
    for ta, tb in zip(a.trees_, b.trees_):
        for name in Tree.FIELDS:
            np.testing.assert_array_equal(getattr(ta, name), getattr(tb, name), err_msg=name)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    np.testing.assert_array_equal(a.selected_features_, b.selected_features_)
    assert c.predict_proba(X).shape == (X.shape[0], 2)
    # and root_candidates is reproducible by random_state
    Xf, yf = make_figure1_regression(500, 40, random_state=0)
    np.testing.assert_array_equal(gt.root_candidates(Xf, yf, 3, random_state=5),
                                  gt.root_candidates(Xf, yf, 3, random_state=5))


# -- 9. the estimators -----------------------------------------------------------------------------

@pytest.mark.parametrize("Est", [GBFSClassifier, GBFSRegressor])
@pytest.mark.parametrize("scope", ["node", "tree"])
def test_gtgbm_estimators_select_the_informative_features(clf_data, reg_data, Est, scope):
    X, y = clf_data if Est is GBFSClassifier else reg_data
    est = Est(method="gtgbm", group_test_scope=scope, n_target_features=3, mu=0.02, n_estimators=15,
              max_leaves=8, min_samples_leaf=5, random_state=0).fit(X, y)
    assert set(est.selected_features_.tolist()) == {0, 1, 2}
    np.testing.assert_array_equal(est.get_support(), np.arange(X.shape[1]) < 3)
    assert est.timings_["precompute_seconds"] > 0
    assert est.timings_["precompute_bytes"] == gt.plan(*X.shape, 3, 0.1).nbytes
    # the tests at a root of every row (each tree's, in both scopes) keep their halves' bins
    assert est.timings_["group_test_bins_bytes"] > 0
    assert (est.n_subsets_, est.subset_size_) == (28, 4)
    pred = est.predict(X)
    assert pred.shape == (X.shape[0],)
    assert est.score(X, y) > (0.85 if Est is GBFSClassifier else 0.7)
    if Est is GBFSClassifier:
        proba = est.predict_proba(X)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)


@pytest.mark.parametrize("param, value, match", [
    ("n_target_features", 0, "n_target_features"),
    ("n_target_features", 13, "n_target_features=13 exceeds the 12 features"),
    ("delta", 0.0, "delta"),
    ("delta", 1.0, "delta"),
    ("delta", 1.5, "delta"),
    ("n_subsets", 0, "n_subsets"),
    ("subset_size", 13, "subset_size=13 exceeds the 12 features"),
    ("subset_size", 0, "subset_size"),
    ("group_test_scope", "forest", "group_test_scope"),
    ("max_precompute_bytes", 0, "max_precompute_bytes"),
])
def test_bad_group_test_params_are_named(clf_data, param, value, match):
    X, y = clf_data
    est = GBFSClassifier(method="gtgbm", n_estimators=2, **{param: value})
    with pytest.raises(ValueError, match=match):
        est.fit(X, y)


def test_group_test_params_warn_with_other_methods(clf_data):
    X, y = clf_data
    with pytest.warns(UserWarning, match="n_target_features, n_subsets.*method='gtgbm'") as rec:
        GBFSClassifier(method="agbm", n_target_features=3, n_subsets=5, n_estimators=2).fit(X, y)
    assert "'agbm'" in str(rec[0].message)
    with pytest.warns(UserWarning, match="group_test_scope"):
        GBFSClassifier(method="gbfs", group_test_scope="node", n_estimators=2).fit(X, y)
    with pytest.warns(UserWarning, match="delta, subset_size, max_precompute_bytes"):
        GBFSClassifier(method="agbm", delta=0.2, subset_size=3, max_precompute_bytes=10**9,
                       n_estimators=2).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        GBFSClassifier(method="agbm", n_estimators=2).fit(X, y)  # defaults: no warning
        GBFSClassifier(method="gtgbm", n_target_features=3, n_subsets=5, n_estimators=2).fit(X, y)


# -- group_test_rows: group tests of large nodes on a row sample -----------------------------------

def test_group_test_rows_samples_the_rows_of_large_nodes():
    _, X, mapper, Xb, rw, hw = tree_problem(2)
    n, d = Xb.shape
    _, tester = make_tester(X, 3, seed=0, mapper=mapper)
    calls = []
    candidates = tester.candidates

    def recording(rows, r, h, sum_g, sum_h, count, msl, mcw, lam):
        calls.append((rows.copy(), r.copy(), h.copy(), sum_g, sum_h, count, msl))
        return candidates(rows, r, h, sum_g, sum_h, count, msl, mcw, lam)

    tester.candidates = recording
    params = GrowthParams(max_leaves=10, min_samples_leaf=10)
    grower = TreeGrower(Xb, mapper, params, group_tests(tester, "node", 150, np.random.default_rng(0)))
    tree = grower.grow(np.arange(n, dtype=np.int32), rw, hw, FeatureUsage(d, 0.01), naive.sse(rw),
                       hw_is_one=True)
    assert tree.leaf_ids.shape[0] == 10
    sampled = [c for c in calls if c[5] == 150]
    assert len(sampled) >= 3 and len(sampled) < len(calls)  # the root and other large nodes; small ones whole
    for rows, r, h, sum_g, sum_h, count, msl in calls:
        assert count <= 150 and h.shape[0] == 0
        if count == 150:  # a sorted sample without repetition, residuals aligned with it
            assert rows.shape[0] == 150 and np.all(np.diff(rows) > 0)
            assert 1.0 <= msl < params.min_samples_leaf
        else:
            assert rows.shape[0] == count and msl == params.min_samples_leaf
        np.testing.assert_array_equal(r, rw[rows])
        assert sum_g == pytest.approx(r.sum()) and sum_h == count


def test_group_test_rows_in_the_estimator(reg_data):
    X, y = reg_data
    kw = dict(method="gtgbm", n_target_features=3, mu=0.02, n_estimators=12, max_leaves=8, min_samples_leaf=5,
              random_state=0)
    full = GBFSRegressor(**kw).fit(X, y)
    capped = GBFSRegressor(group_test_rows=X.shape[0], **kw).fit(X, y)  # no node is larger: no sample
    np.testing.assert_array_equal(full.predict(X), capped.predict(X))
    a = GBFSRegressor(group_test_rows=100, **kw).fit(X, y)
    b = GBFSRegressor(group_test_rows=100, **kw).fit(X, y)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    assert set(a.selected_features_.tolist()) == {0, 1, 2}
    with pytest.raises(ValueError, match="group_test_rows"):
        GBFSRegressor(group_test_rows=1, **kw).fit(X, y)
    with pytest.warns(UserWarning, match="group_test_rows"):
        GBFSRegressor(method="agbm", group_test_rows=100, n_estimators=2).fit(X, y)
